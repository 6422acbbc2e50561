"""The report reads result files only: it runs where redis, pyperf and locust cannot be imported.

Each test runs Python in a subprocess whose first act installs an import hook
refusing those packages and the parts of the suite that speak to Redis or run
stages. A refused import fails the command, and is also listed on stderr even
when some code catches the ImportError.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.data.make_fixtures import RUN_A

DATA = Path(__file__).parent / "data"
REPO = Path(__file__).parent.parent
REPORT_DIR = REPO / "bench" / "report"

REFUSED = (
    "redis", "hiredis", "pyperf", "locust", "gevent",
    "bench.protocol", "bench.harness", "bench.stages", "bench.run",
)  # fmt: skip

# Run before anything else in the child; {refused} is filled in, the body follows it.
PRELUDE = """
import atexit, sys
REFUSED = {refused!r}
attempts = []

class Refuse:
    def find_spec(self, name, path=None, target=None):
        if any(name == r or name.startswith(r + ".") for r in REFUSED):
            attempts.append(name)
            raise ImportError(f"{{name}} refused: the report must not import it")
        return None

sys.meta_path.insert(0, Refuse())
# Caught or not, every refused import is told.
atexit.register(lambda: attempts and print("refused imports:", *attempts, file=sys.stderr))
"""


def run_isolated(body: str, *args: str) -> subprocess.CompletedProcess[str]:
    code = PRELUDE.format(refused=REFUSED) + body
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.slow
def test_report_command_runs_without_redis_pyperf_or_locust(tmp_path: Path) -> None:
    run = tmp_path / RUN_A
    shutil.copytree(DATA / RUN_A, run)
    body = "import runpy\nrunpy.run_module('bench', run_name='__main__', alter_sys=True)\n"
    done = run_isolated(body, "report", str(run))
    assert "refused imports" not in done.stderr, done.stderr
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(run / "report.md")
    text = (run / "report.md").read_text()
    assert text.startswith(f"# echomq-bench run {RUN_A}")
    assert "## Finish-then-fetch" in text and "## Sweep cost" in text and "## Race audit" in text


def test_every_report_module_imports_without_them() -> None:
    # Modules the command above does not reach count too, and the fits leaf both sides share.
    modules = ["bench.results.fits", *(f"bench.report.{p.stem}" for p in sorted(REPORT_DIR.glob("*.py")))]
    body = "import importlib\nfor name in sys.argv[1:]:\n    importlib.import_module(name)\n"
    done = run_isolated(body, *modules)
    assert "refused imports" not in done.stderr, done.stderr
    assert done.returncode == 0, done.stderr
