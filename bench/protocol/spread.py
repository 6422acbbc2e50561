"""Queue names that spread over a cluster's masters: one queue a slot (its hash tag), and
the slots chosen so each master holds as many queues as any other (give or take one).
"""

from __future__ import annotations

from collections.abc import Sequence

from redis.crc import key_slot

from bench.errors import BenchError
from bench.protocol.connection import Client, CountingRedisCluster, primaries
from bench.protocol.keys import QueueKeys

SlotRanges = Sequence[tuple[int, int]]  # one master's inclusive slot ranges
MAX_TRIES = 100_000
SLOTS = 16384


def slot_of(queue: str) -> int:
    """The cluster slot every key of ``queue`` lives in (CRC16 of its hash tag, as the cluster's)."""
    return int(key_slot(QueueKeys(queue).tag.encode()))


def master_of(slot: int, masters: Sequence[SlotRanges]) -> int:
    """The index of the master whose ranges hold ``slot``."""
    for index, ranges in enumerate(masters):
        if any(first <= slot <= last for first, last in ranges):
            return index
    raise BenchError(f"slot {slot} is served by no master")


def spread_names(base: str, count: int, masters: Sequence[SlotRanges]) -> list[str]:
    """``count`` names ``<base>-<n>``, the i-th on master i mod len(masters) (one server: the
    plain ``<base>-<i>``). Names are tried in order, so the same layout gives the same names."""
    if len(masters) <= 1:
        return [f"{base}-{i}" for i in range(count)]
    names: list[str] = []
    taken: set[int] = set()  # one queue a slot: a hot slot would hide a master's spread
    n = 0
    for i in range(count):
        want = i % len(masters)
        while True:
            if n >= MAX_TRIES:
                raise BenchError(f"no queue name for master {want} within {MAX_TRIES} tries")
            name, n = f"{base}-{n}", n + 1
            slot = slot_of(name)
            if slot not in taken and master_of(slot, masters) == want:
                names.append(name)
                taken.add(slot)
                break
    return names


def master_layout(client: Client) -> list[tuple[str, SlotRanges]]:
    """(host:port, slot ranges) of every master, ordered by first slot, as the client's slot
    map says now; one server holds every slot."""
    if not isinstance(client, CountingRedisCluster):
        ((address, _),) = primaries(client)
        return [(address, [(0, SLOTS - 1)])]
    ranges: dict[str, list[tuple[int, int]]] = {}
    cache = client.nodes_manager.slots_cache
    for slot in range(SLOTS):
        owner = cache[slot][0].name if cache.get(slot) else ""
        held = ranges.setdefault(owner, [])
        if held and held[-1][1] == slot - 1:
            held[-1] = (held[-1][0], slot)
        else:
            held.append((slot, slot))
    ranges.pop("", None)  # slots no master serves (a cluster being formed)
    return sorted(ranges.items(), key=lambda item: item[1][0])


def queue_names(client: Client, base: str, count: int) -> list[str]:
    """The run's queue names: ``base`` itself for one queue (as before queues), else ``count``
    names spread over the masters the client sees."""
    if count == 1:
        return [base]
    return spread_names(base, count, [ranges for _, ranges in master_layout(client)])


def homes(client: Client, names: Sequence[str]) -> dict[str, str]:
    """Each queue's master (host:port) by its slot."""
    layout = master_layout(client)
    return {name: layout[master_of(slot_of(name), [r for _, r in layout])][0] for name in names}
