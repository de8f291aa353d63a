"""The engine's own work per request, done back to back: each step of a task timed alone.

No network and no event loop: the prompt is rendered, keyed, looked up and stored in a real
answer cache, the fake server's answer is parsed and scored, and the transcript and outcome
lines are written to a real run directory, each step over the benchmark's own items (best of 5
repeats, in CPU time). Read it next to the run's CPU per request and ``floor.py``: what is left
over is the cost of handling requests one at a time, not the engine's work.

    python benchmarks/engine_work.py [--protocol gemba-mqm|novel-spans] [--workload fewshot] [--n 300]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import timeit
from collections.abc import Callable
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.workload import WORKLOADS, JobSpec, write_items, write_job  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--protocol", default="gemba-mqm", choices=["gemba-mqm", "novel-spans"])
    parser.add_argument("--workload", choices=sorted(WORKLOADS), default="default")
    parser.add_argument("--n", type=int, default=300)
    args = parser.parse_args()
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # should anything import litellm
    from judge_engine.fake.answers import AnswerBook
    from judge_engine.inputs.config import load_config
    from judge_engine.lanes import Lane, rough_prompt_tokens
    from judge_engine.planning.plan import build_protocol, iter_tasks, template_hashes
    from judge_engine.providers import Endpoint
    from judge_engine.providers.base import ProviderResponse
    from judge_engine.rundir.records import Manifest
    from judge_engine.rundir.store import RunStore
    from judge_engine.running.attempt import TaskLog, attempt_record
    from judge_engine.running.cache import AnswerCache
    from judge_engine.running.runtime import JudgeRuntime
    from judge_engine.running.task import outcome

    work = Path(tempfile.mkdtemp(prefix="engine-work-"))
    items = write_items(work / "items.jsonl", args.n, WORKLOADS[args.workload])
    config = load_config(write_job(work / "job", items, "http://127.0.0.1:9/v1", JobSpec(protocol=args.protocol)))
    judge = config.judges[0]
    protocol = build_protocol(judge)
    runtime = JudgeRuntime(judge, protocol, Endpoint(judge.model, judge.api_base), template_hashes(protocol),
                           lane=Lane(judge.name, judge.limits), provider=None)  # type: ignore[arg-type]
    tasks = [task for task, _ in zip(iter_tasks(judge, protocol, config.dataset), range(args.n), strict=False)]
    book = AnswerBook()
    messages = [protocol.render(t.item, t.variant) for t in tasks]
    answers = [book.answer(m, model=judge.model, temperature=0.0, json_mode=False)[0] for m in messages]
    requests = [runtime.request(m, 0.0) for m in messages]
    responses = [ProviderResponse(content=a, finish_reason="stop", prompt_tokens=800, completion_tokens=50,
                                  cost=1e-4, headers={"x-ratelimit-limit-requests": "3000"}, model="gpt-4o-mini")
                 for a in answers]
    verdicts = [protocol.parse(a, t.item, t.variant) for a, t in zip(answers, tasks, strict=True)]
    records = [attempt_record(t, TaskLog(), r, response=p, latency=0.5) for t, r, p in zip(tasks, requests, responses, strict=True)]
    outcomes = [outcome(runtime, t, TaskLog(), verdict=v.model_dump(mode="json"), score=1.0, scores={})
                for t, v in zip(tasks, verdicts, strict=True)]
    cache = AnswerCache(work / "cache")
    store = RunStore.create(work / "run", Manifest.from_dict({"format": "judge-engine-run", "run_id": "engine-work"}))
    stored = iter(range(10**9))

    steps: list[tuple[str, Callable[[int], object]]] = [
        ("render the prompt", lambda i: protocol.render(tasks[i].item, tasks[i].variant)),
        ("build the request", lambda i: runtime.request(messages[i], 0.0)),
        ("cache key", lambda i: runtime.key(requests[i], tasks[i])),
        ("rough prompt size", lambda i: rough_prompt_tokens(messages[i])),
        ("cache lookup (miss)", lambda i: cache.get(f"miss-{i}")),
        ("cache store (batched)", lambda i: cache.set(f"key-{next(stored)}", responses[i].to_record())),
        ("parse the answer", lambda i: protocol.parse(answers[i], tasks[i].item, tasks[i].variant)),
        ("score", lambda i: protocol.score(verdicts[i], tasks[i].item, tasks[i].variant)),
        ("verdict to JSON", lambda i: verdicts[i].model_dump(mode="json")),
        ("transcript record", lambda i: attempt_record(tasks[i], TaskLog(), requests[i], response=responses[i], latency=0.5)),
        ("write the transcript line", lambda i: store.write_transcript(records[i])),
        ("outcome record", lambda i: outcome(runtime, tasks[i], TaskLog(), verdict={"a": 1}, score=1.0, scores={})),
        ("write the outcome line", lambda i: store.write_outcome(outcomes[i])),
    ]
    total = 0.0
    print(f"{args.protocol}, {args.workload} workload, {len(tasks)} tasks, best of 5, ms per task")
    for name, step in steps:
        def run_all(step: Callable[[int], object] = step) -> None:
            for index in range(len(tasks)):
                step(index)

        # process_time, not wall time: on a shared machine the wall clock runs on while this
        # process waits for a core.
        best = min(timeit.repeat(run_all, number=1, repeat=5, timer=time.process_time)) / len(tasks) * 1000
        total += best
        print(f"  {name:28s} {best:.4f}")
    print(f"  {'total':28s} {total:.4f}")
    cache.close()
    store.close()


if __name__ == "__main__":
    main()
