"""Literalness (LitEval): chrF and BLEU between systems' outputs, hand-derived, and the table."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from judge_engine.cli import main
from judge_engine.stats import literalness
from judge_engine.stats.literalness import corpus_overlap, literalness_rows, overlap_matrix
from tests.stats.test_cli import rows_by, run_json


def test_chrf_hand_derived() -> None:
    # chrF (sacreBLEU: character 1-6-grams, beta 2, precision and recall averaged over the orders
    # both sides have). "ab" vs "ac": unigrams a, b vs a, c -> P1 = R1 = 1/2; bigram "ab" vs
    # "ac" -> P2 = R2 = 0; no 3-6-grams. P = R = 1/4: F2 = 5 * P * R / (4P + R) = 0.25 -> 25.
    assert corpus_overlap(["ab"], ["ac"]) == pytest.approx(25.0)
    assert corpus_overlap(["the same"], ["the same"]) == pytest.approx(100.0)
    assert math.isnan(corpus_overlap([], []))
    with pytest.raises(ValueError):
        corpus_overlap(["a"], [])
    with pytest.raises(ValueError):
        corpus_overlap(["a"], ["a"], metric="ter")  # type: ignore[arg-type]


def test_bleu_hand_derived() -> None:
    # "the cat sat on the mat" vs "the cat sat on a mat" (13a tokens, equal lengths, BP 1):
    # clipped matches 1-grams 5/6, 2-grams 3/5, 3-grams 2/4, 4-grams 1/3;
    # BLEU = (5/6 * 3/5 * 2/4 * 1/3) ** (1/4) = (1/12) ** 0.25 = 53.73.
    got = corpus_overlap(["the cat sat on the mat"], ["the cat sat on a mat"], metric="bleu")
    assert got == pytest.approx(100 * (1 / 12) ** 0.25)


def test_overlap_matrix_and_the_diagonal() -> None:
    outputs = {"s1": {"A": ["ab"], "H": ["ab", "ac"]}}
    cells = {(c.system, c.other): c for c in overlap_matrix(outputs)}
    assert math.isnan(cells["A", "A"].score) and cells["A", "A"].n_pairs == 0  # one output
    # H's two outputs against each other: pooled unigrams 2 of 4 match, bigrams 0 of 2: 25.
    assert cells["H", "H"].n_pairs == 2 and cells["H", "H"].score == pytest.approx(25.0)
    # A "ab" against H's "ab" and "ac": unigrams 3 of 4 (P = R = 3/4), bigrams 1 of 2
    # (1/2): P = R = 5/8 -> F2 = 5/8 -> 62.5.
    assert cells["A", "H"].n_pairs == 2 and cells["A", "H"].score == pytest.approx(62.5)
    systems, rows = literalness_rows(outputs, human={"H"})
    assert systems == ["A", "H"]
    a = rows[0]
    assert a["vs_human"] == pytest.approx(62.5) and math.isnan(a["vs_machine"])
    assert rows[1]["vs_machine"] == pytest.approx(62.5) and rows[1]["sources"] == 1


def test_meta_literalness_on_a_table(tmp_path: Path) -> None:
    path = tmp_path / "outputs.jsonl"
    rows = [
        {"src": "1", "sys": "mt1", "out": "the cat sat on the mat", "pair": "en-de"},
        {"src": "1", "sys": "mt2", "out": "the cat sat on the mat", "pair": "en-de"},
        {"src": "1", "sys": "human", "out": "a feline rested upon a rug", "pair": "en-de"},
        {"src": "2", "sys": "mt1", "out": "", "pair": "en-de"},  # no text: left out
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    s = run_json(["meta", str(path), "--literalness", "--item", "src", "--system", "sys",
                  "--text", "out", "--human-system", "human", "--group", "pair"], tmp_path)  # fmt: skip
    lit = s["literalness"]
    mt1 = rows_by(lit, system="mt1")[0]
    assert mt1["mt2"] == pytest.approx(100.0) and mt1["vs_machine"] == pytest.approx(100.0)
    assert mt1["vs_human"] < 30 and mt1["sources"] == 1 and mt1["group"] == "en-de"
    assert [r["group"] for r in lit["rows"]] == ["en-de"] * 3  # per group only, no pooled row
    assert lit["columns"][3:6] == ["mt1", "mt2", "human"]


def test_meta_literalness_needs_its_columns_and_sacrebleu(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "t.csv"
    path.write_text("src,sys,out\n1,a,x\n", encoding="utf-8")
    assert main(["meta", str(path), "--literalness", "--item", "src", "--system", "sys"]) == 2
    assert "needs --item, --system and --text" in capsys.readouterr().err
    monkeypatch.setattr(literalness, "available", lambda: False)
    argv = ["meta", str(path), "--literalness", "--item", "src", "--system", "sys", "--text", "out"]
    assert main(argv) == 2
    assert "pip install 'judge-engine[stats]'" in capsys.readouterr().err
