"""INFO of several cluster masters as one answer, for code written against one server.

Counters (commandstats, cpu, stats) add up: the cluster's Redis µs per job is the
sum of its masters'. Other fields keep their value when every master agrees and
otherwise list each master's, comma-separated: a run_id that changes on any
master (a restart there) changes the joined one too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

ADDITIVE = ("commandstats", "cpu", "stats")


def _added(values: list[Any]) -> Any:
    if all(isinstance(v, Mapping) for v in values):  # commandstats: {calls, usec, ...} per command
        keys = {k for v in values for k in v}
        return {k: _added([v[k] for v in values if k in v]) for k in keys}
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        return sum(values)
    return _joined(values)


def _joined(values: list[Any]) -> Any:
    if all(v == values[0] for v in values):
        return values[0]
    return ",".join(str(v) for v in values)


def merge_info(section: str | None, per_node: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """One INFO dict from each master's (keyed by host:port, in a stable order)."""
    nodes = [per_node[name] for name in sorted(per_node)]
    fields = {k for info in nodes for k in info}
    combine = _added if (section or "").lower() in ADDITIVE else _joined
    return {k: combine([info[k] for info in nodes if k in info]) for k in sorted(fields)}
