"""Where the suite's own files are: lua/ and profiles/ in a checkout, or inside an installed wheel."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
REPO = PACKAGE.parent


def _shipped(name: str) -> Path:
    # A wheel puts lua/ and profiles/ inside the package; a checkout (or an
    # editable install) keeps them beside it.
    inside = PACKAGE / name
    return inside if inside.is_dir() else REPO / name


LUA_DIR = _shipped("lua")
PROFILES_DIR = _shipped("profiles")
LOCUSTFILE = PACKAGE / "locustfile.py"
