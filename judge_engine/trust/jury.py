"""Juries: panels of a config's judges whose verdicts on each item are aggregated into one.

```yaml
juries:
  - name: panel
    judges: [gpt, claude, gemini]     # judges of this config, one protocol
    aggregate: majority               # majority | mean | median | weighted
    weights: {gpt: 2, claude: 1, gemini: 1}   # weighted only
    tie: first                        # first | abstain | mean | <a verdict>; required when the votes can be even
    quorum: 2                         # default: every juror not kept off the item
```

**When.** A jury's outcome for an item (and variant, temperature and repeat: the coordinates
its jurors share) is written once every juror has an outcome there, at the end of each session
(:func:`write_jury_outcomes`). It is a normal outcome line (``judge: <jury name>``, ``protocol:
jury``), so it survives a kill and a resume like any other: a later session writes the ones
still missing, and writes a jury's line again when a juror's outcome is newer than it (``resume
--retry``). Jurors' own outcome lines are untouched: the jury's is an outcome of its own.

**What.** Each juror's vote is its verdict as the protocol defines it
(:meth:`~judge_engine.protocols.base.Protocol.vote`): a label on a categorical scale, else the
score. ``majority`` takes the vote most jurors gave; ``weighted`` counts each juror's weight (a
weighted vote for labels, a weighted mean for numbers); ``mean`` and ``median`` need numbers.
A tie (several votes sharing the top count or weight, or the two middle values of an even
median) is settled by ``tie``: there is no silent tie-break by list order, which is what
``first`` asks for explicitly. The outcome's verdict holds the jury's value, every juror's vote,
score and status, how many voted, and their agreement (the share of juror pairs that voted
alike; for numbers also the spread). Too few votes (``quorum``) is ``jury_incomplete``, an
abstention ``jury_tie``, each with every juror's vote kept.

**Missing votes.** A juror kept off an item (``self_preference: forbid``) lowers the default
quorum by one: the others decide. A juror unscored for any other reason (unreadable, a
transport failure, a protocol error) gives no vote and does not lower it: with the default
quorum the jury is ``jury_incomplete``; with a ``quorum`` below the panel's size the others
decide. Either way an odd panel can vote as an even one on that item, and its ties are settled
by ``tie`` like any other, so the config requires a ``tie`` rule for such a panel
(:class:`~judge_engine.inputs.config.JuryConfig`), as for an even one: a default abstention would
quietly leave many of those items unscored (two jurors who disagree always tie).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from judge_engine.errors import ConfigError, ReasonCode
from judge_engine.inputs.config import TIE_RULES, JobConfig, JuryConfig
from judge_engine.protocols import Protocol, VoteScale
from judge_engine.rundir.index import RunIndex, TaskRow
from judge_engine.rundir.records import Manifest, OutcomeRecord
from judge_engine.rundir.store import LineReader, RunStore, utc_now
from judge_engine.util.jsonio import content_hash

JURY_PROTOCOL = "jury"
"""The ``protocol`` of a jury's outcome lines."""
JURY_VERSION = "1"

Vote = str | float


@dataclass(frozen=True, slots=True)
class Juror:
    """One juror's outcome at one coordinate, as the jury reads it."""

    name: str
    model: str
    task_id: str
    status: str
    reason_code: str | None
    score: float | None
    vote: Vote | None
    """None when the juror did not score (or its verdict holds no vote)."""


@dataclass(frozen=True, slots=True)
class JuryVerdict:
    """What a jury decided at one coordinate."""

    value: Vote | None
    """The jury's vote; None when it gives no verdict (``code`` says why)."""
    score: float | None
    code: ReasonCode | None = None
    reason: str | None = None
    tie: str | None = None
    """The tie rule applied, when the votes tied."""
    voted: int = 0
    agreement: float | None = None
    """The share of juror pairs that voted alike (None with fewer than two votes)."""
    spread: float | None = None
    """Highest minus lowest vote, for numbers."""


# --- checking a config's juries ----------------------------------------------------------------


