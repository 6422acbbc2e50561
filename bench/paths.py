"""Where the suite's own files are: the repository (or installed package) root, lua/, profiles/."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
REPO = PACKAGE.parent
LUA_DIR = REPO / "lua"
PROFILES_DIR = REPO / "profiles"
LOCUSTFILE = PACKAGE / "locustfile.py"
