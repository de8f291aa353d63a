"""The run directory's formats, defined once: the manifest, the outcome line, the attempt line.

Every writer builds these records here and every reader reads through here, so a field has one
name, one type and one meaning wherever it is used (the engine, ``show``, ``stats``, and later
export, rescore and the viewer). Each persisted document carries its format version, and
:meth:`OutcomeRecord.from_dict`, :func:`transcript_record` and :meth:`Manifest.from_dict` accept
every version written before:

============  =======  ==================================================================
document      version  what changed
============  =======  ==================================================================
outcome line  1        no ``v`` key; lines before reason codes lack ``reason_code``
              2        ``"v": 2``; otherwise as version 1; later ``row`` and ``row_tasks``
                       (the item's position, its task count) were added, None when absent
              3        ``"v": 3``: ``confidence`` (how sure the judge is of the verdict, and
                       how that was obtained), written only when measured; None when absent
attempt line  1        no ``v`` key; the whole request repeated in every line
              2        ``"v": 2``; otherwise as version 1 (still written by :meth:`AttemptRecord.to_dict`,
                       the expanded form, e.g. for export)
              3        ``"v": 3``: compact. The request is references into the run's
                       ``blocks.jsonl`` (:mod:`judge_engine.rundir.blocks`) with the item's text inline;
                       ``usage`` once (not also inside ``response``); ``response.cost``
                       dropped (the line's ``cost`` is what the attempt cost); empty
                       ``headers`` and ``model`` left out; later ``batch`` (the batch
                       id and custom id of a batch API result), absent online;
                       ``error.code`` (a failure's reason code, when it has one); and
                       ``response.logprobs`` (the tokens at the verdict: ``[offset, token,
                       logprob, [[token, logprob], ...]]``), only when log-probs were asked;
                       later ``estimated`` (a failed attempt the provider may have billed:
                       its ``usage`` and ``cost`` are estimates), absent otherwise
batch line    1        ``"v": 1``: ``batches.jsonl``, a batch-mode judge's chunks and the
                       tasks they carry to the next round (:class:`BatchEvent`,
                       :class:`BatchCarry`)
manifest      1        ``"format": "judge-engine-run", "version": 1``; later
                       ``rescored_versions`` (a re-scored run: each judge's protocol
                       version before and after), absent otherwise; ``batches`` (the
                       provider's batch id of each chunk), empty when absent; later
                       ``cascade`` (a cascaded run: its stages, thresholds and the items
                       that reached each stage), absent otherwise; later the spend's
                       ``estimated_calls`` and ``estimated_cost`` (calls billed but not
                       read, booked at an estimate), absent when none
============  =======  ==================================================================

A file written by a *newer* judge-engine is refused with a :class:`~judge_engine.errors.RunDirError`
rather than misread. The records are plain slotted dataclasses: one is built for every task and
every attempt of a run, and pydantic validation there would cost more than the rest of writing it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from judge_engine.errors import ReasonCode, RunDirError
from judge_engine.rundir.blocks import Encoder, decode_request

OUTCOME_VERSION = 3
ATTEMPT_VERSION = 3
EXPANDED_ATTEMPT_VERSION = 2
"""The version of :meth:`AttemptRecord.to_dict`'s self-contained form (requests written out)."""
MANIFEST_FORMAT = "judge-engine-run"
MANIFEST_VERSION = 1

BATCH_VERSION = 1
MANIFEST = "run.json"
OUTCOMES = "outcomes.jsonl"
TRANSCRIPTS = "transcripts.jsonl"
BATCHES = "batches.jsonl"
BATCH_DIR = "batches"
"""The chunks' request files and downloaded results, each deleted once its chunk is collected."""
LOCK = ".lock"

UNRECORDED = "unrecorded"
"""The reason code read for an unscored outcome written before reason codes existed."""

Status = Literal["scored", "unscored"]
RunStatus = Literal["running", "completed", "cancelled", "failed", "stopped"]


def _newer(kind: str, version: int, supported: int, where: str) -> RunDirError:
    return RunDirError(f"{where}: {kind} format {version} was written by a newer judge-engine "
                       f"(this one reads up to {supported}); upgrade judge-engine to read it")


