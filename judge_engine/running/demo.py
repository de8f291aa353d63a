"""What ``--demo`` runs against: the project's fake server (:mod:`judge_engine.fake`) in child
processes on loopback ports, answering every judge with synthetic answers and no API key.

Each server runs in a session of its own, so that a Ctrl-C meant for the run does not kill it
under the calls in flight, and stops with the session (or, killed with it, on its own). A judge
with several deployments gets a server per deployment, each holding that deployment's limits,
so the demo shows requests split between them; the other judges share one.

A real provider keeps a batch going when the client that submitted it dies, so a demo's do too:
each server keeps its batch APIs' files and batches in the run's :data:`DEMO_DIR` folder, one
folder per server (:mod:`judge_engine.fake.batch_state`), and a server started later by
``resume``, ``status --poll`` or ``cancel`` on the same folder serves them again, by the wall
clock of their creation. That folder is the fake provider's state, not part of the run's record.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from judge_engine.inputs.config import JudgeConfig, Limits
from judge_engine.providers import Endpoint, deployment_names

if TYPE_CHECKING:
    from judge_engine.fake import FakeServerProcess
    from judge_engine.running.session import PreparedRun

DEMO_BATCH_S = 3.0
"""How long a demo batch takes to complete, by default (``--demo-batch-s``): long enough to see
it in progress, short enough for the README's commands."""
DEMO_DIR = "demo"
"""A demo run's folder for its fake servers' state (their files and batches)."""


def demo_endpoint(judge: JudgeConfig, url: str) -> Endpoint:
    """The fake server for ``judge``: the model's own name under ``openai/`` (the fake speaks
    OpenAI's API), a throwaway key; each request names its sample, so that a demo's answers are
    a function of the request (:attr:`~judge_engine.providers.Endpoint.fake`)."""
    return Endpoint("openai/" + judge.model.split("/")[-1], url, "demo-key", fake=True)


@contextlib.contextmanager
def demo_endpoints(prepared: PreparedRun, *, batch_s: float | None = None) -> Iterator[dict[str, list[Endpoint]]]:
    """Judge name -> its demo endpoints (one per deployment), each server started for as long as
    this lasts; a batch they are sent takes ``batch_s`` (default :data:`DEMO_BATCH_S`)."""
    with contextlib.ExitStack() as stack:
        started: dict[str, str] = {}

        def server(name: str, limits: Limits | None = None) -> str:
            if name not in started:
                started[name] = stack.enter_context(demo_server(prepared, name, limits, batch_s=batch_s)).base_url
            return started[name]

        where = {}
        for judge in prepared.config.judges:
            limits: list[Limits | None] = [d.limits or judge.limits for d in judge.deployments] or [None]
            where[judge.name] = [demo_endpoint(judge, server(name, lane))
                                 for name, lane in zip(demo_servers(judge), limits, strict=True)]
        yield where


def demo_servers(judge: JudgeConfig) -> list[str]:
    """The names of the demo servers ``judge``'s deployments go to, in order: one of its own per
    deployment, or the one the judges without deployments share. Its batches go to the first."""
    return [f"{judge.name}.{name}" for name in deployment_names(judge)] if judge.deployments else ["shared"]


def demo_server(prepared: PreparedRun, name: str, limits: Limits | None = None, *, batch_s: float | None = None,
                read_only: bool = False) -> FakeServerProcess:
    """The demo server ``name`` (not started yet), holding ``limits``, its state in the run's
    :data:`DEMO_DIR` folder. ``read_only``: a look that writes nothing (``status --poll``, maybe
    beside the session that owns it)."""
    from judge_engine.fake import FakeConfig, FakeServerProcess
    from judge_engine.fake.config import FakeBatchConfig

    batch = FakeBatchConfig(processing_s=DEMO_BATCH_S if batch_s is None else batch_s)
    config = FakeConfig(latency_s=0.05, latency_jitter_s=0.03, window_s=10.0, batch=batch,
                        rpm=limits.rpm if limits else None, tpm=limits.tpm if limits else None)
    return FakeServerProcess(config, own_session=True, state_dir=prepared.run_dir / DEMO_DIR / name,
                             read_only=read_only)
