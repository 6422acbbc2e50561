"""The one error type a user sees: a single line saying what is wrong and what to do."""


class BenchError(Exception):
    """A problem with the user's input or environment: the entry point prints it as one line,
    ``echomq-bench: error: <message>``, and exits 2; no traceback, since there is no bug to report."""

    after: str | None = None  # a line printed after it (the keys a run may have left)


class ProtocolError(BenchError):
    """A script answered with a negative code where the caller needed success."""

    def __init__(self, script: str, code: int, job_id: str) -> None:
        super().__init__(f"{script} returned {code} for job {job_id}")


class Interrupted(Exception):
    """Ctrl-C, after the run folder was marked: the entry point prints the line and exits 130."""

    after: str | None = None  # a line printed after it (the keys a run may have left)


def first_line(exc: BaseException, when_empty: str | None = None) -> str:
    """An error's first line without its full stop, for a one-line reason; ``when_empty`` (by
    default the error type's name) when it says nothing."""
    if text := str(exc).strip():
        return text.splitlines()[0].rstrip(".")
    return type(exc).__name__ if when_empty is None else when_empty