# --- outcome lines ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OutcomeRecord:
    """One line of ``outcomes.jsonl``: how one task ended.

    A task judged again (``resume --retry``) has a later line that supersedes this one: every
    reader takes the last line per ``task_id``.
    """

    task_id: str
    """Content hash of the task (judge identity, item, variant, temperature, repeat)."""
    item_id: str
    judge: str
    protocol: str
    protocol_version: str
    model: str
    """The judge's configured model (a demo run keeps the config's model here too)."""
    temperature: float
    repeat: int
    variant: str
    """The protocol's sub-task (``AB``/``BA`` orders, a BWS rotation), ``""`` when it has none."""
    status: Status
    score: float | None = None
    """The headline score (None when unscored, or for a purely categorical verdict)."""
    scores: Mapping[str, float] = field(default_factory=dict)
    """Named breakdowns: per aspect, dimension or candidate."""
    verdict: Mapping[str, Any] | None = None
    """The parsed answer, as the protocol's output model dumps it."""
    reason: str | None = None
    """Why the task is unscored, for a person."""
    reason_code: str | None = None
    """Why the task is unscored, as a :class:`~judge_engine.errors.ReasonCode` value
    (``unrecorded`` for lines written before reason codes)."""
    attempts: int = 0
    """Transcript lines of this task's provider attempts (cache hits included)."""
    reasks: int = 0
    cache_hits: int = 0
    cost: float = 0.0
    latency_s: float = 0.0
    at: str = ""
    """When the task finished (UTC, ISO 8601)."""
    row: int | None = None
    """The item's position in the dataset (0-based), when known."""
    row_tasks: int | None = None
    """How many tasks the judge has for that item: a resumed run skips, unread, the leading
    items whose tasks are all done."""
    confidence: Mapping[str, Any] | None = None
    """How sure the judge is of the verdict (None: not measured): ``method`` (``logprobs``,
    ``agreement``, ``jury``), ``value`` (0..1, None when it could not be read, with a
    ``problem``), and for log-probs ``verdict``, ``probs`` (each accepted value's probability
    at the verdict's position), ``mass``, ``weighted`` (the probability-weighted score) or, for
    a verdict of several values, ``fields`` (:mod:`judge_engine.protocols.confidence`,
    :mod:`judge_engine.trust.decisions`)."""

    @property
    def scored(self) -> bool:
        return self.status == "scored"

    def to_dict(self) -> dict[str, Any]:
        """The line as written (current version; ``confidence`` only when measured)."""
        line = {
            "v": OUTCOME_VERSION,
            "task_id": self.task_id,
            "item_id": self.item_id,
            "judge": self.judge,
            "protocol": self.protocol,
            "protocol_version": self.protocol_version,
            "model": self.model,
            "temperature": self.temperature,
            "repeat": self.repeat,
            "variant": self.variant,
            "status": self.status,
            "score": self.score,
            "scores": dict(self.scores),
            "verdict": None if self.verdict is None else dict(self.verdict),
            "reason": self.reason,
            "reason_code": self.reason_code,
            "attempts": self.attempts,
            "reasks": self.reasks,
            "cache_hits": self.cache_hits,
            "cost": self.cost,
            "latency_s": self.latency_s,
            "at": self.at,
            "row": self.row,
            "row_tasks": self.row_tasks,
        }
        if self.confidence is not None:
            line["confidence"] = dict(self.confidence)
        return line

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], *, where: str = OUTCOMES) -> OutcomeRecord:
        """Read an outcome line of any version.

        Raises:
            RunDirError: a line from a newer version, or one without the fields every version has.
        """
        version = int(raw.get("v") or 1)
        if version > OUTCOME_VERSION:
            raise _newer("outcome line", version, OUTCOME_VERSION, where)
        try:
            status: Status = "scored" if raw["status"] == "scored" else "unscored"
            code = raw.get("reason_code")
            return cls(
                task_id=str(raw["task_id"]),
                item_id=str(raw["item_id"]),
                judge=str(raw["judge"]),
                protocol=str(raw.get("protocol") or ""),
                protocol_version=str(raw.get("protocol_version") or ""),
                model=str(raw.get("model") or ""),
                temperature=float(raw.get("temperature") or 0.0),
                repeat=int(raw.get("repeat") or 0),
                variant=str(raw.get("variant") or ""),
                status=status,
                score=None if raw.get("score") is None else float(raw["score"]),
                scores={str(k): float(v) for k, v in (raw.get("scores") or {}).items() if v is not None},
                verdict=raw.get("verdict"),
                reason=raw.get("reason"),
                reason_code=None if status == "scored" else str(code or UNRECORDED),
                attempts=int(raw.get("attempts") or 0),
                reasks=int(raw.get("reasks") or 0),
                cache_hits=int(raw.get("cache_hits") or 0),
                cost=float(raw.get("cost") or 0.0),
                latency_s=float(raw.get("latency_s") or 0.0),
                at=str(raw.get("at") or ""),
                row=None if raw.get("row") is None else int(raw["row"]),
                row_tasks=None if raw.get("row_tasks") is None else int(raw["row_tasks"]),
                confidence=raw.get("confidence") if isinstance(raw.get("confidence"), Mapping) else None,
            )
        except KeyError as exc:
            raise RunDirError(f"{where}: an outcome line without {exc.args[0]!r}") from None
        except (TypeError, ValueError) as exc:
            raise RunDirError(f"{where}: a malformed outcome line ({exc})") from None


