"""judge_engine.estimate and judge_engine.label_plan as users call them: the returned dict, rows
as dicts or a DataFrame, bad rows named, unscored items kept in the estimand, the plan's
probabilities read back, and LitEval's systems (../shared/data) against the authors' ppi_py."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import judge_engine
from judge_engine import estimate, label_plan


def _rows(n_items: int = 400, n_labels: int = 60, *, groups: tuple[str, ...] = ("a",), seed: int = 0,
          shift: dict[str, float] | None = None) -> tuple[list[dict[str, object]], dict[str, float]]:
    rng = np.random.default_rng(seed)
    rows, truths = [], {}
    for g in groups:
        y = -rng.gamma(0.8, 3.0, n_items) + (shift or {}).get(g, 0.0)
        f = 50 + 5 * (y + rng.normal(0, 1.0, n_items))  # another scale, informative
        labelled = set(rng.choice(n_items, n_labels, replace=False).tolist())
        truths[g] = float(y.mean())
        rows += [{"item": f"{g}-{i}", "prediction": float(f[i]), "label": float(y[i]) if i in labelled else None,
                  "group": g} for i in range(n_items)]
    return rows, truths


def test_the_dict_as_the_issue_spells_it() -> None:
    rows, truths = _rows(groups=("a", "b"))
    out = estimate(rows, alpha=0.1, by="group")
    assert out["alpha"] == 0.1 and out["method"] == "ppi++" and out["estimator"] == "uniform"
    assert [g["group"] for g in out["groups"]] == ["a", "b"]
    for g in out["groups"]:
        assert set(g) >= {"group", "estimate", "ci", "n_labelled", "n_unlabelled", "lambda", "classical",
                          "effective_labels"}
        assert g["n_labelled"] == 60 and g["n_unlabelled"] == 340
        assert g["ci"][0] < g["estimate"] < g["ci"][1]
        assert set(g["classical"]) >= {"estimate", "ci"}
        assert g["ci"][1] - g["ci"][0] < g["classical"]["ci"][1] - g["classical"]["ci"][0]
        assert g["effective_labels"] > g["n_labelled"]
        assert 0 < g["lambda"] <= 1
        assert g["judge_mean"] > 20  # the judge's own scale, beside the human-scale estimate
    pooled = estimate(rows, alpha=0.1)
    assert [g["group"] for g in pooled["groups"]] == ["all"] and pooled["groups"][0]["n_labelled"] == 120


def test_methods_and_the_labels_alone() -> None:
    rows, _ = _rows()
    plus, plain, alone = (estimate(rows, method=m)["groups"][0] for m in ("ppi++", "ppi", "classical"))
    assert plain["lambda"] == 1.0 and alone["lambda"] == 0.0
    assert alone["ci"] == pytest.approx(alone["classical"]["ci"])
    assert plus["ci"][1] - plus["ci"][0] <= alone["ci"][1] - alone["ci"][0]
    # λ = 1 carries the judge's 5x scale into the correction: far wider than tuned
    assert plain["ci"][1] - plain["ci"][0] > 2 * (plus["ci"][1] - plus["ci"][0])
    with pytest.raises(ValueError, match="method"):
        estimate(rows, method="ppi+")


def test_a_fully_labelled_group_is_the_labels_mean_under_every_method() -> None:
    rows, truths = _rows(n_items=40, n_labels=40)
    alone = estimate(rows, method="classical")["groups"][0]
    for method in ("ppi++", "ppi"):
        g = estimate(rows, method=method)["groups"][0]
        # nothing is left to predict: the judge must not move the estimate or its interval
        assert g["estimate"] == pytest.approx(truths["a"]) and g["ci"] == pytest.approx(alone["ci"]), method
        assert g["n_unlabelled"] == 0 and g["lambda"] == 0.0


def test_a_dataframe_gives_the_same_answer() -> None:
    pd = pytest.importorskip("pandas")
    rows, _ = _rows(groups=("a", "b"))
    frame = pd.DataFrame(rows)  # labels become NaN
    assert estimate(frame, by="group") == estimate(rows, by="group")


@pytest.mark.parametrize(("change", "message"), [
    ({"prediction": "A"}, r"rows\[3\]\.prediction: expected a number"),
    ({"label": "high"}, r"rows\[3\]\.label: expected a number"),
    ({"sampling_probability": 0.5}, r"rows\[0\]: no sampling_probability"),
    ({"group": None}, r"rows\[3\]: no 'group'"),
    ({"item": "a-2"}, r"rows\[3\]: item 'a-2' again \(first at rows\[2\]\)"),
])
def test_a_bad_row_is_named(change: dict[str, object], message: str) -> None:
    rows, _ = _rows()
    rows[3] = {**rows[3], **change}
    with pytest.raises(ValueError, match=message):
        estimate(rows, by="group")


def test_bad_settings_are_named() -> None:
    rows, _ = _rows()
    for alpha in (0, 1, 1.5, "0.1"):
        with pytest.raises(ValueError, match="alpha"):
            estimate(rows, alpha=alpha)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="rows: empty"):
        estimate([])
    with pytest.raises(ValueError, match="target width"):
        estimate(rows, target_width=-1)
    with pytest.raises(ValueError, match="no 'prediction'"):
        estimate([{"item": "x", "label": 1}])


def test_binary_labels_and_predictions_are_means_of_0_and_1() -> None:
    rng = np.random.default_rng(2)
    truth = rng.random(500) < 0.3
    judge = np.where(rng.random(500) < 0.85, truth, ~truth)
    rows = [{"item": i, "prediction": bool(judge[i]), "label": bool(truth[i]) if i % 5 == 0 else None}
            for i in range(500)]
    g = estimate(rows)["groups"][0]
    assert g["ci"][0] <= truth.mean() <= g["ci"][1]
    assert 0 < g["estimate"] < 1


def test_an_unscored_item_stays_in_the_estimand() -> None:
    rows, truths = _rows(n_labels=100)
    for row in rows[:40]:
        row["prediction"] = None
    g = estimate(rows)
    assert g["groups"][0]["n_unscored"] == 40
    assert g["groups"][0]["n_labelled"] + g["groups"][0]["n_unlabelled"] == 400
    assert any("no prediction" in n for n in g["notes"])


def test_a_group_with_too_few_labels_says_why_and_the_others_are_estimated() -> None:
    rows, _ = _rows(groups=("a", "b"))
    for row in rows:
        if row["group"] == "b" and row["label"] is not None and row["item"] != "b-0":
            row["label"] = None
    out = estimate(rows, by="group", differences=True)
    a, b = out["groups"]
    assert a["estimate"] is not None and b["estimate"] is None
    assert "2 or more human labels" in b["reason"] and any(n.startswith("b:") for n in out["notes"])
    assert out["differences"] == [] and [r["group"] for r in out["ranking"]] == ["a"]


def test_differences_and_ranking_with_bonferroni() -> None:
    rows, truths = _rows(groups=("low", "mid", "high"), shift={"low": -3.0, "mid": 0.0, "high": 3.0},
                         n_labels=120)
    out = estimate(rows, alpha=0.1, by="group", differences=True)
    assert out["correction"]["method"] == "bonferroni"
    assert len(out["differences"]) == 3
    for d in out["differences"]:
        true = truths[d["a"]] - truths[d["b"]]
        assert d["simultaneous_ci"][0] <= d["ci"][0] <= d["difference"] <= d["ci"][1] <= d["simultaneous_ci"][1]
        assert d["simultaneous_ci"][0] <= true <= d["simultaneous_ci"][1]
        assert d["p_value"] < 0.001
    assert [(r["group"], r["rank"], r["rank_range"]) for r in out["ranking"]] == [
        ("high", 1, [1, 1]), ("mid", 2, [2, 2]), ("low", 3, [3, 3])]
    for r in out["ranking"]:
        g = next(g for g in out["groups"] if g["group"] == r["group"])
        assert r["simultaneous_ci"][0] < g["ci"][0] and r["simultaneous_ci"][1] > g["ci"][1]


def test_target_width_says_how_many_labels_a_group_needs() -> None:
    rows, _ = _rows(n_labels=50)
    g = estimate(rows, alpha=0.1, target_width=0.5)["groups"][0]
    need = g["labels_needed"]
    assert need["width"] == 0.5 and need["have"] == 50 and need["items"] == 400
    assert 50 < need["ppi"] < need["classical"]
    wide = estimate(rows, alpha=0.1, target_width=100)["groups"][0]["labels_needed"]
    assert wide["ppi"] == 2


def test_the_plan_follows_the_uncertainty_and_the_estimate_reads_it_back() -> None:
    rows, truths = _rows(n_items=600, n_labels=0, groups=("a", "b"))
    rng = np.random.default_rng(4)
    for i, row in enumerate(rows):
        row["confidence"] = float(rng.uniform(0.5, 1.0)) if i % 7 else None  # some unmeasured
    plan = label_plan(rows, 120, by="group", seed=3)
    assert isinstance(plan, list) and len(plan) == len(rows)
    assert plan.source == "confidence" and plan.budgets == {"a": 60.0, "b": 60.0}
    probs = np.array([r["sampling_probability"] for r in plan])
    assert probs.sum() == pytest.approx(120) and probs.min() > 0 and probs.max() <= 1
    conf = np.array([r["confidence"] if r["confidence"] is not None else np.nan for r in rows])
    known = ~np.isnan(conf)
    assert np.corrcoef(conf[known], probs[known])[0, 1] < -0.5  # less sure, more likely drawn
    assert plan.drawn == sum(r["selected"] for r in plan) and abs(plan.drawn - 120) < 40
    assert label_plan(rows, 120, by="group", seed=3) == plan  # seeded
    assert any("no uncertainty" in n for n in plan.notes)
    # the annotators label what was drawn; the estimate is the active one
    truth_of = {r["item"]: t for r, t in zip(rows, _rows(n_items=600, n_labels=600, groups=("a", "b"))[0], strict=True)}
    labelled = [{**r, "label": truth_of[r["item"]]["label"] if r["selected"] else None} for r in plan]
    out = estimate(labelled, by="group", alpha=0.1)
    assert out["estimator"] == "active"
    for g in out["groups"]:
        assert g["n_labelled"] == sum(1 for r in plan if r["selected"] and r["group"] == g["group"])


def test_a_uniform_plan_without_uncertainty_and_a_dataframe_plan() -> None:
    rows, _ = _rows(n_items=100, n_labels=0)
    plan = label_plan(rows, 25)
    assert plan.source == "uniform"
    assert {r["sampling_probability"] for r in plan} == {0.25}
    pd = pytest.importorskip("pandas")
    frame = label_plan(pd.DataFrame(rows), 25)
    assert list(frame["sampling_probability"]) == [0.25] * 100
    assert frame.attrs["drawn"] == plan.drawn and frame.attrs["source"] == "uniform"


def test_repeats_spread_is_an_uncertainty() -> None:
    rows = [{"item": i, "prediction": 1.0, "predictions": [1.0, 1.0] if i < 50 else [0.0, 4.0]} for i in range(100)]
    plan = label_plan(rows, 20, max_cost=None)
    assert plan.source == "predictions"
    assert plan[99]["sampling_probability"] > 3 * plan[0]["sampling_probability"]


def test_plan_errors_are_named() -> None:
    rows, _ = _rows(n_items=10, n_labels=0)
    with pytest.raises(ValueError, match="budget"):
        label_plan(rows, 11)
    with pytest.raises(ValueError, match="one of them"):
        label_plan(rows)
    with pytest.raises(ValueError, match=r"rows\[1\]\.confidence"):
        label_plan([{"item": 0, "prediction": 1}, {"item": 1, "prediction": 1, "confidence": 2}], 1)
    with pytest.raises(ValueError, match="pilot"):
        label_plan(rows, target_width=0.5)


def test_a_plan_for_a_target_width_from_a_pilot() -> None:
    rows, _ = _rows(n_items=800, n_labels=30)
    plan = label_plan(rows, target_width=0.6, alpha=0.1, seed=1)
    need = estimate(rows, alpha=0.1, target_width=0.6)["groups"][0]["labels_needed"]["ppi"]
    assert plan.budget == need
    probs = np.array([r["sampling_probability"] for r in plan])
    assert probs.sum() == pytest.approx(need, rel=1e-6)
    assert all(r["selected"] for r in plan if r["label"] is not None)  # the pilot is in the sample


def _liteval(shared_data: Path) -> object:
    pd = pytest.importorskip("pandas")
    frame = pd.read_csv(shared_data / "litmt_eval" / "metric_df.csv")
    return frame


@pytest.mark.slow
@pytest.mark.parametrize("judge", ["gemba_all_literary", "prometheus"])
def test_liteval_systems_against_ppi_py(judge: str, shared_data: Path) -> None:
    """30 human labels per system drawn at random, 100 draws, alpha 0.1: the same intervals as the
    authors' PPI++, under the human-only width with GEMBA, no wider than it with Prometheus."""
    ppi_py = pytest.importorskip("ppi_py")
    frame = _liteval(shared_data).dropna(subset=["mqm_score", judge])  # type: ignore[attr-defined]
    rng = np.random.default_rng(0)
    systems = {name: (g["mqm_score"].to_numpy(float), g[judge].to_numpy(float))
               for name, g in frame.groupby("model_human")}
    covered = ref_covered = total = 0
    widths, ref_widths, alone = [], [], []
    for _ in range(100):
        rows, ref = [], {}
        for name, (y, f) in systems.items():
            labelled = np.zeros(y.size, dtype=bool)
            labelled[rng.choice(y.size, 30, replace=False)] = True
            lo, hi = ppi_py.ppi_mean_ci(y[labelled], f[labelled], f[~labelled], alpha=0.1)
            ref[name] = (float(np.ravel(lo)[0]), float(np.ravel(hi)[0]))
            rows += [{"item": f"{name}/{i}", "prediction": f[i], "label": y[i] if labelled[i] else None,
                      "group": name} for i in range(y.size)]
        for g in estimate(rows, alpha=0.1, by="group")["groups"]:
            truth = systems[g["group"]][0].mean()
            total += 1
            covered += g["ci"][0] <= truth <= g["ci"][1]
            ref_covered += ref[g["group"]][0] <= truth <= ref[g["group"]][1]
            widths.append(g["ci"][1] - g["ci"][0])
            ref_widths.append(ref[g["group"]][1] - ref[g["group"]][0])
            alone.append(g["classical"]["ci"][1] - g["classical"]["ci"][0])
            assert g["ci"] == pytest.approx(list(ref[g["group"]]), rel=1e-9)
    assert covered / total >= ref_covered / total - 0.03
    assert np.mean(widths) <= 1.02 * np.mean(ref_widths)
    if judge == "prometheus":  # a judge that knows nothing: as wide as the labels alone, not wider
        assert np.mean(widths) <= 1.10 * np.mean(alone)
    else:
        assert np.mean(widths) < 0.9 * np.mean(alone)
    assert covered / total > 0.84


def test_liteval_with_the_plans_labels(shared_data: Path) -> None:
    frame = _liteval(shared_data).dropna(subset=["mqm_score", "gemba_all_literary"])  # type: ignore[attr-defined]
    truths = frame.groupby("model_human")["mqm_score"].mean()
    rows = [{"item": str(i), "prediction": float(r.gemba_all_literary), "group": r.model_human}
            for i, r in enumerate(frame.itertuples())]
    labels = frame["mqm_score"].to_numpy(float)
    hits = total = 0
    for seed in range(60):
        plan = label_plan(rows, 300, by="group", seed=seed)
        out = estimate([{**r, "label": labels[i] if r["selected"] else None} for i, r in enumerate(plan)],
                       alpha=0.1, by="group")
        for g in out["groups"]:
            total += 1
            hits += g["ci"][0] <= truths[g["group"]] <= g["ci"][1]
    assert hits / total >= 0.84
    assert math.isclose(sum(r["sampling_probability"] for r in plan), 300)


def test_the_public_names() -> None:
    assert judge_engine.estimate is estimate and judge_engine.label_plan is label_plan
    assert {"estimate", "label_plan"} <= set(judge_engine.__all__)
