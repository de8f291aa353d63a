"""One figure everywhere (issue 34, point 3): the README's cascade demo, planned, run, then read
by ``stats`` and ``status``, each figure the same in every command that shows it, or the
difference named in the output.

The run is the README's ``run examples/cascade/config.yaml --demo`` on a copy of the example
with its shipped thresholds (what the README's ``calibrate`` writes: cheap answers nothing, mid
and strong answer; one item is abstained), as a user types it: a process of its own.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from judge_engine.cli import main
from judge_engine.fake.answers import prompt_tokens as fake_count
from judge_engine.providers.catalog import count_prompt_tokens
from judge_engine.rundir.blocks import decode_request
from judge_engine.rundir.records import Manifest
from judge_engine.rundir.store import read_blocks, read_manifest

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Commands:
    folder: Path
    plan: str
    run: str
    """What ``run`` printed (its display and summary are on stderr)."""
    code: int

    @property
    def run_dir(self) -> Path:
        return (self.folder / "runs" / "latest").resolve()

    @property
    def manifest(self) -> Manifest:
        return read_manifest(self.run_dir)


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python -m judge_engine ARGS`` as a user runs it, 200 columns wide (the figures, not
    the wrapping, are what these tests read)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "judge_engine", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300, check=False)


def flat(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def cascade(tmp_path_factory: pytest.TempPathFactory) -> Commands:
    folder = tmp_path_factory.mktemp("one-figure") / "cascade"
    shutil.copytree(REPO / "examples" / "cascade", folder, ignore=shutil.ignore_patterns("runs", ".judge_cache"))
    plan = cli("plan", "config.yaml", cwd=folder)
    assert plan.returncode == 0, plan.stderr
    run = cli("run", "config.yaml", "--demo", "--no-live", cwd=folder)
    return Commands(folder, plan.stdout, run.stderr + run.stdout, run.returncode)


def _said(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    capsys.readouterr()
    assert main(list(args)) == 0
    return flat(capsys.readouterr().out)


# --- tokens: plan counts with the model's tokenizer, a demo run with the fake server's ----------------


@pytest.mark.slow
def test_a_demo_run_names_why_its_tokens_are_not_plans(cascade: Commands, capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """``plan`` counts strong's prompts with gpt-4o's own tokenizer (exact: no ``~``); the fake
    server that answers a demo counts a token per 4 characters. The two differ, and every
    command that shows a demo run's tokens says why."""
    monkeypatch.setenv("COLUMNS", "200")
    assert "~ judges[strong]" not in flat(cascade.plan)  # exact for an OpenAI model
    blocks = read_blocks(cascade.run_dir)
    sent = [json.loads(line) for line in (cascade.run_dir / "transcripts.jsonl").read_text().splitlines()]
    strong = [(decode_request(t["request"], blocks)["messages"], t["usage"]["prompt_tokens"])
              for t in sent if t["judge"] == "strong"]
    assert len(strong) == cascade.manifest.spend["judges"]["strong"]["calls"] == 36
    # What the note says is the whole difference: the fake's count, where plan counts more exactly.
    assert all(fake_count(messages) == reported for messages, reported in strong)
    planned = sum(count_prompt_tokens("openai/gpt-4o", messages) for messages, _ in strong)
    reported = sum(n for _, n in strong)
    assert planned != reported, (planned, reported)
    why = "the demo's fake server counts tokens"
    assert why in flat(cascade.run)
    assert why in _said(capsys, "status", str(cascade.run_dir))
    assert why in _said(capsys, "stats", str(cascade.run_dir))


