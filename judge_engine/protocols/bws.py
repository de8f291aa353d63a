"""Best-worst scaling (LitEval's human scheme, as an LLM judge): best and worst of k translations.

One item is a source passage and 4-5 candidate translations (2-10 are accepted; the paper keeps
to 4-5 because BWS over many candidates is less reliable). Candidates come as ``candidates``: a
list of ``{id, text}`` (or of plain strings, ids ``"1"``..), or that list as a JSON string (CSV),
or as columns ``candidate_1``..``candidate_N`` (ids are the column names). ``source_lang`` and
``target_lang`` are optional. No official prompt exists; ``prompts/bws/user.j2`` follows the
paper's description: blind, shuffled candidates, pick the best and the worst.

**Order.** Candidates are shuffled per item with a seed derived from the ``seed`` option and the
item id (:func:`~judge_engine.protocols.base.stable_seed`), so a rerun shows the same order.
With ``orders: N`` each item is judged N times (variants ``order0``..``order{N-1}``): order *k* is
the shuffled order rotated by *k*, so with N = k candidates every candidate is shown once in every
position (a Latin square, the cheapest design that separates position from quality); orders past
the number of candidates are fresh shuffles. The verdict records the seed and the order shown.

**Answers.** Text: ``Best: B`` / ``Worst: D``; JSON: ``{"best": "B", "worst": "D"}``. The labels
are mapped back to candidate ids; an unknown label, a missing pick or best == worst is a
:class:`VerdictError`. ``Score.scores`` = ``{candidate_id: +1 best, -1 worst, 0 otherwise}``;
``Score.score`` is None (the verdict is categorical). Aggregate with :func:`bws_scores`; measure
order effects with :func:`position_bias`.
"""

from __future__ import annotations

import json
import random
import re
import string
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from judge_engine.errors import DatasetError, ReasonCode, VerdictError
from judge_engine.protocols import templating
from judge_engine.protocols.base import (
    Item,
    Message,
    Protocol,
    ProtocolOptions,
    Score,
    json_error_code,
    stable_seed,
    strip_code_fence,
)

MIN_CANDIDATES, MAX_CANDIDATES = 2, 10
LABELS = string.ascii_uppercase
"""Display labels: the candidate shown first is ``A``."""


class JudgedBestWorst(BaseModel):
    """What the judge is asked to return in JSON mode: the labels as shown."""

    model_config = ConfigDict(extra="forbid")

    best: str
    worst: str


class BWSVerdict(BaseModel):
    """The judge's best and worst picks, and how they map to candidates."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    best: str
    """Label of the best translation as shown (``A``, ``B``...)."""
    worst: str
    """Label of the worst translation as shown; different from ``best``."""
    best_id: str | None = None
    """Filled by the protocol (leave it out): candidate id of the best translation."""
    worst_id: str | None = None
    """Filled by the protocol: candidate id of the worst translation."""
    order: list[str] = Field(default_factory=list)
    """Filled by the protocol: candidate ids in the order shown (``order[0]`` was ``A``)."""
    seed: int | None = None
    """Filled by the protocol: the seed of the item's shuffle."""


class BWSOptions(ProtocolOptions):
    """Options of ``bws``."""

    seed: int = 0
    """Run-level seed of the candidate shuffles (combined with each item id)."""
    orders: int = Field(default=1, ge=1, le=24)
    """How many orders each item is judged under (variants ``order0``..)."""


_PICK = re.compile(
    r"^(?P<kind>best|worst)(?:\s+(?:translation|candidate|choice|option))?\s*[:=\-–—]\s*(?P<rest>.*)$",
    re.IGNORECASE,
)
_LABEL = re.compile(
    r"^(?:(?:translation|candidate|option)\s+)?[(\[\"'“]?(?P<label>[A-Za-z])(?![A-Za-z])",
    re.IGNORECASE,
)


