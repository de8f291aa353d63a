"""``stats RUN_DIR`` adds protocol figures: BWS scores and position bias, A/B position consistency."""

from __future__ import annotations

import asyncio
from pathlib import Path

from judge_engine.fake import FakeServer
from judge_engine.protocols.reports import protocol_sections
from judge_engine.providers import Endpoint
from judge_engine.running.session import execute
from judge_engine.stats.runs import read_run

REPO = Path(__file__).resolve().parents[2]


def _run_example(name: str, tmp_path: Path, server: FakeServer) -> Path:
    from tests.cli.test_examples_and_commands import _through_litellm

    prepared = _through_litellm(REPO / "examples" / name / "config.yaml", tmp_path, server)
    where = {j.name: Endpoint(j.model, server.base_url, "k") for j in prepared.config.judges}
    asyncio.run(execute(prepared, where, install_signals=False))
    return prepared.run_dir


def test_bws_run_reports_scores_and_position_bias(tmp_path: Path, fake_server: FakeServer) -> None:
    run = read_run(_run_example("bws", tmp_path, fake_server))
    sections = {s.name: s for s in protocol_sections(run)}
    assert set(sections) == {"bws_scores", "bws_position_bias"}
    for judge in {r["judge"] for r in sections["bws_scores"].rows}:
        rows = [r for r in sections["bws_scores"].rows if r["judge"] == judge]
        assert all(-1 <= r["bws"] <= 1 for r in rows)
        # Every best is someone's +1 and every worst someone's -1: the scores weighted by
        # appearances sum to zero.
        assert abs(sum(r["bws"] * r["shown"] for r in rows)) < 1e-9
    bias = sections["bws_position_bias"].rows
    assert {r["position"] for r in bias} >= {"A", "B", "C", "D"}
    for judge in {r["judge"] for r in bias}:
        mine = [r for r in bias if r["judge"] == judge]
        assert sum(r["best"] for r in mine) == sum(r["worst"] for r in mine) == round(sum(r["expected"] for r in mine))


def test_pairwise_run_in_both_orders_reports_position_consistency(tmp_path: Path, fake_server: FakeServer) -> None:
    run = read_run(_run_example("prometheus_relative", tmp_path, fake_server))
    (section,) = protocol_sections(run)
    assert section.name == "position_consistency"
    for row in section.rows:
        assert row["pairs"] > 0 and 0 <= row["position_consistency"] <= 1
