"""``judge-engine show``: transcripts and outcomes, from the run directory alone.

``show RUN --item ID`` prints every task of one item in full: the messages sent, each answer or
error, the verdict and score. Without ``--item``, the filters pick tasks (``--judge``,
``--status``, ``--reason``, ``--temperature``, ``--repeat``, ``--min-score``, ``--max-score``),
``--sort`` orders them and ``--limit`` (default 10) bounds them; ``--brief`` prints one line per
task instead of its transcript. The run's index (``index.sqlite``) finds the lines, so a run of a
million tasks answers as fast as a small one.

What comes before the item's own turn (a system prompt, few-shot turns: the same in every
request of a judge) is folded into one line with its count and tokens; ``--full`` prints it.
A verdict is printed field by field, costs as dollars (:func:`judge_engine.util.money.dollars`).

Run text (dataset fields, answers, errors) is always printed literally, never read as markup.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from judge_engine.cli import EXIT_OK

if TYPE_CHECKING:
    from judge_engine.cli.display import Terminal as Console
    from judge_engine.rundir.index import TaskRow
    from judge_engine.rundir.records import OutcomeRecord, TranscriptRecord
    from judge_engine.rundir.store import LineReader

DEFAULT_LIMIT = 10


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    show = commands.add_parser(
        "show", help="print transcripts and outcomes: messages, raw answer, verdict, score, attempts",
        description="Without --item: the tasks the filters pick (first --limit of them, in --sort order).")
    show.add_argument("run_dir", type=Path, help="the run directory (RUNS/<run id>, or RUNS/latest)")
    show.add_argument("--item", help="every task of this item id")
    show.add_argument("--judge", help="only this judge")
    show.add_argument("--status", choices=["scored", "unscored", "undone"], help="only tasks of this status")
    show.add_argument("--reason", metavar="CODE", help="only unscored tasks with this reason code")
    show.add_argument("--temperature", type=float, help="only tasks at this temperature")
    show.add_argument("--repeat", type=int, help="only this repeat (0, 1...)")
    show.add_argument("--min-score", type=float, help="only scores at least this")
    show.add_argument("--max-score", type=float, help="only scores at most this")
    show.add_argument("--sort", choices=["item", "score", "score-desc", "judge"], default="item",
                      help="order of the tasks (score: lowest first)")
    show.add_argument("--limit", type=int, default=None, help=f"at most N tasks (default {DEFAULT_LIMIT} without --item)")
    show.add_argument("--brief", action="store_true", help="one line per task: no prompt, no transcript")
    show.add_argument("--full", action="store_true",
                      help="also the messages before the item's turn (system prompt, few-shot turns), folded otherwise")
    show.set_defaults(handler=show_command)


def show_command(args: argparse.Namespace) -> int:
    from judge_engine.cli.display import make_console, say
    from judge_engine.rundir.index import Query
    from judge_engine.rundir.records import DEMO_NOTE
    from judge_engine.rundir.store import LineReader, open_index, read_manifest

    console = make_console()
    manifest = read_manifest(args.run_dir)
    if manifest.demo:
        say(console, f"[bold yellow]{DEMO_NOTE}[/bold yellow]")
    filtered = any(getattr(args, f) is not None for f in
                   ("judge", "status", "reason", "temperature", "repeat", "min_score", "max_score"))
    limit = args.limit if args.limit is not None else (None if args.item else DEFAULT_LIMIT)
    query = Query(judge=args.judge, status=args.status, reason_code=args.reason, temperature=args.temperature,
                  repeat=args.repeat, item_id=args.item, min_score=args.min_score, max_score=args.max_score,
                  sort=args.sort, limit=limit)
    with open_index(args.run_dir) as index, LineReader(args.run_dir) as reader:
        known = sorted({j.name for j in manifest.judges} | {judge for judge, _status, _code in index.counts()})
        if args.judge is not None and args.judge not in known:
            from judge_engine.errors import ConfigError

            raise ConfigError(f"--judge {args.judge!r}: this run has no such judge (it has: {', '.join(known)})")
        if args.item is None and not filtered and not args.brief and args.limit is None:
            first = index.tasks(Query(limit=1))
            if not first:
                from judge_engine.errors import RunDirError

                raise RunDirError(f"{args.run_dir}: nothing recorded yet")
            query = Query(item_id=first[0].item_id, sort=args.sort)  # the README's first look: one item
        rows = index.tasks(query)
        if not rows and args.item is not None:
            from judge_engine.errors import RunDirError

            raise RunDirError(f"{args.run_dir}: no outcome or attempt for item {args.item!r}")
        if not rows:
            say(console, "[yellow]no task matches[/yellow]")
            return EXIT_OK
        if args.brief:
            _print_brief(console, rows, reader)
        else:
            attempts = index.attempt_offsets([r.task_id for r in rows])
            printed = Printed(full=args.full)
            for row in rows:
                records = [reader.transcript(offset, length) for offset, length in attempts.get(row.task_id, [])]
                if row.outcome_offset is None or row.outcome_length is None:
                    _print_undone(console, records, args.run_dir, printed)
                else:
                    _print_task(console, reader.outcome(row.outcome_offset, row.outcome_length), records, printed,
                                guarantee=_guarantee(manifest.cascade))
        if limit is not None and len(rows) == limit and query.limit is not None:
            total = index.count(dataclasses.replace(query, limit=None))
            if total > len(rows):
                say(console, f"[dim]first {len(rows):,} of {total:,} tasks shown (--limit N for more)[/dim]")
    return EXIT_OK


BRIEF_REASON = 160
"""Characters of the reason ``--brief`` shows (``show --item`` shows it whole)."""


def _print_brief(console: Console, rows: Sequence[TaskRow], reader: LineReader) -> None:
    from judge_engine.cli.display import Column, print_table

    table = []
    for row in rows:
        outcome = None
        if row.outcome_offset is not None and row.outcome_length is not None:
            outcome = reader.outcome(row.outcome_offset, row.outcome_length)
        status = row.status or "undone"
        why = f"{row.reason_code}: {outcome.reason}" if outcome is not None and not outcome.scored else ""
        score = "" if row.score is None else f"{row.score:g}"
        table.append([row.item_id, row.judge, f"{row.temperature:g}" if row.temperature is not None else "",
                      str(row.repeat if row.repeat is not None else ""), row.variant or "", status, score,
                      why if len(why) <= BRIEF_REASON else why[:BRIEF_REASON - 1] + "…"])
    # The task's coordinates and figures are never broken; the reason wraps in the room left.
    columns = [Column("item", key=True), Column("judge", key=True), Column("T"), Column("repeat"),
               Column("variant"), Column("status"), Column("score"),
               Column("why unscored", wrap=True, fold_long_words=True)]
    print_table("tasks", columns, table, console=console)


@dataclasses.dataclass
class Printed:
    """What this ``show`` has printed so far: a message it already printed whole (the same
    prompt at another temperature or repeat) is one line the second time, unless ``full``."""

    full: bool = False
    messages: dict[tuple[str, str], str] = dataclasses.field(default_factory=dict)
    """(role, content) of each message printed whole -> the task it was printed under."""


def _guarantee(section: Mapping[str, Any] | None) -> str | None:
    """The guarantee a cascaded run's cascade runs under, as said (None: no cascade)."""
    from judge_engine.util.cascade_words import guarantee_name

    return guarantee_name(section.get("guarantee_kind")) if section else None


