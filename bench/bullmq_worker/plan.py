"""The bullmq_worker stage's grid: BullMQ's Worker at each concurrency, then the suite's loops."""

from __future__ import annotations

from dataclasses import dataclass

from bench.harness.profile import BullmqWorkerOptions

PROTOCOL = "bullmq"


@dataclass(frozen=True)
class Run:
    """One driver at one concurrency."""

    driver: str
    concurrency: int

    @property
    def label(self) -> str:
        return f"{self.driver} c{self.concurrency}"


def runs_of(options: BullmqWorkerOptions) -> list[Run]:
    """BullMQ's Worker at each concurrency, then the suite's two loops (concurrency 1)."""
    workers = [Run("bullmq_worker", c) for c in dict.fromkeys(options.bullmq_worker_concurrency)]
    return [*workers, Run("fused", 1), Run("two_call", 1)]