# --- transcript lines ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    """One line of ``transcripts.jsonl`` per provider attempt (or cache hit) of a task."""

    task_id: str
    judge: str
    item_id: str
    attempt: int
    """1, 2, ... over the whole task (re-asks and retries included)."""
    reask: int
    """How many re-asks preceded this attempt (0: the original question)."""
    at: str
    request: Mapping[str, Any]
    """The request as sent: model, messages, temperature, max_tokens, response_format, params,
    api_base. Never the API key."""
    cache_hit: bool = False
    latency_s: float = 0.0
    response: Mapping[str, Any] | None = None
    """The raw answer (content, finish_reason, usage, cost, kept headers, model), or None."""
    usage: Mapping[str, int] | None = None
    cost: float | None = None
    """What this attempt cost (0 for a cache hit); None when it failed."""
    unpriced: bool = False
    """The provider answered, but no price is known for the model: ``cost`` is 0 and is not a
    price. Counted apart (:attr:`Spend.unpriced`), so a total never passes for complete."""
    estimated: bool = False
    """A failed attempt the provider may have billed (a 2xx whose body could not be read, a
    request sent whose answer never came): ``usage`` is the prompt counted locally and the
    request's ``max_tokens``, ``cost`` those at the model's price. Counted in the spend's cost
    and apart (:attr:`Spend.estimated_calls`), so a budget sees it."""
    error: Mapping[str, Any] | None = None
    """``{kind, status, message}`` of a failed attempt (redacted; ``code``: its reason code, when
    it has one), or None."""
    replayed: bool = False
    """Answered from another run's transcript (``rescore``): no call was made."""
    batch: Mapping[str, str] | None = None
    """For a result of the provider's batch API: ``{"id": <batch id>, "custom_id": ...,
    "chunk": ...}`` (see ``batches.jsonl``); None for an online attempt."""
    split_at: tuple[str, ...] = field(default=(), compare=False, repr=False)
    """The item's text values (not stored): where :meth:`encode` splits the request's messages,
    so that only the item's own text is written per line."""

    def to_dict(self) -> dict[str, Any]:
        """The self-contained (expanded, version 2) form: the request written out whole."""
        record: dict[str, Any] = {
            "v": EXPANDED_ATTEMPT_VERSION,
            "task_id": self.task_id,
            "judge": self.judge,
            "item_id": self.item_id,
            "attempt": self.attempt,
            "reask": self.reask,
            "at": self.at,
            "request": dict(self.request),
            "cache_hit": self.cache_hit,
            "latency_s": self.latency_s,
        }
        if self.replayed:
            record["replayed"] = True
        if self.batch is not None:
            record["batch"] = dict(self.batch)
        if self.response is not None:
            record["response"] = dict(self.response)
            record["usage"] = dict(self.usage or {})
            record["cost"] = self.cost
            if self.unpriced:
                record["unpriced"] = True
        if self.error is not None:
            record["error"] = dict(self.error)
        if self.estimated:
            record.update(estimated=True, usage=dict(self.usage or {}), cost=self.cost)
        return record

    def encode(self, encoder: Encoder) -> dict[str, Any]:
        """The compact (version 3) line; new blocks go to the encoder's sink first."""
        record: dict[str, Any] = {
            "v": ATTEMPT_VERSION,
            "task_id": self.task_id,
            "judge": self.judge,
            "item_id": self.item_id,
            "attempt": self.attempt,
            "reask": self.reask,
            "at": self.at,
            "request": encoder.encode(self.request, self.split_at),
            "cache_hit": self.cache_hit,
            "latency_s": self.latency_s,
        }
        if self.replayed:
            record["replayed"] = True
        if self.batch is not None:
            record["batch"] = dict(self.batch)
        if self.response is not None:
            response = {"content": self.response.get("content"), "finish_reason": self.response.get("finish_reason")}
            if self.response.get("model"):
                response["model"] = self.response["model"]
            if self.response.get("headers"):
                response["headers"] = self.response["headers"]
            if self.response.get("logprobs") is not None:
                response["logprobs"] = self.response["logprobs"]
            record["response"] = response
            record["usage"] = dict(self.usage or {})
            record["cost"] = self.cost
            if self.unpriced:
                record["unpriced"] = True
        if self.error is not None:
            record["error"] = dict(self.error)
        if self.estimated:
            record.update(estimated=True, usage=dict(self.usage or {}), cost=self.cost)
        return record

    @property
    def paid(self) -> bool:
        """Whether this attempt was sent to the provider (a cache hit was not)."""
        return not self.cache_hit


@dataclass(frozen=True, slots=True)
class ProtocolErrorRecord:
    """A transcript line for a task whose protocol code raised (a bug): the traceback, kept."""

    task_id: str
    judge: str
    item_id: str
    at: str
    stage: str
    """``render``, ``parse``, ``score`` or ``reask``."""
    error: str
    traceback: str

    def to_dict(self) -> dict[str, Any]:
        return {"v": EXPANDED_ATTEMPT_VERSION, "task_id": self.task_id, "judge": self.judge, "item_id": self.item_id,
                "at": self.at, "event": "protocol_error", "stage": self.stage, "error": self.error,
                "traceback": self.traceback}


TranscriptRecord = AttemptRecord | ProtocolErrorRecord


def transcript_record(raw: Mapping[str, Any], *, blocks: Mapping[str, Any] | None = None,
                      where: str = TRANSCRIPTS, requests: bool = True) -> TranscriptRecord:
    """Read a transcript line of any version.

    Args:
        blocks: the run's blocks (:func:`judge_engine.rundir.store.read_blocks`), needed to rebuild the
            request of a version 3 line.
        requests: False to leave a version 3 line's request encoded (what counting spend needs;
            rebuilding a request costs more than reading the rest of the line).

    Raises:
        RunDirError: a line from a newer version, one without the fields every version has, or a
            version 3 line whose blocks are missing.
    """
    version = int(raw.get("v") or 1)
    if version > ATTEMPT_VERSION:
        raise _newer("transcript line", version, ATTEMPT_VERSION, where)
    try:
        if raw.get("event") == "protocol_error":
            return ProtocolErrorRecord(
                task_id=str(raw["task_id"]), judge=str(raw.get("judge") or ""), item_id=str(raw.get("item_id") or ""),
                at=str(raw.get("at") or ""), stage=str(raw.get("stage") or ""), error=str(raw.get("error") or ""),
                traceback=str(raw.get("traceback") or ""),
            )  # fmt: skip
        request, response, usage = raw["request"], raw.get("response"), raw.get("usage")
        cost = None if raw.get("cost") is None else float(raw["cost"])
        if version >= 3:
            if requests:
                if blocks is None:
                    raise RunDirError(f"{where}: a version 3 line needs the run's blocks to be read")
                request = decode_request(request, blocks, where=where)
            if response is not None:  # the expanded shape every reader knows
                response = {"content": response.get("content"), "finish_reason": response.get("finish_reason"),
                            "usage": dict(usage or {}), "cost": cost or 0.0,
                            "headers": dict(response.get("headers") or {}), "model": str(response.get("model") or ""),
                            **({"logprobs": response["logprobs"]} if response.get("logprobs") is not None else {})}
        return AttemptRecord(
            task_id=str(raw["task_id"]),
            judge=str(raw.get("judge") or ""),
            item_id=str(raw.get("item_id") or ""),
            attempt=int(raw.get("attempt") or 0),
            reask=int(raw.get("reask") or 0),
            at=str(raw.get("at") or ""),
            request=request,
            cache_hit=bool(raw.get("cache_hit")),
            latency_s=float(raw.get("latency_s") or 0.0),
            response=response,
            usage=usage,
            cost=cost,
            error=raw.get("error"),
            replayed=bool(raw.get("replayed")),
            batch=raw.get("batch"),
            unpriced=bool(raw.get("unpriced")),
            estimated=bool(raw.get("estimated")),
        )
    except KeyError as exc:
        raise RunDirError(f"{where}: a transcript line without {exc.args[0]!r}") from None
    except (TypeError, ValueError) as exc:
        raise RunDirError(f"{where}: a malformed transcript line ({exc})") from None


