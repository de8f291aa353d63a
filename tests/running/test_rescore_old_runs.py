"""rescore of runs written by an earlier judge-engine (issue 23, point 2): the judges and the
run's identity come from its own manifest, today's protocol code reads its answers, and the
report says which protocol versions it moved from and to.

``tests/fixtures/run_before_compact`` was written before compact transcripts at gemba-mqm 1 (its
README says how); ``tests/fixtures/run_v1`` before records.py (format 1).
"""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path
from typing import Any

import pytest

from judge_engine.cli import main
from judge_engine.errors import DatasetError
from judge_engine.planning.plan import task_ref
from judge_engine.rundir.records import AttemptRecord, OutcomeRecord, Spend
from judge_engine.rundir.store import iter_transcript, latest_outcome_records, read_manifest
from judge_engine.running.rescore import rescore

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
BEFORE_COMPACT = FIXTURES / "run_before_compact"
RUN_V1 = FIXTURES / "run_v1"
CHANGED = {  # by hand, from the fixture's README: gemba-mqm 2 no longer scores a line cut before its span
    "mqm · lit-001 · T=0.0 · repeat 0": ("scored -1", "unscored (not_recorded)"),
    "mqm · lit-002 · T=0.0 · repeat 1": ("scored -25", "unscored (incomplete)"),
    "mqm · lit-003 · T=0.0 · repeat 1": ("scored -3", "unscored (incomplete)"),
}


