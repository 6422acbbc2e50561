"""meta.json declared once (bench/results/meta.py): every writer and reader goes through it, an
undeclared key fails, and the published runs of earlier versions still read."""

from __future__ import annotations

import ast
import dataclasses
import json
import typing
from pathlib import Path

import pytest

from bench.harness.server import server_identity
from bench.report.load import RunData
from bench.report.sections.meta import meta_section
from bench.results.files import write_meta
from bench.results.finish_fetch import Fidelity, FinishFetchMeta
from bench.results.meta import META_VERSION, STAGE_SECTIONS, RunMeta, UndeclaredMetaKey, read_meta
from bench.results.race import RaceMeta
from bench.results.stages import BY_ID

REPO = Path(__file__).resolve().parent.parent
PUBLISHED = sorted((REPO / "docs" / "results").glob("*/meta.json"))


def test_there_are_published_runs_to_read() -> None:
    assert len(PUBLISHED) >= 4


@pytest.mark.parametrize("path", PUBLISHED, ids=lambda p: p.parent.name)
def test_every_published_run_reads_through_the_declaration(path: Path) -> None:
    raw = json.loads(path.read_text())
    meta = read_meta(path.parent)
    assert meta.meta_version == META_VERSION
    assert meta.run_id == raw["run_id"] == path.parent.name
    # version 1 kept the stages' keys flat; they read nested, under each stage's id
    if "finish_fetch_fidelity" in raw:
        assert meta.finish_fetch is not None and isinstance(meta.finish_fetch.fidelity, Fidelity)
        assert meta.finish_fetch.fidelity.calls == raw["finish_fetch_fidelity"]["calls"]
        assert meta.finish_fetch.audit_failures == raw["finish_fetch_audit_failures"]
    if "sweep_slopes" in raw:
        assert meta.sweep is not None and meta.sweep.slopes == raw["sweep_slopes"]
        assert meta.sweep.errors == raw["sweep_errors"]
    # a run of version 1 was made on Redis: its own version is its redis_version
    assert (meta.server, meta.server_release) == ("Redis", raw["redis_version"])


def test_an_undeclared_key_fails_the_reader() -> None:
    with pytest.raises(UndeclaredMetaKey, match="finish_fetch_fidelty"):
        RunMeta.from_json({"run_id": "r", "finish_fetch_fidelty": {}})  # a misspelt key
    with pytest.raises(UndeclaredMetaKey, match=r"finish_fetch\.p50"):
        RunMeta.from_json({"meta_version": META_VERSION, "finish_fetch": {"p50": 1}})
    # version 2 spells the stages' keys nested: a flat one is no longer declared
    with pytest.raises(UndeclaredMetaKey, match="sweep_errors"):
        RunMeta.from_json({"meta_version": 2, "sweep_errors": 0})


def test_a_newer_version_is_refused_not_guessed() -> None:
    with pytest.raises(UndeclaredMetaKey, match="newer"):
        RunMeta.from_json({"meta_version": META_VERSION + 1})


def test_the_writer_refuses_an_undeclared_key_and_writes_nothing(tmp_path: Path) -> None:
    """A misnamed field is a mypy error (each ignore below is needed: warn_unused_ignores), and at
    run time the declaration refuses it and nothing is written."""
    write_meta(tmp_path, RunMeta, run_id="20240101-000000-smoke", complete=False)
    before = (tmp_path / "meta.json").read_text()
    with pytest.raises(UndeclaredMetaKey, match="redis_verison"):
        write_meta(tmp_path, RunMeta, redis_verison="7.4.1")  # type: ignore[call-arg]
    with pytest.raises(UndeclaredMetaKey, match=r"race\.sweeper"):
        write_meta(tmp_path, RaceMeta, sweeper=2)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="by name"):
        write_meta(tmp_path, RunMeta, 3)
    assert (tmp_path / "meta.json").read_text() == before


def test_a_stage_section_is_merged_key_by_key_and_reads_typed(tmp_path: Path) -> None:
    fidelity = Fidelity(10, 20.0, "redis-benchmark", 30.0, 25.0, 45.0, "10 calls")
    write_meta(tmp_path, FinishFetchMeta, rtt_ms="simulated")
    write_meta(tmp_path, FinishFetchMeta, errors={"timeout": 2}, audit_failures={})
    written = write_meta(tmp_path, FinishFetchMeta, fidelity=fidelity)
    assert written["meta_version"] == META_VERSION
    assert set(written["finish_fetch"]) == {"rtt_ms", "errors", "audit_failures", "fidelity"}
    meta = read_meta(tmp_path)
    assert meta.finish_fetch == FinishFetchMeta(
        rtt_ms="simulated", errors={"timeout": 2}, audit_failures={}, fidelity=fidelity
    )
    assert fidelity.harness_adds_us == 15.0 and fidelity.locust_adds_us == 20.0


def test_every_key_has_a_type_and_a_docstring() -> None:
    """A key is one field in one place: its docstring says what it holds."""
    declared = {RunMeta, Fidelity, *STAGE_SECTIONS.values()}
    files = {REPO / "bench" / "results" / f"{Path(*c.__module__.split('.')[2:])}.py" for c in declared}
    undocumented = []
    for node in (node for file in sorted(files) for node in ast.parse(file.read_text()).body):
        if not isinstance(node, ast.ClassDef) or node.name not in {c.__name__ for c in declared}:
            continue
        body = node.body
        for i, item in enumerate(body):
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                following = body[i + 1] if i + 1 < len(body) else None
                documented = (
                    isinstance(following, ast.Expr)
                    and isinstance(following.value, ast.Constant)
                    and isinstance(following.value.value, str)
                )
                if not documented:
                    undocumented.append(f"{node.name}.{item.target.id}")
    assert not undocumented, f"fields without a docstring: {undocumented}"


def test_each_stage_section_is_nested_under_its_stage_id() -> None:
    """One meta.json shape a stage: its keys under its id, never flat at the top."""
    top = {f.name for f in dataclasses.fields(RunMeta)}
    assert set(STAGE_SECTIONS) <= set(BY_ID)
    # RunMeta holds each stage's section as a typed field under the stage's id, and no other
    hints = typing.get_type_hints(RunMeta)
    held = {
        name: kind for name in top for kind in typing.get_args(hints[name]) if dataclasses.is_dataclass(kind)
    }
    assert held == STAGE_SECTIONS
    flat = sorted(name for name in top for stage in BY_ID if name.startswith(f"{stage}_"))
    assert not flat, f"a stage's key flat at the top of meta.json: {flat}"


# ---- the server's own name ------------------------------------------------------------------


def test_valkey_is_named_valkey_at_its_own_version() -> None:
    # INFO server of Valkey 8.0.1: it says redis_version 7.2.4 for compatibility
    valkey = {"redis_version": "7.2.4", "server_name": "valkey", "valkey_version": "8.0.1"}
    assert server_identity(valkey) == ("valkey", "8.0.1")
    assert server_identity({"redis_version": "7.4.1"}) == ("redis", "7.4.1")
    assert server_identity({"redis_version": "7.0.15", "redis_mode": "standalone"}) == ("redis", "7.0.15")


def test_the_report_says_valkey_where_the_run_was_on_valkey(tmp_path: Path) -> None:
    meta = RunMeta(run_id="r", server_name="valkey", server_version="8.0.1", redis_version="7.2.4",
                   redis_source="REDIS_URL")  # fmt: skip
    text = "\n".join(meta_section(RunData(tmp_path, meta, {})))
    assert "| Valkey | 8.0.1 (REDIS_URL) |" in text
    assert "7.2.4" not in text and "| Redis |" not in text
