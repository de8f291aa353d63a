"""Verbosity and self-preference: model families, hand-derived gaps and correlations, the
sections and the command line on a run whose dataset carries the systems."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, strategies as st

from judge_engine.stats.bias import (
    excess_preference,
    length_correlations,
    preference_gap,
    self_preference_section,
    verbosity_section,
)
from judge_engine.stats.runs import read_run
from judge_engine.util.families import model_family, model_name
from tests.stats.fixtures import outcome, write_run
from tests.stats.test_cli import rows_by, run_json

GPT, CLAUDE = "openai/gpt-4o-mini", "anthropic/claude-3-5-sonnet-20241022"
ITEMS = {
    "i1": {"system": "gpt-4o-2024-08-06", "target": "x" * 10, "source": "y" * 5},
    "i2": {"system": "gpt-4o-2024-08-06", "target": "x" * 20, "source": "y" * 5},
    "i3": {"system": "meta-llama-3-8b-instruct", "target": "x" * 30, "source": "y" * 10},
    "i4": {"system": "meta-llama-3-8b-instruct", "target": "x" * 40, "source": "y" * 10},
}
SCORES = {"g": (GPT, [4, 5, 2, 3]), "c": (CLAUDE, [3, 4, 3, 4])}


@pytest.mark.parametrize(("name", "family"), [
    ("openai/gpt-4o-mini", "openai"), ("gpt-4o-2024-08-06", "openai"), ("gpt4o", "openai"),
    ("o3-mini", "openai"), ("chat_gpt", "openai"), ("chatgpt", "openai"),
    ("anthropic/claude-sonnet-4-5", "anthropic"), ("vicuna_13b", None), ("wizardlm_13b", None),
    ("gemini/gemini-1.5-pro", "google"), ("gemma-1.1-7b-it", "google"),
    ("together_ai/meta-llama/Llama-3-70b-chat-hf", "meta"), ("meta-llama-3-8b-instruct", "meta"),
    ("Qwen/Qwen2-7B-Instruct", "alibaba"), ("qwen2-beta-7b-chat", "alibaba"),
    ("mistral/mistral-large-latest", "mistral"), ("deepseek/deepseek-chat", "deepseek"),
    ("deepl", None), ("google translate", None), ("nllb", None), ("m2m", None),
    ("towerinstruct-7b-v0.2", None), ("translator", None),
])  # fmt: skip
def test_model_family(name: str, family: str | None) -> None:
    assert model_family(name) == family


@pytest.mark.parametrize(("name", "family", "own"), [
    # Fine-tunes are their base model's family (they were none: "ft" was read as the name).
    ("openai/ft:gpt-4o-mini-2024-07-18:org::abc123", "openai", "gpt-4o-mini-2024-07-18"),
    ("ft:gpt-3.5-turbo-0125:my-org:custom:9xyz", "openai", "gpt-3.5-turbo-0125"),
    ("ft:o4-mini-2025-04-16:org::id", "openai", "o4-mini-2025-04-16"),
    ("curie:ft-personal-2022-12-01-00-00-00", "openai", "curie"),
    ("mistral/ft:open-mistral-7b:587a6b29:20240514:7e773925", "mistral", "open-mistral-7b"),
    ("mistral/open-mixtral-8x22b", "mistral", "open-mixtral-8x22b"),
    # Bedrock: cross-region prefixes, vendors, ARNs.
    ("bedrock/global.anthropic.claude-sonnet-4-5-20250929-v1:0", "anthropic", "claude-sonnet-4-5-20250929-v1"),
    ("bedrock/apac.anthropic.claude-3-haiku-20240307-v1:0", "anthropic", "claude-3-haiku-20240307-v1"),
    ("bedrock/us-gov.meta.llama3-8b-instruct-v1:0", "meta", "llama3-8b-instruct-v1"),
    ("bedrock/converse/jp.amazon.nova-pro-v1:0", "amazon", "nova-pro-v1"),
    ("bedrock/amazon.titan-text-express-v1", "amazon", "titan-text-express-v1"),
    ("bedrock/us.deepseek.r1-v1:0", "deepseek", "r1-v1"),  # the vendor names it, the model does not
    ("bedrock/openai.gpt-oss-120b-1:0", "openai", "gpt-oss-120b-1"),
    ("bedrock/writer.palmyra-x5-v1:0", "writer", "palmyra-x5-v1"),  # not PaLM
    ("bedrock/arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-3-7-sonnet-20250219-v1:0",
     "anthropic", "claude-3-7-sonnet-20250219-v1"),
    ("bedrock/arn:aws:bedrock:us-east-1::foundation-model/meta.llama3-70b-instruct-v1:0", "meta",
     "llama3-70b-instruct-v1"),
    ("bedrock/arn:aws:bedrock:us-east-1:123456789012:custom-model/amazon.titan-text-express-v1:0:8k/a1b2c3",
     "amazon", "titan-text-express-v1"),
    ("bedrock/arn:aws-us-gov:bedrock:us-gov-west-1:123456789012:inference-profile/us-gov.anthropic.claude-3-5-sonnet"
     "-20240620-v1:0", "anthropic", "claude-3-5-sonnet-20240620-v1"),
    ("bedrock/llama/arn:aws:bedrock:us-east-1:123456789012:imported-model/r4c4kewx2s0n", "meta", "r4c4kewx2s0n"),
    # What the name does not say: no family (give the base model; see families.py).
    ("bedrock/arn:aws:bedrock:us-east-1:123456789012:provisioned-model/abc123", None, "abc123"),
    ("azure/gpt-4o-mini", "openai", "gpt-4o-mini"), ("azure/prod-judge", None, "prod-judge"),
    ("gemini/tunedModels/my-model-abc", None, "my-model-abc"), ("palm-2", "google", "palm-2"),
])  # fmt: skip
def test_model_family_of_fine_tunes_and_wrapped_ids(name: str, family: str | None, own: str) -> None:
    assert (model_family(name), model_name(name)) == (family, own)


def test_model_family_overrides() -> None:
    assert (
        model_family("towerinstruct-7b-v0.2", overrides={"towerinstruct-7b-v0.2": "meta"}) == "meta"
    )
    assert model_family("hosted_vllm/my-judge", overrides={"my-judge": "openai"}) == "openai"


def test_preference_gap_hand_derived() -> None:
    # Scores 4, 5 (own) and 2, 3: means 4.5 and 2.5, gap 2. SD of (4, 5, 2, 3): deviations
    # 0.5, 1.5, -1.5, -0.5 -> 5 / 3 -> 1.2910; gap_sd = 2 / 1.2910 = 1.5492.
    g = preference_gap([4, 5, 2, 3], [True, True, False, False])
    assert (g.n_own, g.n_other, g.mean_own, g.mean_other, g.gap) == (2, 2, 4.5, 2.5, 2.0)
    assert g.gap_sd == pytest.approx(2 / math.sqrt(5 / 3))
    control = preference_gap([3, 4, 3, 4], [True, True, False, False])  # means 3.5, 3.5: gap 0
    assert excess_preference(g, [control]) == pytest.approx((0.0, 2 / math.sqrt(5 / 3)))
    assert all(math.isnan(v) for v in excess_preference(g, []))
    assert math.isnan(preference_gap([1, 1], [True, False]).gap_sd)  # constant: no SD
    with pytest.raises(ValueError):
        preference_gap([1, 2], [True])


@given(st.lists(st.tuples(st.integers(-5, 5), st.booleans()), min_size=2, max_size=20))
def test_gap_flips_sign_when_own_and_other_swap(pairs: list[tuple[int, bool]]) -> None:
    scores, own = [p[0] for p in pairs], [p[1] for p in pairs]
    a, b = preference_gap(scores, own), preference_gap(scores, [not o for o in own])
    assert a.gap == pytest.approx(-b.gap, nan_ok=True)
    assert a.gap_sd == pytest.approx(-b.gap_sd, nan_ok=True)


def test_length_correlations_hand_derived() -> None:
    # Scores 1..4 against ratios 2, 4, 3, 4: ranks 1, 3.5, 2, 3.5. Deviations from 2.5:
    # x -1.5, -0.5, 0.5, 1.5; y -1.5, 1, -0.5, 1: cov 3, var 5 and 4.5 -> 3 / sqrt(22.5).
    r = length_correlations([1, 2, 3, 4], [2, 4, 3, 4])
    assert r["spearman"] == pytest.approx(3 / math.sqrt(22.5)) and r["n"] == 4
    assert r["mean_length"] == 3.25
    assert length_correlations([1, None], [2, 3])["n"] == 1


def _run(tmp_path: Path) -> Path:
    records = [
        outcome(item, judge, 0.0, 0, float(score), model=model)
        for judge, (model, scores) in SCORES.items()
        for item, score in zip(ITEMS, scores, strict=True)
    ]
    return write_run(tmp_path / "run", records)


def test_self_preference_section_hand_derived(tmp_path: Path) -> None:
    run = read_run(_run(tmp_path))
    section = self_preference_section(run, ITEMS)
    (row,) = section.rows  # claude's family judged no system: no row
    assert (row["judge"], row["family"], row["own_systems"]) == ("g", "openai", "gpt-4o-2024-08-06")
    assert row["gap_sd"] == pytest.approx(1.5492, abs=1e-4)
    # The control: c splits the same items 3.5 vs 3.5, gap 0, so the excess is all of g's gap.
    assert row["others_gap_sd"] == 0.0 and row["excess"] == pytest.approx(row["gap_sd"])
    no_system = self_preference_section(run, {i: {"target": "x"} for i in ITEMS})
    assert no_system.absent == "the items have no 'system' field naming the system judged"
    assert (
        "needs the run's items: gone"
        in self_preference_section(run, None, why_no_items="gone").absent
    )


def test_verbosity_section_hand_derived(tmp_path: Path) -> None:
    run = read_run(_run(tmp_path))
    fields = {"gemba-mqm": ("target", "source")}
    rows = verbosity_section(run, ITEMS, fields).rows
    g = {r["length_of"]: r for r in rows if r["judge"] == "g"}
    # g's scores 4, 5, 2, 3 against target lengths 10, 20, 30, 40: ranks (3, 4, 1, 2) vs
    # (1, 2, 3, 4): sum d^2 = 4 + 4 + 4 + 4 = 16, rho = 1 - 6 * 16 / (4 * 15) = -0.6.
    assert g["answer"]["spearman"] == pytest.approx(-0.6) and g["answer"]["field"] == "target"
    assert g["ratio"]["field"] == "target/source" and g["reference"]["mean_length"] == 7.5
    other = verbosity_section(run, ITEMS, {"ttct": ("text", None)})
    assert other.absent == "no judge with a length to measure: gemba-mqm: no judged text to measure"


def _manifest_with_dataset(run: Path, items: Path) -> None:
    manifest = json.loads((run / "run.json").read_text(encoding="utf-8"))
    fields = {"id": "id", "source": "src", "target": "tgt"}
    manifest["config"] = {"dataset": {"path": str(items), "fields": fields}}
    (run / "run.json").write_text(json.dumps(manifest), encoding="utf-8")


def test_stats_reads_the_items_from_the_runs_dataset(tmp_path: Path) -> None:
    run = _run(tmp_path)
    items = tmp_path / "items.jsonl"
    lines = [{"id": i, "system": f["system"], "tgt": f["target"], "src": f["source"]}
             for i, f in ITEMS.items()]  # fmt: skip
    items.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    _manifest_with_dataset(run, items)
    s: dict[str, Any] = run_json(["stats", str(run)], tmp_path)
    assert rows_by(s["self_preference"], judge="g")[0]["excess"] == pytest.approx(1.5492, abs=1e-4)
    assert rows_by(s["verbosity"], judge="g", length_of="answer")[0]["spearman"] == pytest.approx(
        -0.6
    )
    # --family names what the patterns do not know: now claude judges "its own" llama outputs.
    s = run_json(["stats", str(run), "--family", f"{CLAUDE}=meta"], tmp_path)
    assert {r["judge"] for r in s["self_preference"]["rows"]} == {"g", "c"}
    items.unlink()
    s = run_json(["stats", str(run)], tmp_path)
    assert "is gone" in s["verbosity"]["absent"] and "is gone" in s["self_preference"]["absent"]


def test_length_of_names_the_judged_text_for_custom_judges_and_juries(tmp_path: Path) -> None:
    records = [outcome(item, "mine", 0.0, 0, float(score), model=GPT, protocol="custom")
               for item, score in zip(ITEMS, [4, 5, 2, 3], strict=True)]  # fmt: skip
    run = write_run(tmp_path / "run", records)
    items = tmp_path / "items.jsonl"
    lines = [{"id": i, "system": f["system"], "tgt": f["target"], "src": f["source"]}
             for i, f in ITEMS.items()]  # fmt: skip
    items.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    _manifest_with_dataset(run, items)
    s: dict[str, Any] = run_json(["stats", str(run)], tmp_path)
    assert "custom: no judged text to measure (--length-of FIELD names it)" in s["verbosity"]["absent"]
    s = run_json(["stats", str(run), "--length-of", "target/source"], tmp_path)
    # The same scores against the same lengths as gemba-mqm's g above: rho = -0.6.
    row = rows_by(s["verbosity"], judge="mine", length_of="answer")[0]
    assert row["spearman"] == pytest.approx(-0.6) and row["field"] == "target"
    assert rows_by(s["verbosity"], judge="mine", length_of="ratio")[0]["field"] == "target/source"


def test_meta_self_preference_against_humans(tmp_path: Path) -> None:
    path = tmp_path / "scores.csv"
    # judge (gpt-4o-mini) 4, 5 on gpt4o rows and 2, 3 on the others: gap_sd 1.5492 as above;
    # humans 3, 4, 3, 4: no difference, so the excess is the judge's whole gap.
    rows = [("gpt4o", 4, 3), ("gpt4o", 5, 4), ("deepl", 2, 3), ("nllb", 3, 4)]
    path.write_text(
        "sys,judge,human\n" + "".join(f"{s},{j},{h}\n" for s, j, h in rows), encoding="utf-8"
    )
    s = run_json(["meta", str(path), "--self-preference", "judge=openai/gpt-4o-mini",
                  "--system", "sys", "--human", "human"], tmp_path)["self_preference"]  # fmt: skip
    (row,) = s["rows"]
    assert (row["own_systems"], row["n_own"], row["gap"]) == ("gpt4o", 2, 1.0 + 1.0)
    assert row["others_gap_sd"] == 0.0 and row["excess"] == pytest.approx(2 / math.sqrt(5 / 3))
    other = run_json(["meta", str(path), "--self-preference", "judge=anthropic/claude-3-opus",
                      "--system", "sys"], tmp_path)["self_preference"]  # fmt: skip
    assert other["absent"] == "no judge's model family is the family of a system in 'sys'"