# --- batch lines: a batch-mode judge's chunks, and the tasks they carry on --------------------

BatchEventKind = Literal["intent", "uploaded", "submitted", "state", "refused", "rejected", "collected"]


@dataclass(frozen=True, slots=True)
class BatchEvent:
    """One line of ``batches.jsonl`` about a chunk: a set of tasks sent as one provider batch.

    A chunk's lines, in the order written (each durable before the next step is taken)::

        intent     which tasks, before anything is sent (the request file is written first)
        uploaded   OpenAI: the provider's file id of the request file
        submitted  the provider's batch id (``found``: found on the provider by a resumed run,
                   whose process was killed after the batch was created but before this line)
        state      the provider's status and counts, when they change
        refused    the provider refused the batch (its enqueued-token quota): sent again later
        rejected   a batch adopted by a resumed run turned out not to be this chunk's
        collected  every result read: each task has its outcome line, or a carry line

    Which fields a line sets depends on its ``event``; the others keep their defaults.
    """

    event: BatchEventKind
    judge: str
    chunk: str
    """The chunk's id, unique in the run (``<judge>-r<round>-<sequence>``)."""
    at: str
    """When the line was written (UTC, ISO 8601); an intent's is the earliest a batch of the
    chunk can have been created, where a resumed run looks for it."""
    round: int = 0
    """intent: the batch round of every task in the chunk (1: the first ask)."""
    api: str = ""
    """intent: the batch API, ``openai`` or ``anthropic``."""
    tasks: tuple[str, ...] = ()
    """intent: the tasks' ids (without ``b2:``); a request's custom id is ``<id>-<round>``."""
    rows: tuple[int, int] | None = None
    """intent of round 1: the first and last dataset row of its tasks."""
    requests: int = 0
    bytes: int = 0
    """intent: the request file's size."""
    tokens: int = 0
    """intent: the prompt tokens it enqueues (estimated: UTF-8 bytes / 4)."""
    file_id: str | None = None
    """uploaded, submitted: the provider's id of the request file (OpenAI)."""
    batch_id: str | None = None
    """submitted and later: the provider's batch id."""
    found: bool = False
    """submitted: found on the provider by a resumed run rather than answered to our create."""
    tentative: bool = False
    """submitted: found by its size and time only (Anthropic batches carry no metadata); the
    results' custom ids confirm it, or it is ``rejected`` and the chunk sent again."""
    status: str = ""
    """state, refused, collected: the provider's status (``in_progress``, ``expired``...)."""
    counts: Mapping[str, int] = field(default_factory=dict)
    """state, collected: requests ``total``, ``completed``, ``failed``, ``expired``, ``cancelled``
    (collected: also ``outcomes`` and ``carried``)."""
    reason: str = ""
    """refused, rejected: why, for a person."""

    def to_dict(self) -> dict[str, Any]:
        line: dict[str, Any] = {"v": BATCH_VERSION, "event": self.event, "judge": self.judge, "chunk": self.chunk,
                                "at": self.at}
        for name in ("round", "api", "requests", "bytes", "tokens", "file_id", "batch_id", "found", "tentative",
                     "status", "reason"):
            value = getattr(self, name)
            if value:
                line[name] = value
        if self.rows is not None:
            line["rows"] = list(self.rows)
        if self.counts:
            line["counts"] = dict(self.counts)
        if self.tasks:
            line["tasks"] = list(self.tasks)
        return line


@dataclass(frozen=True, slots=True)
class BatchCarry:
    """A line of ``batches.jsonl`` for one task whose batch result asks for another request:
    the same one again (failed, expired, cancelled, missing) or a re-ask. It holds what that
    request needs (the task, the turns after its rendered prompt, what the task did so far), so
    a resumed run sends it without the earlier results. It is pending until a later chunk's
    intent lists the task, or the task has an outcome line."""

    judge: str
    chunk: str
    """The chunk whose result asked for it."""
    at: str
    task_id: str
    item: Mapping[str, Any]
    variant: str
    temperature: float
    repeat: int
    row: int
    row_tasks: int
    round: int
    """The round the next request belongs to."""
    to: Literal["batch", "online"]
    """Where it goes: the next batch round, or online (``batch.fallback: online``)."""
    why: str
    """``failed``, ``expired``, ``cancelled``, ``missing`` or ``reask``."""
    turns: tuple[Mapping[str, str], ...] = ()
    """Messages after the rendered prompt: each re-ask's (answer, re-ask) pair so far."""
    log: Mapping[str, float] = field(default_factory=dict)
    """The task so far: ``attempts``, ``reasks``, ``cache_hits``, ``cost``, ``latency_s``."""

    def to_dict(self) -> dict[str, Any]:
        return {"v": BATCH_VERSION, "event": "carry", "judge": self.judge, "chunk": self.chunk, "at": self.at,
                "task_id": self.task_id, "item": dict(self.item), "variant": self.variant,
                "temperature": self.temperature, "repeat": self.repeat, "row": self.row, "row_tasks": self.row_tasks,
                "round": self.round, "to": self.to, "why": self.why, "turns": [dict(t) for t in self.turns],
                "log": dict(self.log)}


