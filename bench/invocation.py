"""The command line that started this process, as a user would type it: meta.json records it,
so a published run says how to make it again."""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

# A Redis URL's password never reaches meta.json (redis://user:secret@host -> redis://user:***@host).
_PASSWORD = re.compile(r"\b((?:rediss?|unix)://[^:@/\s]*:)[^@\s]*@")

_words: list[str] = []


def typed(words: Sequence[str]) -> None:
    """Remember the command (the entry point calls it before it runs the command)."""
    _words[:] = list(words)


def command() -> str | None:
    """The command as one line, its passwords redacted; None when no entry point recorded one."""
    return _PASSWORD.sub(r"\1***@", shlex.join(_words)) if _words else None
