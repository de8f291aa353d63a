"""What a person watching a run reads (issue 13, item 12): the live display at 80 columns, the
summary, and progress lines when there is no live display."""

from __future__ import annotations

import io
import re
import time
from pathlib import Path

import pytest
from rich.console import Console
from rich.table import Table

from judge_engine.cli import main
from judge_engine.cli.display import Column, FitTable, LiveDisplay, command, packed, summary
from judge_engine.fake import FakeServer
from judge_engine.inputs.config import JudgeConfig
from judge_engine.lanes import Lane
from judge_engine.planning.plan import build_protocol
from judge_engine.providers import Endpoint
from judge_engine.rundir.records import Manifest
from judge_engine.running.runtime import JudgeRuntime
from judge_engine.running.session import JudgeTotals, RunResult
from tests.harness import make_job

NAMES = ("mqm-gpt-4o-mini", "prometheus-literary-sqm", "bws")


def _judges() -> list[JudgeRuntime]:
    judges = []
    for name in NAMES:
        config = JudgeConfig.model_validate({"name": name, "model": "openai/gpt-4o-mini", "protocol": "gemba-mqm"})
        judge = JudgeRuntime(config, build_protocol(config), Endpoint(config.model, None), [],
                             lane=Lane(name, config.limits), provider=None)  # type: ignore[arg-type]
        c = judge.counters
        c.total, c.done, c.in_flight, c.cost, c.unscored, c.retries, c.reasks = 1_000_000, 123_456, 64, 123.4567, 12, 345, 7
        judges.append(judge)
    return judges


def _render(renderable: object, width: int) -> str:
    console = Console(width=width, record=True, force_terminal=True, color_system=None)
    console.print(renderable)
    return console.export_text()


@pytest.mark.parametrize("width", [80, 100, 200])
def test_live_display_shows_every_figure_whole_at_any_width(width: int) -> None:
    text = _render(LiveDisplay(_judges(), console=Console(width=width, force_terminal=True)), width)
    assert "…" not in text
    assert all(len(line) <= width for line in text.splitlines())
    for name in NAMES:
        assert name in text
    assert text.count("123,456/1,000,000") == 3 and text.count("$123.46") == 3
    for figure in ("345", "64", "12"):
        assert figure in text


def test_packed_breaks_only_between_figures() -> None:
    parts = ["12,345 req/min", "1.23M tok/min", "0 429s", "345 retries", "7 re-asks", "0 cached", "12 unscored"]
    text = packed(parts, 40)
    assert all(len(line) <= 40 for line in text.splitlines())
    assert [p for line in text.splitlines() for p in line.strip().split(" · ")] == parts


def test_summary_at_80_columns_cuts_nothing() -> None:
    manifest = {
        "format": "judge-engine-run", "version": 1,
        "run_id": "literary_mt-demo-1a2b3c4d5e", "status": "completed",
        "counts": {"total": {"tasks": 1000, "scored": 990, "unscored": 10,
                             "unscored_by_code": {"transport_exhausted": 7, "unreadable": 3}},
                   "judges": {NAMES[0]: {"scored": 990, "unscored": 10}}},
        "spend": {"total": {"calls": 1000, "prompt_tokens": 1_234_567, "completion_tokens": 45_678, "cost": 0.22},
                  "judges": {NAMES[0]: {"calls": 1000, "prompt_tokens": 1_234_567, "completion_tokens": 45_678,
                                        "cost": 0.22}}},
        "sessions": [{}, {"judged": 899, "spend": {"total": {"calls": 853, "cost": 0.19}}}],
    }
    result = RunResult(Path("runs/x"), "completed", Manifest.from_dict(manifest),
                       [JudgeTotals(NAMES[0], "openai/gpt-4o-mini", "gemba-mqm", retries=345, reasks=7)],
                       elapsed_s=1234.0)
    text = _render(summary(result, width=80), 80)
    assert "…" not in text and all(len(line) <= 80 for line in text.splitlines())
    assert "transport_exhausted 7, unreadable 3" in text
    assert "this session: 899 tasks judged" in text and "whole run (2 sessions): 1,000 tasks" in text
    assert "$0.19" in text and "$0.22" in text and "$0.1900" not in text  # dollars, not 4 fixed decimals