BatchLine = BatchEvent | BatchCarry


def batch_line(raw: Mapping[str, Any], *, where: str = BATCHES) -> BatchLine:
    """Read a line of ``batches.jsonl``.

    Raises:
        RunDirError: a line from a newer version, or a malformed one.
    """
    version = int(raw.get("v") or 1)
    if version > BATCH_VERSION:
        raise _newer("batch line", version, BATCH_VERSION, where)
    try:
        if raw["event"] == "carry":
            return BatchCarry(
                judge=str(raw["judge"]), chunk=str(raw["chunk"]), at=str(raw.get("at") or ""),
                task_id=str(raw["task_id"]), item=dict(raw["item"]), variant=str(raw.get("variant") or ""),
                temperature=float(raw.get("temperature") or 0.0), repeat=int(raw.get("repeat") or 0),
                row=int(raw.get("row", -1)), row_tasks=int(raw.get("row_tasks") or 0),
                round=int(raw["round"]), to="online" if raw.get("to") == "online" else "batch",
                why=str(raw.get("why") or ""), turns=tuple(dict(t) for t in raw.get("turns") or ()),
                log=dict(raw.get("log") or {}),
            )  # fmt: skip
        event = str(raw["event"])
        if event not in ("intent", "uploaded", "submitted", "state", "refused", "rejected", "collected"):
            raise ValueError(f"unknown event {event!r}")
        rows = raw.get("rows")
        return BatchEvent(
            event=event,  # type: ignore[arg-type]
            judge=str(raw["judge"]), chunk=str(raw["chunk"]), at=str(raw.get("at") or ""),
            round=int(raw.get("round") or 0), api=str(raw.get("api") or ""),
            tasks=tuple(str(t) for t in raw.get("tasks") or ()),
            rows=None if rows is None else (int(rows[0]), int(rows[1])),
            requests=int(raw.get("requests") or 0), bytes=int(raw.get("bytes") or 0), tokens=int(raw.get("tokens") or 0),
            file_id=None if raw.get("file_id") is None else str(raw["file_id"]),
            batch_id=None if raw.get("batch_id") is None else str(raw["batch_id"]),
            found=bool(raw.get("found")), tentative=bool(raw.get("tentative")), status=str(raw.get("status") or ""),
            counts={str(k): int(v) for k, v in (raw.get("counts") or {}).items()}, reason=str(raw.get("reason") or ""),
        )  # fmt: skip
    except KeyError as exc:
        raise RunDirError(f"{where}: a batch line without {exc.args[0]!r}") from None
    except (TypeError, ValueError, IndexError) as exc:
        raise RunDirError(f"{where}: a malformed batch line ({exc})") from None


# --- what a run spent, and how its tasks ended (parts of the manifest) --------------------------


@dataclass(slots=True)
class Spend:
    """What provider attempts cost, summed over transcript lines."""

    calls: int = 0
    """Attempts sent to the provider (failed ones included; cache hits not)."""
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    replayed: int = 0
    """Answers taken from another run's transcript (``rescore``): no call, no cost."""
    unpriced: int = 0
    """Calls answered at no known price (their cost is not in :attr:`cost`)."""
    estimated_calls: int = 0
    """Failed calls the provider may have billed (an answer that could not be read, a request
    whose answer never came), booked at an estimate (:attr:`AttemptRecord.estimated`)."""
    estimated_cost: float = 0.0
    """The part of :attr:`cost` that is those calls' estimate (their tokens are not in
    :attr:`prompt_tokens` or :attr:`completion_tokens`, which count what providers reported)."""

    def add(self, record: TranscriptRecord) -> None:
        """Count one transcript line (protocol-error lines count nothing)."""
        if not isinstance(record, AttemptRecord):
            return
        if record.cache_hit:
            self.cache_hits += 1
            return
        if record.replayed:
            self.replayed += 1
            return
        if record.error is not None and record.error.get("code") == ReasonCode.NOT_RECORDED:
            return  # a replay found no recorded answer (rescore): nothing was sent
        self.calls += 1
        self.unpriced += record.unpriced
        if record.estimated:
            self.estimated_calls += 1
            self.estimated_cost += float(record.cost or 0.0)
        elif record.usage:
            self.prompt_tokens += int(record.usage.get("prompt_tokens") or 0)
            self.completion_tokens += int(record.usage.get("completion_tokens") or 0)
        self.cost += float(record.cost or 0.0)

    def minus(self, other: Spend) -> Spend:
        """This spend less ``other`` (e.g. a session's share of the run's)."""
        return Spend(self.calls - other.calls, self.cache_hits - other.cache_hits,
                     self.prompt_tokens - other.prompt_tokens,
                     self.completion_tokens - other.completion_tokens, self.cost - other.cost,
                     self.replayed - other.replayed, self.unpriced - other.unpriced,
                     self.estimated_calls - other.estimated_calls, self.estimated_cost - other.estimated_cost)

    def plus(self, other: Spend) -> Spend:
        return Spend(self.calls + other.calls, self.cache_hits + other.cache_hits,
                     self.prompt_tokens + other.prompt_tokens,
                     self.completion_tokens + other.completion_tokens, self.cost + other.cost,
                     self.replayed + other.replayed, self.unpriced + other.unpriced,
                     self.estimated_calls + other.estimated_calls, self.estimated_cost + other.estimated_cost)

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_dict(self) -> dict[str, Any]:
        record: dict[str, Any] = {"calls": self.calls, "cache_hits": self.cache_hits,
                                  "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                                  "cost": round(self.cost, 8)}
        if self.replayed:
            record["replayed"] = self.replayed
        if self.unpriced:
            record["unpriced"] = self.unpriced
        if self.estimated_calls:
            record["estimated_calls"] = self.estimated_calls
            record["estimated_cost"] = round(self.estimated_cost, 8)
        return record

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any] | None) -> Spend:
        raw = raw or {}
        return cls(int(raw.get("calls") or 0), int(raw.get("cache_hits") or 0),
                   int(raw.get("prompt_tokens") or 0), int(raw.get("completion_tokens") or 0),
                   float(raw.get("cost") or 0.0), int(raw.get("replayed") or 0), int(raw.get("unpriced") or 0),
                   int(raw.get("estimated_calls") or 0), float(raw.get("estimated_cost") or 0.0))


