"""The machine watch (docs/method.md): did anything outside the run use the CPU during a measured
window? ``MachineWatch`` returns a ``MachineSample``: the machine's CPU busy and steal, the CPU of
the run's own processes (given roots and every descendant), and foreign CPU = busy - own, all in %
of one core. A load process's own side of a window has its verdict here too (``is_saturated``).

How own CPU is counted (``_Tracker``): a process's cumulative CPU is its own time plus that of the
children it has reaped (the kernel adds a child's whole CPU to its parent's when the parent waits
for it). So a child born and dead between two scans still counts, through its parent, and a
process that was running at the start and is reaped during the window has its CPU from before the
window taken off again. The family is re-scanned every ``interval_s`` in a thread, so new children
are found; a process once seen stays counted when it is re-parented.

Every scan leaves a mark (the clock, the machine's counters, own CPU so far), so one watch can also
answer for a part of its time: ``within(span)``, a span timed on ``clock()`` here or in another
process (a Locust run's window after its warm-up, one sweep point of a pyperf run).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypedDict

import psutil

from bench.results.meta import MachineCheckMeta

FOREIGN_LIMIT_PCT = 10.0  # of one core
STEAL_LIMIT_PCT = 5.0  # of one core
SATURATED_CPU_PCT = 90.0  # of one core: a load process's own CPU over its window
SCAN_INTERVAL_S = 0.5
REAPED_SLACK_S = 0.02  # CPU times tick in 10 ms: a reaped child counted a tick short
# The kernel counts CPU time in 10 ms ticks, per CPU and per process: over a window much shorter
# than a second that rounding alone can reach the 10% limit. A shorter window is judged over the
# second around it (the machine just before and after is the machine it ran on).
MIN_WINDOW_S = 1.0
_GONE = (psutil.NoSuchProcess, psutil.AccessDenied)


def is_contended(foreign_cpu_pct: float, steal_pct: float) -> bool:
    return foreign_cpu_pct > FOREIGN_LIMIT_PCT or steal_pct > STEAL_LIMIT_PCT


def is_saturated(process_cpu_pct: float) -> bool:
    """A load process this busy over its window had no time left to wait on Redis: the window
    measured the client, whatever Redis could do."""
    return process_cpu_pct >= SATURATED_CPU_PCT


def clock() -> float:
    """Seconds on CLOCK_MONOTONIC: one clock for every process of the machine, so a child can
    say when its window opened and closed and its parent's watch pick the same span."""
    return time.clock_gettime(time.CLOCK_MONOTONIC)


class MachineFields(TypedDict):
    """The columns a row of any stage ends with (bench.results)."""

    foreign_cpu_pct: float
    steal_pct: float
    contended: bool


@dataclass(frozen=True)
class MachineSample:
    """What the machine did during one window, in % of one core."""

    foreign_cpu_pct: float
    steal_pct: float
    contended: bool
    own_pids: frozenset[int]  # every process counted as the run's own
    busy_cpu_pct: float = 0.0
    own_cpu_pct: float = 0.0
    window_s: float = 0.0

    def row_fields(self) -> MachineFields:
        """The three columns every stage CSV carries."""
        return {
            "foreign_cpu_pct": round(self.foreign_cpu_pct, 1),
            "steal_pct": round(self.steal_pct, 1),
            "contended": self.contended,
        }

    def note(self) -> str:
        """Why a window's numbers are suspect (for progress lines)."""
        parts = [f"foreign CPU {self.foreign_cpu_pct:.0f}% of a core"]
        if self.steal_pct > STEAL_LIMIT_PCT:
            parts.append(f"steal {self.steal_pct:.0f}%")
        return "contended: " + ", ".join(parts)


def worst_of(samples: Iterable[MachineSample]) -> MachineSample | None:
    """One figure for a row made of several windows (a race setting's repetitions): the worst
    window's foreign CPU and steal, contended when any window was. None for no window."""
    if not (found := list(samples)):
        return None
    return MachineSample(
        foreign_cpu_pct=max(s.foreign_cpu_pct for s in found),
        steal_pct=max(s.steal_pct for s in found),
        contended=any(s.contended for s in found),
        own_pids=frozenset().union(*(s.own_pids for s in found)),
        busy_cpu_pct=max(s.busy_cpu_pct for s in found),
        own_cpu_pct=max(s.own_cpu_pct for s in found),
        window_s=sum(s.window_s for s in found),
    )


