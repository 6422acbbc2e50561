"""Moving one hash slot from its master to another while clients use it, as an operator's
resharding does (``redis-cli --cluster reshard``): IMPORTING on the target, MIGRATING on the
source, MIGRATE of its keys a batch at a time, then the slot assigned to the target on every
master. Between batches the slot is in both places: a client is sent to the target (ASK) for a
key already moved, and a command or script over several keys, some moved, is refused
(TRYAGAIN, or a script's "non local key" error). The fault test of a queue's slot moving
during the load stage drives this."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import redis

MIGRATE_TIMEOUT_MS = 5000


@dataclass(frozen=True)
class SlotMove:
    slot: int
    source: str  # host:port
    target: str
    keys_moved: int
    batches: int


def _node_id(node: redis.Redis) -> str:
    found = node.execute_command("CLUSTER", "MYID")
    return found.decode() if isinstance(found, bytes) else str(found)


def _address(node: redis.Redis) -> tuple[str, int]:
    kwargs = node.connection_pool.connection_kwargs
    return str(kwargs["host"]), int(kwargs["port"])


def move_slot(
    slot: int,
    source: redis.Redis,
    target: redis.Redis,
    masters: Sequence[redis.Redis],
    *,
    batch: int = 10,
    between_batches: Callable[[], None] = lambda: None,
) -> SlotMove:
    """Move ``slot`` from ``source`` to ``target`` (plain clients of two masters; ``masters`` is
    every master, told the new owner at the end). ``between_batches`` runs after each MIGRATE:
    a pause there keeps the slot half moved while clients run."""
    source_id, target_id = _node_id(source), _node_id(target)
    host, port = _address(target)
    target.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", source_id)
    source.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", target_id)
    moved = batches = 0
    while True:
        keys = source.execute_command("CLUSTER", "GETKEYSINSLOT", slot, batch)
        if not keys:
            break
        source.execute_command("MIGRATE", host, port, "", 0, MIGRATE_TIMEOUT_MS, "KEYS", *keys)
        moved += len(keys)
        batches += 1
        between_batches()
    # The target first, so it serves the slot before the source stops (redis-cli's order).
    for node in [target, source, *(m for m in masters if m not in (target, source))]:
        node.execute_command("CLUSTER", "SETSLOT", slot, "NODE", target_id)
    src_host, src_port = _address(source)
    return SlotMove(slot, f"{src_host}:{src_port}", f"{host}:{port}", moved, batches)
