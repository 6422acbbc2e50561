"""What a stage of a run is handed: the profile, the server, the run folder, a progress line."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.harness.profile import Profile
from bench.harness.server import ServerInfo
from bench.protocol.connection import RedisSettings


@dataclass
class Progress:
    """One progress line on stderr, rewritten in place on a terminal."""

    stage: str = ""
    started: float = field(default_factory=time.monotonic)

    def __call__(self, message: str) -> None:
        elapsed = time.monotonic() - self.started
        line = f"[{elapsed:6.1f}s] {self.stage}: {message}"
        if sys.stderr.isatty():
            sys.stderr.write("\r\033[K" + line)
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def done(self) -> None:
        if sys.stderr.isatty():
            sys.stderr.write("\n")


@dataclass
class RunContext:
    profile: Profile
    settings: RedisSettings
    server: ServerInfo
    run_dir: Path
    progress: Progress = field(default_factory=Progress)
