"""What a new user reads at 80 columns (and narrower): the ``stats``, ``meta``, ``protocols``,
``plan`` and ``show`` tables never break or cut a number or a name, every suggested command is
a line of its own that no width breaks, ``show`` says what it left out, and ``status`` says why
a run stopped and which command continues it."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from judge_engine.cli import main
from judge_engine.fake import FakeServer
from judge_engine.protocols import available
from judge_engine.util.money import dollars
from tests.harness import make_job, read_lines
from tests.stats.fixtures import outcome, write_run

WIDTH = 80


@pytest.fixture(autouse=True)
def _narrow(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", str(WIDTH))


def _whole(text: str, word: str) -> bool:
    """``word`` appears in ``text`` unbroken and uncut (not inside a longer token)."""
    return re.search(rf"(?<![\w.\-]){re.escape(word)}(?![\w.])", text) is not None


def _lines_fit(text: str, width: int = WIDTH) -> bool:
    return all(len(line.rstrip()) <= width for line in text.splitlines())


def _cells(sections_json: Path) -> set[str]:
    """Every cell of every section as the tables show it (three decimals, as ``_cell`` writes)."""
    from judge_engine.cli.display import _cell

    doc = json.loads(sections_json.read_text(encoding="utf-8"))
    cells = set()
    for section in doc["sections"].values():
        if not section["rows"]:
            continue  # absent: one line says why
        for row in section["rows"]:
            cells |= {_cell(row.get(column)) for column in section["columns"]}
        # A column empty in every row is left out of a long layout.
        cells |= {c for c in section["columns"] if any(row.get(c) not in (None, "") for row in section["rows"])}
    return cells - {"", "-"}


def _scored_run(tmp_path: Path, items: int = 20) -> Path:
    """Two judges, three repeats each, on ``items`` items: enough for every coefficient."""
    records = []
    for i in range(items):
        for repeat in range(3):
            records.append(outcome(f"i{i:02d}", "mqm-judge-one", 0.0, repeat, -float((i * 7 + repeat) % 11)))
            records.append(outcome(f"i{i:02d}", "mqm-judge-two", 0.0, repeat, -float((i * 5 + 2 * repeat) % 9)))
    return write_run(tmp_path / "run", records)


# --- 1. tables: numbers and names whole --------------------------------------------------------


def test_stats_with_reliability_shows_every_number_and_header_whole_at_80_columns(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _scored_run(tmp_path)
    assert main(["stats", str(run), "--reliability", "--json", str(tmp_path / "s.json")]) == 0
    out = capsys.readouterr().out
    assert _lines_fit(out) and "…" not in out
    missing = sorted(cell for cell in _cells(tmp_path / "s.json") if not _whole(out, cell))
    assert missing == []


def test_meta_agreement_with_every_coefficient_is_readable_at_80_columns(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The 17-column "Agreement with human scores" table: each number and header whole."""
    run = _scored_run(tmp_path)
    humans = tmp_path / "humans.csv"
    with humans.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["id", "mqm"])
        writer.writerows([f"i{i:02d}", -float((i * 3) % 10)] for i in range(20))
    assert main(["meta", str(run), "--human-table", str(humans), "--key", "id", "--human", "mqm",
                 "--pred", "mqm-judge-one", "--agreement", "--icc-forms", "--fleiss", "--bootstrap", "200",
                 "--json", str(tmp_path / "m.json")]) == 0
    out = capsys.readouterr().out
    assert _lines_fit(out) and "…" not in out
    for header in ("exact_agreement", "kappa_quadratic", "randolph_kappa", "icc_3_k", "judge"):
        assert _whole(out, header), header
    missing = sorted(cell for cell in _cells(tmp_path / "m.json") if not _whole(out, cell))
    assert missing == []


def test_protocols_at_80_columns_cut_no_name_and_no_header(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["protocols"]) == 0
    out = capsys.readouterr().out
    assert _lines_fit(out) and "…" not in out
    for name in available():
        assert _whole(out, name), name
    assert _whole(out, "description") and _whole(out, "version")


@pytest.mark.slow
def test_plan_never_breaks_a_model_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = "anthropic/claude-sonnet-4-5-20250929"
    job = make_job(tmp_path, None, items=3, judge={"name": "a-judge-named-at-length", "model": model})
    assert main(["plan", str(job.config)]) == 0
    out = capsys.readouterr().out
    assert _lines_fit("\n".join(line for line in out.splitlines() if str(job.runs) not in line))
    assert _whole(out, model) and _whole(out, "a-judge-named-at-length")
    assert any(line.startswith(f"run directory: {job.runs}/") for line in out.splitlines())  # whole, unbroken


# --- 3. suggested commands: whole lines --------------------------------------------------------