def _print_undone(console: Console, attempts: Sequence[TranscriptRecord], run_dir: Path, printed: Printed) -> None:
    from judge_engine.cli.display import command, rule, say
    from judge_engine.cli.run import shell_word

    if not attempts:
        return
    first = attempts[0]
    rule(console, f"item {first.item_id} · judge {first.judge} · task {first.task_id[:15]}")
    _print_attempts(console, attempts, printed, f"{first.judge} task {first.task_id[:15]}")
    say(console, "[yellow]no outcome[/yellow]: the run stopped before this task finished; resume finishes it:")
    command(console, f"judge-engine resume {shell_word(run_dir)}")


def _print_task(console: Console, result: OutcomeRecord, attempts: Sequence[TranscriptRecord],
                printed: Printed, *, guarantee: str | None = None) -> None:
    from judge_engine.cli.display import escape, packed, panel, rule, say
    from judge_engine.util.money import dollars

    head = (f"item {result.item_id} · judge {result.judge} ({result.model}, {result.protocol}) · "
            f"T={result.temperature} · repeat {result.repeat}" + (f" · {result.variant}" if result.variant else ""))
    rule(console, head)
    where = f"{result.judge} T={result.temperature} repeat {result.repeat}" + (
        f" {result.variant}" if result.variant else "")
    _print_attempts(console, attempts, printed, where)
    if result.scored:
        panel(console, "\n".join(verdict_lines(result.verdict)), title="verdict", style="cyan")
        score = "-" if result.score is None else number(result.score)
        say(console, f"score: [bold]{escape(score)}[/bold]")
        parts = [f"{name} {number(value)}" for name, value in result.scores.items()
                 if not (name == "score" and value == result.score)]  # a custom judge's score field is the score
        if parts:
            say(console, escape(packed([f"scores: {parts[0]}", *parts[1:]], console.width - 1)))
    else:
        code = f" ({result.reason_code})" if result.reason_code else ""
        say(console, f"[red]unscored[/red]{code}: {escape(result.reason or '')}")
    if result.confidence is not None:
        say(console, escape(confidence_line(result.confidence)))
    if result.protocol == "cascade":  # which stage answered, and every stage asked before it
        from judge_engine.trust.cascade.outcome import describe

        say(console, escape(describe(result, guarantee)))
    unpriced = sum(1 for a in attempts if getattr(a, "unpriced", False))  # cost 0 there is no price
    cost = dollars(result.cost) + (f" + {unpriced} unpriced call{'s' if unpriced != 1 else ''}" if unpriced else "")
    estimated = [float(getattr(a, "cost", 0.0) or 0.0) for a in attempts if getattr(a, "estimated", False)]
    if estimated:
        cost += (f" (~{dollars(sum(estimated))} of it estimated: {len(estimated)} "
                 f"answer{'s' if len(estimated) != 1 else ''} billed but not read)")
    say(console, f"attempts: {result.attempts} · re-asks: {result.reasks} · cache hits: {result.cache_hits} · "
                 f"cost {cost}")


