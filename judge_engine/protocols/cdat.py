"""CDAT and DAT: creativity by generation, scored with sentence embeddings.

Here the "judge" is the model under test: it is asked for ten nouns (``prompts/cdat/``, the
paper's texts byte for byte), its answer is read as the method reads it
(:mod:`~judge_engine.protocols.word_lists`), and the first seven valid words are scored by
embedding distances (:mod:`~judge_engine.protocols.embeddings`): **novelty** (mean pairwise distance x 100,
the DAT score) and, for CDAT, **appropriateness** to the cue (200 - mean cue distance x 100).

============  ======================  =================================================
protocol      ``prompt`` option       text
============  ======================  =================================================
``cdat``      ``cdat`` (default)      ten words as different as possible, yet associated
                                      with the cue (curly quotes, period inside them)
``cdat``      ``common``              the "Common" baseline: the ten most associated
``dat``       ``dat`` (default)       the Divergent Association Task
``dat``       ``task-aware``          the baseline that names the DAT score
============  ======================  =================================================

**The first answer is the data.** A list with fewer than seven valid nouns is dropped by the
method, which reports the valid-response rate; re-asking would inflate that rate, so it is
recorded at once as ``too_few_valid`` with the parsed words and every dropped word's reason in
the verdict (:attr:`Protocol.reasks` is False). Likewise an answer cut off at ``max_tokens`` is
read as it is (the paper set 80-300 tokens and parsed what came). Transport retries are the
engine's as usual; the paper skipped a cue after an error instead.

**Options.** ``role``: the message role; ``user`` by default, ``assistant`` reproduces the
original OpenAI calls, which sent the prompt as an assistant message. ``embedder``: ``minilm``
(all-MiniLM-L6-v2, ``judge-engine[embeddings]``) or ``none``, which keeps the words and their
validity and records the task ``not_embedded`` (running again with an embedder scores it from
the cache). ``lexicon``: ``packaged`` (WordNet 3.0 and a perceptron tagger from PyPI packages,
``judge-engine[cdat]``; ``tagger: false`` for WordNet alone) or ``nltk`` (NLTK with its data).

Temperatures and samples are plan dimensions (``temperatures``, ``repeats``): the paper's Low /
Mid / High are 0.5 / 1.0 / 1.5, plus 0.0; DAT draws many samples of one prompt (``repeats``).
Items: ``cdat`` needs a ``cue``; ``dat`` needs only an ``id``.

The stored Common baseline was read line by line by its own script (numbers stripped, a
two-word line kept whole); the ``common`` prompt here is read by the CDAT parser, which takes the
first word of each numbered entry.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict

from judge_engine.errors import ConfigError, ReasonCode, VerdictError
from judge_engine.protocols import templating
from judge_engine.protocols.base import Item, Message, Protocol, ProtocolOptions, Score
from judge_engine.protocols.embeddings import Embedder, embedder_problem, get_embedder, list_scores
from judge_engine.protocols.lexicon import Lexicon, LexiconUnavailable, get_lexicon
from judge_engine.protocols.word_lists import MINIMUM_VALID, DropReason, check_words, parse_words

_FROZEN = ConfigDict(frozen=True, extra="forbid")
PROMPT_START = "Please enter 10 words that "
"""How every CDAT/DAT prompt and baseline prompt begins."""
CUE_IN_PROMPT = re.compile(r"following cue word: [“\"](?P<cue>.*?)\.[”\"] Rules:", re.DOTALL)


class DroppedWord(BaseModel):
    """A token of the answer that is not a scored word."""

    model_config = _FROZEN

    word: str
    """The token (cleaned, when it got that far)."""
    reason: DropReason
    """``no_letters``, ``beyond_ten``, ``too_short``, ``not_a_noun`` or ``duplicate``."""


class WordListVerdict(BaseModel):
    """The answer read as the method reads it. The scores are the outcome's ``scores``."""

    model_config = _FROZEN

    words: list[str]
    """The words read from the answer, cleaned and lower-cased, at most ten, in order."""
    valid_words: list[str]
    """Unique valid nouns in order; the first seven are scored."""
    dropped: list[DroppedWord]
    """Every token that did not become a valid word, and why."""
    lexicon: str
    """The lexicon that decided which words are nouns."""


class WordListOptions(ProtocolOptions):
    """Options of ``cdat`` and ``dat``."""

    output: Literal["text"] = "text"
    """The method reads plain text; a JSON schema would change what the model is asked."""
    role: Literal["user", "assistant"] = "user"
    """Role of the prompt message; ``assistant`` is the original OpenAI calls' quirk."""
    embedder: str = "minilm"
    """``minilm`` (all-MiniLM-L6-v2), a name given to ``embeddings.register_embedder``, or
    ``none`` (words and validity only; the task is recorded ``not_embedded``)."""
    lexicon: Literal["packaged", "nltk"] = "packaged"
    """Where the noun check comes from (see :mod:`judge_engine.protocols.lexicon`)."""
    tagger: bool = True
    """With ``lexicon: packaged``: also accept words the tagger tags NN/NNS, as the method does."""


class CDATOptions(WordListOptions):
    """Options of ``cdat``."""

    prompt: Literal["cdat", "common"] = "cdat"
    """``cdat``: the task; ``common``: the Common baseline's prompt (most associated words)."""


class DATOptions(WordListOptions):
    """Options of ``dat``."""

    prompt: Literal["dat", "task-aware"] = "dat"
    """``dat``: the task; ``task-aware``: the baseline prompt that names the DAT score."""