def machine_cpu_s() -> tuple[float, float]:
    """Seconds of CPU busy and stolen since boot, all cores. Guest time is inside user and nice.

    Interrupt time (irq, softirq) is left out, as it is of every process's own time: the
    loopback traffic between the run and its redis-server is handled in softirq, which no
    process is charged for, so counting it as busy would make it foreign."""
    t = psutil.cpu_times()
    busy = sum(getattr(t, name, 0.0) for name in ("user", "nice", "system"))
    return float(busy), float(getattr(t, "steal", 0.0))


def _cumulative_cpu(process: psutil.Process) -> tuple[float, float, int, float]:
    """(own CPU plus reaped children's, reaped children's, ppid, create time) of one process."""
    with process.oneshot():
        t = process.cpu_times()
        children = t.children_user + t.children_system
        return float(t.user + t.system + children), float(children), process.ppid(), process.create_time()


def descendants(roots: Sequence[int]) -> dict[int, psutil.Process]:
    """The roots and every process below them, from one pass over the process table."""
    children: dict[int, list[psutil.Process]] = {}
    table: dict[int, psutil.Process] = {}
    for process in psutil.process_iter(["ppid"]):
        table[process.pid] = process
        children.setdefault(process.info["ppid"] or 0, []).append(process)
    family: dict[int, psutil.Process] = {}
    todo = [pid for pid in roots if pid in table]
    while todo:
        pid = todo.pop()
        if pid in family:
            continue
        family[pid] = table[pid]
        todo.extend(c.pid for c in children.get(pid, ()))
    return family


@dataclass
class _Seen:
    pid: int
    ppid: int
    created: float
    base_s: float  # cumulative CPU at the window's start; 0 for a process born in it
    last_s: float
    reaped_base_s: float = 0.0  # the part of those of its reaped children
    reaped_last_s: float = 0.0


@dataclass
class _Tracker:
    """The run's own processes in one window, and the CPU they used in it."""

    roots: tuple[int, ...]
    seen: dict[int, _Seen] = field(default_factory=dict)
    gone: list[_Seen] = field(default_factory=list)
    scans: int = 0

    def scan(self) -> None:
        found = descendants(self.roots)
        for pid in self.seen.keys() - found.keys():  # re-parented away: still ours while it runs
            try:
                found[pid] = psutil.Process(pid)
            except _GONE:
                continue
        alive: set[int] = set()
        for pid, process in found.items():
            try:
                cpu, reaped, ppid, created = _cumulative_cpu(process)
            except _GONE:
                continue
            entry = self.seen.get(pid)
            if entry is not None and entry.created != created:  # the pid was reused
                self.gone.append(self.seen.pop(pid))
                entry = None
            if entry is None:
                # Found at the first scan: it ran before the window. Later: it was born in it.
                first = self.scans == 0
                self.seen[pid] = _Seen(
                    pid, ppid, created, cpu if first else 0.0, cpu, reaped if first else 0.0, reaped
                )
            else:
                entry.last_s, entry.reaped_last_s, entry.ppid = cpu, reaped, ppid
            alive.add(pid)
        for pid in list(self.seen.keys() - alive):
            self.gone.append(self.seen.pop(pid))
        self.scans += 1

    def own_cpu_s(self) -> float:
        total = sum(e.last_s - e.base_s for e in self.seen.values())
        by_reaper: dict[int, list[_Seen]] = {}
        for entry in self.gone:
            by_reaper.setdefault(self._reaper(entry) or 0, []).append(entry)
        for reaper, ended in by_reaper.items():
            if reaper and self._reaped(reaper, ended):
                # Reaped into a process of ours still running: their whole CPU is in that one's
                # count now, so only what they had used before the window comes off.
                total -= sum(e.base_s for e in ended)
            else:
                total += sum(e.last_s - e.base_s for e in ended)
        return max(total, 0.0)

    def _reaper(self, entry: _Seen) -> int | None:
        """The process still running that a process that ended belonged to, directly or through
        parents that ended too; None when it was none of ours."""
        gone = {e.pid: e for e in self.gone}
        ppid, visited = entry.ppid, {entry.pid}
        while ppid not in self.seen:
            parent = gone.get(ppid)
            if parent is None or ppid in visited:
                return None
            visited.add(ppid)
            ppid = parent.ppid
        return ppid

    def _reaped(self, reaper: int, ended: list[_Seen]) -> bool:
        """Whether the reaper's count of reaped children grew by the CPU of those that ended as
        its own children: not when it ignores SIGCHLD (the kernel reaps them uncounted) or a
        process re-parented away reaped them."""
        running = self.seen[reaper]
        grew = running.reaped_last_s - running.reaped_base_s
        direct = sum(e.last_s for e in ended if e.ppid == reaper)
        return grew >= direct - REAPED_SLACK_S

    def pids(self) -> frozenset[int]:
        return frozenset(self.seen) | frozenset(e.pid for e in self.gone)


