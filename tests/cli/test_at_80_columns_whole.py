"""At 80 columns, what a reader reads as one thing stays whole (issue 34.6): ``plan``'s limit
that binds (``concurrency``, not ``concurrency-`` over ``bound``), ``stats``' cascade table as
two table parts rather than 40 lines of ``column  value`` blocks, a number beside its name and a
comparison (``bound 0.254 > 0.15``, ``strong 0.6060 < 0.6145``) on one line in prose and in
table cells, and a template's own lines in ``protocols --check``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from judge_engine.cli import main
from judge_engine.fake import FakeConfig, FakeServer
from judge_engine.inputs.config import load_config
from judge_engine.inputs.dataset import iter_items
from judge_engine.planning.plan import build_protocol
from tests.harness import TEST_KEY, TEST_KEY_ENV, Job, make_job
from tests.trust.cascade.conftest import cascade_job, latest
from tests.trust.cascade.test_plan_stats import _hand_built_cascaded_run

WIDTH = 80
REPO = Path(__file__).resolve().parents[2]
BOX = "┏┃┡│└┗━─╭╰"
COMPARISONS = {"<", ">", "<=", ">=", "="}
FIGURE = re.compile(r"[(\[~$+-]*[\d.]*\d")


@pytest.fixture(autouse=True)
def _narrow(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", str(WIDTH))


def _split_figures(text: str) -> list[str]:
    """Every place a prose line (not a table's) was wrapped between a figure and its name or
    across a comparison: the next line's first word did not fit (so the break is a wrap, not the
    end of a message), and it is a comparison or a figure after an unpunctuated word, or the line
    ends with a comparison or with a figure that no punctuation closes (``0`` over ``held``)."""
    lines = [line.rstrip() for line in text.splitlines()]
    found = []
    for line, after in zip(lines, lines[1:], strict=False):
        if not line.strip() or not after.strip() or line.lstrip()[:1] in BOX or after.lstrip()[:1] in BOX:
            continue
        last, first = line.split()[-1], after.split()[0]
        if len(line) + 1 + len(first) <= WIDTH:
            continue  # it would have fitted: the line ended there
        if (first in COMPARISONS or last in COMPARISONS
                or (FIGURE.match(first) and not last.endswith((",", ";", ":")))
                or (FIGURE.match(last) and not last.endswith((",", ";", ":", ")", ".")))):
            found.append(f"{line!r} / {after!r}")
    return found


def _fits(text: str) -> bool:
    return all(len(line.rstrip()) <= WIDTH for line in text.splitlines())


# --- plan ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("limits", [{"concurrency": 1}, {}], ids=["concurrency", "latency"])
def test_plan_writes_the_limit_that_binds_as_one_word(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      limits: dict[str, int]) -> None:
    """One call at a time binds a 40-task judge by concurrency; four tasks at 2 s each bind by
    latency. The table says which, whole, in its wall time column ("bound by")."""
    job = make_job(tmp_path, None, items=40 if limits else 4, judge={"limits": limits})
    assert main(["plan", str(job.config)]) == 0
    out = capsys.readouterr().out
    word = "concurrency" if limits else "latency"
    assert re.search(rf"(?<![\w-]){word}(?![\w-])", out), out
    assert "concurrency-" not in out and "latency-" not in out and not re.search(r"^\s*bound\b", out, re.M)
    assert "bound by" in out


# --- stats of a cascade ---------------------------------------------------------------------------


def test_stats_draws_a_cascade_as_two_table_parts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Nine columns do not fit 80: two parts with the stage repeated (18 lines), not a block of
    ``column  value`` lines per stage (40)."""
    run = _hand_built_cascaded_run(tmp_path)
    assert main(["stats", str(run)]) == 0
    out = capsys.readouterr().out
    section = out[out.index("cascade: agreement with humans"):].splitlines()
    table = section[:next(i for i, line in enumerate(section) if line.lstrip().startswith("coverage "))]
    assert len(table) <= 20, "\n".join(table)
    assert sum("(1/2)" in line or "(2/2)" in line for line in table) == 2
    assert not any(re.match(r"\s+(reached|escalated)\s{2,}\d", line) for line in table)  # no block lines
    assert _fits(out)


# --- a number with its name -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def cascaded(tmp_path_factory: pytest.TempPathFactory) -> Job:
    """A cascade whose strong stage is rarely sure enough: items abstain, each with a reason
    listing every stage's confidence against its threshold."""
    folder = tmp_path_factory.mktemp("whole")
    with pytest.MonkeyPatch.context() as patch, FakeServer(FakeConfig()) as server:
        patch.setenv(TEST_KEY_ENV, TEST_KEY)
        job = cascade_job(folder, server, thresholds={"cheap": None, "mid": 0.9, "strong": 0.99}, items=12)
        assert main(["run", str(job.config), "--no-live"]) == 0
    return job


