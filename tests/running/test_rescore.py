"""rescore (issue 15, item 3): the recorded answers through the current rules, with no connection."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from judge_engine.cli import main
from judge_engine.fake import FakeServer
from judge_engine.planning.plan import task_ref
from judge_engine.protocols.gemba_mqm import gemba_score, legacy_parse
from judge_engine.rundir.records import AttemptRecord, OutcomeRecord
from judge_engine.rundir.store import iter_transcript, latest_outcome_records, read_manifest
from judge_engine.running.rescore import rescore
from tests.harness import make_job


def _by_ref(run: Path) -> dict[str, OutcomeRecord]:
    return {task_ref(o.judge, o.item_id, o.variant, o.temperature, o.repeat): o
            for o in latest_outcome_records(run).values()}


@pytest.fixture
def recorded(tmp_path: Path, fake_server: FakeServer) -> Path:
    """A finished run whose answers were sometimes malformed (so some tasks were re-asked, some
    ended unscored), with its answer cache deleted afterwards."""
    fake_server.update(malformed_rate=0.25, stop_early_rate=0.05, seed=9)
    job = make_job(tmp_path, fake_server, items=60, judge={"temperatures": [0.0, 0.7], "retries": {"reasks": 1}})
    assert main(["run", str(job.config), "--no-live", "--allow-unscored"]) == 0
    shutil.rmtree(tmp_path / "cache")
    return job.only_run()


def test_nothing_changed_reproduces_every_score_with_no_connection(recorded: Path, fake_server: FakeServer) -> None:
    before = fake_server.stats()["requests_total"]
    result = rescore(recorded)
    assert fake_server.stats()["requests_total"] == before  # no request reached the (still running) server
    assert result.changed == [] and result.tasks == 120
    original, again = _by_ref(recorded), _by_ref(result.run.run_dir)
    assert original.keys() == again.keys()
    for ref, old in original.items():
        new = again[ref]
        assert (new.status, new.score, dict(new.scores), new.reason_code, new.reasks) == \
               (old.status, old.score, dict(old.scores), old.reason_code, old.reasks)
    spend = result.run.manifest.spend["total"]
    assert spend["calls"] == 0 and spend["cost"] == 0 and spend["replayed"] > 120
    assert read_manifest(result.run.run_dir).rescored_from == str(recorded.resolve())
    assert (recorded.parent / "latest").resolve() == recorded.resolve()  # a rescore does not move latest


def test_the_legacy_parser_changes_exactly_the_tasks_it_scores_differently(recorded: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    first_answer: dict[str, str] = {}
    for attempt in iter_transcript(recorded):
        if isinstance(attempt, AttemptRecord) and attempt.reask == 0 and attempt.response is not None:
            first_answer[attempt.task_id] = str(attempt.response["content"])
    expected = set()
    for ref, old in _by_ref(recorded).items():
        legacy = gemba_score(legacy_parse(first_answer[old.task_id]).errors)
        if not (old.scored and old.score == legacy):
            expected.add(ref)
    assert expected  # the malformed answers made some differ
    assert main(["rescore", str(recorded), "--protocol-option", "parser=legacy-gemba",
                 "--output", str(recorded.parent / "legacy")]) == 0
    out = capsys.readouterr().out
    assert f"{len(expected):,} tasks changed" in out
    assert ("--changes 0 lists every one" in out) == (len(expected) > 20)
    after = _by_ref(recorded.parent / "legacy")
    changed = {ref for ref, old in _by_ref(recorded).items()
               if (after[ref].status, after[ref].score) != (old.status, old.score)}
    assert changed == expected
    assert all(o.scored and o.reasks == 0 for o in after.values())  # legacy rules never re-ask: garbage scores 0


def test_an_answer_the_new_rules_reask_is_not_recorded_never_invented(tmp_path: Path, fake_server: FakeServer) -> None:
    """Scored by the legacy parser (garbage is a perfect 0), the strict parser re-asks the
    malformed answers; the run recorded no answer to those re-asks, so they say so."""
    fake_server.update(malformed_rate=0.3, seed=4)
    job = make_job(tmp_path, fake_server, items=30, judge={"protocol_options": {"parser": "legacy-gemba"}})
    assert main(["run", str(job.config), "--no-live"]) == 0
    run = job.only_run()
    malformed = {a.task_id for a in iter_transcript(run) if isinstance(a, AttemptRecord)
                 and a.response is not None and "Critical" not in str(a.response["content"])}
    assert malformed
    result = rescore(run, options=["parser=strict"])
    after = latest_outcome_records(result.run.run_dir)
    refs = {task_ref(o.judge, o.item_id, o.variant, o.temperature, o.repeat): o for o in after.values()}
    for old in latest_outcome_records(run).values():
        new = refs[task_ref(old.judge, old.item_id, old.variant, old.temperature, old.repeat)]
        if old.task_id in malformed:
            assert new.status == "unscored" and new.reason_code == "not_recorded"
        else:
            assert new.score == old.score
    assert result.after.get("not_recorded") == len(malformed) and len(result.changed) <= len(malformed)
    assert result.run.manifest.spend["total"]["calls"] == 0  # a miss in the recording sent nothing


def test_every_change_is_listed_when_asked(recorded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = recorded.parent / "legacy-all"
    assert main(["rescore", str(recorded), "--protocol-option", "parser=legacy-gemba", "--output", str(out),
                 "--changes", "0"]) == 0
    text = capsys.readouterr().out
    changed = sum(1 for ref, old in _by_ref(recorded).items()
                  if (_by_ref(out)[ref].status, _by_ref(out)[ref].score) != (old.status, old.score))
    assert changed > 0 and "--changes 0" not in text and text.count(" · T=") == changed


def test_bad_options_are_bad_input(recorded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rescore", str(recorded), "--protocol-option", "no-such-option=1"]) == 2
    assert "no judge's protocol has an option 'no-such-option'" in capsys.readouterr().err
    assert main(["rescore", str(recorded), "--protocol-option", "parser"]) == 2


def _legacy_run(tmp_path: Path, fake_server: FakeServer, **judge: object) -> tuple[Path, set[str]]:
    """A run scored by the legacy parser, and the tasks whose first answer was malformed (the
    strict parser re-asks them; the run never did)."""
    fake_server.update(malformed_rate=0.3, seed=4)
    job = make_job(tmp_path, fake_server, items=30, judge={"protocol_options": {"parser": "legacy-gemba"}, **judge})
    assert main(["run", str(job.config), "--no-live"]) == 0
    run = job.only_run()
    malformed = {a.task_id for a in iter_transcript(run) if isinstance(a, AttemptRecord)
                 and a.response is not None and "Critical" not in str(a.response["content"])}
    assert malformed
    fake_server.update(malformed_rate=0.0)
    return run, malformed


@pytest.mark.slow
def test_reask_online_asks_the_judges_own_endpoint_and_only_for_what_was_never_recorded(
        tmp_path: Path, fake_server: FakeServer) -> None:
    """The re-asks go to the judge's api_base (here the fake server; never the provider's
    default host), paced by the judge's limits, and nothing recorded is asked again."""
    run, malformed = _legacy_run(tmp_path, fake_server, limits={"rpm": 600, "concurrency": 4})
    before = fake_server.stats()["requests_total"]
    assert main(["rescore", str(run), "--protocol-option", "parser=strict", "--reask-online",
                 "--output", str(tmp_path / "strict")]) == 0
    assert fake_server.stats()["requests_total"] - before == len(malformed)
    after = {o.task_id: o for o in latest_outcome_records(tmp_path / "strict").values()}
    assert all(o.scored for o in after.values())
    assert sorted(o.reasks for o in after.values()).count(1) == len(malformed)
    assert read_manifest(tmp_path / "strict").spend["total"]["calls"] == len(malformed)


def test_a_judge_that_stops_while_asked_online_fails_the_rescore(tmp_path: Path, fake_server: FakeServer,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    run, _ = _legacy_run(tmp_path, fake_server)
    fake_server.update(require_api_key="another-key")  # every online call is now refused (401)
    assert main(["rescore", str(run), "--protocol-option", "parser=strict", "--reask-online",
                 "--output", str(tmp_path / "strict")]) == 1
    assert "did not finish" in capsys.readouterr().out
    assert read_manifest(tmp_path / "strict").status == "failed"


def test_a_moved_run_directory_rescores(recorded: Path, tmp_path: Path) -> None:
    """Archived runs are what people re-score: the run's identity is its manifest's, not its
    directory's name."""
    archived = tmp_path / "archive" / "judged-in-march"
    shutil.copytree(recorded, archived)
    result = rescore(archived)
    assert result.changed == [] and result.tasks == 120
