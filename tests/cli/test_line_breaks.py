"""Where a line of prose may break (``cli/line_breaks.py``): never between a figure and its
name nor across a comparison, every word kept, every line within the width unless one word is
wider."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from judge_engine.cli.line_breaks import CONTINUED, joined, line_spans, marked_lines


def _lines(text: str, width: int) -> list[str]:
    return [text[a:b] for a, b in line_spans(text, width)]


@pytest.mark.parametrize(("before", "after", "together"), [
    ("bound", "0.254", True),     # a figure and the name before it
    ("0.254", ">", True), (">", "0.15", True),  # a comparison
    ("20", "items", True),        # a figure and the name after it
    ("0.15;", "at", False),       # punctuation closes the figure
    ("items,", "14", False),      # and opens the next
    ("(10.0%)", "it", False),
    ("the", "reference", False),  # words
    ("--min-items", "cannot", False),
])
def test_what_stays_together(before: str, after: str, together: bool) -> None:
    assert joined(before, after) is together


def test_the_sentences_of_the_issue_keep_their_figures() -> None:
    sentence = ("cheap: answers nothing: at confidence >= 0.9929, 3 errors in 30 items, bound 0.254 > 0.15; at its "
                "error rate there (10.0%) it needs 180 items")
    lines = _lines(sentence, 72)
    assert any("bound 0.254 > 0.15;" in line for line in lines), lines
    reason = "no stage was sure enough: mid 0.6667 < 0.8333; strong 0.6058 < 0.6145"
    assert _lines(reason, 24) == ["no stage was sure", "enough:", "mid 0.6667 < 0.8333;", "strong 0.6058 < 0.6145"]


def test_a_run_wider_than_the_width_breaks_between_its_words_as_a_last_resort() -> None:
    assert _lines("strong 0.6058 < 0.6145", 10) == ["strong", "0.6058 <", "0.6145"]


@given(st.lists(st.sampled_from(["bound", "0.254", ">", "0.15;", "items", "20", "(0.5)", "a", "reference",
                                 "escalated,", "$0.01", "<", "x" * 30]), min_size=1, max_size=40),
       st.integers(min_value=8, max_value=100))
def test_every_word_is_kept_and_every_line_fits_unless_one_word_is_wider(words: list[str], width: int) -> None:
    text = " ".join(words)
    lines = _lines(text, width)
    assert " ".join(" ".join(lines).split()) == text
    assert all(len(line) <= width or " " not in line.strip() for line in lines)


def test_a_templates_long_line_is_marked_where_it_continues() -> None:
    line = "You are grading an answer an AI assistant gave to a household question. The reference notes"
    first, *more = marked_lines(line, 40)
    assert " ".join([first, *more]) == line
    assert len(first) <= 40 and all(len(CONTINUED + m) <= 40 for m in more)
    assert marked_lines("short", 40) == ["short"]
