"""BullMQ's Node package, the pinned peer in peers/bullmq-node (`make venv` installs it where node
18 or newer is on PATH): whether it can run here, and how; else one line saying why not.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from bench.paths import REPO

PEER = REPO / "peers" / "bullmq-node"
DRIVER_FILE = "driver.mjs"
MIN_NODE_MAJOR = 18
LISTING_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class NodePeer:
    """A node that can run the peer, and what the installed package is."""

    node: str  # the executable
    folder: Path
    node_version: str
    bullmq: str
    ioredis: str
    scripts: dict[str, str]  # the package's script files, each with the SHA1 that EVALSHA sends

    def command(self, *args: str) -> list[str]:
        return [self.node, str(self.folder / DRIVER_FILE), *args]

    def shas_of(self, files: list[str]) -> dict[str, str]:
        """Script files (as the driver names those it called) with their SHA1s."""
        return {name: self.scripts.get(name, "not one of the package's scripts") for name in sorted(files)}


def json_value(path: Path, *keys: str) -> str | None:
    """The value at ``keys`` in the JSON file at ``path``, as a string; None when any is missing:
    a package's version as package-lock.json pins it, or as its package.json says it is installed."""
    try:
        found = json.loads(path.read_text())
        for key in keys:
            found = found[key]
        return str(found)
    except (OSError, ValueError, KeyError):
        return None


def last_line(text: str) -> str:
    return (text.strip().splitlines() or ["no output"])[-1]


def find_peer(folder: Path | None = None, path: str | None = None) -> NodePeer | str:
    """The peer ready to run, or one line saying why BullMQ's Node rows are absent.
    ``path`` is the PATH to look for node in (the process's own by default)."""
    folder = PEER if folder is None else folder
    if (node := shutil.which("node", path=path)) is None:
        return "node is not on PATH: install Node.js 18 or newer, then run make venv"
    try:
        version = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{node} --version failed ({exc}): install Node.js 18 or newer"
    version = version.strip().removeprefix("v")
    major = version.split(".")[0]
    if not major.isdigit() or int(major) < MIN_NODE_MAJOR:
        return f"node {version or '(no version)'} is older than {MIN_NODE_MAJOR}: install a newer Node.js"
    where = folder.relative_to(REPO) if folder.is_relative_to(REPO) else folder
    for name in ("bullmq", "ioredis"):
        want = json_value(folder / "package-lock.json", "packages", f"node_modules/{name}", "version")
        have = json_value(folder / "node_modules" / name / "package.json", "version")
        if want is None:
            return f"{where}/package-lock.json pins no {name}: restore it from the repository"
        if have is None:
            return f"{name} {want} is not installed in {where}: run make venv"
        if have != want:
            return f"{where} has {name} {have}, its lock pins {want}: run make venv"
    try:
        done = subprocess.run(
            [node, str(folder / DRIVER_FILE), "scripts"],
            capture_output=True, text=True, timeout=LISTING_TIMEOUT_S,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return f"node {DRIVER_FILE} scripts took over {LISTING_TIMEOUT_S:.0f}s"
    if done.returncode != 0:
        return f"node {DRIVER_FILE} scripts failed: {last_line(done.stderr)}"
    listing = json.loads(done.stdout)
    return NodePeer(node, folder, version, listing["bullmq"], listing["ioredis"], dict(listing["scripts"]))