def total_spend(spends: Mapping[str, Spend]) -> Spend:
    total = Spend()
    for spend in spends.values():
        total = total.plus(spend)
    return total


def spend_section(spends: Mapping[str, Spend], *, covers_bytes: int | None = None) -> dict[str, Any]:
    """The manifest's ``spend``: the total, per judge, and the transcript offset it covers."""
    section: dict[str, Any] = {"total": total_spend(spends).to_dict(),
                               "judges": {judge: spend.to_dict() for judge, spend in sorted(spends.items())}}
    if covers_bytes is not None:
        section["covers_bytes"] = covers_bytes
    return section


@dataclass(slots=True)
class Counts:
    """Tasks, scored and unscored (by reason code) of one judge or of the whole run."""

    tasks: int = 0
    scored: int = 0
    unscored: int = 0
    unscored_by_code: dict[str, int] = field(default_factory=dict)

    def add(self, status: str, reason_code: str | None, n: int = 1) -> None:
        """Count ``n`` tasks that ended ``status`` (unscored: under ``reason_code``)."""
        self.tasks += n
        if status == "scored":
            self.scored += n
            return
        self.unscored += n
        code = reason_code or UNRECORDED
        self.unscored_by_code[code] = self.unscored_by_code.get(code, 0) + n

    def merge(self, other: Counts) -> None:
        self.tasks += other.tasks
        self.scored += other.scored
        self.unscored += other.unscored
        for code, n in other.unscored_by_code.items():
            self.unscored_by_code[code] = self.unscored_by_code.get(code, 0) + n

    def to_dict(self) -> dict[str, Any]:
        return {"tasks": self.tasks, "scored": self.scored, "unscored": self.unscored,
                "unscored_by_code": dict(sorted(self.unscored_by_code.items()))}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any] | None) -> Counts:
        raw = raw or {}
        return cls(int(raw.get("tasks") or 0), int(raw.get("scored") or 0), int(raw.get("unscored") or 0),
                   {str(k): int(v) for k, v in (raw.get("unscored_by_code") or {}).items()})


def counts_section(per_judge: Mapping[str, Counts]) -> dict[str, Any]:
    """The manifest's ``counts``: the total and per judge."""
    total = Counts()
    for counts in per_judge.values():
        total.merge(counts)
    return {"total": total.to_dict(), "judges": {judge: c.to_dict() for judge, c in per_judge.items()}}


# --- the manifest -------------------------------------------------------------------------------


@dataclass(slots=True)
class JudgeEntry:
    """What the manifest records of one judge: enough to read its outcomes without the config."""

    name: str
    model: str
    protocol: str
    protocol_version: str
    protocol_options: dict[str, Any]
    templates: dict[str, str]
    """Template path -> content hash: which prompts produced the answers."""
    temperatures: list[float]
    repeats: int
    score_range: list[float] | None
    tasks_per_item_variant: int
    item_outcomes: bool = False
    """The judge also writes one outcome line per item and temperature, judge ``<name>:item``
    (its requests' decision: :mod:`judge_engine.trust.decisions`)."""

    def to_dict(self) -> dict[str, Any]:
        entry = {"name": self.name, "model": self.model, "protocol": self.protocol,
                 "protocol_version": self.protocol_version, "protocol_options": self.protocol_options,
                 "templates": self.templates, "temperatures": self.temperatures, "repeats": self.repeats,
                 "score_range": self.score_range, "tasks_per_item_variant": self.tasks_per_item_variant}
        if self.item_outcomes:
            entry["item_outcomes"] = True
        return entry

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> JudgeEntry:
        return cls(
            name=str(raw["name"]), model=str(raw.get("model") or ""), protocol=str(raw.get("protocol") or ""),
            protocol_version=str(raw.get("protocol_version") or ""),
            protocol_options=dict(raw.get("protocol_options") or {}), templates=dict(raw.get("templates") or {}),
            temperatures=[float(t) for t in raw.get("temperatures") or []], repeats=int(raw.get("repeats") or 1),
            score_range=None if raw.get("score_range") is None else [float(x) for x in raw["score_range"]],
            tasks_per_item_variant=int(raw.get("tasks_per_item_variant") or 1),
            item_outcomes=bool(raw.get("item_outcomes")),
        )  # fmt: skip