class BestWorstScaling(Protocol):
    """Best-worst scaling over 4-5 shuffled candidate translations of one source."""

    name: ClassVar[str] = "bws"
    version: ClassVar[str] = "1"
    description: ClassVar[str] = (
        "best-worst scaling over 4-5 shuffled translations (LitEval); +1/-1/0 per candidate"
    )
    required_fields: ClassVar[tuple[str, ...]] = ("source",)
    output_model: ClassVar[type[BaseModel]] = BWSVerdict
    judge_model: ClassVar[type[BaseModel] | None] = JudgedBestWorst
    options_model: ClassVar[type[ProtocolOptions]] = BWSOptions
    # Two labels: 8 tokens as text, 13 as JSON (the fake server's answers, in the asked format).
    typical_completion_tokens: ClassVar[int] = 15
    template: ClassVar[str] = "bws/user.j2"

    options: BWSOptions

    def templates(self) -> Sequence[str]:
        return (self.template,)

    def check_item(self, item: Item) -> list[str]:
        """Problems with ``item``'s candidates, for a dataset scan before any call (the base
        class has no such hook yet; ``render`` raises the same problem as a DatasetError)."""
        try:
            candidates_of(item)
        except DatasetError as exc:
            return [str(exc)]
        return []

    def variants(self, item: Item) -> Sequence[str]:
        return tuple(f"order{k}" for k in range(self.options.orders))

    def vote_scale(self) -> None:
        """None: a verdict scores each candidate, not the item, so there is no one vote."""
        return None

    # --- order ---------------------------------------------------------------------------------

    def shuffle_seed(self, item: Item) -> int:
        """The seed of ``item``'s base shuffle: the ``seed`` option and the item id."""
        return stable_seed("bws", self.options.seed, item.get("id", item["source"]))

    def displayed(self, item: Item, variant: str = "") -> list[tuple[str, str]]:
        """``(candidate_id, text)`` in the order shown under ``variant`` (``A`` first)."""
        candidates = candidates_of(item)
        k = _order_index(variant)
        if k >= len(candidates):
            random.Random(stable_seed(self.shuffle_seed(item), k)).shuffle(candidates)
            return candidates
        random.Random(self.shuffle_seed(item)).shuffle(candidates)
        return candidates[k:] + candidates[:k]

    # --- rendering and reading -----------------------------------------------------------------

    def render(self, item: Item, variant: str = "") -> list[Message]:
        shown = self.displayed(item, variant)
        content = templating.render(
            self.template,
            source=str(item["source"]),
            source_lang=str(item.get("source_lang") or ""),
            target_lang=str(item.get("target_lang") or ""),
            candidates=[{"label": LABELS[i], "text": text} for i, (_, text) in enumerate(shown)],
            labels=list(LABELS[: len(shown)]),
            json_mode=self.json_mode,
        )
        return [{"role": "user", "content": content}]

    def parse(self, answer: str, item: Item, variant: str = "") -> BWSVerdict:
        order = [cid for cid, _ in self.displayed(item, variant)]
        labels = tuple(LABELS[: len(order)])
        is_json = strip_code_fence(answer).startswith("{")
        picks, problems, code = _json_picks(answer) if is_json else _text_picks(answer)
        missing = [kind for kind in ("best", "worst") if kind not in picks]
        problems += [f"no {kind} translation given (answer '{kind.capitalize()}: <label>')" for kind in missing]
        unknown = [(kind, label) for kind, label in picks.items() if label not in labels]
        problems += [f"{kind}: {label!r} is not one of the labels {', '.join(labels)}" for kind, label in unknown]
        if not problems and picks["best"] == picks["worst"]:
            problems.append("the best and the worst translation must be different")
        if problems:
            if code is None:
                # Both picks are the answer: with one missing it is incomplete, whatever else.
                code = (ReasonCode.UNREADABLE if len(missing) == 2 else ReasonCode.INCOMPLETE if missing
                        else ReasonCode.OUT_OF_RANGE if unknown else ReasonCode.UNREADABLE)
            raise VerdictError(problems, raw=answer, code=code)
        best, worst = picks["best"], picks["worst"]
        return BWSVerdict(
            best=best,
            worst=worst,
            best_id=order[labels.index(best)],
            worst_id=order[labels.index(worst)],
            order=order,
            seed=self.shuffle_seed(item),
        )

    def score(self, verdict: BaseModel, item: Item, variant: str = "") -> Score:
        assert isinstance(verdict, BWSVerdict)
        scores = dict.fromkeys(verdict.order, 0.0)
        scores[str(verdict.best_id)] = 1.0
        scores[str(verdict.worst_id)] = -1.0
        return Score(None, scores)


def candidates_of(item: Item) -> list[tuple[str, str]]:
    """An item's candidates as ``(id, text)``, in dataset order.

    Raises:
        DatasetError: no candidates, fewer than 2 or more than 10, or duplicate ids.
    """
    raw: Any = item.get("candidates")
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise DatasetError(
                f"item {item.get('id')!r}: candidates is not valid JSON: {exc}"
            ) from None
    if raw is None:
        columns = sorted(
            (k for k in item if re.fullmatch(r"candidate_\d+", k)), key=lambda k: int(k[10:])
        )
        raw = [{"id": k, "text": item[k]} for k in columns if item[k] not in (None, "")]
    candidates = [
        _candidate(c, n, item) for n, c in enumerate(raw if isinstance(raw, list) else [], 1)
    ]
    ids = [cid for cid, _ in candidates]
    if not MIN_CANDIDATES <= len(candidates) <= MAX_CANDIDATES or len(set(ids)) != len(ids):
        raise DatasetError(
            f"item {item.get('id')!r}: needs {MIN_CANDIDATES}-{MAX_CANDIDATES} candidates with distinct "
            f"ids (as 'candidates' [{{id, text}}] or columns candidate_1..), got ids {ids}"
        )
    return candidates


