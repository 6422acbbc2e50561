"""Child processes of a run (Locust, pyperf): each in a process group of its own, never left behind.

A child that forks (Locust's ``--processes``, pyperf's workers, the sweep's
probe) is started as the leader of a new session, so the whole family can be
signalled at once with ``killpg``. A terminal's Ctrl-C then reaches only the
suite's own process, which passes it on and waits a bounded time for the
child to write what it measured, before killing the group. The leader also
gets SIGTERM if the suite's process dies without cleaning up.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import signal
import subprocess
import sys
import time
from typing import Any

PR_SET_PDEATHSIG = 1


def prctl(option: int, value: int) -> None:
    """Linux's prctl(2) for this thread (or process); elsewhere, or refused, nothing happens."""
    if sys.platform == "linux":
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None).prctl(option, value, 0, 0, 0)


def spawn(command: list[str], **popen: Any) -> subprocess.Popen[Any]:
    """Start ``command`` as the leader of a new process group (and session)."""
    return subprocess.Popen(
        command,
        start_new_session=True,
        # In the child, before exec: SIGTERM when the parent dies (prctl: Linux only).
        preexec_fn=functools.partial(prctl, PR_SET_PDEATHSIG, signal.SIGTERM),
        **popen,
    )


def signal_group(process: subprocess.Popen[Any], signum: int) -> None:
    """Send ``signum`` to the child's whole group; a group already gone is fine."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signum)


def group_alive(pgid: int) -> bool:
    """Whether any process (zombies aside) is still in process group ``pgid``."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            # /proc/<pid>/stat: "pid (comm) state ppid pgrp ..."; comm may hold spaces
            stat = open(f"/proc/{entry}/stat").read()  # noqa: SIM115 - a one-shot read
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def stop_group(process: subprocess.Popen[Any], signum: int, grace_s: float) -> int:
    """Ask the group to stop with ``signum``, wait up to ``grace_s`` for the leader, then SIGKILL the
    group (stragglers included). Returns the leader's exit code. A second Ctrl-C while waiting kills
    the group at once, and is raised on."""
    try:
        if process.poll() is None:
            signal_group(process, signum)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=grace_s)
    finally:
        reap_group(process)
    code = process.returncode
    return int(code) if code is not None else -signal.SIGKILL


def reap_group(process: subprocess.Popen[Any]) -> None:
    """SIGKILL whatever is left of the child's group, and wait for the leader."""
    signal_group(process, signal.SIGKILL)
    process.wait()
    deadline = time.monotonic() + 5.0
    while group_alive(process.pid) and time.monotonic() < deadline:
        time.sleep(0.01)  # forked members are reaped by init once killed
