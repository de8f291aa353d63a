"""Reproduce the paper's stored CDAT scores from the word lists alone.

    python benchmarks/cdat_baselines.py [--data ../shared/data/cdat] [--no-embeddings] [--nltk]

For every Random, Common and human list in ``../shared/data/cdat`` (the paper's files), the
words are checked and scored as a run scores a model's answer (packaged WordNet 3.0 + perceptron
tagger, all-MiniLM-L6-v2), then compared with the stored ``sbert_valid_count``,
``sbert_novelty`` and ``sbert_appropriateness``:

* valid-count agreement with the default lexicon and with WordNet alone, over all lists and over
  the lists holding a word WordNet has no noun for (where the tagger decides; lists of plain
  nouns agree whatever the check);
* max and mean absolute difference of novelty and appropriateness over the lists both sides
  scored with the same valid count (where the counts differ, so do the seven scored words);
* the baselines' mean and 95% interval (mean +- 1.96 SEM), stored and recomputed.

Then the noun check against the original's: the valid counts that agree over all lists and over
the lists where the original rejected a word as a non-noun, and every disagreement with the
words the tagger decides (no WordNet noun) and this tagger's tag for each; with ``--nltk``, where
NLTK and its ``averaged_perceptron_tagger_eng`` and ``wordnet`` data are installed, NLTK's tag
beside it and the agreement of the original code itself. Needs ``judge-engine[embeddings]``
unless ``--no-embeddings``.
"""

from __future__ import annotations

import argparse
import ast
import csv
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from judge_engine.protocols.cdat_baselines import ScoredList, WordList, score_lists  # noqa: E402
from judge_engine.protocols.lexicon import NOUN_TAGS, PackagedLexicon  # noqa: E402
from judge_engine.protocols.word_lists import clean_word  # noqa: E402
from judge_engine.stats.creativity import mean_ci  # noqa: E402

DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "cdat"
SETS = ("random", "common", "human")


@dataclass(frozen=True, slots=True)
class StoredList:
    """One list as the paper stored it."""

    cue: str
    words: tuple[str, ...]
    valid_count: int
    novelty: float | None
    appropriateness: float | None


@dataclass(frozen=True, slots=True)
class Agreement:
    """How one set's recomputed lists compare with the stored ones."""

    lists: int
    valid_agree: int
    nonnoun_lists: int
    nonnoun_agree: int
    scored_both: int
    """Lists both sides scored, with the same valid count (the score differences are over these)."""
    scored_differently: int
    """Lists one side scored and the other dropped (fewer than seven valid words)."""
    novelty_max: float
    novelty_mean: float
    appropriateness_max: float
    appropriateness_mean: float


def _number(text: str | float | None) -> float | None:
    if text is None or text == "":
        return None
    value = float(text)
    return None if math.isnan(value) else value


def load_lists(data: Path) -> dict[str, list[StoredList]]:
    """The Random and Common baselines and the human answers, as stored."""
    out: dict[str, list[StoredList]] = {}
    for name in ("random", "common"):
        rows = json.loads((data / f"{name}_results550.json").read_text(encoding="utf-8"))
        out[name] = [StoredList(r["Cue"], tuple(r["Words"]), int(r["sbert_valid_count"]),
                                _number(r["sbert_novelty"]), _number(r["sbert_appropriateness"])) for r in rows]
    with (data / "results_with_bert_layers_human.csv").open(encoding="utf-8", newline="") as handle:
        out["human"] = [
            StoredList(r["Cue"], tuple(ast.literal_eval(r["Words"])), int(float(r["sbert_valid_count"])),
                       _number(r["sbert_novelty"]), _number(r["sbert_appropriateness"]))
            for r in csv.DictReader(handle)
        ]
    return out


def has_non_noun(words: Sequence[str], lexicon: PackagedLexicon) -> bool:
    """True when a word has no WordNet noun sense (or is one letter): the tagger decides it."""
    return any(len(w) <= 1 or not lexicon.wordnet.lemmas(w) for w in map(clean_word, words))


