"""``plan`` says what it estimates (issue 13, item 10): token counts marked ``~`` where the
model's tokenizer is not available offline (the counting itself: ``test_token_counting``),
completion tokens, calls and cost as ranges over the re-ask budget, an unknown model or price as
a warning (``--strict``: exit 2), and a table readable at 80 columns."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from judge_engine.cli import main
from judge_engine.errors import VerdictError
from judge_engine.providers.catalog import load_litellm
from judge_engine.util.money import dollars
from tests.harness import make_job


def test_plan_marks_estimated_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job = make_job(tmp_path, None, items=3, judges=[
        {"name": "mini", "model": "openai/gpt-4o-mini", "protocol": "gemba-mqm"},
        {"name": "claude", "model": "anthropic/claude-sonnet-4-5", "protocol": "gemba-mqm"}])  # fmt: skip
    assert main(["plan", str(job.config)]) == 0
    out = capsys.readouterr().out
    from judge_engine.running.estimate import plan_rows
    from judge_engine.running.session import prepare

    mini, claude = plan_rows(prepare(job.config, check_keys=False))
    assert f"~{claude.prompt_tokens.low:,}" in out and f"~{mini.prompt_tokens.low:,}" not in out
    assert "~ judges[claude]: estimated: no offline tokenizer for anthropic/claude-sonnet-4-5" in out


def test_completion_tokens_calls_and_cost_are_ranges_over_the_reask_budget(tmp_path: Path) -> None:
    from judge_engine.protocols.gemba_mqm import GembaMQM
    from judge_engine.running.estimate import plan_rows
    from judge_engine.running.session import prepare

    job = make_job(tmp_path, None, items=10, judge={"max_tokens": 300, "retries": {"reasks": 2}})
    (plan,) = plan_rows(prepare(job.config, check_keys=False))
    assert plan.completion_per_call == GembaMQM.typical_completion_tokens == 50  # under max_tokens 300
    assert plan.calls == (10, 30)  # 10 tasks; each re-asked twice at worst: 3 calls
    assert plan.completion_tokens == (500, 1500)  # 10 x 50; 30 x 50
    # Re-ask k resends the prompt with k (answer, re-ask) turns: P + (P + g) + (P + 2g) per task,
    # g = 50 (the answer) + 4 + 4 (two messages) + the re-ask text.
    reask = GembaMQM().reask(VerdictError("the answer does not follow the requested format"))
    growth = 50 + 8 + int(load_litellm().token_counter(model="gpt-4o-mini", text=reask))
    assert plan.prompt_tokens.high == 3 * plan.prompt_tokens.low + 10 * 3 * growth
    info = load_litellm().get_model_info("gpt-4o-mini")
    price_in, price_out = info["input_cost_per_token"], info["output_cost_per_token"]
    assert plan.cost is not None
    assert plan.cost.low == pytest.approx(plan.prompt_tokens.low * price_in + 500 * price_out)
    assert plan.cost.high == pytest.approx(plan.prompt_tokens.high * price_in + 1500 * price_out)

    (tmp_path / "capped").mkdir()
    capped = make_job(tmp_path / "capped", None, items=10, judge={"max_tokens": 30, "retries": {"reasks": 0}})
    (plan,) = plan_rows(prepare(capped.config, check_keys=False))
    assert plan.completion_tokens == (300, 300) and plan.calls == (10, 10)  # capped at 30; no re-asks
    assert any("judges[mqm].max_tokens: 30 is below gemba-mqm's typical answer" in n for n in plan.notes)


@pytest.mark.parametrize(("judge", "warning"), [
    ({"model": "my-unknown-model", "api_base": None}, "unknown model my-unknown-model"),
    ({"model": "openai/my-local-llama", "api_base": "http://127.0.0.1:9/v1"}, "unknown price for openai/my-local-llama"),
])  # fmt: skip
def test_unknown_model_or_price_warns_and_strict_exits_2(
    judge: dict[str, Any], warning: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = make_job(tmp_path, None, items=3, judge=judge)
    assert main(["plan", str(job.config)]) == 0
    out = capsys.readouterr().out
    assert f"warning: {warning}" in out and "no price" in out
    assert "$0.0000" not in out and "estimated cost unknown (no judge's model has a price)" in out
    assert main(["plan", str(job.config), "--strict"]) == 2
    assert "plan --strict: exit 2" in capsys.readouterr().out
    (tmp_path / "known").mkdir()
    known = make_job(tmp_path / "known", None, items=3)
    assert main(["plan", str(known.config), "--strict"]) == 0  # nothing unknown: strict passes


def test_plan_is_readable_at_80_columns(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    job = make_job(tmp_path, None, items=50, judges=[
        {"name": "mqm-mini", "model": "openai/gpt-4o-mini", "protocol": "gemba-mqm", "repeats": 20},
        {"name": "mqm-claude", "model": "anthropic/claude-sonnet-4-5", "protocol": "gemba-mqm-literary",
         "temperatures": [0.0, 1.0], "limits": {"rpm": 50}},
        {"name": "local", "model": "openai/my-local-llama", "api_base": "http://127.0.0.1:9/v1",
         "protocol": "gemba-mqm"}])  # fmt: skip
    assert main(["plan", str(job.config)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    # The run directory is a line of its own the terminal folds, never broken by the output.
    assert len([line for line in lines if line.startswith(f"run directory: {job.runs}/")]) == 1
    assert max(len(line) for line in lines if not line.startswith("run directory: ")) <= 80 and "…" not in out
    from judge_engine.running.estimate import plan_rows
    from judge_engine.running.session import prepare

    for plan in plan_rows(prepare(job.config, check_keys=False)):
        # every figure whole, the low end of each range above its high end
        mark = "" if plan.tokens_exact else "~"
        assert f"{mark}{plan.prompt_tokens.low:,}" in out and f"to {mark}{plan.prompt_tokens.high:,}" in out
        assert f"{plan.completion_tokens.low:,}" in out and f"to {plan.completion_tokens.high:,}" in out
        assert plan.judge in out and _as_shown(plan.bound_by) in out
        if plan.cost is not None:
            assert dollars(plan.cost.low) in out and f"to {dollars(plan.cost.high)}" in out


@pytest.mark.parametrize(("limits", "requests", "tokens", "bound", "seconds"), [
    # 600 requests at 60 RPM: 10 min; 32 at a time x 2 s: 37.5 s; 6e5 tokens at 1M TPM: 36 s.
    ({"rpm": 60, "tpm": 1_000_000, "concurrency": 32}, 600, 600_000, "RPM-bound", 600.0),
    # 6e6 tokens at 100k TPM: 60 min, against 10 s at 3,600 RPM.
    ({"rpm": 3600, "tpm": 100_000, "concurrency": 64}, 600, 6_000_000, "TPM-bound", 3600.0),
    # 4 at a time, 2 s a call: 600 x 2 / 4 = 300 s, against 10 s at 3,600 RPM.
    ({"rpm": 3600, "tpm": 10_000_000, "concurrency": 4}, 600, 600_000, "concurrency-bound", 300.0),
    # 10 requests, 64 at a time: one wave, so one call's 2 s (not 10 x 2 / 64 = 0.3 s).
    ({"rpm": 3600, "tpm": 10_000_000, "concurrency": 64}, 10, 10_000, "latency-bound", 2.0),
])  # fmt: skip
def test_plan_says_in_words_which_limit_binds(limits: dict[str, int], requests: int, tokens: int, bound: str,
                                              seconds: float, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    from judge_engine.inputs.config import JudgeConfig
    from judge_engine.running.estimate import wall_time

    judge = JudgeConfig.model_validate({"name": "j", "model": "openai/gpt-4o-mini", "protocol": "gemba-mqm",
                                        "limits": limits})
    assert wall_time(judge, requests, tokens, 2.0) == (pytest.approx(seconds), bound)
    job = make_job(tmp_path, None, items=requests if requests < 100 else 60,
                   judge={"limits": limits, "repeats": 1 if requests < 100 else 10})
    assert main(["plan", str(job.config)]) == 0
    assert _as_shown(bound) in capsys.readouterr().out


def _as_shown(bound: str) -> str:
    """The limit as the time column ("wall time, bound by") shows it: its name, whole."""
    return bound.removesuffix("-bound")


def test_the_readmes_plan_stays_one_table_at_80_columns(capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    # Dollars and the limit in words widen the cost and time columns: they must still fit.
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["plan", str(Path(__file__).resolve().parents[2] / "examples/literary_mt/config.yaml")]) == 0
    out = capsys.readouterr().out
    table = [line for line in out.splitlines() if line[:1] in "┏┃┡│└"]
    assert table and max(len(line) for line in table) <= 80
    assert re.search(r"\b(latency|concurrency|RPM|TPM)\b", out) and "bound by" in out
