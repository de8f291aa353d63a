"""The exception tree: every exception judge-engine raises, and whose fault it is.

```
JudgeEngineError                  root; catch this to catch everything we raise
├── ConfigError                   "you did this": bad config key/type/value (names field and file)
├── DatasetError                  "your data": a bad dataset line/row (names file and line)
├── TemplateError                 a prompt template failed to render (names template and variable)
├── RunDirError                   a run directory is missing, foreign, locked or unreadable
├── DiskError                     "the machine did this": a disk full, read-only or over quota, or
│                                 a place the user may not write (names the path; exit 5)
├── TableError (also ValueError)  a stats/meta input table: unreadable, missing column, no join match
│   └── CalibrationError          calibrate's rows (row and field named), its settings, a thresholds file
├── ProviderError                 "the provider did this": carries model, status, body (secrets redacted)
│   ├── FatalProviderError        auth / bad request / not found: stop this judge, do not retry
│   │   ├── EndpointUnreachable   no attempt of a task ever connected: the endpoint, not the item
│   │   └── LocalRequestError     our own side failed before the request left (a setting the
│   │                             client refused, our code raised): nothing sent, no call
│   ├── TransientError            5xx, timeout, reset: retried within ``retries.transport``
│   ├── ItemFailure               this one request cannot succeed (context too long, content
│   │                             filter, too many 429s): the task ends unscored with its code
│   ├── HTTPStatusError           the direct transport got a non-200 answer (classified, then
│   │                             one of the above)
│   └── MalformedResponseError    a 200 whose body is not a chat completion (retried)
├── VerdictError                  "the judge answered badly": carries raw text and the problems found
└── FakeRequestError (ValueError) the fake server cannot read a request (it answers HTTP 400)

Abandoned (not an error)          a stop request: the task is left undone, with no outcome
```

Per-item failures (a VerdictError after its re-asks, an ItemFailure, a TransientError after its
retries) are recorded as data in ``outcomes.jsonl`` and never raised through the run: an unscored
outcome carries a human ``reason`` and a machine-readable :class:`ReasonCode`, so users can count,
filter and retry by cause (``judge-engine resume RUN_DIR --retry transport_exhausted``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any


class ReasonCode(StrEnum):
    """Why a task ended unscored: the ``reason_code`` of its outcome line.

    The first four are verdicts about the judge's answer (re-asked first, then recorded); the
    next seven say the answer never came or could not be used for a reason outside the answer;
    then two belong to generation protocols, whose first answer is the data, one to
    ``rescore``, one to a judge kept from its own family's systems, two to juries, three to an
    item's outcome over its requests (:mod:`judge_engine.trust.decisions`) and the last to a cascade's
    outcome (:mod:`judge_engine.trust.cascade`).
    """

    UNREADABLE = "unreadable"
    """The answer is not in the protocol's format (prose, broken JSON, unknown category...)."""
    INCOMPLETE = "incomplete"
    """A part the format requires is missing (a GEMBA section, a TTCT question, the BWS worst
    pick, Prometheus feedback), or the answer was cut off at ``max_tokens``."""
    OUT_OF_RANGE = "out_of_range"
    """A value outside the scale (a score beyond the rubric, a rating outside 1-5, a label not
    shown)."""
    REFUSED = "refused"
    """The judge declined or reported an error instead of answering."""
    CONTENT_FILTER = "content_filter"
    """The provider's content filter blocked the request or the answer."""
    CONTEXT_TOO_LONG = "context_too_long"
    """The prompt does not fit the model's context window."""
    PROVIDER_REJECTED = "provider_rejected"
    """The provider refused this one request for another reason (an unknown per-request error)."""
    RATE_LIMITED = "rate_limited"
    """``retries.rate_limit_max`` 429s in a row for this task."""
    TRANSPORT_EXHAUSTED = "transport_exhausted"
    """5xx, timeouts, resets or truncated bodies used up ``retries.transport``: not a verdict
    about the item; ``--retry transport_exhausted`` sends it again."""
    RENDER_ERROR = "render_error"
    """The prompt could not be rendered for this item."""
    PROTOCOL_ERROR = "protocol_error"
    """The protocol's own code raised (a bug): the traceback is in the transcript."""
    TOO_FEW_VALID = "too_few_valid"
    """A generation answer (CDAT, DAT) holds fewer valid words than the method scores (7 unique
    nouns). The method drops such a response and reports the valid-response rate, so it is
    recorded at once, never re-asked (a re-ask would inflate that rate); the parsed words and
    why each was dropped are kept in the outcome's verdict."""
    NOT_EMBEDDED = "not_embedded"
    """A generation answer was read and its words checked, but the judge has no embedder
    (``embedder: none``): the verdict is kept and its scores are left to be computed offline.
    Running the config again with an embedder scores it from the cache at no cost."""
    NOT_RECORDED = "not_recorded"
    """``rescore``: the current rules need an answer the original run never recorded (a re-ask
    it did not make, or a task it never finished); ``rescore --reask-online`` asks for it."""
    SELF_PREFERENCE = "self_preference"
    """Not judged, on purpose: the judge's model family is the family of a system behind the
    item (its ``system`` field) and the judge has ``self_preference: forbid``. No call is made;
    the run's exit code does not count these as failures."""
    JURY_INCOMPLETE = "jury_incomplete"
    """A jury's outcome for an item: fewer of its jurors scored the item than its quorum (every
    juror not kept off by ``self_preference``, unless ``quorum`` says fewer). Each juror's own
    outcome says why it did not score."""
    JURY_TIE = "jury_tie"
    """A jury's outcome for an item: the votes tied and the jury's ``tie`` rule is ``abstain``
    (the default of an odd-sized panel, whose ties come only from three or more values or a
    missing vote)."""
    NONE_READABLE = "none_readable"
    """An item's outcome over its requests (``pairwise-annotators``' annotators, a judge's
    repeats: :mod:`judge_engine.trust.decisions`): every request's answer was unreadable (or refused
    by the provider), so no annotator or repeat is left to decide with."""
    ITEM_INCOMPLETE = "item_incomplete"
    """An item's outcome over its requests: a request ended for a reason that is not about its
    answer (transport retries used up, a protocol error, not recorded): deciding without it
    would change the item's confidence, so it waits for ``--retry`` of that request."""
    ITEM_TIE = "item_tie"
    """An item's outcome over its requests: two predictions share the highest probability or
    the most votes (never broken by order)."""
    ABSTAINED = "abstained"
    """A cascade's outcome for an item: no stage was sure enough of its verdict (each asked
    stage's confidence stayed below its calibrated threshold, or it had no judgment), so the
    cascade gives none. The method working, not a failure: counted apart, and the run's exit
    code does not count it."""