def check_juries(config: JobConfig, protocols: Mapping[str, Protocol]) -> None:
    """What the config alone cannot check: the jurors' verdicts are votes on one scale that fits
    the aggregate and the tie rule.

    Raises:
        ConfigError: naming the jury, the key and the jurors.
    """
    for jury in config.juries:
        where = f"juries[{jury.name}]"
        scales = {name: protocols[name].vote_scale() for name in jury.judges}
        if any(scale is None for scale in scales.values()):
            raise ConfigError(f"{where}.judges: {protocols[jury.judges[0]].name} verdicts give no vote per item "
                              "(a custom judge needs a score: option; BWS scores every candidate): a jury needs a "
                              "score or a label")
        kinds = {name: scale.kind for name, scale in scales.items() if scale is not None}
        if len(set(kinds.values())) > 1:
            raise ConfigError(f"{where}.judges: the jurors vote on different scales ("
                              + ", ".join(f"{name} {kind}" for name, kind in kinds.items()) + ")")
        _check_same_scale(where, jury, [s for s in scales.values() if s is not None])


def _check_same_scale(where: str, jury: JuryConfig, scales: list[VoteScale]) -> None:
    kind = scales[0].kind
    values = {s.values for s in scales if s.values}
    bounds = {s.bounds for s in scales if s.bounds is not None}
    if len(values) > 1 or len(bounds) > 1:
        shown = " vs ".join(", ".join(v) for v in values) if len(values) > 1 else \
            " vs ".join(f"{b[0]:g}..{b[1]:g}" for b in sorted(bounds))
        raise ConfigError(f"{where}.judges: the jurors vote on different scales ({shown})")
    if kind == "categorical" and jury.aggregate in ("mean", "median"):
        raise ConfigError(f"{where}.aggregate: {jury.aggregate} needs numbers, and these jurors vote labels; "
                          "use majority or weighted (or give the labels a score_map)")
    if kind == "interval" and jury.aggregate == "majority":
        raise ConfigError(f"{where}.aggregate: a majority of scores on a continuous scale rarely exists; "
                          "use mean, median or weighted")
    tie = jury.tie
    if tie is None or tie in ("first", "abstain"):
        return
    if tie == "mean" and kind == "categorical":
        raise ConfigError(f"{where}.tie: mean needs numbers, and these jurors vote labels")
    if kind == "categorical" and values and str(tie) not in next(iter(values)):
        raise ConfigError(f"{where}.tie: {tie!r} is not a label these jurors vote ({', '.join(next(iter(values)))}) "
                          f"nor one of {', '.join(TIE_RULES)}")
    if kind != "categorical" and tie != "mean" and not isinstance(tie, int | float):
        raise ConfigError(f"{where}.tie: {tie!r} is neither a number nor one of {', '.join(TIE_RULES)} (these "
                          "jurors vote numbers; a label with a score_map votes its number)")


def jury_lines(config: JobConfig, protocols: Mapping[str, Protocol]) -> list[str]:
    """One line per jury, for ``plan`` and ``protocols --check``."""
    lines = []
    for jury in config.juries:
        scale = protocols[jury.judges[0]].vote_scale()
        how = jury.aggregate + (f" (weights {', '.join(f'{j} {w:g}' for j, w in jury.weights.items())})"
                                if jury.weights else "")
        tie = jury.tie if jury.tie is not None else "abstain (an odd panel, every juror voting)" \
            if len(jury.judges) % 2 else "none"
        lines.append(f"juries[{jury.name}]: {how} of {', '.join(jury.judges)} on {_scale_words(scale)}; "
                     f"tie: {tie}; quorum: {jury.quorum or 'every juror not kept off the item'}; an outcome per item "
                     "once all its jurors have one")
    return lines


def _scale_words(scale: VoteScale | None) -> str:
    if scale is None:
        return "no scale"
    return f"{'an' if scale.kind[0] in 'aeiou' else 'a'} {scale.kind} scale"


# --- aggregating -------------------------------------------------------------------------------