def confidence_line(confidence: Mapping[str, Any]) -> str:
    """``confidence: 0.83 (logprobs) · A 0.83, B 0.12 · weighted 3.9``."""
    from judge_engine.util.cascade_words import threshold_text

    value = confidence.get("value")
    # A cascade's confidence is compared with a threshold: written as thresholds are (4 decimals).
    shown = "unread" if value is None else threshold_text(value) if confidence.get("method") == "cascade" else \
        f"{value:.3g}"
    line = f"confidence: {shown} ({confidence.get('method')})"
    if probs := confidence.get("probs"):
        line += " · " + ", ".join(f"{key} {p:.3g}" for key, p in sorted(probs.items(), key=lambda kv: -kv[1]))
    if confidence.get("weighted") is not None:
        line += f" · weighted {confidence['weighted']:.4g}"
    if confidence.get("problem"):
        line += f" · {confidence['problem']}"
    return line


def _print_attempts(console: Console, attempts: Sequence[TranscriptRecord], printed: Printed, where: str) -> None:
    """Messages as sent (each once; those before the item's turn, and those already printed for
    another task, folded unless ``printed.full``), then every answer or error, and protocol
    errors. ``where``: the task, as a later fold names it."""
    from judge_engine.cli.display import escape, panel, say
    from judge_engine.rundir.records import AttemptRecord
    from judge_engine.util.money import dollars

    shown_messages = 0
    for attempt in attempts:
        if not isinstance(attempt, AttemptRecord):
            panel(console, attempt.traceback or attempt.error, title=f"protocol error in {attempt.stage}", style="red")
            continue
        messages = list(attempt.request.get("messages", []))
        if shown_messages == 0 and not printed.full and (lead := leading_messages(messages)):
            say(console, f"[dim]{escape(folded_line(messages, lead, attempt.usage))}[/dim]")
            shown_messages = lead
        for message in messages[shown_messages:]:
            role, content = str(message.get("role")), str(message.get("content") or "")
            before = printed.messages.get((role, content))
            if before is not None and not printed.full:
                say(console, f"[dim]{escape(f'sent: {role}, the same message as above ({before})')}[/dim]")
                continue
            panel(console, content, title=f"sent: {role}")
            printed.messages[(role, content)] = where
        shown_messages = len(messages)
        label = f"attempt {attempt.attempt} (re-ask {attempt.reask})" + (" [cache hit]" if attempt.cache_hit else "")
        if attempt.batch:  # a batch API result: which batch, which request in it
            label += f" [batch {attempt.batch.get('id')}, {attempt.batch.get('custom_id')}]"
        label = escape(label)  # titles are markup: "[cache hit]" would vanish as an unknown style
        if attempt.response is not None:
            finish = attempt.response.get("finish_reason")
            panel(console, str(attempt.response.get("content") or ""), title=f"answer · {label} · finish={finish}",
                  style="green")
        else:
            error = attempt.error or {}
            booked = (f"\n(billed but not read: booked at ~{dollars(attempt.cost or 0.0)}, an estimate)"
                      if attempt.estimated else "")
            panel(console, f"{error.get('kind')}: {error.get('message')}{booked}", title=f"error · {label}", style="red")


