"""Item decisions: a judge's (or a jury's) outcomes for one item -> the item's prediction and
confidence, how they were obtained, or no decision with a reason code.

:func:`decide_item` is the one place that does this. It is pure (outcome records in, an
:class:`ItemDecision` out), so it can be called for an item as soon as its requests are done:
the engine does (:class:`ItemCollector`, fed every outcome line as it is written), a session's
end catches up what earlier sessions left (:func:`write_item_outcomes`, from the index, like the
juries), and a cascade can ask it per item between its stages.

**Which judges.** A judge whose item is several requests and whose confidence is measured: every
``pairwise-annotators`` judge (2N requests per item), and a judge with ``confidence:
logprobs`` or ``agreement`` and several variants or repeats. Its item outcome is an outcome line
of its own, judge ``<judge>:item`` (a colon no judge name can hold), protocol ``item``, one per
item and temperature: ``show``, ``stats``, ``export``, the index and the viewer read it like a
jury's. A judge with one request per item needs none: its outcome line carries its confidence.

**How** (``confidence.method`` of the judge):

- ``logprobs``: each request's probabilities of the verdict's values (labels in the item's own
  terms, or a scale's scores), averaged over the requests kept; the prediction is the value
  with the largest average, the confidence that average (``pairwise-annotators``: exactly the
  reference's p(output 1), p(output 2)). The weighted scores (G-Eval) are averaged beside it.
  A verdict of several values (TTCT) has no one distribution: its prediction is the requests'
  vote (as ``agreement``) and its confidence the mean of the requests' confidences.
- ``agreement``: the requests' votes; for labels and short ordinal scales the prediction is the
  most common vote and the confidence the share of requests that gave it; for an interval
  scale the prediction is the mean and the confidence ``1 - sd / (half the scale's width)``,
  the population standard deviation of the votes against the largest one the scale allows
  (1 when all agree, 0 when they split between its ends).
- a jury's outcome line: its value, and the share of its voting jurors that gave it.

**Requests left out.** A request whose answer was unreadable (``unreadable``, ``incomplete``,
``out_of_range``, ``refused``) or that the provider refused (``provider_rejected``,
``content_filter``, ``context_too_long``: the reference's ``BadRequestError``) is left out with
every request of its group (:meth:`~judge_engine.protocols.base.Protocol.request_group`: an
annotator's two orders), and counted on the item's outcome. Any other unscored request
(``transport_exhausted``, ``protocol_error``, ``not_recorded``...) makes the item
``item_incomplete``: an outage is not a verdict, and deciding without it would change the
confidence. Nothing left: ``none_readable``. Two predictions tied: ``item_tie``.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections import Counter, OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from judge_engine.errors import ConfigError, ReasonCode
from judge_engine.inputs.config import JobConfig, JudgeConfig
from judge_engine.protocols import Protocol, VoteScale
from judge_engine.rundir.index import RunIndex, TaskRow
from judge_engine.rundir.records import OutcomeRecord
from judge_engine.rundir.store import LineReader, RunStore, utc_now
from judge_engine.util.jsonio import content_hash
from judge_engine.util.naming import judge_ref

ITEM_PROTOCOL = "item"
"""The ``protocol`` of an item outcome line."""
ITEM_VERSION = "1"
ITEM_SUFFIX = ":item"
"""An item outcome's judge is the judge's name and this."""
LEFT_OUT_CODES = frozenset({
    ReasonCode.UNREADABLE, ReasonCode.INCOMPLETE, ReasonCode.OUT_OF_RANGE, ReasonCode.REFUSED,
    ReasonCode.PROVIDER_REJECTED, ReasonCode.CONTENT_FILTER, ReasonCode.CONTEXT_TOO_LONG})
"""Unscored requests that are left out of an item's decision (their group with them)."""
DIGITS = 6

Method = Literal["logprobs", "agreement", "jury"]
Prediction = str | float


@dataclass(frozen=True, slots=True)
class ItemRule:
    """How one judge's requests make its item decision."""

    method: Method
    scale: VoteScale
    protocol: Protocol | None = None
    """The judge's protocol (its votes and request groups); None for a jury."""