def compare(stored: Sequence[StoredList], ours: Sequence[ScoredList], wordnet_only: Sequence[ScoredList],
            lexicon: PackagedLexicon) -> tuple[Agreement, Agreement]:
    """(default lexicon, WordNet alone) agreement of one set."""
    results = []
    for scored in (ours, wordnet_only):
        agree = [s.valid_count == o.valid_count for s, o in zip(stored, scored, strict=True)]
        mixed = [has_non_noun(s.words, lexicon) for s in stored]
        # Scores are compared where both sides scored the same words; where the valid words
        # differ the first seven differ too, and that is the valid-count disagreement above.
        both = [(s, o) for s, o, a in zip(stored, scored, agree, strict=True)
                if a and s.novelty is not None and o.novelty is not None]
        differ = sum((s.novelty is None) != (o.novelty is None) for s, o in zip(stored, scored, strict=True))
        nov = [abs(s.novelty - o.novelty) for s, o in both if s.novelty is not None and o.novelty is not None]
        app = [abs(s.appropriateness - o.appropriateness) for s, o in both
               if s.appropriateness is not None and o.appropriateness is not None]
        results.append(Agreement(
            len(stored), sum(agree), sum(mixed), sum(a for a, m in zip(agree, mixed, strict=True) if m),
            len(both), differ, max(nov, default=math.nan), _mean(nov), max(app, default=math.nan), _mean(app),
        ))
    return results[0], results[1]


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--no-embeddings", action="store_true", help="valid counts only")
    parser.add_argument("--nltk", action="store_true",
                        help="also tag each disagreement's words with nltk.pos_tag (needs NLTK's data installed)")
    args = parser.parse_args(argv)
    lists = load_lists(args.data)
    lexicon, wordnet = PackagedLexicon(), PackagedLexicon(tagger=False)
    embedder = None
    if not args.no_embeddings:
        from judge_engine.protocols.embeddings import get_embedder

        embedder = get_embedder("minilm")
    print(f"{'set':7} {'lists':>5} {'valid=':>7} {'(WN)':>6} {'w/ non-noun':>11} {'valid=':>7} {'(WN)':>6} "
          f"{'same':>6} {'nov max':>9} {'nov mean':>9} {'app max':>9} {'app mean':>9}")
    started = time.perf_counter()
    recomputed: dict[str, list[ScoredList]] = {}
    for name in SETS:
        stored = lists[name]
        word_lists = [WordList(s.cue, s.words) for s in stored]
        ours = recomputed[name] = score_lists(word_lists, lexicon=lexicon, embedder=embedder)
        alone = score_lists(word_lists, lexicon=wordnet, embedder=None)
        full, wn = compare(stored, ours, alone, lexicon)
        print(f"{name:7} {full.lists:5d} {full.valid_agree:7d} {wn.valid_agree:6d} {full.nonnoun_lists:11d} "
              f"{full.nonnoun_agree:7d} {wn.nonnoun_agree:6d} {full.scored_both:6d} {full.novelty_max:9.2e} "
              f"{full.novelty_mean:9.2e} {full.appropriateness_max:9.2e} {full.appropriateness_mean:9.2e}")
    print(f"({time.perf_counter() - started:.1f} s; valid=: lists whose valid count equals the stored one, (WN): "
          "with WordNet alone; same: lists scored by both with equal valid counts, over which the absolute "
          "differences of novelty and appropriateness are taken)\n")
    if embedder is not None:
        _print_statistics(lists, recomputed)
    _print_noun_check(lists, recomputed, lexicon, args.nltk)
    return 0


def _print_statistics(lists: dict[str, list[StoredList]], recomputed: dict[str, list[ScoredList]]) -> None:
    print("baseline statistics: mean [95% CI] over scored lists, stored -> recomputed")
    for name in SETS:
        for field in ("novelty", "appropriateness"):
            before = mean_ci([v for s in lists[name] if (v := getattr(s, field)) is not None])
            after = mean_ci([v for s in recomputed[name] if (v := getattr(s, field)) is not None])
            print(f"  {name:7} {field:15} {before.mean:8.4f} [{before.low:.4f}, {before.high:.4f}] n={before.n:<4d}"
                  f" -> {after.mean:8.4f} [{after.low:.4f}, {after.high:.4f}] n={after.n}")
    print()