def leading_messages(messages: Sequence[Mapping[str, Any]]) -> int:
    """How many messages come before the item's own turn (the last user message): the system
    prompt and few-shot turns a protocol sends first. 0 when there is no such turn."""
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    return users[-1] if users else 0


def folded_line(messages: Sequence[Mapping[str, Any]], lead: int, usage: Mapping[str, int] | None) -> str:
    """The one line that stands for ``messages[:lead]``: what they are, how many, and their share
    of the prompt's tokens (the attempt's reported prompt tokens split by size, as a lane sizes a
    prompt without a tokenizer; the size alone when no usage was reported)."""
    from judge_engine.lanes.tokens import rough_prompt_tokens

    first = messages[:lead]
    what = ["system prompt"] if first[0].get("role") == "system" else []
    turns = sum(1 for m in first if m.get("role") == "assistant")
    if turns:
        what.append(f"{turns} few-shot turn{'s' if turns != 1 else ''}")
    named = " and ".join(what) or "earlier turns"
    rough = rough_prompt_tokens(first)
    prompt = int((usage or {}).get("prompt_tokens") or 0)
    if prompt:
        share = round(prompt * rough / max(1, rough_prompt_tokens(messages)))
        tokens = f"~{share:,} of the prompt's {prompt:,} tokens"
    else:
        tokens = f"~{rough:,} tokens"
    plural = "s" if lead != 1 else ""
    return f"sent first, folded: {named} ({lead} message{plural}, {tokens}); --full shows them"


def number(value: float) -> str:
    """A score or figure as ``show`` prints it: up to four significant digits (``-12.5``, ``0.1667``)."""
    return f"{value:.4g}"


def verdict_lines(verdict: Any, indent: str = "") -> list[str]:
    """A verdict field by field, one ``name: value`` line each, in the verdict's own order: a
    list of records (MQM errors, quoted spans) as a count and each record's fields below it, a
    mapping of records (a jury's jurors) one line per key. Values are run text, printed as is."""
    if not isinstance(verdict, Mapping):
        return [indent + _value(verdict)]
    lines = []
    for key, value in verdict.items():
        if isinstance(value, Mapping) and value and all(isinstance(v, Mapping) for v in value.values()):
            lines += [f"{indent}{key}:", *(f"{indent}  {name}: {_value(sub)}" for name, sub in value.items())]
        elif isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
            lines.append(f"{indent}{key}: {len(value)}")
            for record in value:
                fields = verdict_lines(record, indent + "    ")
                lines += [f"{indent}  - {fields[0].lstrip()}", *fields[1:]]
        else:
            lines.append(f"{indent}{key}: {_value(value)}")
    return lines


def _value(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return number(value)
    if isinstance(value, str):
        return value if value else '""'
    if isinstance(value, Mapping):
        return " · ".join(f"{k} {_value(v)}" for k, v in value.items() if v is not None)
    if isinstance(value, list | tuple):
        return ", ".join(_value(v) for v in value) if value else "none"
    return str(value)