def test_a_comparison_stays_on_one_line_in_stats_and_show(cascaded: Job, capsys: pytest.CaptureFixture[str]) -> None:
    run = cascaded.only_run()
    reasons = [r.reason or "" for r in latest(run, "cascade").values() if r.reason_code == "abstained"]
    comparisons = {m.group() for reason in reasons for m in re.finditer(r"\w+ [\d.]+ < [\d.]+", reason)}
    assert comparisons, reasons
    outputs = {}
    assert main(["stats", str(run)]) == 0
    outputs["stats"] = capsys.readouterr().out
    assert main(["show", str(run), "--judge", "cascade"]) == 0
    outputs["show"] = capsys.readouterr().out
    item = next(i for i, r in sorted(latest(run, "cascade").items()) if r.reason_code == "abstained")
    assert main(["show", str(run), "--item", item, "--judge", "cascade"]) == 0
    outputs["show --item"] = capsys.readouterr().out
    for where, out in outputs.items():
        flat = " ".join(out.split())
        shown = [c for c in comparisons if c in flat]
        assert shown, where
        cells = [re.sub(r"\s+", " ", line) for line in out.splitlines()]
        for comparison in shown:  # in prose or in a table cell: on one line, whole
            assert any(comparison in cell for cell in cells), (where, comparison)
        assert _split_figures(out) == [], where
        assert _fits(out), where


def test_calibrate_keeps_bound_with_its_figure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The example's rows at risk 0.15: mini's first test fails; its sentence says "bound 0.254 >
    0.15"-like figures that must not be split from "bound"."""
    rows = REPO / "examples" / "calibrate" / "rows.csv"
    assert main(["calibrate", "--rows", str(rows), "--stages", "mini,small,large", "--risk", "0.15",
                 "--delta", "0.1", "--costs", "mini=0.0002,small=0.001,large=0.01"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"bound \d\.\d{3} > 0\.15", out)  # on one line
    assert _split_figures(out) == [] and _fits(out)


def test_plan_and_status_of_a_cascade_keep_figures_with_their_names(
        cascaded: Job, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", str(cascaded.config)]) == 0
    plan = capsys.readouterr().out
    assert main(["status", str(cascaded.only_run())]) == 0
    status = capsys.readouterr().out
    for out in (plan, status):
        lines = [line for line in out.splitlines() if not line.startswith("run directory: ")]
        assert _split_figures("\n".join(lines)) == [] and _fits("\n".join(lines))


def test_the_run_summary_writes_a_cascades_sentence_as_a_sentence(
        tmp_path: Path, fake_server: FakeServer, capsys: pytest.CaptureFixture[str]) -> None:
    """'answered by mid 6, strong 0 (cheap not asked...)' was cut after each ', ' that did not fit:
    'mid 6' on one line, 'strong 0 (...' on the next; it wraps as a sentence now."""
    job = cascade_job(tmp_path, fake_server, thresholds={"cheap": None, "mid": 0.9, "strong": 0.99}, items=12)
    assert main(["run", str(job.config), "--no-live"]) == 0
    err = capsys.readouterr().err
    said = err[err.index("cascade (stage guarantee): 12 items"):err.index("this session:")]
    assert re.match(r"cascade \(stage guarantee\): 12 items; answered by mid \d+, strong \d+ ", said), said
    assert _split_figures(said) == [] and _fits(said)


# --- protocols --check ----------------------------------------------------------------------------


def test_protocols_check_keeps_each_line_of_a_template(capsys: pytest.CaptureFixture[str]) -> None:
    """The custom rubric's prompt has lines of ~100 characters: each is shown as one line, or
    broken between words with its continuation marked ``↳``, so the template's own lines read as
    written; no line of the output is wider than 80."""
    config_path = REPO / "examples" / "custom_rubric" / "config.yaml"
    assert main(["protocols", "--check", str(config_path)]) == 0
    out = capsys.readouterr().out
    assert _fits("\n".join(line for line in out.splitlines() if not line.endswith(str(config_path))))  # a path is whole
    logical: list[str] = []
    for line in out.splitlines():
        if not line.startswith("│") or not line.rstrip().endswith("│"):
            continue
        inner = line.rstrip()[1:-1][1:].rstrip()  # the box and its one space of padding
        if inner.startswith("↳ "):
            logical[-1] += " " + inner[2:]
        else:
            logical.append(inner)
    config = load_config(config_path)
    long_lines = 0
    for judge in config.judges:
        protocol = build_protocol(judge)
        item = next(iter_items(config.dataset, protocol.required_fields))
        for message in protocol.render(item, protocol.variants(item)[0]):
            for line in str(message["content"]).splitlines():
                assert line.rstrip() in logical, line
                long_lines += len(line) > WIDTH - 4
    assert long_lines >= 3, "the example's template has lines wider than the box"