@dataclass(frozen=True, slots=True)
class ItemDecision:
    """What an item's requests decide (see the module docstring)."""

    prediction: Prediction | None
    """A label (the item's own terms) or a number; None: no decision (:attr:`code` says why)."""
    confidence: float | None
    method: Method
    code: ReasonCode | None = None
    reason: str | None = None
    probs: Mapping[str, float] = field(default_factory=dict)
    """``logprobs``: each value's average probability; ``agreement``: each vote's share."""
    weighted: float | None = None
    """The average probability-weighted score (G-Eval), when every request kept has one."""
    requests: int = 0
    used: int = 0
    left_out: Mapping[str, int] = field(default_factory=dict)
    """Requests left out, by reason code (a request left out with its group's unreadable one:
    ``with_group``)."""
    groups_left_out: int = 0
    """Annotators (request groups) left out."""

    @property
    def decided(self) -> bool:
        return self.code is None

    def to_confidence(self) -> dict[str, Any]:
        """The item outcome line's ``confidence``."""
        record: dict[str, Any] = {"method": self.method, "value": _rounded(self.confidence)}
        if self.probs:
            record["probs"] = {key: round(p, DIGITS) for key, p in self.probs.items()}
        if self.weighted is not None:
            record["weighted"] = round(self.weighted, DIGITS)
        return record


# --- which judges decide items, and how ------------------------------------------------------------


def item_rule(judge: JudgeConfig, protocol: Protocol) -> ItemRule | None:
    """How ``judge``'s requests for one item make its decision (any number of them: a cascade
    decides a judge of one request per item by its outcome line), or None when the judge
    measures no confidence or its verdict is no vote (BWS)."""
    confidence = judge.confidence
    scale = protocol.vote_scale()
    if confidence is None or scale is None:
        return None
    return ItemRule("logprobs" if confidence.method == "logprobs" else "agreement", scale, protocol)


def decides_items(judge: JudgeConfig, protocol: Protocol) -> ItemRule | None:
    """``judge``'s rule when it writes item outcome lines: its rule, and several requests per item
    and temperature (variants x repeats); a judge of one request has its confidence on its
    outcome lines already."""
    rule = item_rule(judge, protocol)
    if rule is None:
        return None
    try:
        variants = len(protocol.variants({"id": ""}))
    except Exception:  # variants that need a real item: take them as several
        variants = 2
    return rule if judge.repeats * variants > 1 else None


def item_judge(judge: str) -> str:
    """The ``judge`` of ``judge``'s item outcome lines."""
    return judge + ITEM_SUFFIX


def decide_item(parts: Sequence[OutcomeRecord], rule: ItemRule) -> ItemDecision:
    """The decision of one item's requests (all of one judge, at one temperature), or of a
    jury's outcome line (``rule.method == "jury"``)."""
    if rule.method == "jury":
        return _jury_decision(parts)
    assert rule.protocol is not None, "a judge's rule carries its protocol"
    kept, left_out, groups_out, blocking = _kept(parts, rule.protocol)
    counted: dict[str, Any] = {"requests": len(parts), "used": len(kept), "left_out": left_out,
                               "groups_left_out": groups_out}
    if blocking:
        codes = Counter(str(p.reason_code) for p in blocking)
        only_recused = set(codes) == {ReasonCode.SELF_PREFERENCE}
        shown = ", ".join(f"{n} {code}" for code, n in sorted(codes.items()))
        return ItemDecision(None, None, rule.method, ReasonCode.SELF_PREFERENCE if only_recused else
                            ReasonCode.ITEM_INCOMPLETE, f"requests ended without an answer to decide with ({shown})",
                            **counted)
    if not kept:
        return ItemDecision(None, None, rule.method, ReasonCode.NONE_READABLE,
                            f"no request left to decide with: all {len(parts)} were left out ({_shown(left_out)})",
                            **counted)
    if rule.method == "logprobs":
        return _by_probability(kept, rule, counted)
    return _by_agreement(kept, rule, counted)


def _kept(parts: Sequence[OutcomeRecord], protocol: Protocol) -> tuple[list[OutcomeRecord], dict[str, int], int,
                                                                       list[OutcomeRecord]]:
    """(requests kept, requests left out by code, groups left out, requests that block)."""
    blocking = [p for p in parts if not p.scored and p.reason_code not in LEFT_OUT_CODES]
    groups: dict[tuple[str, int], list[OutcomeRecord]] = {}
    for part in parts:
        groups.setdefault((protocol.request_group(part.variant), part.repeat), []).append(part)
    kept: list[OutcomeRecord] = []
    left: Counter[str] = Counter()
    groups_out = 0
    for members in groups.values():
        if all(m.scored for m in members):
            kept.extend(members)
            continue
        groups_out += 1
        for member in members:
            left[str(member.reason_code) if not member.scored else "with_group"] += 1
    return kept, dict(sorted(left.items())), groups_out, blocking


