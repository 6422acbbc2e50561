"""One trial's settings: the load at one point of stage 1, as the locustfile and the raw loops run
it (single values, not a profile's lists)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from bench.harness.profile import FinishFetchOptions, option_key
from bench.results.finish_fetch import regime_of
from bench.stages.finish_fetch.plan import Point


@dataclass(frozen=True)
class TrialSettings:
    strategy: str
    workers: int
    producers: int
    batch_size: int
    payload_bytes: int
    target_rate: float
    warmup_s: float
    measure_s: float
    rtt_ms: float
    queue: str
    socket_timeout_s: float = 30.0
    protocol: str = "echomq"
    concurrency: int = 1  # jobs in flight per worker connection
    job_ms: float = 0.0  # how long a worker holds each job before finishing it
    queues: int = 1  # queues the users are spread over (``queue`` is their base name)
    probe: bool = False  # the latency-fidelity run: one user, a trivial EVALSHA, no queue load
    # backlog (a wait list pre-filled with backlog_jobs and kept near it), steady (a backlog of
    # 10 batches at most: producers and workers at one pace) or open (at target_rate)
    regime: str = "steady"
    backlog_jobs: int = 0

    @classmethod
    def at(
        cls,
        opts: FinishFetchOptions,
        strategy: str,
        point: Point,
        queue: str,
        protocol: str = "echomq",
        probe: bool = False,
    ) -> TrialSettings:
        """One run of the profile's stage 1 at ``point``: the settings a Locust run is given as
        flags (``locust_flags``) and the raw driver runs with."""
        return cls(
            strategy=strategy,
            workers=point.workers,
            producers=opts.producers,
            batch_size=opts.batch_size,
            payload_bytes=opts.payload_bytes,
            target_rate=opts.target_rate,
            warmup_s=opts.warmup_s,
            measure_s=opts.measure_s,
            rtt_ms=point.rtt_ms,
            queue=queue,
            socket_timeout_s=opts.socket_timeout_s,
            protocol=protocol,
            concurrency=point.concurrency,
            job_ms=point.job_ms,
            queues=point.queues,
            probe=probe,
            regime=regime_of(opts.target_rate, point.regime),
            backlog_jobs=opts.backlog_jobs,
        )

    def locust_flags(self) -> list[str]:
        """Each field as the locustfile's option of its name (``--rtt-ms 1``), which the Locust
        child reads back into the same settings (in_locust/options.trial_settings)."""
        flags: list[str] = []
        for f in fields(self):
            value, flag = getattr(self, f.name), f"--{option_key(f.name)}"
            if isinstance(value, bool):
                flags += [flag] if value else []
            else:
                flags += [flag, f"{value:g}" if isinstance(value, float) else str(value)]
        return flags

    def as_dict(self) -> dict[str, Any]:
        # rtt_simulated: each exchange on the wire waits rtt_ms once, whatever it carries
        return {**asdict(self), "rtt_simulated": True}
