"""A redis-server under valgrind's callgrind: the instructions Redis executes, counted (what is
counted and why it holds still: docs/results-reference.md, instructions.csv).

Collection is on only inside the functions of the server's ``Scope``; callgrind's ``zero`` and
``dump`` monitor commands, sent by ``vgdb`` (as ``callgrind_control -z`` and ``-d`` send them), zero
the counters before a batch of calls and dump them after it, and the dump's ``summary:`` line is
the batch's count. Two scopes, each its own server (callgrind cannot count two regions at once):

- ``command``: Redis's ``call()`` (a script's own ``redis.call`` commands run nested in it): what a
  script costs.
- ``server``: a request from its read to its reply: ``readQueryFromClient`` (read, parse, look up,
  run) and ``beforeSleep`` (which writes the replies). The timers (``serverCron``) are outside
  both, so an idle second adds about 3,000 instructions.

The command table's lookups stay out either way (in ``command`` the client command's own lookup,
made before ``call()``, toggles collection on for its length instead: one lookup a request).
Redis's inputs from outside its calls are pinned, each having moved counts from server to server:
/dev/urandom's seed of its hash tables (a sweep moved 1.8%) by a private mount namespace
(``unshare``); random()'s seed (a fused job moved 0.16%) and the wall clock (stream ids), stopped
at ``PINNED_MS``, by ``pinned_inputs.c``, preloaded. Where ``unshare`` or ``cc`` is missing they
stay as they come and ``seed_pinned`` is false. A binary without these symbols (a stripped build)
counts nothing, which ``measure`` refuses with one line.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from bench.errors import BenchError
from bench.harness.server import EmbeddedRedis, Source
from bench.protocol.phases import FIXED_START_MS

Scope = Literal["command", "server"]
SCOPES: dict[Scope, tuple[str, ...]] = {
    "command": ("call", "lookupCommand"),
    "server": ("readQueryFromClient", "beforeSleep", "lookupCommand"),
}
# valgrind starts a redis-server in a second or two on a quiet machine; a loaded one takes longer.
VALGRIND_START_S = 90.0
CONTROL_TIMEOUT_S = 60.0  # vgdb waits for the server to take its command
_SUMMARY = re.compile(r"^(?:summary|totals):\s*(\d+)", re.MULTILINE)
OUT_FILE = "callgrind.out"
SEED_FILE = "urandom.fixed"
SEED = bytes(range(64))  # what Redis reads of /dev/urandom at start, the same every run
PIN_SOURCE = Path(__file__).with_name("pinned_inputs.c")
PIN_LIBRARY = "pinned_inputs.so"
PINNED_MS = FIXED_START_MS  # the counted server's wall clock: where the fixed inputs' clock starts
# sh in the new mount namespace: /dev/urandom becomes the seed file ($0), then the server runs.
_PIN = 'mount --bind "$0" /dev/urandom && exec "$@"'


def valgrind_missing() -> str | None:
    """Why instructions cannot be counted here, or None when valgrind and vgdb are on PATH."""
    for tool in ("valgrind", "vgdb"):
        if shutil.which(tool) is None:
            return f"{tool} is not on PATH (install valgrind: apt-get install valgrind)"
    return None


def _unshare() -> tuple[str, ...]:
    """unshare's call that may bind-mount: root has the right; a user gets it in a user namespace."""
    own_user = os.geteuid() != 0
    return ("unshare", "--mount", *(("--map-root-user",) if own_user else ()))


