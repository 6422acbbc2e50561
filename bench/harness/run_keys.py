"""A run's keys on a server: their prefixes recorded in its folder before the first is written,
what is left of them counted when the run ends, and `echomq-bench clean` to remove them.

Every queue a run names starts with the run's scope (bench.protocol.keys), so every key it writes
starts with one of a few prefixes. A run that could not delete its queues (Redis restarting, a
failover, the run killed) leaves keys under those prefixes only, and `clean` removes exactly
them: SCAN and UNLINK on every master, never another key.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import itertools
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from pathlib import Path

import redis

from bench.errors import BenchError, first_line
from bench.protocol.connection import Client, RedisSettings, primaries, redact_url
from bench.protocol.keys import KEY_SCOPE_ENV, new_scope, scope_prefixes
from bench.results.files import RESULTS_DIR, resolve_run, write_meta
from bench.results.meta import KeyRecord, KeysLeft, RunMeta, read_meta

SCAN_COUNT = 1000
UNLINK_BATCH = 500
# A server that is away at a run's end: the count gives up soon, and the line says "may remain".
COUNT_CONNECT_TIMEOUT_S = 2.0
COUNT_SOCKET_TIMEOUT_S = 10.0


@contextmanager
def key_scope(run_dir: Path, url: str, own_server: bool) -> Iterator[KeyRecord]:
    """A fresh scope for the run in ``run_dir``, recorded there before the body writes any key;
    every queue named in the body, or in a child it starts, is named in it."""
    scope = new_scope()
    record = KeyRecord(url=redact_url(url), own_server=own_server, prefixes=scope_prefixes(scope))
    write_meta(run_dir, RunMeta, keys=record)
    before = os.environ.get(KEY_SCOPE_ENV)
    os.environ[KEY_SCOPE_ENV] = scope
    try:
        yield record
    finally:
        if before is None:
            os.environ.pop(KEY_SCOPE_ENV, None)
        else:
            os.environ[KEY_SCOPE_ENV] = before


def _keys(client: Client, prefixes: Sequence[str]) -> Iterator[tuple[redis.Redis, bytes]]:
    """Every key under ``prefixes`` on every master, with the master that holds it."""
    for _, node in primaries(client):
        for prefix in prefixes:
            for key in node.scan_iter(match=f"{prefix}*", count=SCAN_COUNT):
                yield node, key


def count_keys(settings: RedisSettings, prefixes: Sequence[str], first_only: bool = False) -> int:
    """How many keys are under ``prefixes`` (with ``first_only``: 1 once one is found)."""
    brief = dataclasses.replace(
        settings, connect_timeout_s=COUNT_CONNECT_TIMEOUT_S, socket_timeout_s=COUNT_SOCKET_TIMEOUT_S
    )
    with closing(brief.connect()) as client:
        return sum(1 for _ in itertools.islice(_keys(client, prefixes), 1 if first_only else None))


def remove_keys(settings: RedisSettings, prefixes: Sequence[str]) -> int:
    """UNLINK every key under ``prefixes``, in batches, on every master; how many were removed."""
    removed = 0
    with closing(settings.connect()) as client:
        for node, found in itertools.groupby(_keys(client, prefixes), key=lambda pair: pair[0]):
            keys = (key for _, key in found)
            while batch := list(itertools.islice(keys, UNLINK_BATCH)):
                pipe = node.pipeline(transaction=False)
                for key in batch:  # one key a command: a cluster node's keys span many slots
                    pipe.unlink(key)
                removed += sum(int(n) for n in pipe.execute())
    return removed


def left_line(run_dir: Path, record: KeyRecord, keys: int | None, why: str = "it did not answer") -> str:
    """The line a run ends with when its keys remain on the server, or may (``why`` not counted)."""
    under = ", ".join(f"{prefix}*" for prefix in record["prefixes"])
    if keys is None:
        said = f"keys under {under} may remain on {record['url']} ({why})"
    else:
        said = f"{keys:,} key{'s' if keys != 1 else ''} under {under} remain on {record['url']}"
    return f"{said}; echomq-bench clean {run_dir} removes them"


def check_left(run_dir: Path, settings: RedisSettings, record: KeyRecord) -> str | None:
    """At a run's end: its keys still on the server, counted; the line naming `clean` when any
    remain (or may: the server did not answer), also written into meta.json."""
    if record["own_server"]:
        return None
    why = ""
    try:
        keys: int | None = count_keys(settings, record["prefixes"])
    except redis.RedisError as exc:
        keys, why = None, f"not counted: {first_line(exc)}"
    if keys == 0:
        return None
    line = left_line(run_dir, record, keys, why)
    write_meta(run_dir, RunMeta, keys_left=KeysLeft(keys=keys, line=line))
    return line


def _meta(run_dir: Path) -> RunMeta | None:
    try:
        return read_meta(run_dir)
    except (BenchError, ValueError, OSError):
        return None  # not a run folder of this suite's, or a torn one: not ours to judge


def _left_behind(results_root: Path) -> Iterator[tuple[Path, KeyRecord]]:
    """Every incomplete run under ``results_root`` on a user's server, not cleaned since, with its keys."""
    for run_dir in sorted(p for p in results_root.glob("*") if p.is_dir()):
        if (meta := _meta(run_dir)) is None or meta.complete or meta.keys is None or meta.keys["own_server"]:
            continue
        if meta.keys_left is None or meta.keys_left["keys"] != 0:
            yield run_dir, meta.keys