class WordListProtocol(Protocol):
    """What CDAT and DAT share: the prompt, the reading of the list, its scoring."""

    output_model: ClassVar[type[BaseModel]] = WordListVerdict
    reasks: ClassVar[bool] = False
    item_in_cache_key: ClassVar[bool] = True
    reads_truncated: ClassVar[bool] = True
    options: WordListOptions

    def __init__(self, options: ProtocolOptions | None = None, *, lexicon: Lexicon | None = None,
                 embedder: Embedder | None = None) -> None:
        super().__init__(options)
        self._lexicon = lexicon
        self._embedder = embedder

    @classmethod
    def from_options(cls, raw: Mapping[str, Any] | None, *, where: str = "protocol_options") -> Self:
        """Validate options and check, before anything is sent, that the lexicon and embedder
        they name are installed (a run must not spend money to record ``protocol_error``)."""
        protocol = super().from_options(raw, where=where)
        problems = protocol.setup_problems()
        if problems:
            raise ConfigError(f"protocol {cls.name}: {'; '.join(problems)}")
        return protocol

    def setup_problems(self) -> list[str]:
        """What is missing for these options (empty when everything is installed)."""
        problems = []
        if self._lexicon is None:
            try:
                get_lexicon(self.options.lexicon, tagger=self.options.tagger)
            except LexiconUnavailable as exc:
                problems.append(str(exc))
        if self._embedder is None and self.options.embedder != "none":
            problem = embedder_problem(self.options.embedder)
            if problem:
                problems.append(problem)
        return problems

    @property
    def lexicon(self) -> Lexicon:
        if self._lexicon is None:
            self._lexicon = get_lexicon(self.options.lexicon, tagger=self.options.tagger)
        return self._lexicon

    @property
    def embedder(self) -> Embedder | None:
        if self._embedder is None and self.options.embedder != "none":
            self._embedder = get_embedder(self.options.embedder)
        return self._embedder

    # --- the prompt -----------------------------------------------------------------------

    def template_name(self) -> str:
        assert isinstance(self.options, CDATOptions | DATOptions)
        return f"cdat/{self.options.prompt.replace('-', '_')}.j2"

    def templates(self) -> Sequence[str]:
        return (self.template_name(),)

    def cue(self, item: Item) -> str | None:
        """The item's cue (None for DAT)."""
        return None

    def render(self, item: Item, variant: str = "") -> list[Message]:
        cue = self.cue(item)
        content = templating.render(self.template_name(), **({"cue": cue} if cue is not None else {}))
        return [{"role": self.options.role, "content": content}]

    # --- the answer -----------------------------------------------------------------------

    def parse(self, answer: str, item: Item, variant: str = "") -> WordListVerdict:
        parsed = parse_words(answer)
        checked = check_words(parsed.words, self.lexicon)
        verdict = WordListVerdict(
            words=list(parsed.words),
            valid_words=list(checked.valid),
            dropped=[DroppedWord(word=d.word, reason=d.reason) for d in (*parsed.dropped, *checked.dropped)],
            lexicon=self.lexicon.name,
        )
        if not checked.scorable:
            shown = ", ".join(checked.valid) or "none"
            raise VerdictError(
                f"{len(checked.valid)} valid words ({shown}); the method scores a list of at least "
                f"{MINIMUM_VALID} unique nouns and drops the others",
                raw=answer, code=ReasonCode.TOO_FEW_VALID, verdict=verdict.model_dump(mode="json"),
            )
        return verdict

    def score_range(self) -> tuple[float, float] | None:
        return (0.0, 200.0)

    def score(self, verdict: BaseModel, item: Item, variant: str = "") -> Score:
        assert isinstance(verdict, WordListVerdict)
        embedder = self.embedder
        if embedder is None:
            raise VerdictError(
                "no embedder (embedder: none): the words and their validity are kept; score them "
                "offline or run again with an embedder (answers come from the cache)",
                code=ReasonCode.NOT_EMBEDDED,
            )
        scored = verdict.valid_words[:MINIMUM_VALID]
        novelty, appropriateness = list_scores(embedder, scored, self.cue(item))
        scores = {"novelty": novelty}
        if appropriateness is not None:
            scores["appropriateness"] = appropriateness
        return Score(novelty, scores)


class CDAT(WordListProtocol):
    """Conditional DAT: ten nouns as different as possible yet associated with a cue."""

    name: ClassVar[str] = "cdat"
    version: ClassVar[str] = "1"
    description: ClassVar[str] = (
        "CDAT (generation): 10 nouns for a cue; novelty and appropriateness by embeddings"
    )
    required_fields: ClassVar[tuple[str, ...]] = ("cue",)
    options_model: ClassVar[type[ProtocolOptions]] = CDATOptions

    def check_item(self, item: Item) -> list[str]:
        cue = item.get("cue")
        if not isinstance(cue, str) or not cue.strip():
            return ["cue must be a non-empty string"]
        return []

    def cue(self, item: Item) -> str | None:
        return str(item["cue"])



class DAT(WordListProtocol):
    """The Divergent Association Task: ten nouns as different from each other as possible."""

    name: ClassVar[str] = "dat"
    version: ClassVar[str] = "1"
    description: ClassVar[str] = "DAT (generation): 10 unrelated nouns; novelty by embeddings"
    required_fields: ClassVar[tuple[str, ...]] = ()
    options_model: ClassVar[type[ProtocolOptions]] = DATOptions
