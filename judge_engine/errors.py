"""The exception tree: every error says whose fault it is.

```
JudgeEngineError                 root; catch this to catch everything we raise
├── ConfigError                  "you did this": bad config key/type/value (names field and file)
├── DatasetError                 "your data": a bad dataset line/row (names file and line)
├── TemplateError                a prompt template failed to render (names template and variable)
├── RunDirError                  a run directory is missing, foreign or unreadable
├── ProviderError                "the provider did this": carries model, status, body (secrets redacted)
│   └── FatalProviderError       auth / bad request / not found: stop this judge, do not retry
└── VerdictError                 "the judge answered badly": carries raw text and the problems found
```

Per-item failures (a VerdictError after its re-asks, a provider error after its retries) are
recorded as data in ``outcomes.jsonl`` and never raised through the run.
"""

from __future__ import annotations

from collections.abc import Sequence


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


class VerdictError(JudgeEngineError):
    """A judge answer could not be read or failed the protocol's checks.

    Attributes:
        raw: the answer text as received.
        problems: human-readable problems, each suitable to show the judge in a re-ask.
    """

    def __init__(self, problems: str | Sequence[str], *, raw: str = "") -> None:
        self.problems: list[str] = [problems] if isinstance(problems, str) else list(problems)
        self.raw = raw
        super().__init__("; ".join(self.problems))