def rejected_a_word(stored: StoredList) -> bool:
    """The original code rejected a word of this list as a non-noun: its stored valid count is
    below the list's distinct words of two letters or more (the other reasons to drop a word)."""
    words = [w for w in map(clean_word, stored.words) if len(w) > 1]
    return stored.valid_count < len(dict.fromkeys(words[:10]))


def decided_by_the_tagger(stored: StoredList, lexicon: PackagedLexicon) -> list[str]:
    """The list's words WordNet has no noun for: the tagger alone decides them."""
    words = (w for w in map(clean_word, stored.words) if len(w) > 1 and not lexicon.wordnet.lemmas(w))
    return list(dict.fromkeys(words))


def _print_noun_check(lists: dict[str, list[StoredList]], recomputed: dict[str, list[ScoredList]],
                      lexicon: PackagedLexicon, nltk: bool) -> None:
    """Valid counts against the stored ones, on every list and on the lists where the original
    rejected a word; then each disagreement, its words the tagger decides with this tagger's tag
    (and NLTK's, with --nltk), and which way the original went."""
    pairs = [(name, s, o) for name in SETS for s, o in zip(lists[name], recomputed[name], strict=True)]
    rejecting = [(n, s, o) for n, s, o in pairs if rejected_a_word(s)]
    agree = sum(s.valid_count == o.valid_count for _, s, o in pairs)
    print(f"noun check: {agree} of {len(pairs)} lists agree ({agree / len(pairs):.1%}); where the original "
          f"rejected a word as a non-noun: {sum(s.valid_count == o.valid_count for _, s, o in rejecting)} of "
          f"{len(rejecting)}")
    tagger = _nltk_tags() if nltk else None
    print("disagreements: set, cue, stored -> this valid count, the words the tagger decides (no WordNet noun) "
          "with this tagger's tag" + (" / NLTK's" if tagger else ""))
    for name, stored, ours in pairs:
        if stored.valid_count == ours.valid_count:
            continue
        # The words that can explain the difference: where the original rejected more, the ones
        # this tagger calls nouns; where it accepted more, the ones this tagger does not.
        more = ours.valid_count > stored.valid_count
        words = [w for w in decided_by_the_tagger(stored, lexicon) if (lexicon.tag(w) in NOUN_TAGS) == more]
        tags = [f"{w}:{lexicon.tag(w)}" + (f"/{tagger(w)}" if tagger else "") for w in words]
        way = "the original rejected" if more else "the original accepted"
        print(f"  {name:7} {stored.cue:13} {stored.valid_count:2d} -> {ours.valid_count:2d}  {way} "
              f"{abs(ours.valid_count - stored.valid_count)} more of: {' '.join(tags)}")
    if tagger:
        ours_nltk = sum(s.valid_count == o.valid_count for _, s, o in _nltk_counts(lists))
        print(f"with NLTK's own tagger and WordNet (lexicon: nltk): {ours_nltk} of {len(pairs)} lists agree")
    print()


def _nltk_tags() -> Callable[[str], str] | None:
    """``nltk.pos_tag([word])``'s tag, where NLTK and its data are installed (None otherwise)."""
    from judge_engine.protocols.lexicon import LexiconUnavailable, NltkLexicon

    try:
        return NltkLexicon().tag
    except LexiconUnavailable as exc:
        print(f"--nltk: {exc}")
        return None


def _nltk_counts(lists: dict[str, list[StoredList]]) -> list[tuple[str, StoredList, ScoredList]]:
    from judge_engine.protocols.lexicon import NltkLexicon

    lexicon = NltkLexicon()
    return [(name, s, o) for name in SETS for s, o in zip(
        lists[name], score_lists([WordList(s.cue, s.words) for s in lists[name]], lexicon=lexicon, embedder=None),
        strict=True)]


if __name__ == "__main__":
    sys.exit(main())
