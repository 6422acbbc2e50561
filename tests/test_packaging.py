"""A non-editable install ships every subpackage, lua/ and profiles/, and loads the scripts from itself."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            str(REPO),
            "-w",
            str(out),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (built,) = out.glob("echomq_bench-*.whl")
    return built


@pytest.mark.slow
def test_wheel_holds_every_subpackage_and_script(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    packages = {p.parent.relative_to(REPO).as_posix() for p in (REPO / "bench").rglob("__init__.py")}
    for package in packages:
        assert f"{package}/__init__.py" in names, package
    for module in (REPO / "bench").rglob("*.py"):
        assert module.relative_to(REPO).as_posix() in names, module
    for script in (REPO / "lua").rglob("*.lua"):
        assert "bench/lua/" + script.relative_to(REPO / "lua").as_posix() in names, script
    for profile in (REPO / "profiles").glob("*.conf"):
        assert f"bench/profiles/{profile.name}" in names, profile


@pytest.mark.slow
def test_installed_wheel_reads_its_own_lua_and_profiles(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    probe = (
        "from bench import paths\n"
        "from bench.protocol.scripts import SCRIPT_FILES, script_source\n"
        "from bench.harness.profile import load_profile\n"
        "print(paths.LUA_DIR)\n"
        "print(all(script_source(f) for f in SCRIPT_FILES.values()))\n"
        "print(load_profile('smoke').name)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(target)}
    out = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout.split()
    assert out[0] == str((target / "bench" / "lua").resolve())
    assert out[1:] == ["True", "smoke"]
