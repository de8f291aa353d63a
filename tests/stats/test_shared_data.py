"""Acceptance on the papers' real data in ../shared/data (skipped when it is absent)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from judge_engine.cli import main

METRICS = ["prometheus", "comet_xl", "comet_xxl", "gemba_all_orig", "gemba_all_literary"]
ASPECTS = [  # (human aspect, literary GEMBA aspect); "all" is the overall MQM pair
    ("mqm_score", "gemba_all_literary"),
    ("mqm_score_acc", "gemba_acc_literary"),
    ("mqm_score_fluency", "gemba_flu_literary"),
    ("mqm_score_style", "gemba_sty_literary"),
    ("mqm_score_term", "gemba_term_literary"),
]
# meta_evaluation.md: LitEval's correlation figure, segment-level Kendall tau-b per pair.
PUBLISHED_METRICS = {
    "de-en": [-0.014, 0.174, 0.198, 0.405, 0.376],
    "en-de": [0.053, 0.388, 0.469, 0.594, 0.585],
    "de-zh": [0.087, 0.046, 0.041, 0.461, 0.429],
    "en-zh": [0.002, 0.389, 0.356, 0.534, 0.530],
}
PUBLISHED_ASPECTS = {
    "de-en": [0.376, 0.437, 0.227, 0.220, 0.018],
    "en-de": [0.585, 0.468, 0.377, 0.298, 0.090],
    "de-zh": [0.429, 0.484, 0.213, 0.224, 0.089],
    "en-zh": [0.530, 0.503, 0.254, 0.148, 0.079],
}
TOP = ["gpt4o", "deepl", "google translate", "qwen2-beta-7b-chat"]
OTHER = ["qwen2-beta-7b-chat", "m2m", "nllb", "towerinstruct-7b-v0.2",
         "meta-llama-3-8b-instruct", "gemma-1.1-7b-it"]  # fmt: skip


def sections(argv: list[str], tmp_path: Path) -> dict[str, Any]:
    out = tmp_path / "out.json"
    assert main([*argv, "--json", str(out), "--quiet"]) == 0
    return json.loads(out.read_text(encoding="utf-8"))["sections"]


def test_liteval_40_kendall_taus(shared_data: Path, tmp_path: Path) -> None:
    # Both human MQM and GEMBA are penalties (<= 0, higher = better), XCOMET and Prometheus are
    # scores: no sign flip is needed. Plain tau-b, no NaNs in the file (their fillna(0) is moot).
    compare = [f"{h}={p}" for h, p in ASPECTS[1:]]
    s = sections(["meta", str(shared_data / "litmt_eval" / "metric_df.csv"), "--group", "pair",
                  "--human", "mqm_score", "--pred", *METRICS, "--compare", *compare,
                  "--methods", "kendall"], tmp_path)  # fmt: skip
    tau = {(r["group"], r["human"], r["judge"]): r["kendall"] for r in s["correlation"]["rows"]}
    checked = 0
    for pair, values in PUBLISHED_METRICS.items():
        for metric, published in zip(METRICS, values, strict=True):
            assert round(tau[(pair, "mqm_score", metric)], 3) == published, (pair, metric)
            checked += 1
    for pair, values in PUBLISHED_ASPECTS.items():
        for (human, judge), published in zip(ASPECTS, values, strict=True):
            assert round(tau[(pair, human, judge)], 3) == published, (pair, human)
            checked += 1
    assert checked == 40


def test_liteval_adequacy(shared_data: Path, tmp_path: Path) -> None:
    data = shared_data / "litmt_eval"
    s = sections(["meta", str(data / "metric_df.csv"), "--adequacy",
                  "--subset", str(data / "bws_sampled_source.csv"), "--item", "source_",
                  "--system", "model_human", "--group", "pair", "--human-system", "translator",
                  "--top-systems", *TOP, "--other-systems", *OTHER,
                  "--pred", "mqm_score", *METRICS], tmp_path)  # fmt: skip
    rate = {(r["group"], r["metric"], r["versus"]): r["rate"] for r in s["adequacy"]["rows"]}
    n = {(r["group"], r["metric"]): r["n_items"] for r in s["adequacy"]["rows"] if "n_items" in r}
    assert [n[(p, "mqm_score")] for p in ("de-en", "en-de", "de-zh", "en-zh")] == [15, 20, 20, 24]
    # The paper: student MQM prefers the human translation over the top systems in about 42%
    # of paragraphs, GEMBA-MQM in under 10%, automatic metrics at most about 21%.
    assert rate[("mean", "mqm_score", "top")] == pytest.approx(0.4271, abs=1e-4)
    assert rate[("mean", "gemba_all_orig", "top")] == pytest.approx(0.0708, abs=1e-4)
    assert rate[("mean", "gemba_all_literary", "top")] == pytest.approx(0.0958, abs=1e-4)
    assert rate[("mean", "comet_xxl", "top")] == pytest.approx(0.2125, abs=1e-4)
    assert rate[("mean", "mqm_score", "other")] == pytest.approx(0.9104, abs=1e-4)
    assert rate[("de-en", "mqm_score", "top")] == pytest.approx(9 / 15)


@pytest.mark.parametrize(("name", "alpha"), [("mt_bench", 0.8145), ("vicuna", 0.7234)])
def test_prometheus_gpt4_repeat_alpha(
    name: str, alpha: float, shared_data: Path, tmp_path: Path
) -> None:
    path = shared_data / "prometheus" / f"{name}_eval.json"
    s = sections(["stats", str(path), "--repeats", "gpt4_score"], tmp_path)
    row = next(r for r in s["consistency"]["rows"] if r["group"] == "all")
    assert round(row["alpha_ordinal"], 4) == alpha
    assert row["n_items"] == 320 and row["n_repeats"] == 3
    # prometheus.md: all-3-agree 44.1% / 62.2%, mean within-item SD 0.296 / 0.182
    agree, sd = {"mt_bench": (0.441, 0.296), "vicuna": (0.622, 0.182)}[name]
    assert round(1 - row["flip_rate"], 3) == agree and round(row["mean_sd"], 3) == sd


def test_prometheus_gpt4_reliability_with_intervals(shared_data: Path, tmp_path: Path) -> None:
    path = shared_data / "prometheus" / "mt_bench_eval.json"
    s = sections(["stats", str(path), "--repeats", "gpt4_score", "--reliability",
                  "--bootstrap", "1000", "--n-categories", "5"], tmp_path)  # fmt: skip
    r = {row["statistic"]: row for row in s["reliability"]["rows"]}
    # Prometheus 2's consistency figure (alpha ordinal 0.8145) inside its own interval.
    assert round(r["alpha_ordinal"]["value"], 4) == 0.8145
    assert r["alpha_ordinal"]["ci_low"] < 0.8145 < r["alpha_ordinal"]["ci_high"]
    assert r["alpha_ordinal"]["ci_high"] - r["alpha_ordinal"]["ci_low"] < 0.1
    # Three repeats of one judge: no rater effect to speak of, so the absolute-agreement and
    # consistency forms coincide to 3 decimals; the mean of 3 repeats is more reliable.
    assert round(r["icc_2_1"]["value"], 3) == round(r["icc_3_1"]["value"], 3)
    assert r["icc_2_k"]["value"] > r["icc_2_1"]["value"]
    assert all(row["n"] == 320 for row in r.values())


@pytest.mark.slow
def test_liteval_literalness_machine_outputs_overlap_more_with_each_other(
    shared_data: Path, tmp_path: Path
) -> None:
    # metric_df.csv keeps the first 20 characters of each translation (tgt_) and of its source
    # (source_, the item): chrF between those prefixes. In every pair the machine systems'
    # outputs overlap more with each other than with the human translations.
    s = sections(["meta", str(shared_data / "litmt_eval" / "metric_df.csv"), "--literalness",
                  "--item", "source_", "--system", "model_human", "--text", "tgt_",
                  "--group", "pair", "--human-system", "translator"], tmp_path)  # fmt: skip
    rows = s["literalness"]["rows"]
    for pair in ("de-en", "en-de", "de-zh", "en-zh"):
        machines = [r for r in rows if r["group"] == pair and r["system"] != "translator"]
        assert len(machines) == 9
        among = sum(r["vs_machine"] for r in machines) / 9
        with_human = sum(r["vs_human"] for r in machines) / 9
        assert among > with_human, pair


def test_liteval_gemba_shows_no_self_preference_beyond_the_humans(
    shared_data: Path, tmp_path: Path
) -> None:
    # LitEval's GEMBA-MQM judge is GPT-4o-mini (gemba_mqm.md), and GPT-4o is one of the systems.
    # GEMBA scores GPT-4o's translations about 0.56 SD above the rest, and so does human MQM
    # (0.57): in every pair the judge's gap is within 0.12 SD of the humans'.
    s = sections(["meta", str(shared_data / "litmt_eval" / "metric_df.csv"), "--self-preference",
                  "gemba_all_orig=openai/gpt-4o-mini", "--system", "model_human",
                  "--human", "mqm_score", "--group", "pair"], tmp_path)["self_preference"]  # fmt: skip
    rows = {r["group"]: r for r in s["rows"]}
    assert rows["all"]["own_systems"] == "gpt4o" and rows["all"]["n_own"] == 199
    assert (
        round(rows["all"]["gap_sd"], 3) == 0.556 and round(rows["all"]["others_gap_sd"], 3) == 0.570
    )
    assert all(abs(r["excess"]) < 0.12 for r in rows.values())


def _prometheus_gpt4(
    name: str, shared_data: Path
) -> tuple[list[float], list[str], list[int], list[int]]:
    """GPT-4's mean of three scores, the system judged, and the lengths of the response and of
    the reference answer, cut from the rendered prompt."""
    from judge_engine.stats import parse_list

    def between(text: str, start: str, end: str) -> str:
        i = text.index(start) + len(start)
        return text[i : text.index(end, i)].strip()

    rows = json.loads(
        (shared_data / "prometheus" / f"{name}_eval.json").read_text(encoding="utf-8")
    )
    scores = [sum(map(float, parse_list(r["gpt4_score"]))) / 3 for r in rows]
    answer = [
        len(between(r["instruction"], "###Response to evaluate:", "###Reference Answer"))
        for r in rows
    ]
    reference = [len(between(r["instruction"], "(Score 5):", "###Score Rubrics")) for r in rows]
    return scores, [r["response_source"] for r in rows], answer, reference


def test_prometheus_gpt4_verbosity(shared_data: Path) -> None:
    from judge_engine.stats import length_correlations

    # Vicuna bench: GPT-4's score follows the response's length (rho 0.375) and not the
    # reference answer's (-0.034): a verbosity signal. MT-Bench: both follow (0.348, 0.306),
    # the size of the task; the ratio barely (0.112).
    want = {"vicuna": (0.375, -0.034, 0.419), "mt_bench": (0.348, 0.306, 0.112)}
    for name, (answer_rho, reference_rho, ratio_rho) in want.items():
        scores, _, answer, reference = _prometheus_gpt4(name, shared_data)
        ratio = [a / r for a, r in zip(answer, reference, strict=True)]
        got = [
            round(length_correlations(scores, x)["spearman"], 3) for x in (answer, reference, ratio)
        ]
        assert got == [answer_rho, reference_rho, ratio_rho], name


def test_prometheus_gpt4_on_chatgpt_outputs(shared_data: Path) -> None:
    from judge_engine.stats import preference_gap
    from judge_engine.util.families import model_family

    # GPT-4 grades ChatGPT's MT-Bench answers 3.817 on average, the three 13B models' 3.379:
    # 0.35 SD. No human scores in the file, so no control: a gap, not yet an excess.
    scores, systems, _, _ = _prometheus_gpt4("mt_bench", shared_data)
    gap = preference_gap(scores, [model_family(s) == model_family("gpt-4") for s in systems])
    assert (gap.n_own, round(gap.mean_own, 3), round(gap.mean_other, 3)) == (80, 3.817, 3.379)
    assert round(gap.gap_sd, 3) == 0.350