def _by_probability(kept: Sequence[OutcomeRecord], rule: ItemRule, counted: Mapping[str, Any]) -> ItemDecision:
    distributions = [(p.confidence or {}).get("probs") for p in kept]
    values = [(p.confidence or {}).get("value") for p in kept]
    if any(v is None for v in values):
        missing = sum(1 for v in values if v is None)
        return ItemDecision(None, None, rule.method, ReasonCode.ITEM_INCOMPLETE,
                            f"{missing} of {len(kept)} requests have no confidence (their log-probs at the verdict "
                            "were not kept)", **counted)
    if any(not isinstance(d, Mapping) for d in distributions):
        return _by_mean_confidence(kept, rule, counted, [float(v) for v in values if v is not None])
    keys = sorted({str(k) for d in distributions if isinstance(d, Mapping) for k in d})
    average = {key: sum(float(d.get(key, 0.0)) for d in distributions if isinstance(d, Mapping)) / len(kept)
               for key in keys}
    weights = [(p.confidence or {}).get("weighted") for p in kept]
    weighted = sum(float(w) for w in weights if w is not None) / len(kept) if all(w is not None for w in weights) \
        else None
    return _top(average, rule, counted, weighted)


def _by_mean_confidence(kept: Sequence[OutcomeRecord], rule: ItemRule, counted: Mapping[str, Any],
                        values: Sequence[float]) -> ItemDecision:
    """A verdict of several values (TTCT's twelve ratings): no one distribution to average, so
    the prediction is the requests' vote (the mean of numbers, the most common label) and the
    confidence the mean of theirs."""
    decided = _by_agreement(kept, ItemRule("agreement", rule.scale, rule.protocol), counted)
    weights = [(p.confidence or {}).get("weighted") for p in kept]
    weighted = statistics.fmean(float(w) for w in weights if w is not None) if all(w is not None for w in weights) \
        else None
    return ItemDecision(decided.prediction, statistics.fmean(values) if decided.decided else None, rule.method,
                        decided.code, decided.reason, {}, weighted, **counted)


def _by_agreement(kept: Sequence[OutcomeRecord], rule: ItemRule, counted: Mapping[str, Any]) -> ItemDecision:
    assert rule.protocol is not None
    votes = [v for p in kept if (v := rule.protocol.vote(p.verdict, p.score)) is not None]
    if not votes:
        return ItemDecision(None, None, rule.method, ReasonCode.NONE_READABLE, "no request gave a vote", **counted)
    if rule.scale.kind == "interval":
        numbers = [float(v) for v in votes if not isinstance(v, str)]
        mean = statistics.fmean(numbers)
        bounds = rule.scale.bounds
        confidence = None
        if bounds is not None and bounds[1] > bounds[0]:
            confidence = max(0.0, 1.0 - statistics.pstdev(numbers) / ((bounds[1] - bounds[0]) / 2))
        return ItemDecision(mean, confidence, rule.method, **counted)
    shares = {_key(v): n / len(votes) for v, n in Counter(votes).items()}
    return _top(shares, rule, counted, None)


def _top(probabilities: Mapping[str, float], rule: ItemRule, counted: Mapping[str, Any],
         weighted: float | None) -> ItemDecision:
    best = max(probabilities.values(), default=0.0)
    leaders = [key for key, p in probabilities.items() if math.isclose(p, best)]
    if len(leaders) != 1:
        return ItemDecision(None, best, rule.method, ReasonCode.ITEM_TIE,
                            f"{' and '.join(leaders) or 'no value'} share the highest "
                            f"{'probability' if rule.method == 'logprobs' else 'share of votes'} ({best:.3g})",
                            dict(probabilities), weighted, **counted)
    prediction: Prediction = leaders[0] if rule.scale.kind == "categorical" else float(leaders[0])
    return ItemDecision(prediction, best, rule.method, None, None, dict(probabilities), weighted, **counted)


def _jury_decision(parts: Sequence[OutcomeRecord]) -> ItemDecision:
    (jury,) = parts
    verdict = jury.verdict or {}
    if not jury.scored:
        return ItemDecision(None, None, "jury", ReasonCode(str(jury.reason_code)) if jury.reason_code in
                            set(ReasonCode) else ReasonCode.ITEM_INCOMPLETE, jury.reason)
    value = verdict.get("value")
    votes = [j.get("vote") for j in (verdict.get("jurors") or {}).values() if j.get("vote") is not None]
    share = sum(1 for v in votes if v == value) / len(votes) if votes else None
    return ItemDecision(value, share, "jury", requests=len(votes), used=len(votes))


def _key(vote: Any) -> str:
    return f"{vote:g}" if isinstance(vote, float) else str(vote)


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, DIGITS)