class JudgeEngineError(Exception):
    """Root of every exception judge-engine raises on purpose."""


class ConfigError(JudgeEngineError):
    """The configuration is invalid. The message names the field and the file."""


class DatasetError(JudgeEngineError):
    """A dataset file or one of its rows is invalid. The message names the file and line."""


class TemplateError(JudgeEngineError):
    """A prompt template could not be rendered for an item."""


class RunDirError(JudgeEngineError):
    """A run directory is missing, unreadable, or not a judge-engine run."""


class DiskError(JudgeEngineError):
    """A file judge-engine must write is on a disk that is full, read-only or over quota, or in
    a place this user may not write. Neither the input nor the provider is at fault: make room
    (or make the place writable), then run the command again (``resume`` for a run).

    Attributes:
        path: the file or directory that could not be written.
        kind: ``full``, ``quota``, ``read-only``, ``permission`` or ``unwritable`` (SQLite could
            not open or write a database there, for a reason it does not say).
        detail: what the system said (``No space left on device``).
    """

    def __init__(self, path: str, kind: str, detail: str) -> None:
        self.path, self.kind, self.detail = path, kind, detail
        self.taken_back = True  # False: a write cut short could not be undone (a torn last line)
        super().__init__(f"cannot write {path}: {_DISK[kind][0] if kind in _DISK else kind} ({detail})")

    @property
    def advice(self) -> str:
        """What to do about it, as a clause (``free space on that disk``)."""
        return _DISK.get(self.kind, _DISK["unwritable"])[1]


_DISK = {"full": ("the disk is full", "free space on that disk"),
         "quota": ("the disk quota is exceeded", "free space or raise the quota"),
         "read-only": ("the file system is read-only", "make it writable"),
         "permission": ("permission denied", "make it writable for this user"),
         "unwritable": ("SQLite cannot write there", "check the disk's free space and permissions")}
"""A :class:`DiskError`'s kind -> (what happened, what to do)."""


