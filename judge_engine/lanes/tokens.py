"""A lane's token estimate, without a tokenizer.

The token pacer needs a prompt's size before sending it. Counting it exactly (tiktoken) cost
~0.2-0.5 ms per request, the largest single CPU cost of a TPM-paced run, and is exact only for
OpenAI's own tokenizers anyway. The lane instead sizes a prompt by its UTF-8 bytes
(:func:`rough_prompt_tokens`: BPE tokenizers work on bytes, so one token is ~4 bytes of Latin
text and ~3 bytes, one character, of Chinese) and scales that by the ratio of reported to
estimated prompt tokens it learns from every answer (:class:`TokenEstimate`). The pacer is then
calibrated to the provider's own count, whatever its tokenizer: an under-estimate is paid back
when each answer's usage is reconciled into the schedule, and an over-estimate, which
reconciling alone would turn into idle time, is learnt away within a few dozen answers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

BYTES_PER_TOKEN = 4
"""Prior of :func:`rough_prompt_tokens` before the lane has learnt the provider's ratio."""
TOKENS_PER_MESSAGE = 4
"""Chat framing per message (role and separators), as OpenAI's counting recipe adds."""
RATIO_SMOOTHING = 0.1
"""Weight of each answer in the learnt reported/estimated prompt-token ratio (after the tenth)."""


def rough_prompt_tokens(messages: Sequence[Mapping[str, str]]) -> int:
    """A tokenizer-free size of a chat prompt: UTF-8 bytes / 4 per message plus its framing.

    Costs ~1 us per request against ~300 us for tiktoken; the lane corrects its scale with the
    usage the provider reports (see the module docstring).
    """
    total = 3
    for message in messages:
        total += TOKENS_PER_MESSAGE + len((message.get("content") or "").encode("utf-8")) // BYTES_PER_TOKEN
    return total


class TokenEstimate:
    """A request's tokens before it is sent, learnt from the usage of the answers so far."""

    def __init__(self) -> None:
        self.prompt_ratio = 1.0
        """Reported prompt tokens per :func:`rough_prompt_tokens` token, as learnt so far."""
        self.completion: float | None = None
        """Moving average of the completion tokens reported; None before the first."""
        self._ratio_samples = 0

    def tokens(self, rough_prompt: int, max_tokens: int | None) -> float:
        """A request's tokens: its rough prompt size (:func:`rough_prompt_tokens`) scaled by the
        reported/estimated ratio learnt so far, plus a moving average of the completions seen."""
        completion = self.completion
        if completion is None:
            completion = float(min(max_tokens or 256, 256))
        return rough_prompt * self.prompt_ratio + completion

    def learn(self, rough_prompt: int, prompt_tokens: int, completion_tokens: int) -> None:
        """Take in one answer's reported usage (0 where the provider reported none)."""
        if completion_tokens > 0:
            prev = self.completion
            self.completion = completion_tokens if prev is None else 0.9 * prev + 0.1 * completion_tokens
        if prompt_tokens > 0 and rough_prompt > 0:
            # A running mean until it has ten answers, then an exponential one: the first answer
            # already replaces the prior, and a drift in the data is still followed.
            self._ratio_samples += 1
            weight = max(RATIO_SMOOTHING, 1.0 / self._ratio_samples)
            self.prompt_ratio += weight * (prompt_tokens / rough_prompt - self.prompt_ratio)