def aggregate(jury: JuryConfig, scale: VoteScale, jurors: Sequence[Juror]) -> JuryVerdict:
    """The jury's verdict from its jurors' outcomes at one coordinate (see the module docstring)."""
    votes = [(j.name, j.vote) for j in jurors if j.status == "scored" and j.vote is not None]
    recused = sum(1 for j in jurors if j.reason_code == ReasonCode.SELF_PREFERENCE)
    needed = max(1, jury.quorum if jury.quorum is not None else len(jurors) - recused)
    agreement, spread = _agreement([v for _, v in votes], numeric=scale.kind != "categorical")
    if len(votes) < needed:
        missing = ", ".join(f"{j.name} {j.reason_code or 'no vote'}" for j in jurors if j.vote is None)
        return JuryVerdict(None, None, ReasonCode.JURY_INCOMPLETE,
                           f"{len(votes)} of {len(jurors)} jurors scored, the jury needs {needed} ({missing})",
                           voted=len(votes), agreement=agreement, spread=spread)
    value, tie = _decide(jury, scale, votes)
    if value is None:
        return JuryVerdict(None, None, ReasonCode.JURY_TIE, f"the votes tied ({_tally(votes)}) and the jury abstains",
                           tie=tie, voted=len(votes), agreement=agreement, spread=spread)
    if scale.kind == "categorical":
        score = next((j.score for j in jurors if j.vote == value and j.score is not None), None)
    else:
        score = float(value)
    return JuryVerdict(value, score, tie=tie, voted=len(votes), agreement=agreement, spread=spread)


