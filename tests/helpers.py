"""Small helpers the tests share."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any


def ids(values: Iterable[Any]) -> list[str]:
    """Redis replies (bytes or str) as text."""
    return [v.decode() if isinstance(v, bytes) else str(v) for v in values]


def wait_until(condition: Callable[[], bool], timeout_s: float = 10.0, what: str = "condition") -> None:
    """Poll ``condition`` until true; fail the test with ``what`` after the deadline."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.01)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


# The protocols the contract tests of lua/ run against (a module's params fixture
# ``protocol_name`` overrides conftest's, which opens echomq alone).
PROTOCOL_NAMES = ("echomq", "echomq-deadline")


def has_deadlines(queue: Any) -> bool:
    """True when the queue's protocol keeps a deadline index (echomq-deadline)."""
    from bench.protocol.deadline import EchoMQDeadline

    return isinstance(queue.protocol, EchoMQDeadline)
