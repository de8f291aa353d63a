"""Reading word lists (the reference's rules, then answers shaped like real models') and the
validity rules (noun, longer than one letter, unique; at least 7; the first 7 count)."""

from __future__ import annotations

import pytest

from judge_engine.protocols.word_lists import (
    Dropped,
    check_words,
    clean_word,
    parse_words,
    tokens,
)
from tests.protocols.cdat.conftest import SetLexicon

TEN = ["apple", "river", "storm", "violin", "candle", "mirror", "anchor", "ladder", "meadow", "kettle"]


def words(answer: str) -> list[str]:
    return list(parse_words(answer).words)


# --- the reference's rules, one by one ---------------------------------------------------------


def test_numbered_markers_take_the_first_token_after_each_marker() -> None:
    assert words("1. Apple pie\n2. River bank\n3. Storm") == ["apple", "river", "storm"]


def test_ten_is_a_marker_and_eleven_is_not() -> None:
    # "11." has no word boundary before its second "1", so it stays inside segment 10.
    answer = "".join(f"{i}. {w}\n" for i, w in enumerate(TEN, start=1)) + "11. zebra\n"
    assert words(answer) == TEN


def test_a_decimal_is_a_marker_too_as_in_the_original() -> None:
    # "2.5" matches \b2\. ; the token after it is "5", which has no letter and is dropped.
    parsed = parse_words("I would rate it 2.5 apples")
    assert parsed.words == () and parsed.dropped == (Dropped("5", "no_letters"),)


def test_without_markers_the_answer_is_split_on_whitespace() -> None:
    assert words("Apple\nRiver\tStorm  Violin") == ["apple", "river", "storm", "violin"]


def test_a_single_token_is_split_again_on_commas() -> None:
    assert tokens("apple,river,storm") == ["apple", "river", "storm"]
    assert words("apple,river,storm") == ["apple", "river", "storm"]


def test_zero_width_and_special_spaces_become_spaces() -> None:
    # U+200B (zero-width space), U+2003 (em space), U+FEFF (BOM), U+2060 (word joiner).
    assert words("apple\u200briver\u2003storm\ufeffviolin\u2060candle") == ["apple", "river", "storm", "violin", "candle"]
    assert words("1.\u200bApple 2.\u200bRiver") == ["apple", "river"]


def test_tokens_keep_letters_and_hyphens_only_and_are_lower_cased() -> None:
    assert words("1. **X-Ray**\n2. Café\n3. rock'n'roll") == ["x-ray", "caf", "rocknroll"]


def test_tokens_without_a_letter_are_dropped_with_the_reason() -> None:
    parsed = parse_words("- apple\n- river\n- 42")
    assert parsed.words == ("apple", "river")
    assert parsed.dropped == (Dropped("-", "no_letters"), Dropped("-", "no_letters"), Dropped("-", "no_letters"),
                              Dropped("42", "no_letters"))


def test_the_list_is_cut_to_ten_words() -> None:
    parsed = parse_words(" ".join([*TEN, "zebra", "yak"]))
    assert list(parsed.words) == TEN
    assert parsed.dropped == (Dropped("zebra", "beyond_ten"), Dropped("yak", "beyond_ten"))


# --- answers shaped like real ones --------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        pytest.param("\n".join(f"{i}. {w.capitalize()}" for i, w in enumerate(TEN, 1)), TEN, id="numbered"),
        pytest.param(", ".join(TEN), TEN, id="comma-separated"),
        pytest.param("\n".join(TEN), TEN, id="one-per-line"),
        pytest.param(
            "Sure! Here are 10 nouns associated with “release”:\n\n"
            + "".join(f"{i}. **{w.capitalize()}** – a sense of release\n" for i, w in enumerate(TEN, 1))
            + "\nThese words span physical, emotional and abstract meanings.",
            TEN, id="preamble-and-explanations",
        ),
        pytest.param(
            "".join(f"{i}. {w} ({w[0]}...)\n" for i, w in enumerate(TEN, 1)), TEN, id="parenthetical-notes",
        ),
        pytest.param("Here are my words: apple, river", ["here", "are", "my", "words", "apple", "river"],
                     id="prose-preamble-without-numbers-counts-its-words"),
    ],
)
def test_answers_shaped_like_real_ones(answer: str, expected: list[str]) -> None:
    assert words(answer) == expected


def test_a_refusal_reads_as_its_words() -> None:
    assert words("I'm sorry, but I can't help with that.") == ["im", "sorry", "but", "i", "cant", "help", "with", "that"]


# --- validity --------------------------------------------------------------------------------


def test_a_valid_word_is_a_noun_longer_than_one_letter_and_unique() -> None:
    lexicon = SetLexicon(["apple", "river", "a"])
    checked = check_words(["apple", "a", "quickly", "Apple", "river", "quickly"], lexicon)
    assert checked.valid == ("apple", "river")
    assert checked.dropped == (
        Dropped("a", "too_short"), Dropped("quickly", "not_a_noun"), Dropped("apple", "duplicate"),
        Dropped("quickly", "not_a_noun"),  # a repeated non-noun is a non-noun each time
    )


def test_fewer_than_seven_valid_words_is_not_scorable() -> None:
    checked = check_words(TEN[:6] + ["quickly"] * 4, SetLexicon(TEN))
    assert len(checked.valid) == 6 and not checked.scorable and checked.scored == ()


def test_only_the_first_seven_valid_words_are_scored() -> None:
    checked = check_words(["quickly", *TEN[:9]], SetLexicon(TEN))
    assert checked.valid == tuple(TEN[:9])
    assert checked.scored == tuple(TEN[:7])


def test_stored_lists_are_cleaned_as_the_original_validate_cleans_them() -> None:
    assert clean_word("Freedom!") == "freedom"
    assert clean_word(" Ice cream ") == "ice cream"  # spaces survive here, never in a parsed answer
    assert clean_word("3-D") == "-d"
