"""The demo's judges disagree as real ones do (issue 26): the fake server answers each model as it
reads the item (``judge_engine/fake/persona.py``: the item's truth, the model's strength and lean),
each model reproducibly; log-prob and annotator answers stay the truth's, judged as before."""

from __future__ import annotations

import json
import re
import statistics
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from judge_engine.errors import VerdictError
from judge_engine.fake import FakeConfig, FakeServer
from judge_engine.fake.answers import AnswerBook, as_judged
from judge_engine.fake.persona import TRUTH, persona
from judge_engine.fake.writers.mqm import GEMBA_CATEGORIES, fake_errors
from judge_engine.fake.writers.prometheus import write_absolute
from judge_engine.inputs.config import load_config
from judge_engine.inputs.dataset import iter_items
from judge_engine.planning.plan import build_protocol
from judge_engine.protocols.gemba_mqm import GembaMQM

REPO = Path(__file__).resolve().parents[2]
WEAK, STRONG = "gpt-4o-mini", "claude-sonnet-4-5"
"""Two models of the README's own example (``--model`` swaps one for the other)."""
EXAMPLES = ("literary_mt", "literary_mt_lit", "prometheus_absolute", "prometheus_relative", "ttct", "bws",
            "close_reading", "custom_rubric", "cdat")