DEMO_NOTE = ("DEMO RUN: answers come from judge-engine's built-in fake server; they are synthetic, "
             "not a model's judgments.")
"""What a demo run says about itself: in its manifest (``synthetic``), and first in what the run,
``show``, ``stats`` and ``meta`` print."""
DEMO_TOKENS_NOTE = ("Demo tokens: the demo's fake server counts tokens as one per 4 characters, plus 4 per "
                    "message, not with the model's tokenizer as plan does, so a demo run's token counts, and "
                    "the costs priced on them, are not plan's.")
"""Where a demo run's tokens or costs are shown beside what ``plan`` estimated (the run's
summary, ``status``, the cascade's cost in ``stats``, the viewer): why they differ
(:mod:`judge_engine.fake.answers` counts so; ``plan`` counts an OpenAI model's prompts exactly)."""


@dataclass(slots=True)
class Manifest:
    """``run.json``: the run's identity, configuration (no secrets), versions, status and totals.

    It is rewritten atomically while the run goes on (status, counts, spend, sessions).
    """

    run_id: str
    status: RunStatus
    created_at: str
    updated_at: str
    package_version: str
    versions: dict[str, str | None]
    """Python and litellm versions of the session that created the run."""
    demo: bool
    config_path: str
    """The config file, absolute."""
    config_path_from_run: str
    """The config file relative to the run directory (found again if the project moves)."""
    config: dict[str, Any]
    """The resolved config, secrets removed."""
    overrides: dict[str, Any]
    """Command-line overrides (``--model``, ``--limit``...), applied again by ``resume``."""
    dataset: dict[str, Any]
    """``{path, fingerprint, items}``."""
    judges: list[JudgeEntry]
    counts: dict[str, Any] = field(default_factory=dict)
    """:func:`counts_section` of the latest outcomes."""
    spend: dict[str, Any] = field(default_factory=dict)
    """:func:`spend_section` of the whole run, with the transcript offset it covers."""
    sessions: list[dict[str, Any]] = field(default_factory=list)
    """One entry per session: started/ended, status, tasks judged, its own spend, ``--retry``;
    for judges with several deployments, ``deployments``: judge -> deployment -> its calls of
    that spend (batch results counted at the first deployment, where batches go)."""
    failures: dict[str, str] = field(default_factory=dict)
    """Judge -> why it stopped, when the last session failed."""
    rescored_from: str | None = None
    """The run whose recorded answers this run re-scored (``judge-engine rescore``), if any."""
    rescored_versions: dict[str, dict[str, str]] = field(default_factory=dict)
    """A re-scored run's judge -> ``{"protocol", "from", "to"}``: the protocol version the
    original run recorded (``""`` when it recorded none) and the one that re-scored it."""
    stopped: dict[str, Any] | None = None
    """Why the last session stopped before the end (``status: stopped``): the budget reached,
    its limit and what was spent; ``resume --budget`` continues."""
    batches: dict[str, dict[str, str]] = field(default_factory=dict)
    """Batch-mode judges: judge -> chunk -> the provider's id of the batch that holds (or held)
    it (``batch_...``, ``msgbatch_...``), to find it in the provider's console or API. Kept
    current at each checkpoint; ``batches.jsonl`` is the record. Added within version 1."""
    cascade: dict[str, Any] | None = None
    """A cascaded run's ``{"name", "items", "thresholds", "guarantee" (in words), "guarantee_kind" (``stage``
    or ``cascade``; added within version 1, absent: ``stage``), "stages": [{"stage",
    "kind", "judges", "decides", "threshold", "asked", "reached"}], "held", "waiting"}``
    (:mod:`judge_engine.trust.cascade`): a later stage's judges plan only the items that reached it."""
    version: int = MANIFEST_VERSION

    @property
    def synthetic(self) -> str | None:
        return DEMO_NOTE if self.demo else None

    def judge(self, name: str) -> JudgeEntry | None:
        return next((j for j in self.judges if j.name == name), None)

    def swapped_models(self) -> dict[str, str]:
        """Judge -> the model it ran, for the judges whose model ``--model`` swapped (every judge
        of a run started with it; none otherwise): their names are the config's, their answers
        another model's, so every table that names them shows the model too."""
        if not self.overrides.get("model"):
            return {}
        return {entry.name: entry.model for entry in self.judges}

    def jury(self, name: str) -> dict[str, Any] | None:
        """The config of jury ``name`` as the run recorded it (``judges``, ``aggregate``...), or None."""
        juries = self.config.get("juries") or []
        return next((dict(j) for j in juries if isinstance(j, Mapping) and j.get("name") == name), None)

    def planned_tasks(self, name: str) -> int | None:
        """How many tasks the run plans for judge ``name`` over the whole dataset: its item-variants
        (the scan's count, ``dataset.variants``, else the items) x temperatures x repeats. For a
        jury, the coordinates all its jurors share (one protocol, so the same variants; the
        temperatures they all have, the repeats they all reach). For a judge's item outcomes
        (``<judge>:item``), its items x temperatures. None when the manifest does not know
        ``name``. In a cascaded run, a stage's judges, item outcomes and jury plan the items
        that reached the stage, and the cascade one outcome per item."""
        if self.cascade is not None and (planned := self._cascade_planned(name)) is not None:
            return planned
        entry = self.judge(name)
        if entry is not None:
            return self._variants(entry.name) * entry.tasks_per_item_variant
        judge, _, kind = name.rpartition(":")
        if kind == "item" and (entry := self.judge(judge)) is not None and entry.item_outcomes:
            return int(self.dataset.get("items") or 0) * len(entry.temperatures)
        jury = self.jury(name)
        jurors = [self.judge(str(j)) for j in (jury or {}).get("judges") or []]
        if not jurors or any(j is None for j in jurors):
            return None
        found = [j for j in jurors if j is not None]
        temperatures = set(found[0].temperatures).intersection(*(j.temperatures for j in found[1:]))
        return self._variants(found[0].name) * len(temperatures) * min(j.repeats for j in found)

    def _cascade_planned(self, name: str) -> int | None:
        cascade = self.cascade or {}
        items = int(cascade.get("items") or 0)
        if name == cascade.get("name"):
            return items
        for stage in cascade.get("stages") or []:
            reached = int(stage.get("reached") or 0)
            if name in (stage.get("stage"), stage.get("decides")) and name not in (stage.get("judges") or []):
                return reached  # a jury's line, or a judge's item line, per item
            if name in (stage.get("judges") or []) and (entry := self.judge(name)) is not None:
                per_item = self._variants(name) / items if items else 0
                return round(reached * per_item) * entry.tasks_per_item_variant
        return None

    def _variants(self, judge: str) -> int:
        """The item-variants judge ``judge`` has (``dataset.variants`` is in the judges' order)."""
        variants = self.dataset.get("variants") or []
        position = [j.name for j in self.judges].index(judge)
        return int(variants[position] if position < len(variants) else self.dataset.get("items") or 0)

    @property
    def total_counts(self) -> Counts:
        return Counts.from_dict((self.counts or {}).get("total"))

    def to_dict(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "format": MANIFEST_FORMAT,
            "version": MANIFEST_VERSION,
            "run_id": self.run_id,
            "status": self.status,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "package_version": self.package_version,
            "versions": self.versions,
            "demo": self.demo,
        }
        if self.demo:
            document["synthetic"] = DEMO_NOTE
        document.update({
            "config_path": self.config_path,
            "config_path_from_run": self.config_path_from_run,
            "config": self.config,
            "overrides": self.overrides,
            "dataset": self.dataset,
            "judges": [j.to_dict() for j in self.judges],
            "counts": self.counts,
            "spend": self.spend,
            "sessions": self.sessions,
        })
        if self.failures:
            document["failures"] = self.failures
        if self.rescored_from:
            document["rescored_from"] = self.rescored_from
        if self.rescored_versions:
            document["rescored_versions"] = self.rescored_versions
        if self.stopped:
            document["stopped"] = self.stopped
        if self.batches:
            document["batches"] = self.batches
        if self.cascade is not None:
            document["cascade"] = self.cascade
        return document

    @classmethod
    def from_dict(cls, raw: Any, *, where: str = MANIFEST) -> Manifest:
        """Read a manifest of any version.

        Raises:
            RunDirError: not a judge-engine manifest, or one from a newer version.
        """
        if not isinstance(raw, Mapping) or raw.get("format") != MANIFEST_FORMAT:
            raise RunDirError(f"{where}: not a judge-engine manifest")
        version = int(raw.get("version") or 0)
        if version > MANIFEST_VERSION:
            raise _newer("manifest", version, MANIFEST_VERSION, where)
        try:
            status = str(raw.get("status") or "running")
            return cls(
                run_id=str(raw["run_id"]),
                status=status if status in ("running", "completed", "cancelled", "failed", "stopped") else "running",  # type: ignore[arg-type]
                created_at=str(raw.get("created_at") or ""),
                updated_at=str(raw.get("updated_at") or ""),
                package_version=str(raw.get("package_version") or ""),
                versions=dict(raw.get("versions") or {}),
                demo=bool(raw.get("demo")),
                config_path=str(raw.get("config_path") or ""),
                config_path_from_run=str(raw.get("config_path_from_run") or ""),
                config=dict(raw.get("config") or {}),
                overrides=dict(raw.get("overrides") or {}),
                dataset=dict(raw.get("dataset") or {}),
                judges=[JudgeEntry.from_dict(j) for j in raw.get("judges") or []],
                counts=dict(raw.get("counts") or {}),
                spend=dict(raw.get("spend") or {}),
                sessions=list(raw.get("sessions") or []),
                failures=dict(raw.get("failures") or {}),
                rescored_from=None if raw.get("rescored_from") is None else str(raw["rescored_from"]),
                rescored_versions={str(judge): {str(k): str(v) for k, v in dict(move).items()}
                                   for judge, move in (raw.get("rescored_versions") or {}).items()},
                stopped=None if not raw.get("stopped") else dict(raw["stopped"]),
                batches={str(judge): {str(c): str(b) for c, b in dict(chunks).items()}
                         for judge, chunks in dict(raw.get("batches") or {}).items()},
                cascade=dict(raw["cascade"]) if isinstance(raw.get("cascade"), Mapping) else None,
                version=version,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise RunDirError(f"{where}: a malformed manifest ({exc!r})") from None


def reason_codes() -> list[str]:
    """Every reason code an outcome line can carry, including :data:`UNRECORDED`."""
    return [str(code) for code in ReasonCode] + [UNRECORDED]
