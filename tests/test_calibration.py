"""The run-start calibration and what meta.json records about the software and the system."""

from __future__ import annotations

import time
from pathlib import Path

from bench.harness.calibration import EVALSHAS, PINGS, ROUNDS, calibrate, ping_p50_us
from bench.harness.provenance import cpu_list, installed_packages, system_view
from bench.protocol.commandstats import CommandStats
from bench.protocol.connection import Client


def test_calibration_takes_its_three_figures_quickly_and_never_resets_the_stats(client: Client):
    client.set("calibration-marker", 1)
    before = CommandStats.read(client)
    calibration = calibrate(client)
    after = CommandStats.read(client)
    assert calibration.python_loop_ns > 0
    assert calibration.ping_p50_us > 0
    assert calibration.evalsha_us is not None and calibration.evalsha_us > 0
    # Quick by its work, fixed whatever the machine: a few loops, PINGS pings and EVALSHAS calls,
    # each counted by the server (one more of each warms the connection and loads the script).
    assert calibration.took_s > 0
    assert after.calls["ping"] - before.calls.get("ping", 0) == PINGS + 1
    # Counters only grew: nobody ran CONFIG RESETSTAT.
    assert after.calls["set"] >= before.calls["set"] >= 1
    assert after.calls["evalsha"] - before.calls.get("evalsha", 0) == EVALSHAS + 1
    assert set(calibration.as_meta()) == {"python_loop_ns", "ping_p50_us", "evalsha_us", "took_s"}


def test_every_installed_package_is_recorded_with_its_version():
    packages = installed_packages()
    for name in ("redis", "hiredis", "locust", "pyperf", "psutil", "pandas", "echomq-bench"):
        assert packages.get(name), name


def fake_cpu_tree(root: Path, governors: dict[int, str]) -> None:
    for cpu, governor in governors.items():
        folder = root / f"cpu{cpu}" / "cpufreq"
        folder.mkdir(parents=True)
        (folder / "scaling_governor").write_text(governor + "\n")
        (folder / "scaling_driver").write_text("intel_pstate\n")
    (root / "isolated").write_text("\n")
    (root / "intel_pstate").mkdir()
    (root / "intel_pstate" / "no_turbo").write_text("1\n")


def test_the_system_view_reads_what_pyperf_shows(tmp_path: Path):
    cpu, proc = tmp_path / "cpu", tmp_path / "proc"
    fake_cpu_tree(cpu, {0: "performance", 1: "performance", 2: "powersave"})
    (proc / "sys" / "kernel").mkdir(parents=True)
    (proc / "sys" / "kernel" / "randomize_va_space").write_text("2\n")
    (proc / "cmdline").write_text("BOOT_IMAGE=/vmlinuz isolcpus=2 nohz_full=2 rcu_nocbs=2\n")
    view = system_view(cpu, proc)
    assert view["cpu_governor"] == "0-1: performance, 2: powersave"
    assert view["cpu_scaling_driver"] == "intel_pstate"
    assert view["cpu_turbo"] == "off"
    assert view["isolated_cpus"] == "none"
    assert view["nohz_full"] == "2" and view["rcu_nocbs"] == "2"
    assert view["aslr"] == "full (2)"
    assert view["perf_event_max_sample_rate"] is None  # absent there: None, not an error


def test_the_system_view_of_this_machine_has_no_errors():
    view = system_view()
    assert view["aslr"] is not None  # /proc/sys/kernel/randomize_va_space is world-readable
    assert view["cpu_affinity"]


def test_cpu_lists_in_the_kernel_notation():
    assert cpu_list([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"
    assert cpu_list([3]) == "3"
    assert cpu_list([]) == ""


class SlowFirstRound:
    """A client whose first PINGs each wait 5 ms more: a burst of steal, injected."""

    def __init__(self, client: Client, slow_calls: int) -> None:
        self.client, self.slow_left = client, slow_calls

    def ping(self) -> object:
        if self.slow_left > 0:
            self.slow_left -= 1
            time.sleep(0.005)
        return self.client.ping()


def test_a_slow_round_does_not_move_the_calibration(client: Client):
    quiet = ping_p50_us(client)
    # the warm-up ping and three rounds of five slowed: most of the pings, so their median is slow
    burst = ping_p50_us(SlowFirstRound(client, 1 + 3 * PINGS // ROUNDS))
    assert quiet < 5000 and burst < 5000, (quiet, burst)
    # every round slowed: the figure says so
    assert ping_p50_us(SlowFirstRound(client, 1 + PINGS)) >= 5000
