"""A cluster's answers that a call belongs elsewhere, followed for the auto-pipeline.

The auto-pipeline writes to the connection of the master that held its queue's
slot when it started (redis-py's cluster client follows these answers only on
its own command path). While an operator moves the slot (resharding):

- ``ASK``: this call's key is already on the importing master; sent there once,
  after ``ASKING``. The slot map is not changed: the move is not done.
- ``TRYAGAIN``: a call over several keys of the slot, some moved and some not.
  It did not run; sent again after a short pause until the move is over.
- ``MOVED``: the slot now belongs to another master. The cluster client's slot
  map learns it, and the pipeline's next exchange goes to the new owner.

None of them ran where it was refused, so sending them again runs each once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from redis.exceptions import AskError, MovedError, TryAgainError

from bench.protocol.connection import CountingRedisCluster, write_and_read

TRYAGAIN_PAUSE_S = 0.02
# A script's keys are moved over several MIGRATE batches: until the last, it is refused. About
# 2 s for the slot's move to end before the call fails (redis-py's own gives up after 0.15 s).
TRYAGAIN_TIMES = 100


def redirected(replies: Sequence[Any], kind: type[Exception]) -> list[int]:
    return [i for i, reply in enumerate(replies) if isinstance(reply, kind)]


def learn_moved(client: Any, moved: MovedError) -> None:
    """The cluster client's slot map takes the new owner (as redis-py does on its own command path)."""
    if isinstance(client, CountingRedisCluster):
        client.nodes_manager.move_slot(moved)


def ask(client: Any, asked: AskError, command: tuple[Any, ...]) -> Any:
    """One command on the importing master, after ASKING: its reply (an error as a value)."""
    if not isinstance(client, CountingRedisCluster):
        return asked
    host, port = asked.node_addr
    node = client.nodes_manager.get_node(host=host, port=port)
    if node is None:
        client.nodes_manager.initialize()
        node = client.nodes_manager.get_node(host=host, port=port)
    if node is None:
        return asked
    pool = client.get_redis_connection(node).connection_pool
    connection = pool.get_connection()
    client.round_trips += 1
    try:
        return write_and_read(connection, [("ASKING",), command])[1]
    finally:
        pool.release(connection)


def retry_tryagain(
    replies: list[Any],
    calls: Sequence[Any],
    exchange: Callable[[list[Any]], list[Any]],
    sleep: Callable[[float], None],
) -> None:
    """Send the calls refused with TRYAGAIN again until they run (or TRYAGAIN_TIMES)."""
    waiting = redirected(replies, TryAgainError)
    for _ in range(TRYAGAIN_TIMES):
        if not waiting:
            break
        sleep(TRYAGAIN_PAUSE_S)
        again = exchange([calls[i] for i in waiting])
        for i, reply in zip(waiting, again, strict=True):
            replies[i] = reply
        waiting = [i for i in waiting if isinstance(replies[i], TryAgainError)]