@dataclass(frozen=True)
class _Mark:
    """The watch's state after one scan: cumulative seconds since the window opened, or boot."""

    t: float  # clock()
    busy_s: float  # the machine's, since boot
    steal_s: float
    own_s: float  # the run's own CPU since the watch started
    pids: frozenset[int]


def _between(a: _Mark, b: _Mark) -> MachineSample:
    elapsed = max(b.t - a.t, 1e-6)
    busy_pct = 100.0 * (b.busy_s - a.busy_s) / elapsed
    steal_pct = max(100.0 * (b.steal_s - a.steal_s) / elapsed, 0.0)
    own_pct = max(100.0 * (b.own_s - a.own_s) / elapsed, 0.0)
    foreign = max(busy_pct - own_pct, 0.0)
    return MachineSample(
        foreign_cpu_pct=foreign,
        steal_pct=steal_pct,
        contended=is_contended(foreign, steal_pct),
        own_pids=b.pids,
        busy_cpu_pct=busy_pct,
        own_cpu_pct=own_pct,
        window_s=elapsed,
    )


class MachineWatch:
    """``with MachineWatch(roots) as watch: ...``, then ``watch.sample``: the roots are the run's
    own processes (the suite's own pid covers an embedded redis-server and every child it spawned)."""

    def __init__(self, roots: Iterable[int], interval_s: float = SCAN_INTERVAL_S) -> None:
        self.roots = tuple(dict.fromkeys(roots))
        self.interval_s = interval_s
        self.sample: MachineSample | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._tracker = _Tracker(self.roots)
        self._lock = threading.Lock()
        self._marks: list[_Mark] = []

    def start(self) -> MachineWatch:
        self._tracker = _Tracker(self.roots)
        self._marks = []
        self._scan()
        self._stop.clear()
        self._thread = threading.Thread(target=self._rescan, name="machine-watch", daemon=True)
        self._thread.start()
        return self

    def _scan(self) -> None:
        """A scan, marked with the clock and the machine's counters at its midpoint: a scan reads
        one process after another and can take tens of ms on a busy machine; on average a process
        is read halfway through, so the machine is read as of then too."""
        t_a, cpu_a = clock(), machine_cpu_s()
        self._tracker.scan()
        t_b, cpu_b = clock(), machine_cpu_s()
        busy, steal = (cpu_a[0] + cpu_b[0]) / 2, (cpu_a[1] + cpu_b[1]) / 2
        own, pids = self._tracker.own_cpu_s(), self._tracker.pids()
        self._marks.append(_Mark((t_a + t_b) / 2, busy, steal, own, pids))

    def _rescan(self) -> None:
        while not self._stop.wait(self.interval_s):
            with self._lock:
                self._scan()

    def scans_so_far(self) -> int:
        """How many scans the watch has made. A mark after a given moment exists once two more
        than at that moment are done (the one under way may have begun before it)."""
        with self._lock:
            return len(self._marks)

    def counted_so_far(self) -> frozenset[int]:
        """The pids counted as own up to the last scan (while the window is still open)."""
        with self._lock:
            return self._tracker.pids()

    def stop(self) -> MachineSample:
        """Ends the watch, once it has lasted MIN_WINDOW_S: a run shorter than that is judged over
        the second from its start (what within() widens a short span to must lie in the watch)."""
        assert self._thread is not None, "stop() before start()"
        self._stop.wait(MIN_WINDOW_S - (clock() - self._marks[0].t))  # the scans go on meanwhile
        self._stop.set()
        self._thread.join()
        self._scan()
        self.sample = _between(self._marks[0], self._marks[-1])
        return self.sample

    def within(self, span: Sequence[float] | None, min_s: float = MIN_WINDOW_S) -> MachineSample:
        """After stop(): the part of the watch around ``span`` (start and end on ``clock()``), from
        the last mark at or before its start to the first at or after its end, so the window is
        covered whole (a scan interval more at most on each side); a span shorter than ``min_s``
        is widened about its middle to ``min_s`` (moved inside the watch near one of its ends). The
        whole watch when ``span`` is missing or lies outside it."""
        assert self.sample is not None, "within() before stop()"
        if span is None or len(span) != 2 or not span[0] < span[1]:
            return self.sample
        t0, t1 = float(span[0]), float(span[1])
        first, last = self._marks[0], self._marks[-1]
        if t1 <= first.t or t0 >= last.t:
            return self.sample  # another clock, or another window: do not pretend
        if t1 - t0 < min_s:
            middle = (t0 + t1) / 2
            t0, t1 = middle - min_s / 2, middle + min_s / 2
            # near an end of the watch, the second lies inside it, on the side it has
            if t0 < first.t:
                t0, t1 = first.t, min(first.t + min_s, last.t)
            elif t1 > last.t:
                t0, t1 = max(last.t - min_s, first.t), last.t
        opening = max((m for m in self._marks if m.t <= t0), key=lambda m: m.t, default=first)
        closing = min((m for m in self._marks if m.t >= t1), key=lambda m: m.t, default=last)
        return _between(opening, closing)

    def __enter__(self) -> MachineWatch:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def watch_run(extra_pids: Iterable[int] = ()) -> MachineWatch:
    """A watch over the suite's own process and its family (the usual case for a stage)."""
    return MachineWatch([os.getpid(), *extra_pids])