def _decide(jury: JuryConfig, scale: VoteScale, votes: list[tuple[str, Vote]]) -> tuple[Vote | None, str | None]:
    """``(value, tie rule applied)``; value None when the jury abstains."""
    numbers = [float(v) for _, v in votes] if scale.kind != "categorical" else []
    if jury.aggregate == "mean":
        return sum(numbers) / len(numbers), None
    if jury.aggregate == "weighted" and numbers:
        weights = [jury.weights[name] for name, _ in votes]
        return sum(w * v for w, v in zip(weights, numbers, strict=True)) / sum(weights), None
    if jury.aggregate == "median":
        ordered = sorted(numbers)
        low, high = ordered[(len(ordered) - 1) // 2], ordered[len(ordered) // 2]
        tied: list[Vote] = [low] if low == high else [low, high]
    else:  # majority, or a weighted vote of labels
        totals: dict[Vote, float] = {}
        for name, vote in votes:
            totals[vote] = totals.get(vote, 0.0) + (jury.weights.get(name, 1.0) if jury.aggregate == "weighted" else 1.0)
        top = max(totals.values())
        tied = [vote for vote, total in totals.items() if math.isclose(total, top)]
    if len(tied) == 1:
        return tied[0], None
    return _break_tie(jury, votes, tied)


def _break_tie(jury: JuryConfig, votes: list[tuple[str, Vote]], tied: list[Vote]) -> tuple[Vote | None, str]:
    rule = jury.tie if jury.tie is not None else "abstain"
    if rule == "abstain":
        return None, "abstain"
    if rule == "first":
        return next(vote for _, vote in votes if vote in tied), "first"
    if rule == "mean":
        return sum(float(v) for v in tied) / len(tied), "mean"
    return rule, str(rule)


def _agreement(votes: Sequence[Vote], *, numeric: bool) -> tuple[float | None, float | None]:
    """(share of voter pairs that agree, spread of the numbers)."""
    spread = (max(map(float, votes)) - min(map(float, votes))) if numeric and votes else None
    if len(votes) < 2:
        return None, spread
    pairs = list(itertools.combinations(votes, 2))
    return sum(a == b for a, b in pairs) / len(pairs), spread


def _tally(votes: Sequence[tuple[str, Vote]]) -> str:
    return ", ".join(f"{name} {_shown(vote)}" for name, vote in votes)


def _shown(vote: Vote) -> str:
    return f"{vote:g}" if isinstance(vote, float) else str(vote)


def jury_record(jury: JuryConfig, scale: VoteScale, coordinates: tuple[str, str, float, int],
                jurors: Sequence[Juror]) -> OutcomeRecord:
    """The jury's outcome line at ``(item id, variant, temperature, repeat)``."""
    item_id, variant, temperature, repeat = coordinates
    decided = aggregate(jury, scale, jurors)
    verdict: dict[str, Any] = {
        "aggregate": jury.aggregate, "scale": scale.kind, "value": decided.value, "tie": decided.tie,
        "voted": decided.voted, "agreement": decided.agreement,
        "jurors": {j.name: {"vote": j.vote, "score": j.score, "status": j.status, "reason_code": j.reason_code,
                            "task_id": j.task_id} for j in jurors},
    }
    if decided.spread is not None:
        verdict["spread"] = decided.spread
    if jury.weights:
        verdict["weights"] = dict(jury.weights)
    scored = decided.code is None
    identity = {"jury": jury.model_dump(mode="json"), "item": item_id, "variant": variant,
                "temperature": temperature, "repeat": repeat}
    return OutcomeRecord(
        task_id=content_hash(identity), item_id=item_id, judge=jury.name, protocol=JURY_PROTOCOL,
        protocol_version=JURY_VERSION, model="+".join(j.model for j in jurors), temperature=temperature,
        repeat=repeat, variant=variant, status="scored" if scored else "unscored", score=decided.score,
        scores={j.name: j.score for j in jurors if j.status == "scored" and j.score is not None},
        verdict=verdict, reason=decided.reason, reason_code=None if scored else str(decided.code), at=utc_now(),
    )


# --- writing a run's jury outcomes -------------------------------------------------------------


def write_jury_outcomes(store: RunStore, config: JobConfig, protocols: Mapping[str, Protocol]) -> int:
    """Write each jury's outcome wherever all its jurors have one and the jury's line is missing
    or older than a juror's; returns how many lines were written. Reads the run's index (a
    snapshot, so the lines written here do not disturb the reading) and, for labels, the
    jurors' outcome lines."""
    if not config.juries:
        return 0
    _ = store.index  # flushed: the snapshot sees every juror outcome written so far
    models = {judge.name: judge.model for judge in config.judges}
    written = 0
    with RunIndex.open(store.run_dir, catch_up=False) as snapshot, LineReader(store.run_dir) as reader:
        for jury in config.juries:
            scale = protocols[jury.judges[0]].vote_scale()
            assert scale is not None, "check_juries refuses a jury without votes"
            for coordinates, rows in _coordinates(snapshot, [*jury.judges, jury.name]):
                if any(name not in rows for name in jury.judges):
                    continue  # a juror has not judged it (yet, or at all: another temperature)
                mine = rows.get(jury.name)
                jurors = [rows[name] for name in jury.judges]
                if mine is not None and all(_offset(mine) > _offset(row) for row in jurors):
                    continue
                votes = [_juror(row, protocols[row.judge], scale, models[row.judge], reader) for row in jurors]
                store.write_outcome(jury_record(jury, scale, coordinates, votes))
                written += 1
    return written


def settle_juries(run_dir: Path, config: JobConfig, protocols: Mapping[str, Protocol], manifest: Manifest) -> Manifest:
    """A finished run whose config has juries: write the jury outcomes it lacks (a jury added to
    the config after the run ended) and record the counts. Nothing else is touched."""
    store = RunStore.open(run_dir)
    try:
        if write_jury_outcomes(store, config, protocols):
            manifest.counts, manifest.updated_at = store.counts(), utc_now()
            store.write_manifest(manifest)
    finally:
        store.close()
    return manifest


def _coordinates(index: RunIndex, judges: Sequence[str]) -> Iterator[tuple[tuple[str, str, float, int],
                                                                            dict[str, TaskRow]]]:
    """The judges' finished tasks grouped by coordinate, one coordinate at a time."""
    def key(row: TaskRow) -> tuple[str, str, float, int]:
        return row.item_id, row.variant or "", float(row.temperature or 0.0), int(row.repeat or 0)

    for coordinates, group in itertools.groupby(index.finished(judges), key=key):
        yield coordinates, {row.judge: row for row in group}


def _offset(row: TaskRow) -> int:
    return row.outcome_offset if row.outcome_offset is not None else -1


def _juror(row: TaskRow, protocol: Protocol, scale: VoteScale, model: str, reader: LineReader) -> Juror:
    vote: Vote | None = None
    if row.status == "scored":
        if scale.kind == "categorical" and row.outcome_offset is not None and row.outcome_length is not None:
            record = reader.outcome(row.outcome_offset, row.outcome_length)
            vote = protocol.vote(record.verdict, record.score)
        else:
            vote = row.score
    return Juror(row.judge, model, row.task_id, str(row.status), row.reason_code, row.score, vote)