def earlier_left(results_root: Path, settings: RedisSettings) -> str | None:
    """A warning when earlier incomplete runs recorded prefixes on this server that still hold keys."""
    url = redact_url(settings.url)
    holding: list[Path] = []
    for run_dir, keys in _left_behind(results_root):
        if keys["url"] != url:
            continue
        try:
            if count_keys(settings, keys["prefixes"], first_only=True):
                holding.append(run_dir)
        except redis.RedisError:
            return None  # the run's own check of the server says why
    if not holding:
        return None
    if len(holding) == 1:
        return f"run {holding[0].name} left keys on this server; echomq-bench clean {holding[0]} removes them"
    names = ", ".join(p.name for p in holding)
    return (
        f"{len(holding)} incomplete runs left keys on this server ({names}); "
        f"echomq-bench clean --all-incomplete --results {results_root} removes them"
    )


def _settings_for(record: KeyRecord, env_url: str) -> RedisSettings:
    """The recorded server; its password from REDIS_URL when that names the same server."""
    if env_url and redact_url(env_url) == record["url"]:
        return RedisSettings.from_url(env_url)
    if "***" in record["url"]:
        raise BenchError(
            f"the run's server {record['url']} needs its password, which is never recorded: "
            "set REDIS_URL to that URL with the password and run clean again"
        )
    return RedisSettings.from_url(record["url"])


def clean_run(run_dir: Path, env_url: str) -> str:
    """Remove the keys ``run_dir`` recorded; the line that says how many."""
    meta = _meta(run_dir)
    if meta is None or meta.keys is None:
        raise BenchError(
            f"{run_dir} holds no record of its keys (no meta.json, or a run from before the suite "
            "recorded them): nothing removed; delete its queues' keys by hand"
        )
    record = meta.keys
    if record["own_server"]:
        return f"{run_dir.name}: removed 0 keys (it ran on a server of its own, gone with it)"
    settings = _settings_for(record, env_url)
    try:
        removed = remove_keys(settings, record["prefixes"])
    except redis.RedisError as exc:
        raise BenchError(
            f"Redis at {settings.where} did not answer ({first_line(exc)}); nothing more removed. "
            f"Run clean again once it is up"
        ) from None
    said = f"removed {removed:,} key{'s' if removed != 1 else ''}"
    when = dt.datetime.now().isoformat(timespec="seconds")
    write_meta(run_dir, RunMeta, keys_left=KeysLeft(keys=0, line=f"{said} at {when} (echomq-bench clean)"))
    under = ", ".join(f"{prefix}*" for prefix in record["prefixes"])
    return f"{run_dir.name}: {said} under {under} on {record['url']}"


def clean_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="echomq-bench clean",
        description="Remove the keys a run left on its server: only those under the prefixes it "
        "recorded (SCAN and UNLINK), never another key.",
    )
    parser.add_argument("runs", nargs="*", help="run folders, or run ids under --results")
    parser.add_argument("--all-incomplete", action="store_true", help="every incomplete run under --results")
    parser.add_argument("--results", type=Path, default=RESULTS_DIR, help="where run folders are")
    args = parser.parse_args(argv)
    if not args.runs and not args.all_incomplete:
        raise BenchError("name a run to clean (a folder or a run id), or give --all-incomplete")
    runs = [resolve_run(name, args.results) for name in args.runs]
    if args.all_incomplete:
        runs += [run_dir for run_dir, _ in _left_behind(args.results)]
    env_url = os.environ.get("REDIS_URL", "").strip()
    for run_dir in dict.fromkeys(runs):
        print(clean_run(run_dir, env_url))
    if not runs:
        print(f"no incomplete run under {args.results} recorded keys to remove")
    sys.stdout.flush()
    return 0
