"""judge_engine.util.text: the authors' transliteration, and locating a quote in the text it quotes."""

from __future__ import annotations

from hypothesis import given, strategies as st

from judge_engine.util.text import fold, locate, transliterate

PASSAGE = (
    "The lighthouse keeper counted gulls instead of ships. His daughter’s laugh, "
    "thin as  a paper cut, drifted over the rocks.\nNobody answered the radio."
)


def _fold(text: str) -> str:
    return fold(text)[0].strip()


def test_transliterate_is_plain_unidecode_and_folds_nothing_else() -> None:
    # The authors' matcher keeps case, spacing and the quote marks unidecode writes:
    # only locate's normaliser folds those.
    assert transliterate("Ä  “Café” — ok") == 'A  "Cafe" -- ok'
    assert _fold("Ä  “Café” — ok") == "a 'cafe' -- ok"


def test_locate_exact_and_normalised_offsets() -> None:
    assert locate("counted gulls", PASSAGE) == (22, 35)
    start, end = locate("DAUGHTER'S LAUGH, thin as a paper cut", PASSAGE) or (0, 0)
    assert PASSAGE[start:end] == "daughter’s laugh, thin as  a paper cut"
    start, end = locate("rocks. nobody", PASSAGE) or (0, 0)
    assert PASSAGE[start:end] == "rocks.\nNobody"
    assert locate("a silver whale", PASSAGE) is None
    assert locate("   ", PASSAGE) is None


def test_locate_skips_a_match_that_ends_inside_one_characters_expansion() -> None:
    # "—" folds to "--": the first folded "aa-" ends halfway through the dash (found by hypothesis).
    assert locate("AA-", "aaaaaa—aa-") == (7, 10)
    assert locate("A—", "a-a—") == (2, 4)


# --- properties of locate -------------------------------------------------------------------

_TEXT = st.text(alphabet="ab’'\" \n\tÉé—-", min_size=1, max_size=40)


@given(_TEXT, st.data())
def test_locate_finds_every_substring_exactly(passage: str, data: st.DataObject) -> None:
    start = data.draw(st.integers(0, len(passage) - 1))
    end = data.draw(st.integers(start + 1, len(passage)))
    needle = passage[start:end]
    where = locate(needle, passage)
    if not needle.strip():
        assert where is None
        return
    assert where is not None
    assert passage[where[0] : where[1]] == needle.strip()


@given(_TEXT, st.data())
def test_locate_normalised_offsets_cover_an_equivalent_span(
    passage: str, data: st.DataObject
) -> None:
    start = data.draw(st.integers(0, len(passage) - 1))
    end = data.draw(st.integers(start + 1, len(passage)))
    # What a judge does to a quote: other case, straight apostrophes, one space for any run.
    needle = " ".join(passage[start:end].upper().replace("’", "'").split())
    where = locate(needle, passage)
    if not _fold(needle):
        assert where is None
        return
    assert where is not None
    assert _fold(passage[where[0] : where[1]]) == _fold(needle)