def test_suggested_commands_are_whole_lines_on_a_narrow_terminal(
        tmp_path: Path, fake_server: FakeServer, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The run directory's path is longer than the terminal is wide: a command is still one
    line, to copy and paste (the terminal soft-wraps it)."""
    monkeypatch.setenv("COLUMNS", "40")
    fake_server.update(error_500_rate=1.0)
    job = make_job(tmp_path, fake_server, items=3, judge={"retries": {"transport": 1, "backoff_max_s": 0.01}})
    assert main(["run", str(job.config), "--no-live"]) == 3
    err = capsys.readouterr().err.splitlines()
    run = job.only_run()
    assert len(str(run)) > 40
    assert f"  judge-engine stats {run}" in err
    assert f"  judge-engine resume {run} --retry transport_exhausted" in err
    assert f"Run directory: {run}" in err


def test_a_model_given_with_model_is_the_one_the_tables_name(
        tmp_path: Path, fake_server: FakeServer, capsys: pytest.CaptureFixture[str]) -> None:
    """``run --model X`` swaps every judge's model (the config says openai/gpt-4o-mini): the
    summary, ``status``, the summary of a resumed session and ``plan --model X`` name X, never the
    config's; X is what was sent (the transcript) and what run.json records."""
    job = make_job(tmp_path, fake_server, items=4)
    assert main(["run", str(job.config), "--no-live", "--limit", "2", "--model", "openai/gpt-4o"]) == 0
    run = job.only_run()
    outputs = {"summary": capsys.readouterr().err}
    assert main(["status", str(run)]) == 0
    outputs["status"] = capsys.readouterr().out
    (run / "run.json").write_text(json.dumps({**json.loads((run / "run.json").read_text()), "status": "cancelled"}))
    assert main(["resume", str(run), "--no-live"]) == 0  # the recorded --model applies again
    outputs["resumed"] = capsys.readouterr().err
    assert main(["plan", str(job.config), "--model", "openai/gpt-4o"]) == 0
    outputs["plan"] = capsys.readouterr().out
    for name, said in outputs.items():
        assert re.search(r"openai/gpt-4o(?![\w.\-])", said) and "gpt-4o-mini" not in said, (name, said)
    assert "mqm (online, openai/gpt-4o)" in outputs["status"]
    assert set(fake_server.stats()["by_model"]) == {"gpt-4o"}  # what was sent (the provider's name for it)
    assert {r["model"] for r in read_lines(run / "outcomes.jsonl")} == {"openai/gpt-4o"}
    assert [j["model"] for j in json.loads((run / "run.json").read_text())["judges"]] == ["openai/gpt-4o"]


def test_every_line_that_names_the_run_directory_is_a_path_line_or_a_command(
        tmp_path: Path, fake_server: FakeServer, capsys: pytest.CaptureFixture[str]) -> None:
    """A run directory longer than 80 columns, through ``run``, ``run`` again, ``resume``,
    ``plan`` and ``export``: each line naming it is ``label: path`` (display.path_line) or an
    indented command (display.command), the path whole; every other line fits 80 columns."""
    deep = tmp_path / ("deep-" * 12) / "job"  # the run id is job-<hash>: only paths say deep-deep
    deep.mkdir(parents=True)
    job = make_job(deep, fake_server, items=2)
    assert main(["run", str(job.config), "--no-live"]) == 0
    run = job.only_run()
    assert len(f"Run directory: {run}") > WIDTH
    said = capsys.readouterr().err.splitlines()
    for argv in (["run", str(job.config), "--no-live"], ["resume", str(run), "--no-live"], ["plan", str(job.config)],
                 ["export", str(run)]):
        assert main(argv) == 0, argv
        out, err = capsys.readouterr()
        said += (out + err).splitlines()
    naming = [line for line in said if "deep-deep" in line]
    assert len(naming) >= 6, said  # run 2, run again 2, resume 2, plan 1, export 1
    for line in naming:
        label, _, path = line.partition(": ")
        assert (line.startswith("  ") and str(run) in line) or (path.startswith(str(run)) and ": " not in path), line
    assert [line for line in said if "deep-deep" not in line and len(line) > WIDTH] == []


def test_a_failed_run_names_its_judge_once_and_says_how_to_go_on(
        tmp_path: Path, fake_server: FakeServer, capsys: pytest.CaptureFixture[str]) -> None:
    fake_server.update(error_503_rate=1.0)
    job = make_job(tmp_path, fake_server, items=10, judge={
        "limits": {"concurrency": 1}, "retries": {"transport": 1, "backoff_max_s": 0.01, "stop_after_exhausted": 3}})
    assert main(["run", str(job.config), "--no-live"]) == 1
    err = capsys.readouterr().err
    run = job.only_run()
    assert err.count("stopped:") == 1 and "judges[mqm] (openai/gpt-4o-mini) stopped: 3 tasks in a row" in err
    assert f"  judge-engine resume {run} --retry transport_exhausted" in err.splitlines()

    assert main(["status", str(run)]) == 0
    out = capsys.readouterr().out
    assert out.count("stopped:") == 1 and "Fix the cause above" in out
    assert f"  judge-engine resume {run} --retry transport_exhausted" in out.splitlines()
    assert "3 unscored (transport_exhausted=3)" in out  # why, by reason code
    assert "batches" not in out  # an online run: nothing of batches


# --- 6. status: online runs and budgets ----------------------------------------------------------


def test_status_of_an_online_run_says_how_to_finish_it(
        tmp_path: Path, fake_server: FakeServer, capsys: pytest.CaptureFixture[str]) -> None:
    job = make_job(tmp_path, fake_server, items=4)
    assert main(["run", str(job.config), "--no-live"]) == 0
    run = job.only_run()
    manifest = json.loads((run / "run.json").read_text())
    for status, lead in (("cancelled", "Finish it"), ("running", "Its process ended without closing it")):
        (run / "run.json").write_text(json.dumps({**manifest, "status": status}))
        capsys.readouterr()
        assert main(["status", str(run)]) == 0
        out = capsys.readouterr().out
        assert lead in out and f"  judge-engine resume {run}" in out.splitlines(), out
        assert "batch" not in out and "waiting for another request" not in out


def test_status_of_a_run_stopped_by_its_budget_says_so_with_the_figures(
        tmp_path: Path, fake_server: FakeServer, capsys: pytest.CaptureFixture[str]) -> None:
    job = make_job(tmp_path, fake_server, items=40, judge={"limits": {"concurrency": 2}})
    assert main(["run", str(job.config), "--no-live", "--budget", "0.001"]) == 4
    run = job.only_run()
    err = capsys.readouterr().err
    assert "Stopped at the run's budget of $0.001 (" in err and "Stopped: stopped" not in err
    assert f"  judge-engine resume {run} --budget USD" in err.splitlines()

    stopped = json.loads((run / "run.json").read_text())["stopped"]
    assert main(["status", str(run)]) == 0
    out = capsys.readouterr().out
    assert "stopped: budget" in out
    assert f"Stopped at the run's budget of $0.001 ({dollars(stopped['spent'])} spent" in out
    assert f"  judge-engine resume {run} --budget USD" in out.splitlines()
    assert f"  judge-engine resume {run}" not in out.splitlines()  # a plain resume would stop again


def test_status_of_a_run_stopped_by_a_judges_own_budget_points_at_the_config(
        tmp_path: Path, fake_server: FakeServer, capsys: pytest.CaptureFixture[str]) -> None:
    job = make_job(tmp_path, fake_server, items=40, judge={"limits": {"concurrency": 2},
                                                            "budget": {"max_cost_usd": 0.001}})
    assert main(["run", str(job.config), "--no-live"]) == 4
    run = job.only_run()
    capsys.readouterr()
    assert main(["status", str(run)]) == 0
    out = capsys.readouterr().out
    assert "stopped: budget" in out and "judges[mqm].budget of $0.001" in out
    assert "raise judges[mqm].budget.max_cost_usd" in out and f"  judge-engine resume {run}" in out.splitlines()


# --- 4. show -----------------------------------------------------------------------------------


def test_show_wraps_its_headings_and_says_what_a_limit_left_out(
        tmp_path: Path, fake_server: FakeServer, capsys: pytest.CaptureFixture[str]) -> None:
    fake_server.update(error_500_rate=0.5, seed=3)
    job = make_job(tmp_path, fake_server, items=6, judge={
        "name": "a-judge-named-at-length", "temperatures": [0.0, 1.0],
        "retries": {"transport": 0, "backoff_max_s": 0.01}})
    main(["run", str(job.config), "--no-live"])
    run = job.only_run()
    outcomes = read_lines(run / "outcomes.jsonl")
    capsys.readouterr()

    assert main(["show", str(run), "--item", outcomes[0]["item_id"]]) == 0
    out = capsys.readouterr().out
    headings = [line for line in out.splitlines() if line.startswith("item ")]
    assert headings and all("…" not in line for line in headings)
    assert "T=1.0" in out and all(f"repeat {o['repeat']}" in out for o in outcomes[:1])

    assert main(["show", str(run), "--brief", "--limit", "3"]) == 0
    out = capsys.readouterr().out
    assert "first 3 of 12 tasks shown (--limit N for more)" in out
    assert _whole(out, "a-judge-named-at-length") and _lines_fit(out)
    assert main(["show", str(run), "--brief", "--limit", "12"]) == 0
    assert "--limit N for more" not in capsys.readouterr().out  # nothing more to show

    unscored = [o for o in outcomes if o["status"] == "unscored"]
    assert unscored, "the fake server's 500s left no task unscored"
    assert main(["show", str(run), "--brief", "--status", "unscored"]) == 0
    out = capsys.readouterr().out
    # The reason wraps in the room the task's columns leave; it is not cut to a stub.
    assert _lines_fit(out) and _whole(out, "transport_exhausted:") and _whole(out, "InternalServerError")
