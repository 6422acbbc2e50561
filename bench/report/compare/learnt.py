"""The drift between runs of one commit, learnt from A/A pairs and kept in the repository with their
run ids: the threshold a timed figure is judged beyond (bench.report.verdict).

A family is a stage's metric (``finish_fetch jobs_per_s``) or a ratio within one run
(``finish_fetch fused/two_call jobs/s``). Its drift is the largest |B/A - 1| any A/A pair showed at a
point judged on clean windows; a comparison claims a change beyond half again that, never under 5%,
and beyond ``BETWEEN_RUNS`` for a family no pair measured. The calibrations' drift between two runs
is shown, never added: no threshold is wider than measured."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from bench.report.verdict import BETWEEN_RUNS, CLAIM_BEYOND, NOT_JUDGED, SHOWN

LEARNT_FILE = Path(__file__).with_name("learnt.json")
# A few pairs see less than the drift's tail: a held-out third A/A pair of smoke runs moved fused
# jobs/s by 13.4% where the first two pairs' largest change was 12.0% (20261206-050750-smoke /
# -050931-smoke against -050059 ... -050615). A family is judged beyond half again its largest.
LEARNT_MARGIN = 1.5
TIMED = "timed"  # a comparison row's kind: a timed figure, the only kind a drift is learnt for


def threshold(drift: float) -> float:
    """The least change claimed for a family whose A/A pairs moved by ``drift`` at most; never under
    CLAIM_BEYOND (pairs that happened not to move): no timed figure is claimed on a count's change."""
    return max(drift * LEARNT_MARGIN, CLAIM_BEYOND)


def family(stage: str, metric: str) -> str:
    return f"{stage} {metric}"


@dataclass(frozen=True)
class Learnt:
    """Each family's drift, and where it was learnt."""

    drift: dict[str, float] = field(default_factory=dict)  # family -> largest |B/A - 1|
    points: dict[str, int] = field(default_factory=dict)  # family -> clean points it rests on
    pairs: tuple[tuple[str, str], ...] = ()  # the A/A pairs' run ids
    commit: str = ""  # their commit

    def beyond(self, stage: str, metric: str) -> float:
        """The least change claimed for this metric: by its learnt drift, else BETWEEN_RUNS."""
        learnt = self.drift.get(family(stage, metric))
        return BETWEEN_RUNS if learnt is None else threshold(learnt)

    def source(self) -> str:
        if not self.pairs:
            return "no A/A pair learnt yet"
        runs = ", ".join(f"{a} / {b}" for a, b in self.pairs)
        return f"learnt from {len(self.pairs)} A/A pairs of commit {self.commit[:10]} ({runs})"

    def to_json(self) -> dict[str, object]:
        return {
            "drift": dict(sorted(self.drift.items())),
            "points": dict(sorted(self.points.items())),
            "pairs": [list(pair) for pair in self.pairs],
            "commit": self.commit,
        }

    @classmethod
    def from_json(cls, data: dict[str, object]) -> Learnt:
        drift = {str(k): float(v) for k, v in dict(data.get("drift") or {}).items()}  # type: ignore[call-overload]
        points = {str(k): int(v) for k, v in dict(data.get("points") or {}).items()}  # type: ignore[call-overload]
        pairs = tuple((str(a), str(b)) for a, b in data.get("pairs") or [])  # type: ignore[attr-defined]
        return cls(drift, points, pairs, str(data.get("commit") or ""))


def read_learnt(path: Path = LEARNT_FILE) -> Learnt:
    """The drift kept in the repository; none learnt when the file is absent."""
    return Learnt.from_json(json.loads(path.read_text())) if path.is_file() else Learnt()


def write_learnt(learnt: Learnt, path: Path = LEARNT_FILE) -> None:
    path.write_text(json.dumps(learnt.to_json(), indent=2) + "\n")


def learn(rows: list[pd.DataFrame], pairs: tuple[tuple[str, str], ...], commit: str) -> Learnt:
    """Each family's drift over A/A comparisons' rows: the largest |B/A - 1| of its clean timed rows."""
    drift: dict[str, float] = {}
    points: dict[str, int] = {}
    for frame in rows:
        judged = frame[(frame["kind"] == TIMED) & ~frame["verdict"].isin([NOT_JUDGED, SHOWN])]
        for record in judged.to_dict("records"):
            name = family(str(record["stage"]), str(record["metric"]))
            change = abs(float(record["ratio"]) - 1)
            drift[name] = max(drift.get(name, 0.0), change)
            points[name] = points.get(name, 0) + 1
    return Learnt(drift, points, pairs, commit)