def _candidate(raw: Any, number: int, item: Item) -> tuple[str, str]:
    if isinstance(raw, str):
        return str(number), raw
    if isinstance(raw, dict) and "text" in raw:
        return str(raw.get("id", number)), str(raw["text"])
    raise DatasetError(f"item {item.get('id')!r}: candidate {number} is not {{id, text}}: {raw!r}")


def _order_index(variant: str) -> int:
    return int(variant.removeprefix("order") or 0)


def _text_picks(answer: str) -> tuple[dict[str, str], list[str], ReasonCode | None]:
    picks: dict[str, str] = {}
    problems: list[str] = []
    for line in answer.splitlines():
        match = _PICK.match(re.sub(r"[*_`#>]+", "", line).strip().lstrip("-• ").strip())
        if match is None:
            continue
        kind = match.group("kind").lower()
        label = _label(match.group("rest"))
        if label is None:
            continue
        if picks.setdefault(kind, label) != label:
            problems.append(f"two different {kind} translations given")
    return picks, problems, ReasonCode.UNREADABLE if problems else None


def _json_picks(answer: str) -> tuple[dict[str, str], list[str], ReasonCode | None]:
    text = strip_code_fence(answer)
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        return {}, [f"the answer is not valid JSON: {exc}"], json_error_code(exc, text)
    if not isinstance(raw, dict):
        return {}, ["the JSON answer is not an object"], ReasonCode.UNREADABLE
    picks: dict[str, str] = {}
    for key, value in raw.items():
        kind = str(key).strip().lower()
        if kind in ("best", "worst") and (label := _label(str(value))) is not None:
            picks[kind] = label
    return picks, [], None


def _label(text: str) -> str | None:
    match = _LABEL.match(text.strip())
    return match.group("label").upper() if match else None


# --- aggregation (pure functions over stored outcomes) -------------------------------------


def bws_scores(outcomes: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """BWS score per candidate: (times best - times worst) / times shown, in [-1, 1].

    Args:
        outcomes: one ``Score.scores`` per judged (item, order): ``{candidate_id: +1 | -1 | 0}``
            over the candidates shown. Use system names as candidate ids to score systems
            across items; an item judged under several orders counts once per order.
    """
    net: Counter[str] = Counter()
    shown: Counter[str] = Counter()
    for outcome in outcomes:
        for candidate, value in outcome.items():
            shown[candidate] += 1
            net[candidate] += int(value)
    return {candidate: net[candidate] / shown[candidate] for candidate in sorted(shown)}


@dataclass(frozen=True, slots=True)
class PositionBias:
    """How often one displayed position (``A``, ``B``...) was picked, against chance.

    Attributes:
        shown: verdicts in which the position existed.
        best: times the translation at this position was picked best.
        worst: times it was picked worst.
        expected: picks expected by chance, the sum of ``1/k`` over those verdicts
            (k = candidates shown), the same for best and for worst.
    """

    shown: int
    best: int
    worst: int
    expected: float

    @property
    def best_ratio(self) -> float:
        """Observed / chance best picks: 1.0 is no bias, 1.5 is 50 % more often than chance."""
        return self.best / self.expected if self.expected else float("nan")

    @property
    def worst_ratio(self) -> float:
        """Observed / chance worst picks."""
        return self.worst / self.expected if self.expected else float("nan")


def position_bias(verdicts: Iterable[BWSVerdict | Mapping[str, Any]]) -> dict[str, PositionBias]:
    """The position-bias figure: per displayed position, picks against chance.

    Chance is what a judge blind to order would give: a position shown among k candidates is
    picked best (and worst) with probability 1/k. With shuffled orders quality is spread evenly
    over positions, so a ``best_ratio`` far from 1 (say 1.6 for ``A``: a primacy bias) measures
    the order effect itself. Verdicts may be :class:`BWSVerdict` or their stored dicts.
    """
    counts: dict[str, list[float]] = {}
    for verdict in verdicts:
        data = verdict.model_dump() if isinstance(verdict, BWSVerdict) else verdict
        k = len(data["order"])
        for label in LABELS[:k]:
            row = counts.setdefault(label, [0, 0, 0, 0.0])
            row[0] += 1
            row[1] += data["best"] == label
            row[2] += data["worst"] == label
            row[3] += 1 / k
    return {
        label: PositionBias(int(row[0]), int(row[1]), int(row[2]), row[3])
        for label, row in sorted(counts.items())
    }
