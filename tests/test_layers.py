"""The one-way flow (lua/ <- protocol <- stages -> results/ -> report), held by import-linter's contracts."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def lint_imports() -> subprocess.CompletedProcess[str]:
    beside = Path(sys.executable).with_name("lint-imports")
    command = str(beside) if beside.exists() else shutil.which("lint-imports")
    assert command, "import-linter is not installed (it is in the dev extra)"
    return subprocess.run(
        [command, "--no-cache"], cwd=REPO, capture_output=True, text=True, timeout=300, check=False
    )


def test_every_import_contract_is_kept() -> None:
    result = lint_imports()
    assert result.returncode == 0, result.stdout + result.stderr
    kept = [line for line in result.stdout.splitlines() if line.rstrip().endswith("KEPT")]
    assert len(kept) == 7, result.stdout  # the seven contracts in pyproject.toml
