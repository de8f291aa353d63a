"""Protocol-specific figures for ``judge-engine stats RUN_DIR``, built on each protocol's own
pure helpers: BWS scores per candidate and the BWS position-bias figure; A/B position
consistency for pairwise judging in both orders; for custom judges shown candidates in several
orders, how often a candidate field picks the same candidate in every order; which fields of a
judge's verdicts are labels from a closed set (the panel agreement of :mod:`judge_engine.stats.panel`).

This lives beside the command layer, not in ``stats/``: ``stats`` knows tables, not protocols.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from judge_engine.protocols.bws import bws_scores, position_bias
from judge_engine.protocols.cdat_report import GENERATION
from judge_engine.protocols.custom_fields import (
    BooleanField,
    CandidateField,
    FieldSpec,
    LabelField,
)
from judge_engine.protocols.gemba_mqm_literary import ASPECTS
from judge_engine.protocols.prometheus import PrometheusRelative, position_consistency
from judge_engine.protocols.ttct import DIMENSIONS
from judge_engine.stats.panel import CategoricalField
from judge_engine.stats.runs import Outcome, Run
from judge_engine.stats.sections import Section

if TYPE_CHECKING:
    from judge_engine.rundir.records import Manifest


def dimensions() -> dict[str, tuple[str, ...]]:
    """The sub-scores ``stats`` follows across repeats, by protocol: TTCT's four dimensions
    (CPers reports each over three runs) and literary MQM's aspects."""
    return {"ttct": tuple(DIMENSIONS), "gemba-mqm-literary": ASPECTS}


def generation_protocols() -> frozenset[str]:
    """The protocols whose "judge" is the model under test, its answer scored on its own (CDAT,
    DAT): ``stats`` leaves them out of agreement between judges and across temperatures."""
    return frozenset(GENERATION)


def length_fields() -> dict[str, tuple[str, str | None]]:
    """The item fields ``stats``' verbosity report measures, by protocol: (the judged text, the
    text it is judged against or None). A translation is judged against its source."""
    return {
        "gemba-mqm": ("target", "source"),
        "gemba-mqm-literary": ("target", "source"),
        "prometheus-absolute": ("response", "reference_answer"),
        "ttct": ("text", None),
    }


def protocol_sections(run: Run) -> list[Section]:
    """Extra sections for the protocols present in ``run`` (none when no protocol has any): a
    protocol's section that cannot be computed for this run is there with its ``absent`` reason."""
    sections: list[Section] = []
    if any(o.protocol == "bws" for o in run.outcomes):
        bws = [o for o in run.outcomes if o.protocol == "bws" and o.status == "scored"]
        sections += [_bws_scores(bws), _bws_position_bias(bws)]
    relative = [o for o in run.outcomes if o.protocol == "prometheus-relative"]
    if relative:
        sections.append(_position_consistency([o for o in relative if o.variant in ("AB", "BA")]))
    ordered = [o for o in run.outcomes if o.protocol == "custom" and o.variant.startswith("order")]
    if ordered:
        sections.append(_candidate_consistency(ordered))
    return sections


def _groups(outcomes: list[Outcome]) -> dict[tuple[str, float], list[Outcome]]:
    groups: dict[tuple[str, float], list[Outcome]] = {}
    for o in outcomes:
        groups.setdefault((o.judge, o.temperature), []).append(o)
    return dict(sorted(groups.items()))


def _bws_scores(outcomes: list[Outcome]) -> Section:

    rows: list[dict[str, Any]] = []
    for (judge, temperature), group in _groups(outcomes).items():
        shown: dict[str, int] = {}
        for o in group:
            for candidate in o.scores:
                shown[candidate] = shown.get(candidate, 0) + 1
        scores = bws_scores(o.scores for o in group)
        for candidate, value in sorted(scores.items(), key=lambda kv: -kv[1]):
            rows.append({"judge": judge, "temperature": temperature, "candidate": candidate,
                         "bws": value, "shown": shown[candidate]})
    return Section("bws_scores", "BWS score per candidate: (best - worst) / shown",
                   ["judge", "temperature", "candidate", "bws", "shown"], rows,
                   absent="" if rows else "no scored BWS outcome")


def _bws_position_bias(outcomes: list[Outcome]) -> Section:

    rows: list[dict[str, Any]] = []
    for (judge, temperature), group in _groups(outcomes).items():
        for label, bias in position_bias(o.verdict for o in group if o.verdict).items():
            rows.append({"judge": judge, "temperature": temperature, "position": label, "shown": bias.shown,
                         "best": bias.best, "worst": bias.worst, "expected": bias.expected,
                         "best_ratio": bias.best / bias.expected if bias.expected else float("nan"),
                         "worst_ratio": bias.worst / bias.expected if bias.expected else float("nan")})
    return Section("bws_position_bias", "BWS position bias: picks per displayed position against chance (1.0 = none)",
                   ["judge", "temperature", "position", "shown", "best", "worst", "expected", "best_ratio", "worst_ratio"],
                   rows, absent="" if rows else "no scored BWS outcome")