@pytest.fixture
def no_connections(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every attempt to open a network connection, refused and listed (a re-score sends nothing)."""
    tried: list[Any] = []

    def refuse(self: socket.socket, address: Any) -> None:
        tried.append(address)
        raise OSError("a re-score must not connect anywhere")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    return tried


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The old project, moved: its config and dataset beside its runs, none where run.json says."""
    moved = tmp_path / "moved" / "before-compact"
    shutil.copytree(BEFORE_COMPACT, moved)
    return moved


def _run(project: Path) -> Path:
    (run,) = [p for p in (project / "runs").iterdir() if p.is_dir()]
    return run


def _by_ref(run: Path) -> dict[str, OutcomeRecord]:
    return {task_ref(o.judge, o.item_id, o.variant, o.temperature, o.repeat): o
            for o in latest_outcome_records(run).values()}


def test_a_run_from_before_compact_transcripts_rescores_at_todays_protocol_versions(
        project: Path, no_connections: list[Any], capsys: pytest.CaptureFixture[str]) -> None:
    run = _run(project)
    recorded = read_manifest(run)
    assert not Path(recorded.config_path).exists() and not Path(recorded.dataset["path"]).exists()
    assert {j.name: j.protocol_version for j in recorded.judges} == {"mqm": "1", "prometheus": "1"}
    assert not (run / "index.sqlite").exists() and not (run / "blocks.jsonl").exists()

    assert main(["rescore", str(run), "--output", str(project / "rescored")]) == 0
    out = capsys.readouterr().out
    assert "mqm: gemba-mqm 1 -> 2" in out
    assert "prometheus: prometheus-absolute 1 (unchanged)" in out
    assert "3 tasks changed score or status" in out and "0 calls made" in out
    rows = [[cell.strip() for cell in line.split("│")[1:-1]] for line in out.splitlines() if " · T=" in line]
    assert sorted(rows) == sorted([task, was, now] for task, (was, now) in CHANGED.items())
    assert no_connections == []

    new = project / "rescored"
    manifest = read_manifest(new)
    assert manifest.rescored_from == str(run)
    assert manifest.rescored_versions == {"mqm": {"protocol": "gemba-mqm", "from": "1", "to": "2"},
                                          "prometheus": {"protocol": "prometheus-absolute", "from": "1", "to": "1"}}
    assert json.loads((new / "run.json").read_text())["rescored_versions"]["mqm"] == \
        {"protocol": "gemba-mqm", "from": "1", "to": "2"}
    assert manifest.spend["total"]["calls"] == 0 and manifest.spend["total"]["replayed"] > 24
    assert manifest.dataset["path"] == str(project / "items.jsonl")  # found where the project went

    before, after = _by_ref(run), _by_ref(new)
    assert before.keys() == after.keys() and len(after) == 24
    assert {o.protocol_version for o in after.values() if o.judge == "mqm"} == {"2"}
    changed = {f"{o.judge} · {o.item_id} · T={o.temperature} · repeat {o.repeat}"
               for ref, o in before.items() if (o.status, o.score) != (after[ref].status, after[ref].score)}
    assert changed == set(CHANGED)
    attempts = [a for a in iter_transcript(new) if isinstance(a, AttemptRecord)]
    assert all(a.replayed or (a.error or {}).get("code") == "not_recorded" for a in attempts)


def test_show_stats_and_export_read_the_old_run(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """What re-scoring stands on: today's readers take the old lines as they are."""
    run = _run(project)
    assert main(["show", str(run), "--item", "lit-002", "--judge", "mqm"]) == 0
    assert "answer · attempt 1" in capsys.readouterr().out
    assert main(["stats", str(run), "--quiet", "--json", str(project / "stats.json")]) == 0
    assert main(["export", str(run), "--output", str(project / "outcomes.csv")]) == 0
    assert len((project / "outcomes.csv").read_text().splitlines()) == 25  # a header and 24 tasks
    spend = Spend()
    for attempt in iter_transcript(run):
        spend.add(attempt)
    assert spend.to_dict() == {k: v for k, v in read_manifest(run).spend["total"].items() if k != "covers_bytes"}


def test_the_judges_are_the_manifests_not_the_config_files(project: Path) -> None:
    """The config file as it is now (a judge dropped, temperatures changed) does not change what
    is re-scored: the run recorded its judges."""
    (project / "config.yaml").write_text((project / "config.yaml").read_text().replace(
        "temperatures: [0.0, 0.7]", "temperatures: [0.3]"), encoding="utf-8")
    result = rescore(_run(project), output=project / "rescored")
    assert result.tasks == 24 and len(result.changed) == 3
    assert set(result.versions) == {"mqm", "prometheus"}
    assert {o.temperature for o in latest_outcome_records(result.run.run_dir).values()} == {0.0, 0.7}


def test_a_run_directory_without_its_project_needs_its_dataset_and_no_config(project: Path, tmp_path: Path,
                                                                              capsys: pytest.CaptureFixture[str]) -> None:
    archived = tmp_path / "archive" / "judged-in-november"
    shutil.copytree(_run(project), archived)
    assert main(["rescore", str(archived), "--output", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err
    assert "before-compact/items.jsonl" in err and "--dataset PATH" in err
    with pytest.raises(DatasetError, match="not the dataset run before-compact-demo-a363d3c9f3 judged"):
        rescore(archived, dataset=RUN_V1 / "items.jsonl", output=tmp_path / "b")
    result = rescore(archived, dataset=project / "items.jsonl", output=tmp_path / "c")
    assert result.tasks == 24 and len(result.changed) == 3


def test_an_old_run_without_reason_codes_reads_them_as_unrecorded(project: Path) -> None:
    """Outcome lines from before reason codes: the original's unscored tasks are ``unrecorded``."""
    outcomes = _run(project) / "outcomes.jsonl"
    lines = [json.loads(line) for line in outcomes.read_text().splitlines()]
    outcomes.write_text("".join(json.dumps({k: v for k, v in line.items() if k != "reason_code"}) + "\n"
                                for line in lines))
    result = rescore(_run(project), output=project / "rescored")
    unscored = sum(1 for o in latest_outcome_records(_run(project)).values() if not o.scored)
    assert result.before.get("unrecorded") == unscored == 4
    assert {c.before for c in result.changed if c.before.startswith("unscored")} == {"unscored (unrecorded)"}


def test_protocol_options_apply_to_an_old_run(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _run(project)
    assert main(["rescore", str(run), "--protocol-option", "mqm.parser=legacy-gemba",
                 "--output", str(project / "legacy")]) == 0
    assert "mqm: gemba-mqm 1 -> 2" in capsys.readouterr().out
    legacy = _by_ref(project / "legacy")
    assert all(o.scored and o.reasks == 0 for o in legacy.values() if o.judge == "mqm")  # garbage scores 0
    assert read_manifest(project / "legacy").judge("mqm").protocol_options["parser"] == "legacy-gemba"  # type: ignore[union-attr]
    assert main(["rescore", str(run), "--protocol-option", "mqm.rubric=x", "--output", str(project / "x")]) == 2
    assert "judges[mqm].protocol_options: gemba-mqm has no option 'rubric'" in capsys.readouterr().err
    assert main(["rescore", str(run), "--protocol-option", "mqm.parser=lenient", "--output", str(project / "x")]) == 2
    assert capsys.readouterr().err.startswith("judge-engine: error: --protocol-option: ")
    assert not (project / "x").exists()


def test_reask_online_on_an_old_demo_run_is_refused_before_anything_is_written(
        project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rescore", str(_run(project)), "--reask-online", "--output", str(project / "x")]) == 2
    assert "--reask-online on a demo run" in capsys.readouterr().err
    assert not (project / "x").exists()


def test_a_format_1_run_rescores_given_its_dataset(tmp_path: Path, no_connections: list[Any],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """run_v1 (no format versions; written before records.py) recorded its dataset at /tmp/fx,
    gone: with --dataset it re-scores, gemba-mqm 1 -> 2, and nothing its answers say changes
    (each is a well-formed answer or prose, read alike by both versions)."""
    run = tmp_path / "run_v1"
    shutil.copytree(RUN_V1, run)
    assert main(["rescore", str(run), "--output", str(tmp_path / "a")]) == 2
    assert "/tmp/fx/items.jsonl" in capsys.readouterr().err
    assert main(["rescore", str(run), "--dataset", str(run / "items.jsonl"), "--output", str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    assert "mqm: gemba-mqm 1 -> 2" in out and "0 tasks changed" in out and "0 calls made" in out
    before, after = _by_ref(run), _by_ref(tmp_path / "b")
    assert len(after) == 16 and {r: (o.status, o.score) for r, o in before.items()} == \
        {r: (o.status, o.score) for r, o in after.items()}
    assert no_connections == []


def test_reask_online_on_a_format_1_run_wants_its_recorded_key(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """run.json keeps no secrets: the key comes from the variable the run named (FX_KEY)."""
    run = tmp_path / "run_v1"
    shutil.copytree(RUN_V1, run)
    assert main(["rescore", str(run), "--dataset", str(run / "items.jsonl"), "--reask-online",
                 "--output", str(tmp_path / "x")]) == 2
    assert "FX_KEY is not set" in capsys.readouterr().err