@dataclass(frozen=True)
class Busy:
    """A process outside the run and the CPU it used during a check."""

    pid: int
    name: str
    cpu_pct: float  # of one core

    def __str__(self) -> str:
        return f"pid {self.pid} {self.name} uses {self.cpu_pct:.0f}% of a core"


@dataclass(frozen=True)
class MachineCheck:
    """The pre-run check: one short window before anything is measured."""

    sample: MachineSample
    busiest: tuple[Busy, ...]  # other processes, busiest first

    @property
    def contended(self) -> bool:
        return self.sample.contended

    def culprits(self, width: int | None = None) -> str:
        """What made the machine busy; with ``width``, as many as fit (the busiest first, always one)."""
        parts = [str(b) for b in self.busiest]
        # What no process still running accounts for: processes that came and went, interrupts.
        rest = self.sample.foreign_cpu_pct - sum(b.cpu_pct for b in self.busiest)
        if rest > FOREIGN_LIMIT_PCT:
            parts.append(f"short-lived processes use {rest:.0f}% of a core")
        if self.sample.steal_pct > STEAL_LIMIT_PCT:
            parts.append(f"the hypervisor steals {self.sample.steal_pct:.0f}% of a core")
        if width is None:
            return ", ".join(parts)
        kept = parts[:1]
        for part in parts[1:]:
            if len(", ".join([*kept, part])) > width:
                break
            kept.append(part)
        return ", ".join(kept)

    def warning(self, width: int | None = None) -> str | None:
        """The line printed before a run on a busy machine (None on a quiet one), within ``width``:
        when even the busiest process alone leaves no room, the tail goes on a second line."""
        if not self.contended:
            return None
        tail = ": results will be marked contended"
        room = None if width is None else width - len(tail)
        named = self.culprits(room)
        if width is None or len(named) + len(tail) <= width:
            return f"{named}{tail}"
        return f"{named}:\n  {tail.removeprefix(': ')}"

    def as_meta(self) -> MachineCheckMeta:
        return {
            **self.sample.row_fields(),
            "busy_cpu_pct": round(self.sample.busy_cpu_pct, 1),
            "window_s": round(self.sample.window_s, 2),
            "busiest": [str(b) for b in self.busiest],
        }


CHECK_WINDOW_S = 1.0
NAMED_FROM_PCT = 5.0  # a process below this share of a core is not named
NAMED_AT_MOST = 3


CpuTable = dict[tuple[int, float], tuple[str, float]]  # (pid, create time) -> (name, CPU seconds)


def _self_cpu() -> CpuTable:
    """(pid, create time) -> (name, own CPU seconds) of every process readable now."""
    out: CpuTable = {}
    for process in psutil.process_iter(["name", "cpu_times", "create_time"]):
        times, created = process.info["cpu_times"], process.info["create_time"]
        if times is None or created is None:
            continue
        out[(process.pid, created)] = (process.info["name"] or "?", times.user + times.system)
    return out


def check_machine(roots: Iterable[int] | None = None) -> MachineCheck:
    """Watch the machine for CHECK_WINDOW_S and name the busiest processes outside the run's family."""
    before = _self_cpu()
    watch = MachineWatch([os.getpid()] if roots is None else roots).start()
    time.sleep(CHECK_WINDOW_S)
    return named_check(watch.stop(), before, _self_cpu())


def named_check(sample: MachineSample, before: CpuTable, after: CpuTable) -> MachineCheck:
    """A watched window's check: the busiest processes outside the run by their CPU between the tables."""
    busy = []
    for key, (name, cpu_s) in after.items():
        if key[0] in sample.own_pids:
            continue
        pct = 100.0 * (cpu_s - before.get(key, (name, 0.0))[1]) / sample.window_s
        if pct >= NAMED_FROM_PCT:
            busy.append(Busy(key[0], name, pct))
    busy.sort(key=lambda b: -b.cpu_pct)
    return MachineCheck(sample, tuple(busy[:NAMED_AT_MOST]))