@functools.cache
def seed_refused() -> str | None:
    """Why Redis's seeds and clock cannot be pinned here (no cc, no unshare or refused), or None."""
    if shutil.which("cc") is None:
        return "no C compiler (cc) to build the clock's pin (apt-get install gcc)"
    if shutil.which("unshare") is None:
        return "unshare is not on PATH (util-linux)"
    try:
        done = subprocess.run(
            [*_unshare(), "sh", "-c", 'mount --bind /dev/null "$0"', "/dev/urandom"],
            capture_output=True,
            text=True,
            timeout=CONTROL_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"unshare failed: {error}"
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        return f"unshare refused a private mount: {said[-1] if said else done.returncode}"
    return None


def _run(command: list[str], failure: str) -> None:
    """Run a tool; where it fails, one line: ``failure`` and its first error line (a compiler
    follows that with the source and a caret), else the last thing it said."""
    done = subprocess.run(command, capture_output=True, text=True, timeout=CONTROL_TIMEOUT_S)
    if done.returncode != 0:
        said = [line.strip() for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        errors = [line for line in said if "error" in line]
        line = errors[0] if errors else (said[-1] if said else str(done.returncode))
        raise BenchError(f"{failure}: {line}")


def instructions_in(dump: Path) -> int:
    """The instructions a callgrind output file counted (its summary line)."""
    if (found := _SUMMARY.search(dump.read_text(errors="replace"))) is None:
        raise BenchError(f"callgrind's dump {dump.name} has no summary line")
    return int(found.group(1))


Function = tuple[str, str]  # (the object file it is in, its name: "0x..." where the binary has no symbol)


@dataclass(frozen=True)
class Count:
    """One batch's instructions: the total (callgrind's summary line), and each function's own
    instructions (its self cost; their sum, callgrind's ``totals``, is within 0.2% of the summary)."""

    total: int
    functions: Mapping[Function, int] = field(default_factory=dict)

    def __add__(self, other: Count) -> Count:
        functions = Counter(self.functions)
        functions.update(other.functions)
        return Count(self.total + other.total, dict(functions))


# Lines of callgrind's format (valgrind's docs, "Callgrind Format Specification") that name a
# function or an object, each in its own compressed table: "fn=(12) name" the first time, "fn=(12)"
# after. fn and cfn share one table, ob and cob another.
_NAMED = {"fn": "fn", "cfn": "fn", "ob": "ob", "cob": "ob"}
_COMPRESSED = re.compile(r"\((\d+)\)(?: (.*))?$")


def function_costs(dump: Path) -> dict[Function, int]:
    """Each function's self cost in a callgrind dump (one event, Ir): the cost lines under its
    ``fn=``, less each line that follows a ``calls=`` (a call's inclusive cost, the callee's)."""
    tables: dict[str, dict[str, str]] = {"fn": {}, "ob": {}}
    current = {"fn": "", "ob": ""}
    costs: Counter[Function] = Counter()
    inclusive_next = False
    with dump.open(errors="replace") as lines:
        for line in lines:
            head = line[:1]
            if head.isdigit() or head in "+-*":
                fields = line.split()
                if inclusive_next:
                    inclusive_next = False
                elif len(fields) > 1:
                    costs[(current["ob"], current["fn"])] += int(fields[1])
                continue
            key, _, value = line.rstrip("\n").partition("=")
            if key in _NAMED:
                table = tables[_NAMED[key]]
                found = _COMPRESSED.match(value)
                name = value
                if found is not None:
                    if found.group(2) is not None:
                        table[found.group(1)] = found.group(2)
                    name = table.get(found.group(1), found.group(1))
                if key in current:
                    current[key] = name
            elif key == "calls":
                inclusive_next = True
    return dict(costs)


# jemalloc purges freed pages as time passes (its decay), inline once the background thread is
# off: a slower server (a busy neighbour) would purge at other calls. Never purging keeps the
# allocator's work a function of the calls alone. Debian's jemalloc reads MALLOC_CONF; the one
# Redis bundles, built with the je_ prefix, JE_MALLOC_CONF.
ALLOCATOR_CONF = "dirty_decay_ms:-1,muzzy_decay_ms:-1"
ALLOCATOR_ENV = ("MALLOC_CONF", "JE_MALLOC_CONF")
# glibc's malloc, which Valkey 8 gives Lua: its fastbins are merged (malloc_consolidate) every so
# many frees, and its heap's top trimmed, so a step's count over N calls missed its count over 2N
# by up to 0.8% (valkey 8.0.1, 20261206-054146-servers). No fastbins and no trimming keep its work
# a function of each call alone (halves within 0.08%); Redis's own jemalloc does not read it.
LIBC_MALLOC_TUNABLES = ":".join(
    ("glibc.malloc.mxfast=0", "glibc.malloc.trim_threshold=1073741824", "glibc.malloc.top_pad=67108864")
)


def allocator_env() -> dict[str, str]:
    """The environment a counted server's allocators run under: jemalloc's (both builds) and glibc's."""
    return {**dict.fromkeys(ALLOCATOR_ENV, ALLOCATOR_CONF), "GLIBC_TUNABLES": LIBC_MALLOC_TUNABLES}


class CallgrindRedis(EmbeddedRedis):
    """An embedded redis-server (no persistence, a free port) run under callgrind, counting ``scope``."""

    start_deadline_s = VALGRIND_START_S

    def __init__(self, scope: Scope, source: Source = "auto", binary: str | None = None) -> None:
        if missing := valgrind_missing():
            raise BenchError(f"cannot count instructions: {missing}")
        # No slowlog: under valgrind every call is slow, and logging one copies its arguments,
        # so the count would follow the clock. No rehashing by the clock: a table's rehash steps
        # fall inside the commands that touch it. No jemalloc background thread: its purges race
        # the main thread's allocations (bullmq's extendLock moved 0.27% from server to server).
        extra = ("--slowlog-log-slower-than", "-1", "--activerehashing", "no", "--jemalloc-bg-thread", "no")
        super().__init__(source, extra_args=extra, binary=binary)
        self.scope = scope
        self.seed_pinned = seed_refused() is None

    @property
    def out_file(self) -> Path:
        return self.folder / OUT_FILE

    def command_prefix(self) -> tuple[str, ...]:
        return (
            "env",
            *(f"{name}={value}" for name, value in allocator_env().items()),
            *self._pinned_seed(),
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={self.out_file}",
            "--collect-atstart=no",
            *(f"--toggle-collect={function}" for function in SCOPES[self.scope]),
        )

    def _pinned_seed(self) -> tuple[str, ...]:
        """The prefix that runs the server on fixed seeds and clock (none where they cannot be)."""
        if not self.seed_pinned:
            return ()
        seed = self.folder / SEED_FILE
        seed.write_bytes(SEED)
        return (*_unshare(), "sh", "-c", _PIN, str(seed), "env", f"LD_PRELOAD={self._build_pin()}")

    def _build_pin(self) -> Path:
        """The preloaded library that pins random()'s seed and the clock, built once (a restart finds it)."""
        library = self.folder / PIN_LIBRARY
        if library.exists():
            return library
        build = ("cc", "-shared", "-fPIC", "-O2", f"-DPINNED_MS={PINNED_MS}LL")
        _run([*build, "-o", str(library), str(PIN_SOURCE)], f"cc could not build {PIN_SOURCE.name}")
        return library

    def _control(self, command: Literal["zero", "dump"]) -> None:
        """Callgrind's monitor command, sent by vgdb itself: what callgrind_control sends, without
        its Perl and its listing of every valgrind process first."""
        assert self.process is not None
        _run(["vgdb", f"--pid={self.process.pid}", command], f"vgdb {command} failed")

    def measure(self, action: Callable[[], object], calls: int) -> Count:
        """Instructions of ``calls`` runs of ``action``, in this server's scope, and by function:
        the counters zeroed before, dumped after (each dump read, then removed)."""
        self._control("zero")
        for _ in range(calls):
            action()
        before = set(self.folder.glob(f"{OUT_FILE}.*"))
        self._control("dump")
        new = set(self.folder.glob(f"{OUT_FILE}.*")) - before
        if not new:
            raise BenchError(f"callgrind's dump wrote no file in {self.folder}")
        counted = Count(0)
        for path in sorted(new, key=lambda p: int(p.suffix.lstrip(".") or 0)):
            counted += Count(instructions_in(path), function_costs(path))
            path.unlink()
        if counted.total == 0 and calls > 0:
            raise BenchError(
                f"callgrind counted no instructions in {', '.join(SCOPES[self.scope])}: "
                f"{self.binary} may lack those symbols (a stripped build); use one that exports them"
            )
        return counted
