"""Profile keys from the command line: one helper for `bench sweep` and `bench race`."""

from __future__ import annotations

import pytest

from bench.errors import BenchError
from bench.harness.overrides import SectionFlags
from bench.harness.profile import RaceOptions, load_profile
from bench.stages.race.plan import RacePlan
from bench.stages.race.stage import FLAGS as RACE_FLAGS
from bench.stages.sweep.stage import FLAGS as SWEEP_FLAGS


def test_each_key_of_the_section_is_a_flag_without_the_section_prefix():
    sweep = SWEEP_FLAGS.parser("sweep", "").format_usage()
    for flag in ("--sizes", "--variants", "--scenarios", "--reps", "--caps", "--slice", "--probe-rate-hz"):
        assert f"[{flag} " in sweep
    race = RACE_FLAGS.parser("race", "").format_usage()
    for flag in (
        "--variants",
        "--sweepers",
        "--jobs",
        "--delay-ms",
        "--deadline-s",
        "--slice",
        "--max-stalled",
    ):
        assert f"[{flag} " in race
    assert "--profile" in race and "--results" in race


def test_flags_given_override_their_keys_typed_and_the_rest_stay_the_profiles():
    args = SWEEP_FLAGS.parser("sweep", "").parse_args(
        ["--profile", "smoke", "--sizes", "5, 50", "--slice", "7"]
    )
    profile = SWEEP_FLAGS.profile(args)
    smoke = load_profile("smoke")
    assert profile.sweep.sweep_sizes == (5, 50) and profile.sweep.sweep_slice == 7
    assert profile.sweep.sweep_reps == smoke.sweep.sweep_reps
    assert (profile.race, profile.finish_fetch, profile.name) == (smoke.race, smoke.finish_fetch, "smoke")


def test_the_race_plan_takes_every_race_flag_max_stalled_too():
    argv = ["--profile", "smoke", "--variants", "all", "--sweepers", "2,3", "--delay-ms", "0,1.5"]
    argv += ["--jobs", "9", "--max-stalled", "0", "--deadline-s", "4", "--slice", "3", "--workers", "0"]
    plan = RacePlan.from_options(RACE_FLAGS.profile(RACE_FLAGS.parser("race", "").parse_args(argv)).race)
    assert (plan.sweepers, plan.delays_ms, plan.stalled_jobs) == ((2, 3), (0.0, 1.5), 9)
    assert (plan.max_stalled, plan.deadline_s, plan.slice_size, plan.workers) == (0, 4.0, 3, 0)
    assert plan == RacePlan.from_options(
        RaceOptions(
            race_variants=("all",),
            race_sweepers=(2, 3),
            race_jobs=9,
            race_delay_ms=(0.0, 1.5),
            race_reps=load_profile("smoke").race.race_reps,
            race_workers=0,
            race_deadline_s=4.0,
            race_slice=3,
            race_max_stalled=0,
        )
    )


@pytest.mark.parametrize(
    ("flags", "argv", "message"),
    [
        (SWEEP_FLAGS, ["--sizes", "ten"], "--sizes 'ten' is not a whole number; fix it on the command line"),
        (SWEEP_FLAGS, ["--reps", "0"], "--reps 0 is below its minimum 1; use 1 or more"),
        (RACE_FLAGS, ["--delay-ms", ","], "--delay-ms is empty; give at least one value"),
        (RACE_FLAGS, ["--sweepers", "1"], "--sweepers 1 is below its minimum 2"),
    ],
)
def test_a_bad_flag_value_is_a_one_line_error_naming_the_flag(
    flags: SectionFlags, argv: list[str], message: str
):
    args = flags.parser("x", "").parse_args(["--profile", "smoke", *argv])
    with pytest.raises(BenchError) as caught:
        flags.profile(args)
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)


def test_the_same_value_in_a_profile_is_named_as_a_profile_key(tmp_path):
    conf = tmp_path / "bad.conf"
    conf.write_text("sweep-sizes = ten\n")
    with pytest.raises(
        BenchError, match="profile key sweep-sizes = 'ten' is not a whole number; fix it in the profile"
    ):
        load_profile(str(conf))
