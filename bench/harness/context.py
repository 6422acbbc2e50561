"""What a stage of a run is handed: the profile, the server, the run folder, a progress line."""

# Progress is re-exported here: the stages take it from the context they are handed.

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from bench.harness.profile import Profile
from bench.harness.progress import Progress
from bench.harness.server import ServerInfo
from bench.protocol.connection import RedisSettings

__all__ = ["Progress", "RunContext"]


@dataclass
class RunContext:
    profile: Profile
    settings: RedisSettings
    server: ServerInfo
    run_dir: Path
    progress: Progress = field(default_factory=Progress)
    # Pids the machine watch counts as the run's own beside this process's family: a REDIS_URL
    # server on this machine (bench.harness.watch_scope).
    watch_pids: tuple[int, ...] = ()
