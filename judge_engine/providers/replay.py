"""The replay provider: answers from a run's transcripts, never from the network.

Each request names its task (:attr:`ProviderRequest.task_ref <judge_engine.providers.base.ProviderRequest.task_ref>`:
judge, item, variant, temperature, repeat); the provider finds that task in the recorded run
(through its index) and answers with the recorded answers in the order they were given: the
first request gets the answer to the original question, the request after one re-ask gets the
answer the run recorded after its first re-ask, and so on. Failed attempts (5xx, timeouts) are
skipped: they are not answers. A request the run has no answer for (a re-ask it never made, a
task it never finished) raises :class:`NotRecorded`, classified as a per-task ``not_recorded``
failure, unless a fallback provider is given to ask online instead (``rescore --reask-online``).

So a protocol's current parser and scoring can be run over every recorded answer with the
engine's own task loop (re-asks included) at no cost and with no connection: ``judge-engine
rescore`` does that, and a test suite can replay recorded real answers through any protocol.
"""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING

from judge_engine.errors import ReasonCode
from judge_engine.lanes.tokens import rough_prompt_tokens
from judge_engine.providers.base import (
    ErrorClass,
    ErrorKind,
    Provider,
    ProviderRequest,
    ProviderResponse,
)
from judge_engine.rundir.index import Query, RunIndex
from judge_engine.rundir.records import AttemptRecord
from judge_engine.rundir.store import LineReader, open_index

if TYPE_CHECKING:
    from judge_engine.lanes import Lane

_WORKING_SET = 4096
"""Tasks whose first-request length is remembered (the engine has at most ``concurrency`` open)."""


class NotRecorded(Exception):
    """The recorded run holds no answer for this request."""


class ReplayProvider:
    """:class:`~judge_engine.providers.base.Provider` answering from the run in ``run_dir``.

    Args:
        run_dir: the recorded run (its index is brought up to date when opened).
        fallback: a provider to ask when the run recorded no answer (None: :class:`NotRecorded`).
        fallback_lane: the judge's own lane (its rate limits), which paces the fallback's
            requests only: replayed answers are not held to a provider's limits.
    """

    def __init__(self, run_dir: Path, *, fallback: Provider | None = None,
                 fallback_lane: Lane | None = None) -> None:

        self.run_dir = run_dir
        self._index: RunIndex = open_index(run_dir)
        self._reader = LineReader(run_dir)
        self._fallback = fallback
        self._fallback_lane = fallback_lane
        self._first_length: OrderedDict[str, int] = OrderedDict()
        self.replayed = 0
        """Answers served from the recording."""
        self.asked_online = 0
        """Requests the fallback answered."""

    async def complete(self, request: ProviderRequest) -> ProviderResponse:
        answers = self._answers(request.task_ref)
        first = self._first_length.get(request.task_ref)
        if first is None:  # the task's first request: the original question
            first = self._first_length[request.task_ref] = len(request.messages)
            if len(self._first_length) > _WORKING_SET:
                self._first_length.popitem(last=False)
        reasks = max(0, (len(request.messages) - first) // 2)  # an (answer, re-ask) pair per re-ask
        answer = answers.get(reasks)
        if answer is None:
            if self._fallback is not None:
                self.asked_online += 1
                return await self._ask_online(self._fallback, request)
            raise NotRecorded(f"the recorded run has no answer to {'re-ask ' + str(reasks) if reasks else 'this task'}"
                              f" (rescore --reask-online asks the provider)")
        self.replayed += 1
        return answer

    async def _ask_online(self, fallback: Provider, request: ProviderRequest) -> ProviderResponse:
        lane = self._fallback_lane
        if lane is None:
            return await fallback.complete(request)

        admission = await lane.admit(rough_prompt_tokens(request.messages), request.max_tokens)
        try:
            response = await fallback.complete(request)
        except Exception as exc:
            failure = fallback.classify(exc)
            if failure.kind is ErrorKind.RATE_LIMITED:
                lane.on_rate_limited(failure.retry_after_s)
            raise
        lane.on_success(admission, response.prompt_tokens, response.completion_tokens, response.headers)
        return response

    def _answers(self, task_ref: str) -> dict[int, ProviderResponse]:
        """Re-ask number -> the recorded answer, for the task at ``task_ref`` in the recorded run."""
        judge, item_id, variant, temperature, repeat = task_ref.split("\x1f")
        rows = self._index.tasks(Query(judge=judge, item_id=item_id, temperature=float(temperature),
                                       repeat=int(repeat)))
        rows = [r for r in rows if (r.variant or "") == variant]
        found: dict[int, ProviderResponse] = {}
        if not rows:
            return found
        for offset, length in self._index.attempt_offsets([rows[0].task_id]).get(rows[0].task_id, []):
            record = self._reader.transcript(offset, length, requests=False)
            if isinstance(record, AttemptRecord) and record.response is not None:
                response = ProviderResponse.from_record(record.response)
                found[record.reask] = ProviderResponse(response.content, response.finish_reason,
                                                       response.prompt_tokens, response.completion_tokens,
                                                       0.0, response.headers, response.model, replayed=True,
                                                       logprobs=response.logprobs)
        return found

    def classify(self, error: BaseException) -> ErrorClass:
        if isinstance(error, NotRecorded):
            return ErrorClass(ErrorKind.ITEM, str(error), code=ReasonCode.NOT_RECORDED)
        if self._fallback is not None:
            return self._fallback.classify(error)
        return ErrorClass(ErrorKind.FATAL, f"{type(error).__name__}: {error}")

    async def aclose(self) -> None:
        self._reader.close()
        self._index.close()
        if self._fallback is not None:
            await self._fallback.aclose()
