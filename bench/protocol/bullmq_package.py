"""The bullmq package the bullmq protocol reads its Lua and builders from: exactly one version."""

from __future__ import annotations

from importlib import metadata

from bench.errors import BenchError

# The version pyproject.toml pins: its scripts' KEYS, ARGV and replies are what bullmq.py reads.
REQUIRED_VERSION = "3.4.4"


def installed_version(package: str = "bullmq") -> str | None:
    """A package's installed version (meta.json's record of the client libraries too); None: none."""
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def require_bullmq() -> str:
    """The installed version, when it is REQUIRED_VERSION; a one-line BenchError otherwise."""
    found = installed_version()
    if found != REQUIRED_VERSION:
        have = "which is not installed" if found is None else f"but {found} is installed"
        fix = f"run `make venv` (or pip install bullmq=={REQUIRED_VERSION})"
        raise BenchError(f"the bullmq protocol needs bullmq {REQUIRED_VERSION}, {have}; {fix}")
    return REQUIRED_VERSION