@pytest.mark.slow
def test_strong_alone_names_what_its_figure_is_against_plans(cascade: Commands, capsys: pytest.CaptureFixture[str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """``plan``'s strong-alone figure prices its token counts before the run; ``stats``'s is
    strong's cost per item in the run: each says which it is, and ``stats`` says why it is not
    plan's."""
    monkeypatch.setenv("COLUMNS", "200")
    planned = re.search(r"against (\$[0-9.]+) for strong on every item \(\d+%\)(.*?)$", flat(cascade.plan))
    assert planned is not None, cascade.plan
    assert "plan's token counts" in planned.group(2)
    stats = _said(capsys, "stats", str(cascade.run_dir))
    alone = re.search(r"strong alone on all 20 items: about (\$[0-9.]+) \(([^)]*)\)", stats)
    assert alone is not None, stats
    assert alone.group(1) != planned.group(1)  # two figures, so the output names the difference
    assert "its cost per item in this run" in alone.group(2)
    assert "strong alone differs from plan's: plan's figure prices its token counts before the run" in stats


# --- tasks: the start line and the end agree -----------------------------------------------------------


def test_the_start_line_says_escalations_add_tasks(cascade: Commands) -> None:
    said = flat(cascade.run)
    manifest = cascade.manifest
    first = manifest.counts["judges"]["mid"]["tasks"]
    later = manifest.counts["judges"]["strong"]["tasks"]
    assert (first, later) == (120, 36)
    assert f"Judging {first:,} tasks of stage mid; more as items escalate to strong" in said
    assert f"this session: {first + later:,} tasks judged" in said


# --- exit codes: an item tie is an answer, and says so --------------------------------------------------


@pytest.mark.slow
def test_a_calibration_run_with_tied_items_exits_0_and_says_they_are_not_failures(
        tmp_path: Path) -> None:
    """The README's calibration run of the cascade demo: mid's six answers split 3-3 on some
    items (``item_tie``: its confidence 0.5 is the finding, and calibration reads it so). The run
    did its work: exit 0, and its summary and the README's exit codes say why."""
    folder = tmp_path / "cascade"
    shutil.copytree(REPO / "examples" / "cascade", folder, ignore=shutil.ignore_patterns("runs", ".judge_cache"))
    done = cli("run", "config.yaml", "--no-cascade", "--dataset", "calibration.jsonl", "--demo", "--no-live",
               "--limit", "12", cwd=folder)
    said = flat(done.stderr)
    assert done.returncode == 0, said
    assert "2 unscored, none a failure (item_tie 2)" in said
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    row = next(line for line in readme.splitlines() if line.startswith("| 0 |"))
    assert "item_tie" in row and "abstained" in row
    row = next(line for line in readme.splitlines() if line.startswith("| 3 |"))
    assert "failure" in row


# --- stats: the cascade has no temperature of its own --------------------------------------------------


def test_stats_gives_the_cascade_its_stages_temperatures_not_0(cascade: Commands, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """mid ran at 0.7 and strong at 0: the cascade's verdicts are theirs, so no row labels it 0,
    and it is not set beside its own stages in the agreement between judges (as a jury is not
    beside its jurors: strong's verdicts would agree with themselves)."""
    out = tmp_path / "stats.json"
    said = _said(capsys, "stats", str(cascade.run_dir), "--json", str(out))
    sections = json.loads(out.read_text())["sections"]
    for name in ("distribution", "unscored"):
        rows = [r for r in sections[name]["rows"] if r["judge"] == "cascade"]
        assert len(rows) == 1 and rows[0]["temperature"] is None, rows
    assert not any("cascade" in r["judges"] for r in sections["judge_agreement"]["rows"])
    assert ("cascade: temperature -: each item's verdict is at the temperature of the stage that answered it "
            "(mid 0.7, strong 0)") in said


# --- the last stage: an item it was not sure of is abstained, not sent on ------------------------------


def test_the_last_stage_abstains_where_it_is_not_sure(cascade: Commands, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "stats.json"
    _said(capsys, "stats", str(cascade.run_dir), "--json", str(out))
    rows = {r["stage"]: r for r in json.loads(out.read_text())["sections"]["cascade"]["rows"]}
    strong, mid = rows["strong"], rows["mid"]
    assert (strong["escalated"], strong["abstained"]) == (0, 1)
    assert (mid["escalated"], mid["abstained"]) == (strong["reached"], 0)
    for row in (mid, strong):  # every item that reached a stage ended there one way
        assert row["reached"] == row["answered"] + row["escalated"] + row["abstained"] + row["held"]