class TableError(JudgeEngineError, ValueError):
    """Bad tabular input to ``stats`` or ``meta``: unreadable file, missing column, no join matches."""


class CalibrationError(TableError):
    """Bad input to ``calibrate``: a row (named by position or line, with the field), a stage,
    risk, delta or a cost out of range; or a thresholds file that cannot be read (named)."""


class ProviderError(JudgeEngineError):
    """A provider call failed.

    Attributes:
        model: the litellm model string.
        status: HTTP status when known.
        body: the provider's error body, with secrets redacted.
    """

    def __init__(self, message: str, *, model: str = "", status: int | None = None, body: str = "") -> None:
        super().__init__(message)
        self.model = model
        self.status = status
        self.body = body


class FatalProviderError(ProviderError):
    """Auth, bad-request or not-found errors: retrying cannot help, the judge stops."""


class EndpointUnreachable(FatalProviderError):
    """Every attempt of a task failed to connect: the endpoint is down or wrong, not the item."""


class LocalRequestError(FatalProviderError):
    """Our own side failed before the request left: the HTTP client refused a setting (an
    infinite timeout, a header with a line break, a URL it cannot send to) or our code raised
    while building the request. Nothing reached the provider, so it is neither a call nor its
    answer; the judge stops (every task would fail the same way) and its tasks stay undone for
    ``resume`` once the cause is fixed. A subclass of :class:`FatalProviderError` because it
    stops the judge the same way, not because the provider did anything."""


class TransientError(ProviderError):
    """A transport failure worth retrying (raised by the engine from the adapter's verdict)."""


class ItemFailure(ProviderError):
    """This request cannot succeed (context too long, content filter, too many 429s).

    Attributes:
        code: the outcome's reason code.
    """

    def __init__(self, message: str, *, code: ReasonCode, model: str = "", status: int | None = None) -> None:
        super().__init__(message, model=model, status=status)
        self.code = code


_STATUS_NAMES = {400: "BadRequestError", 401: "AuthenticationError", 403: "PermissionDeniedError",
                 404: "NotFoundError", 408: "Timeout", 409: "ConflictError", 422: "UnprocessableEntityError",
                 429: "RateLimitError", 500: "InternalServerError", 502: "BadGatewayError",
                 503: "ServiceUnavailableError", 504: "GatewayTimeoutError"}


class HTTPStatusError(ProviderError):
    """A non-200 answer to the direct transport, before it is classified. ``provider_message``
    holds the provider's own error text (redacted); the text names the error as OpenAI's SDK does
    (``AuthenticationError (HTTP 401): ...``)."""

    def __init__(self, status: int, message: str, headers: Mapping[str, str]) -> None:
        super().__init__(f"{_STATUS_NAMES.get(status, 'APIError')} (HTTP {status}): {message}",
                         status=status, body=message)
        self.status_code = status
        self.provider_message = message
        self.headers = dict(headers)


class MalformedResponseError(ProviderError):
    """A 200 answer whose body is not a chat completion (cut short, not JSON, no choices)."""


class VerdictError(JudgeEngineError):
    """A judge answer could not be read or failed the protocol's checks.

    Attributes:
        raw: the answer text as received.
        problems: human-readable problems, each suitable to show the judge in a re-ask.
        code: what kind of failure (``unreadable``, ``incomplete``, ``out_of_range``,
            ``refused``...): the outcome's ``reason_code`` if the re-asks do not mend it.
        verdict: what the protocol could read before it gave up (a generation protocol's parsed
            words and why each was dropped), kept in the unscored outcome; None otherwise.
    """

    def __init__(
        self,
        problems: str | Sequence[str],
        *,
        raw: str = "",
        code: ReasonCode = ReasonCode.UNREADABLE,
        verdict: Mapping[str, Any] | None = None,
    ) -> None:
        self.problems: list[str] = [problems] if isinstance(problems, str) else list(problems)
        self.raw = raw
        self.code = code
        self.verdict = verdict
        super().__init__("; ".join(self.problems))


class FakeRequestError(JudgeEngineError, ValueError):
    """The fake server cannot read a request body as a chat completion request (HTTP 400)."""


class Abandoned(Exception):
    """Not an error: the run is stopping, and this task is left undone with no outcome
    (``resume`` redoes it). Deliberately outside :class:`JudgeEngineError`, so code that catches
    every judge-engine error never swallows a stop."""