def _position_consistency(outcomes: list[Outcome]) -> Section:

    rows: list[dict[str, Any]] = []
    left_out: list[str] = []
    for (judge, temperature), group in _groups(outcomes).items():
        winners = [((o.item_id, o.repeat), o.variant, (o.verdict or {}).get("winner") if o.status == "scored" else None)
                   for o in group]
        consistency = position_consistency(winners)
        if consistency is None:
            left_out.append(f"{judge} T={temperature:g}")
            continue
        both = {key for key, variant, winner in winners if winner is not None and variant == "AB"}
        both &= {key for key, variant, winner in winners if winner is not None and variant == "BA"}
        rows.append({"judge": judge, "temperature": temperature, "pairs": len(both),
                     "position_consistency": consistency})
    section = Section("position_consistency", "A/B position consistency: same winner in both orders",
                      ["judge", "temperature", "pairs", "position_consistency"], rows)
    if not outcomes:
        section.absent = "needs both orders of each pair (protocol_options: {both_orders: true})"
    elif not rows:
        section.absent = "no pair has a scored answer in both orders"
    elif left_out:
        section.notes.append(f"not shown: {', '.join(left_out)} (no pair scored in both orders)")
    return section


def _candidate_consistency(outcomes: list[Outcome]) -> Section:
    """Custom judges with ``orders``: per candidate field (stored with its ``<field>_id``), the
    share of items (and repeats) judged in 2+ orders whose pick is the same candidate in all."""
    rows: list[dict[str, Any]] = []
    for (judge, temperature), group in _groups(outcomes).items():
        picks: dict[tuple[str, str, int], set[Any]] = {}
        counts: dict[tuple[str, str, int], int] = {}
        for o in group:
            verdict = o.verdict if o.status == "scored" and isinstance(o.verdict, dict) else {}
            for field in (k[:-3] for k in verdict if k.endswith("_id") and k[:-3] in verdict):
                key = (field, o.item_id, o.repeat)
                picks.setdefault(key, set()).add(verdict[f"{field}_id"])
                counts[key] = counts.get(key, 0) + 1
        for field in sorted({key[0] for key in picks}):
            judged = [key for key in picks if key[0] == field and counts[key] >= 2]
            same = sum(1 for key in judged if len(picks[key]) == 1)
            rows.append({"judge": judge, "temperature": temperature, "field": field, "items": len(judged),
                         "position_consistency": same / len(judged) if judged else float("nan")})
    return Section("candidate_consistency", "Candidate position consistency: the same pick in every order shown",
                   ["judge", "temperature", "field", "items", "position_consistency"], rows,
                   absent="" if rows else "no candidate field judged in 2+ orders")


def categorical_fields(manifest: Manifest | None) -> dict[str, list[CategoricalField]]:
    """The categorical fields each judge of a run writes, from its manifest (``stats``' panel
    agreement): Prometheus relative's ``winner`` (its vote scale's labels), BWS's ``best`` and
    ``worst`` (candidate ids), a custom judge's ``label``, ``boolean`` and ``candidate`` fields.
    Judges writing none are left out; so is a custom judge whose recorded fields do not read."""
    if manifest is None:
        return {}
    out = {entry.name: fields for entry in manifest.judges
           if (fields := _categorical(entry.protocol, entry.protocol_options))}  # fmt: skip
    return out


def _categorical(protocol: str, options: dict[str, Any]) -> list[CategoricalField]:
    if protocol == "prometheus-relative":
        return [CategoricalField("winner", "winner", tuple(sorted(PrometheusRelative().vote_scale().values)))]
    if protocol == "bws":
        return [CategoricalField("best", "best_id"), CategoricalField("worst", "worst_id")]
    if protocol != "custom":
        return []
    from pydantic import TypeAdapter, ValidationError

    try:
        specs = TypeAdapter(dict[str, FieldSpec]).validate_python(options.get("fields") or {})
    except ValidationError:
        return []
    fields = []
    for name, spec in specs.items():
        if isinstance(spec, LabelField):
            fields.append(CategoricalField(name, name, tuple(sorted(spec.choices))))
        elif isinstance(spec, BooleanField):
            fields.append(CategoricalField(name, name, ("false", "true")))
        elif isinstance(spec, CandidateField):
            fields.append(CategoricalField(name, f"{name}_id"))
    return fields
