"""Every query parameter of every endpoint, given hostile values (issue 24, point 7): the viewer
answers 200, or 400/404 with a JSON error naming the parameter, never 500 and never a hang."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from tests.viewer.conftest import ServedViewer

ENDPOINTS = {
    "api/tasks": ("judge", "status", "reason", "temperature", "repeat", "min", "max", "q", "item", "sort", "page",
                  "size"),
    "api/item": ("id",),
    "api/transcript": ("run", "task"),
    "api/overview": ("x",),
}
"""Each endpoint and its query parameters (``api/overview`` takes none: an unknown one is ignored)."""
REALS = frozenset({"temperature", "min", "max"})
WHOLES = frozenset({"repeat", "page", "size", "run"})
NOT_REALS = frozenset({"1e400", "-1e400", "nan", "inf", "-inf", "abc", "💥", "\x00", "9" * 400, "0x10", "%"})
NOT_WHOLES = NOT_REALS | {"99999999999999999999", "1.5"}  # -1 and 0: a page clamps to 1, a repeat finds nothing
HOSTILE = ["99999999999999999999", "1e400", "-1e400", "nan", "inf", "-inf", "-1", "0", "1.5", "-0", "0x10", "1_000",
           "", " ", "abc", "💥", "\x00", "%", "'; DROP TABLE tasks; --", '"', "*", "a" * 4000, "1e-400", "9" * 400,
           "１２",  # full-width digits: int() reads them, SQLite would not
           ]


@pytest.fixture(scope="module")
def viewer(demo_runs: dict[str, Path]) -> Any:
    with ServedViewer([demo_runs["literary_mt"]]) as served:
        yield served.ready()


def test_every_parameter_of_every_endpoint_takes_hostile_values(viewer: ServedViewer) -> None:
    task = viewer.json("api/tasks?size=1")["rows"][0]
    base = {"api/item": {"id": task["item_id"]}, "api/transcript": {"run": "0", "task": task["task_id"]}}
    failures = []
    for endpoint, parameters in ENDPOINTS.items():
        for parameter in parameters:
            for value in HOSTILE:
                query = {**base.get(endpoint, {}), parameter: value}
                path = endpoint + "?" + "&".join(f"{k}={quote(v, safe='')}" for k, v in query.items())
                started = time.monotonic()
                status, _, body = viewer.get(path)
                took = time.monotonic() - started
                problem = _problem(status, body, parameter, value, took)
                if problem:
                    failures.append(f"{endpoint} {parameter}={value[:30]!r}: {problem}")
    assert failures == []


def _problem(status: int, body: bytes, parameter: str, value: str, took: float) -> str | None:
    if took > 5:
        return f"took {took:.1f} s"
    if status not in (200, 400, 404):
        return f"HTTP {status}: {body[:200]!r}"
    if status == 400 and not json.loads(body).get("error", "").startswith(f"{parameter}: "):
        return f"400 without naming the parameter: {body[:200]!r}"
    if (parameter in REALS and value in NOT_REALS or parameter in WHOLES and value in NOT_WHOLES) and status != 400:
        return f"HTTP {status}: a number the viewer cannot use was not refused"
    return None


@pytest.mark.parametrize(("query", "message"), [
    ("page=99999999999999999999", "page: "),
    ("repeat=1e400", "repeat: "),
    ("size=nan", "size: "),
    ("min=inf", "min: "),
    ("temperature=nan", "temperature: "),
    ("page=1.5", "page: "),
])
def test_the_numbers_from_the_issue_are_400_naming_the_parameter(viewer: ServedViewer, query: str, message: str) -> None:
    status, _, body = viewer.get(f"api/tasks?{query}")
    assert status == 400 and json.loads(body)["error"].startswith(message)


def test_a_transcript_of_a_run_that_is_not_open_is_404_and_a_bad_number_400(viewer: ServedViewer) -> None:
    assert viewer.get("api/transcript?run=7&task=x")[0] == 404
    status, _, body = viewer.get("api/transcript?run=1e400&task=x")
    assert status == 400 and json.loads(body)["error"].startswith("run: ")