@pytest.mark.slow
def test_without_a_live_display_progress_lines_are_printed_periodically(
        tmp_path: Path, fake_server: FakeServer, capsys) -> None:
    fake_server.update(latency_s=0.2)
    job = make_job(tmp_path, fake_server, items=30, judge={"limits": {"concurrency": 2}})
    assert main(["run", str(job.config), "--no-live", "--progress-every", "0.5"]) == 0
    err = capsys.readouterr().err
    progress = [line for line in err.splitlines() if line.startswith("[") and "] mqm: " in line]
    assert len(progress) >= 3  # ~3 s of work at one line per 0.5 s
    assert "/30 (" in progress[-1] and "req/min" in progress[-1] and "ETA" in progress[-1]


def _watched_view(tmp_path: Path, every_s: float) -> tuple[object, object, io.StringIO, list[int]]:
    """A session view (no live display) of a started session, its ``_step`` calls counted."""
    from types import SimpleNamespace

    from judge_engine.cli.display import SessionView
    from judge_engine.running.runtime import RunProgress

    progress = RunProgress(run_dir=tmp_path)
    progress.start(SimpleNamespace(done_count=0, retry_count=0, judges=_judges()))  # type: ignore[arg-type]
    out = io.StringIO()
    view = SessionView(progress, console=Console(file=out, width=200), live=False, every_s=every_s)
    looks = [0]
    step = view._step

    def counted() -> None:
        looks[0] += 1
        step()

    view._step = counted  # type: ignore[method-assign]
    return progress, view, out, looks


@pytest.mark.slow
def test_the_view_of_a_running_session_wakes_only_when_there_is_something_to_say(tmp_path: Path) -> None:
    """The view's thread looked at the session 20 times a second; a paced run waits on its pacer
    for minutes, and every wake-up of this thread costs the engine CPU (it takes the GIL). It now
    wakes for the start, for each progress line when it is due, and for a stop."""
    progress, view, out, looks = _watched_view(tmp_path, every_s=0.6)
    with view:  # type: ignore[attr-defined]
        time.sleep(1.5)
    assert 2 <= looks[0] <= 4, looks  # the start and two lines (30 before)
    assert sum("] mqm-gpt-4o-mini: " in line for line in out.getvalue().splitlines()) >= 2


def test_a_stop_request_wakes_the_view_at_once(tmp_path: Path) -> None:
    progress, view, out, _ = _watched_view(tmp_path, every_s=30.0)
    with view:  # type: ignore[attr-defined]
        time.sleep(0.3)  # started, and said so
        asked = time.monotonic()
        progress.request_stop()  # type: ignore[attr-defined]
        while "Stopping" not in out.getvalue() and time.monotonic() - asked < 5.0:
            time.sleep(0.01)
        said = time.monotonic() - asked
    assert "Stopping" in out.getvalue() and said < 0.5, said


# --- the one table printer (issue: terminal display at 80 columns) -------------------------------

COEFFICIENTS = ["exact_agreement", "cohen_kappa", "kappa_quadratic", "alpha_ordinal", "alpha_interval", "icc_1_1",
                "icc_2_1", "icc_3_1", "icc_1_k", "icc_2_k", "icc_3_k", "fleiss_kappa", "randolph_kappa"]


def _agreement(rows: int) -> tuple[list[Column], list[list[str]]]:
    columns = [Column("group", key=True), Column("judge", key=True),
               *(Column(name, justify="right") for name in ["n", *COEFFICIENTS])]
    table = [[f"g{r}", "mqm-mini", "20", *(f"{-0.1234 * (i + r) / 7:.3f}" for i in range(len(COEFFICIENTS)))]
             for r in range(rows)]
    return columns, table


def test_a_table_that_fits_is_drawn_exactly_as_rich_draws_it() -> None:
    columns, rows = _agreement(3)
    plain = Table(title="Agreement", title_justify="left")
    for column in columns:
        plain.add_column(column.header, justify=column.justify)
    for row in rows:
        plain.add_row(*row)
    assert _render(FitTable(columns, rows, title="Agreement", title_justify="left"), 240) == _render(plain, 240)