def _post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(url + "/chat/completions", data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        reply: dict[str, Any] = json.load(response)
    return reply


def _mqm_answers(model: str, temperature: float = 0.0) -> list[str]:
    """The fake server's answers to every literary_mt item, asked over HTTP by ``model``, from a
    fresh server (a run of its own)."""
    config = load_config(REPO / "examples" / "literary_mt" / "config.yaml")
    protocol = GembaMQM()
    with FakeServer(FakeConfig()) as server:
        return [_post(server.base_url, {"model": model, "temperature": temperature,
                                        "messages": protocol.render(item)})["choices"][0]["message"]["content"]
                for item in iter_items(config.dataset, protocol.required_fields)]


def _read(answers: list[str]) -> list[tuple[float | None, list[tuple[str, str]]]]:
    """(score, [(severity, span)...]) of each GEMBA-MQM answer."""
    protocol = GembaMQM()
    item = {"id": "x", "source": "s", "target": "t", "source_lang": "en", "target_lang": "de"}
    read = []
    for answer in answers:
        verdict = protocol.parse(answer, item)
        read.append((protocol.score(verdict, item).score, [(e.severity, e.span) for e in verdict.errors]))
    return read


def test_two_models_answer_the_same_items_differently_and_each_the_same_every_time() -> None:
    weak, strong = _read(_mqm_answers(WEAK)), _read(_mqm_answers(STRONG))
    assert sum(w[0] != s[0] for w, s in zip(weak, strong, strict=True)) >= 5  # scores (measured: 17 of 20)
    assert sum(w[1] != s[1] for w, s in zip(weak, strong, strict=True)) >= 5  # the error spans and severities (20 of 20)
    assert _read(_mqm_answers(WEAK)) == weak and _read(_mqm_answers(STRONG)) == strong  # another run: the same
    assert _mqm_answers(WEAK, 1.0) == _mqm_answers(WEAK, 1.0)  # sampling too, for the same request
    assert _mqm_answers("openai/gpt-4o-mini") == _mqm_answers(WEAK)  # a provider prefix is not another model


def _verdicts(config_path: Path, judge_index: int, model: str) -> list[str]:
    config = load_config(config_path)
    judge = config.judges[judge_index]
    protocol = build_protocol(judge)
    book, found = AnswerBook(), []
    for item in iter_items(config.dataset, protocol.required_fields):
        for variant in protocol.variants(item):
            answer, _ = book.answer(protocol.render(item, variant), model=model, temperature=0.0,
                                    json_mode=protocol.json_mode)
            try:
                found.append(protocol.parse(answer, item, variant).model_dump_json())
            except VerdictError as error:  # a generation protocol's list of too few nouns is data too
                found.append(f"{error.code}: {answer}")
    return found


@pytest.mark.parametrize("example", EXAMPLES)
def test_every_protocols_answers_depend_on_the_model(example: str) -> None:
    """Every judge of the example: the two models' verdicts differ on some items (BWS and
    Prometheus' pairs: other picks and winners), and each model's are the same when asked again."""
    path = REPO / "examples" / example / "config.yaml"
    for index in range(len(load_config(path).judges)):
        weak, strong = _verdicts(path, index, WEAK), _verdicts(path, index, STRONG)
        assert weak != strong, (example, index)
        assert weak == _verdicts(path, index, WEAK), (example, index)


def _scores(model: str, items: int = 600) -> list[int]:
    """Prometheus-absolute scores on a 1-5 scale for ``items`` prompts (seeds), as ``model`` gives them."""
    prompt = [{"role": "user", "content": "a score rubric representing a evaluation criteria are given\n"
                                          "write a score that is an integer between 1 and 5."}]
    answers = (write_absolute(prompt, seed=seed, temperature=0.0, json_mode=False, model=model) for seed in range(items))
    return [int(re.findall(r"\d+", answer or "")[-1]) for answer in answers]


def test_a_stronger_model_is_closer_to_the_truth_and_each_leans_its_own_way() -> None:
    truth = _scores(TRUTH)
    weak, strong, mid = _scores(WEAK), _scores(STRONG), _scores("some-judge")
    error = {name: statistics.fmean(abs(a - t) for a, t in zip(got, truth, strict=True))
             for name, got in (("weak", weak), ("mid", mid), ("strong", strong))}
    # Mean distance to the truth on 600 items: weak 0.58, mid 0.33, strong 0.28.
    assert error["strong"] < error["weak"] and error["mid"] < error["weak"]
    assert error["strong"] > 0  # not the truth itself
    # A consistent bias: the mean gap to the truth has the sign of the model's lean.
    for model in (WEAK, STRONG, "gemini-2.5-flash", "claude-haiku-4-5"):
        gap = statistics.fmean(a - t for a, t in zip(_scores(model), truth, strict=True))
        assert (gap > 0) == (persona(model).lean > 0), (model, gap, persona(model).lean)
    assert persona("gemini-2.5-flash").lean > 0 > persona(WEAK).lean  # a lenient judge and a harsh one
    # Two weak judges, a harsh and a lenient one, agree exactly on 37% of the items (not all, not none).
    agree = statistics.fmean(a == b for a, b in zip(weak, _scores("claude-haiku-4-5"), strict=True))
    assert 0.3 < agree < 0.8


def test_a_weak_judge_misses_and_invents_more_errors_a_harsh_one_reports_more() -> None:
    target = "the quick brown fox jumps over the lazy dog near a quiet river bank at dawn"

    def errors(model: str, seed: int) -> list[tuple[str, str]]:
        return [(e.span, e.severity) for e in fake_errors(target, seed=seed, temperature=0.0,
                                                          categories=GEMBA_CATEGORIES, model=model)]

    def f1(model: str) -> float:
        hits = found = true = 0
        for seed in range(600):
            got, truth = errors(model, seed), errors(TRUTH, seed)
            hits += sum(min(got.count(e), truth.count(e)) for e in set(truth))
            found, true = found + len(got), true + len(truth)
        return 2 * hits / (found + true)

    # Measured: span-and-severity F1 against the truth 0.53 (gpt-4o-mini), 0.78 (claude-sonnet-4-5).
    assert 0.4 < f1(WEAK) < f1(STRONG) < 0.95
    harsh, lenient = WEAK, "gemini-2.5-flash"  # leans -0.85 and +0.61, both weak
    count = {m: statistics.fmean(len(errors(m, s)) for s in range(600)) for m in (harsh, lenient, TRUTH)}
    assert count[harsh] > count[TRUTH] > count[lenient]


def test_logprob_and_annotator_answers_are_the_truths_judged_as_before() -> None:
    """A request that asks for log-probs, and every pairwise-annotators request, is answered from
    the truth and judged by the log-prob judge of the model's strength, whatever the model: what
    those answers were before the models' personas."""
    book = AnswerBook()
    config = load_config(REPO / "examples" / "prometheus_absolute" / "config.yaml")
    protocol = build_protocol(config.judges[0])
    messages = protocol.render(next(iter(iter_items(config.dataset, protocol.required_fields))))
    truth = book.answer(messages, model=TRUTH, temperature=0.0, json_mode=False)
    assert book.answer(messages, model=WEAK, temperature=0.0, json_mode=False, logprobs=True) == truth
    with FakeServer(FakeConfig()) as server:
        reply = _post(server.base_url, {"model": WEAK, "temperature": 0.0, "messages": messages, "logprobs": True,
                                        "top_logprobs": 5})
    expected, _ = as_judged(messages, truth[0], truth[1], model=WEAK, temperature=0.0, asked=True)
    assert reply["choices"][0]["message"]["content"] == expected
    annotators = load_config(REPO / "examples" / "pairwise_annotators" / "config.yaml")
    pairs = build_protocol(annotators.judges[0])
    item = next(iter(iter_items(annotators.dataset, pairs.required_fields)))
    asked = pairs.render(item, pairs.variants(item)[0])
    assert {book.answer(asked, model=m, temperature=0.0, json_mode=False) for m in (WEAK, STRONG, TRUTH)} == \
        {book.answer(asked, model=TRUTH, temperature=0.0, json_mode=False)}