def _shown(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{n} {code}" for code, n in counts.items())


# --- the item outcome line --------------------------------------------------------------------------


def item_record(judge: JudgeConfig, rule: ItemRule, item_id: str, temperature: float,
                parts: Sequence[OutcomeRecord]) -> OutcomeRecord:
    """The item outcome line of ``judge``'s requests ``parts`` for one item and temperature."""
    decided = decide_item(parts, rule)
    verdict: dict[str, Any] = {
        "prediction": decided.prediction, "method": decided.method, "requests": decided.requests,
        "used": decided.used, "left_out": dict(decided.left_out), "groups_left_out": decided.groups_left_out,
        "parts": {f"{p.variant or '-'}|{p.repeat}": {"vote": _vote(rule, p), "status": p.status,
                                                      "reason_code": p.reason_code, "task_id": p.task_id,
                                                      "confidence": (p.confidence or {}).get("value")}
                  for p in parts},
    }
    score = _score(decided, rule, parts)
    scores = {"weighted": round(decided.weighted, DIGITS)} if decided.weighted is not None else {}
    confidence = judge.confidence
    if confidence is not None and confidence.score == "weighted" and decided.weighted is not None and score is not None:
        scores, score = {"raw": score}, round(decided.weighted, DIGITS)
    scored = decided.decided
    identity = {"item_outcome": judge.name, "item": item_id, "temperature": temperature,
                "rule": [rule.method, rule.protocol.name if rule.protocol else None]}
    return OutcomeRecord(
        task_id=content_hash(identity), item_id=item_id, judge=item_judge(judge.name), protocol=ITEM_PROTOCOL,
        protocol_version=ITEM_VERSION, model=judge.model, temperature=temperature, repeat=0, variant="",
        status="scored" if scored else "unscored", score=score if scored else None,
        scores=scores if scored else {}, verdict=verdict, reason=decided.reason,
        reason_code=None if scored else str(decided.code), cost=round(sum(p.cost for p in parts), 8),
        at=utc_now(), row=parts[0].row if parts else None, confidence=decided.to_confidence(),
    )


def _vote(rule: ItemRule, part: OutcomeRecord) -> Any:
    if not part.scored or rule.protocol is None:
        return None
    return rule.protocol.vote(part.verdict, part.score)


def _score(decided: ItemDecision, rule: ItemRule, parts: Sequence[OutcomeRecord]) -> float | None:
    """A label's score is the score a request with that vote has (``pairwise-annotators``: 1 for
    A); a number is itself."""
    if decided.prediction is None:
        return None
    if isinstance(decided.prediction, float):
        return decided.prediction
    return next((p.score for p in parts if p.scored and _vote(rule, p) == decided.prediction), None)


# --- as the requests finish ----------------------------------------------------------------------------


class ItemCollector:
    """Makes each item's outcome line as soon as its last request's outcome is written.

    Fed every outcome line the run writes (:meth:`offer`); holds the outcomes of the items
    still open, at most :data:`MAX_OPEN` of them (an item whose other requests finished in an
    earlier session, or that is judged again in part, never completes here: the session's end
    writes it from the index, :func:`write_item_outcomes`).
    """

    MAX_OPEN = 10_000

    def __init__(self, config: JobConfig, protocols: Mapping[str, Protocol], *, max_open: int = MAX_OPEN) -> None:
        self._rules = {judge.name: (judge, rule) for judge in config.judges
                       if (rule := decides_items(judge, protocols[judge.name])) is not None}
        self._open: OrderedDict[tuple[str, str, float], dict[str, OutcomeRecord]] = OrderedDict()
        self._max_open = max_open
        """A cascade seeds the items part-way through their requests, and raises this by as many."""

    @property
    def active(self) -> bool:
        return bool(self._rules)

    def offer(self, record: OutcomeRecord) -> OutcomeRecord | None:
        """The item outcome that ``record`` completes, if it does."""
        found = self._rules.get(record.judge)
        if found is None:
            return None
        judge, rule = found
        key = (record.judge, record.item_id, record.temperature)
        parts = self._open.setdefault(key, {})
        parts[record.task_id] = record
        if len(self._open) > self._max_open:
            self._open.popitem(last=False)
        if record.row_tasks is None or len(parts) < record.row_tasks // len(judge.temperatures):
            return None
        del self._open[key]
        return item_record(judge, rule, record.item_id, record.temperature, list(parts.values()))


# --- at a session's end --------------------------------------------------------------------------------


def write_item_outcomes(store: RunStore, config: JobConfig, protocols: Mapping[str, Protocol]) -> int:
    """Write each item outcome whose requests are all done and whose line is missing or older
    than one of them (requests finished in earlier sessions, or judged again); returns how many
    lines were written. Reads the index (a snapshot) and the requests' outcome lines."""
    rules = [(judge, rule) for judge in config.judges
             if (rule := decides_items(judge, protocols[judge.name])) is not None]
    if not rules:
        return 0
    _ = store.index  # flushed: the snapshot sees every outcome written so far
    written = 0
    with RunIndex.open(store.run_dir, catch_up=False) as snapshot, LineReader(store.run_dir) as reader:
        for judge, rule in rules:
            for (item_id, temperature), rows, mine in _items(snapshot, judge.name):
                if mine is not None and all(_offset(mine) > _offset(row) for row in rows):
                    continue
                parts = [reader.outcome(row.outcome_offset, row.outcome_length) for row in rows
                         if row.outcome_offset is not None and row.outcome_length is not None]
                expected = parts[0].row_tasks // len(judge.temperatures) if parts and parts[0].row_tasks else len(parts)
                if len(parts) < expected:
                    continue  # some requests are not done yet
                store.write_outcome(item_record(judge, rule, item_id, temperature, parts))
                written += 1
    return written


def _items(index: RunIndex, judge: str) -> Iterator[tuple[tuple[str, float], list[TaskRow], TaskRow | None]]:
    """Per item and temperature: the judge's finished requests, and its item line if written."""
    mine = item_judge(judge)
    for item_id, group in itertools.groupby(index.finished([judge, mine]), key=lambda row: row.item_id):
        by_temperature: dict[float, tuple[list[TaskRow], list[TaskRow | None]]] = {}
        for row in group:
            rows, item = by_temperature.setdefault(float(row.temperature or 0.0), ([], [None]))
            if row.judge == mine:
                item[0] = row
            else:
                rows.append(row)
        for temperature, (rows, item) in by_temperature.items():
            if rows:
                yield (item_id, temperature), rows, item[0]


def _offset(row: TaskRow) -> int:
    return row.outcome_offset if row.outcome_offset is not None else -1


def item_lines(config: JobConfig, protocols: Mapping[str, Protocol]) -> list[str]:
    """One line per judge about its confidence, for ``plan`` and ``protocols --check``."""
    lines = []
    for judge in config.judges:
        confidence = judge.confidence
        if confidence is None:
            continue
        how = (f"token log-probs at the verdict (top {confidence.top_logprobs})" if confidence.method == "logprobs"
               else "agreement of its requests")
        if confidence.score == "weighted":
            how += "; the score is the probability-weighted one (the judge's own kept as scores.raw)"
        elif confidence.method == "logprobs" and protocols[judge.name].weighs_scores():
            how += "; a probability-weighted score beside the judge's own (scores.weighted)"
        items = f"; an outcome per item as {item_judge(judge.name)}" if decides_items(judge, protocols[judge.name]) \
            else ""
        lines.append(f"{judge_ref(judge.name)}: confidence from {how}{items}")
    return lines


# --- checked before anything is sent --------------------------------------------------------------------


def check_confidence(config: JobConfig, protocols: Mapping[str, Protocol]) -> None:
    """What a judge's ``confidence`` needs, checked before anything is sent: a protocol whose
    parser says where its verdict is (log-probs) or whose verdict is a vote (agreement), a
    weighted score only on a closed integer scale, and several requests per item to agree (the
    model's side, log-probs it gives, is :func:`judge_engine.providers.check_logprobs`).

    Raises:
        ConfigError: naming the judge, the key and what to change.
    """
    for judge in config.judges:
        confidence, protocol = judge.confidence, protocols[judge.name]
        if confidence is None:
            continue
        where = f"judges[{judge.name}].confidence"
        if confidence.method == "logprobs" and not protocol.locates_verdict():
            raise ConfigError(f"{where}: {protocol.name}'s parser does not say where its verdict is, so token "
                              "probabilities cannot be read at it (a custom judge needs an integer field with min "
                              "and max, or a label field); use confidence: agreement with repeats: 3 or more")
        if confidence.score == "weighted" and not protocol.weighs_scores():
            raise ConfigError(f"{where}.score: weighted needs a score made of closed integer scales "
                              f"({protocol.name}'s is not); use score: raw")
        if confidence.method == "agreement" and decides_items(judge, protocol) is None:
            raise ConfigError(f"{where}: agreement needs several requests per item to agree and a verdict that is a "
                              f"vote: set repeats to 3 or more (now {judge.repeats})")