def test_a_wide_table_is_split_into_column_groups_that_repeat_its_keys() -> None:
    columns, rows = _agreement(6)
    text = _render(FitTable(columns, rows, title="Agreement"), 80)
    assert "…" not in text and all(len(line) <= 80 for line in text.splitlines())
    parts = re.findall(r"Agreement \((\d)/(\d)\)", text)
    assert len(parts) >= 2 and {total for _, total in parts} == {str(len(parts))}
    header_lines = [line for line in text.splitlines() if "┃ group" in line]
    assert len(header_lines) == len(parts) and all("┃ judge" in line for line in header_lines)
    for header in ["n", *COEFFICIENTS]:
        assert re.search(rf"┃ +{header} +┃", text), header  # every header whole, on one line
    for row in rows:
        for value in row[2:]:
            assert re.search(rf"│ +{re.escape(value)} +│", text), value  # every figure whole


def test_one_row_too_wide_for_its_table_becomes_a_block_of_column_value_lines() -> None:
    columns, rows = _agreement(1)
    text = _render(FitTable(columns, rows, title="Agreement"), 80)
    lines = [line.strip() for line in text.splitlines()]
    assert lines[0] == "Agreement"
    assert lines[1].split() == ["group", "g0"] and lines[2].split() == ["judge", "mqm-mini"]  # the keys first
    for header, value in zip(["n", *COEFFICIENTS], rows[0][2:], strict=True):
        assert [header, value] in [line.split() for line in lines], header


def test_prose_wraps_between_words_while_names_stay_whole() -> None:
    columns = [Column("name", key=True), Column("description", wrap=True)]
    rows = [["prometheus-relative", "Prometheus 2 pairwise grading: feedback + winner A/B; score 1 if A wins"]]
    text = _render(FitTable(columns, rows), 50)
    assert "prometheus-relative" in text and "…" not in text and all(len(line) <= 50 for line in text.splitlines())
    assert "│ prometheus-relative │" in text  # a table still: only the description wrapped


def test_a_command_is_one_line_whatever_the_width() -> None:
    line = "judge-engine resume /a/very/long/path/to/runs/literary_mt-demo-99e5735605 --retry transport_exhausted"
    console = Console(width=40, record=True, force_terminal=True, color_system=None)
    command(console, line, lead="Judge them again (cached answers are re-read, not bought again):")
    assert f"  {line}" in console.export_text().splitlines()


def test_summary_never_breaks_a_model_name() -> None:
    model = "anthropic/claude-sonnet-4-5-20250929"
    manifest = {"format": "judge-engine-run", "version": 1, "run_id": "r-1", "status": "completed",
                "counts": {"total": {"tasks": 10, "scored": 10}, "judges": {NAMES[1]: {"scored": 10}}},
                "spend": {"total": {"calls": 10}, "judges": {NAMES[1]: {"calls": 10}}}, "sessions": [{}]}
    result = RunResult(Path("runs/x"), "completed", Manifest.from_dict(manifest),
                       [JudgeTotals(NAMES[1], model, "prometheus-absolute")], elapsed_s=12.0)
    text = _render(summary(result, width=60), 60)
    assert model in text and NAMES[1] in text and "prometheus-absolute" in text
    assert all(len(line) <= 60 for line in text.splitlines())


def test_wrapped_prose_reads_from_the_left() -> None:
    reason = "unusable answer after 0 re-asks: 3 valid words (sun, planet, constellation); the method scores"
    columns = [Column("judge", key=True), Column("rate", justify="right"),
               Column("top_reason", justify="right", wrap=True, fold_long_words=True)]
    text = _render(FitTable(columns, [["claude-haiku", "0.167", reason]]), 60)
    assert all(len(line) <= 60 for line in text.splitlines())
    assert "│ unusable answer after 0 re-asks:" in text
    assert "│ 3 valid words (sun, planet," in text  # each line starts at the column's left edge
