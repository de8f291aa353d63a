"""Custom judges end to end (issue 19, items 1 and 3): against the fake server over HTTP, their
answers are scored per the declared fields, an unusable answer is re-asked then unscored (never
scored), the template's hash is in the cache key, ``protocols --check`` shows the prompt, and a
judge of an item's own model family is flagged by ``plan`` or kept off it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from judge_engine.cli import main
from judge_engine.fake import FakeServer
from judge_engine.fake.answers import AnswerBook
from judge_engine.inputs.config import load_config
from judge_engine.inputs.dataset import iter_items
from judge_engine.planning.plan import build_protocol
from judge_engine.planning.self_preference import model_family, own_systems, recusal
from tests.harness import TEST_KEY_ENV, read_lines, read_transcripts

SYSTEMS = ["gpt-4o-2024-08-06", "claude-sonnet-4-5-20250929", "llama-3.1-8b-instruct"]


def job(tmp_path: Path, server: FakeServer | None, options: dict[str, Any], *, items: int = 9,
        **judge: Any) -> Path:
    with (tmp_path / "items.jsonl").open("w", encoding="utf-8") as handle:
        for index in range(items):
            handle.write(json.dumps({
                "id": f"q{index}", "question": f"Question {index}: how long should an egg boil?",
                "response": f"Boil it for {index + 4} minutes, then cool it in cold water for a minute.",
                "system": SYSTEMS[index % 3]}) + "\n")
    (tmp_path / "rubric.j2").write_text("Grade the answer.\nQuestion:\n{{ question }}\nResponse:\n{{ response }}\n",
                                        encoding="utf-8")
    raw = {"dataset": {"path": "items.jsonl"}, "output": {"dir": "runs"}, "cache": {"dir": "cache"},
           "judges": [{"name": "mine", "model": "openai/gpt-4o-mini", "protocol": "custom",
                       "api_base": server.base_url if server else None, "api_key_env": TEST_KEY_ENV,
                       "retries": {"transport": 2, "reasks": 2, "backoff_max_s": 0.01},
                       "protocol_options": {"template_file": "rubric.j2", **options}, **judge}]}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return path


JSON_OPTIONS = {"output": "json", "score": "score",
                "fields": {"reasoning": "text", "score": {"type": "integer", "min": 1, "max": 5},
                           "wrong": {"type": "spans", "of": "response"}}}


def only_run(tmp_path: Path) -> Path:
    (run,) = [p for p in (tmp_path / "runs").iterdir() if not p.is_symlink()]
    return run


def test_a_custom_json_judge_end_to_end_scores_what_the_fake_answers(tmp_path: Path, fake_server: FakeServer) -> None:
    path = job(tmp_path, fake_server, JSON_OPTIONS)
    assert main(["run", str(path), "--no-live"]) == 0
    run = only_run(tmp_path)
    outcomes = read_lines(run / "outcomes.jsonl")
    assert len(outcomes) == 9 and all(o["status"] == "scored" and o["protocol"] == "custom" for o in outcomes)
    config = load_config(path)
    protocol = build_protocol(config.judges[0])
    for item, outcome in zip(iter_items(config.dataset), outcomes, strict=True):
        answer, writer = AnswerBook().answer(protocol.render(item), model=config.judges[0].model, temperature=0.0,
                                             json_mode=True)
        assert writer == "custom"
        assert outcome["verdict"] == protocol.parse(answer, item).model_dump(mode="json")
        assert outcome["score"] == protocol.score(protocol.parse(answer, item), item).score
        for span in outcome["verdict"]["wrong"]:
            assert item["response"][span["start"]:span["end"]] == span["text"]
    request = read_transcripts(run)[0]["request"]
    assert request["response_format"]["json_schema"]["schema"]["properties"]["score"]["maximum"] == 5
    manifest = json.loads((run / "run.json").read_text())
    (entry,) = manifest["judges"]
    assert set(entry["templates"]) == {"custom/answer_format.j2", str(tmp_path / "rubric.j2")}
    assert entry["score_range"] == [1.0, 5.0] and "template_file" not in entry["protocol_options"]


@pytest.mark.parametrize("options", [
    JSON_OPTIONS,
    {"output": "text", "fields": {"feedback": "text", "score": {"type": "integer", "min": 1, "max": 5}}, "score": "score"},
    # A regex for a layout the answer format does not ask for: nothing the judge writes can match.
    {"output": "text", "regex": r"VERDICT=(?P<score>\d)", "fields": {"score": "integer"}, "score": "score"},
])
def test_unusable_answers_are_re_asked_then_unscored_never_scored(
    tmp_path: Path, fake_server: FakeServer, options: dict[str, Any]
) -> None:
    if "regex" not in options:
        fake_server.update(malformed_rate=1.0)  # prose, every time
    path = job(tmp_path, fake_server, options, items=4)
    assert main(["run", str(path), "--no-live"]) == 3
    outcomes = read_lines(only_run(tmp_path) / "outcomes.jsonl")
    assert [(o["status"], o["reasks"], o["reason_code"], o["score"]) for o in outcomes] == \
        [("unscored", 2, "unreadable", None)] * 4
    assert fake_server.stats()["requests_total"] == 12  # each asked three times
    reask = next(t for t in read_transcripts(only_run(tmp_path)) if t["reask"] == 1)
    assert reask["request"]["messages"][-1]["content"].startswith("Your previous answer could not be used:\n- ")


def test_the_template_hash_is_in_the_cache_key(tmp_path: Path, fake_server: FakeServer) -> None:
    path = job(tmp_path, fake_server, JSON_OPTIONS, items=3)
    assert main(["run", str(path), "--no-live"]) == 0
    assert main(["run", str(path), "--no-live", "--new-run"]) == 0
    assert fake_server.stats()["requests_total"] == 3  # the second run came from the cache
    rubric = tmp_path / "rubric.j2"
    rubric.write_text(rubric.read_text(encoding="utf-8") + "Be strict.\n", encoding="utf-8")
    assert main(["run", str(path), "--no-live"]) == 0  # another template: another run, new answers
    assert fake_server.stats()["requests_total"] == 6
    assert len([p for p in (tmp_path / "runs").iterdir() if not p.is_symlink()]) == 3


def test_protocols_check_renders_each_judges_prompt_or_names_the_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = job(tmp_path, None, JSON_OPTIONS)
    assert main(["protocols", "--check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "Question 0: how long should an egg boil?" in out and '"score" (an integer from 1 to 5)' in out
    assert "JSON schema sent" in out and "1 judges checked" in out
    broken = job(tmp_path, None, {**JSON_OPTIONS, "score": "score * reasoning"})
    assert main(["protocols", "--check", str(broken)]) == 2
    err = capsys.readouterr().err
    assert "judges[mine].protocol_options: score: 'reasoning' is not a field with a number" in err
    missing = job(tmp_path, None, {**JSON_OPTIONS, "template": "{{ question }} {{ verdict_of_humans }}"})
    raw = yaml.safe_load(missing.read_text())
    del raw["judges"][0]["protocol_options"]["template_file"]
    missing.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    assert main(["protocols", "--check", str(missing)]) == 2
    assert "verdict_of_humans" in capsys.readouterr().err  # the item field the template reads is not there


def test_the_model_family_of_a_judge_and_of_a_system() -> None:
    # One definition with stats (judge_engine.util.families): the vendor's line, so siblings count.
    assert model_family("openai/gpt-4o-mini") == model_family("gpt-4o-2024-08-06") == "openai"
    assert model_family("gpt-4-turbo") == model_family("chatgpt-4o-latest") == "openai"
    assert model_family("anthropic/claude-haiku-4-5") == model_family("claude-sonnet-4-5-20250929") == "anthropic"
    assert model_family("bedrock/anthropic.claude-3-5-sonnet-20240620-v1:0") == "anthropic"
    assert model_family("ollama_chat/llama3.1:8b") == model_family("meta-llama/Llama-3.1-8B-Instruct") == "meta"
    assert model_family("together_ai/mistralai/Mixtral-8x7B-Instruct-v0.1") == "mistral"
    assert model_family("gemini/gemini-2.5-flash") == model_family("gemini-2.5-pro") == "google"
    assert model_family("hosted_vllm/vicuna-13b") == model_family("vicuna-13b") != model_family("vicuna-7b")
    assert own_systems("openai/gpt-4o-mini", {"system": ["llama-3.1-8b", "gpt-4o", "claude-3-opus"]}) == ["gpt-4o"]
    candidates = {"candidates": [{"id": "x", "text": "a", "system": "chatgpt-4o-latest"}]}
    assert own_systems("openai/gpt-4o-mini", candidates) == ["chatgpt-4o-latest"]


def test_a_fine_tuned_or_bedrock_profile_judge_is_kept_off_its_base_models_family() -> None:
    # A fine-tune's id has its base model's family (before: no family, never flagged), and so
    # does a Bedrock cross-region inference profile.
    item = {"system": ["gpt-4o-2024-08-06", "claude-3-5-sonnet-20240620", "llama-3.1-8b"]}
    assert own_systems("openai/ft:gpt-4o-mini-2024-07-18:org::abc123", item) == ["gpt-4o-2024-08-06"]
    reason = recusal("openai/ft:gpt-4o-mini-2024-07-18:org::abc123", "forbid", item)
    assert reason is not None and "family (openai)" in reason
    assert own_systems("bedrock/global.anthropic.claude-sonnet-4-5-20250929-v1:0", item) == ["claude-3-5-sonnet-20240620"]
    # Two fine-tunes of different vendors are not one family "ft".
    assert own_systems("mistral/ft:open-mistral-7b:587a6b29:20240514:7e773925",
                       {"system": "ft:gpt-4o-mini-2024-07-18:org::xyz"}) == []


def test_plan_flags_a_judge_of_its_own_family_with_counts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = job(tmp_path, None, JSON_OPTIONS)
    assert main(["plan", str(path)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert ("self-preference: judges[mine] (openai/gpt-4o-mini, family openai) would judge 3 of 9 items whose system is of "
            "its family (gpt-4o-2024-08-06); set self_preference: forbid") in out
    assert main(["plan", str(job(tmp_path, None, JSON_OPTIONS, self_preference="allow"))]) == 0
    assert "self-preference" not in capsys.readouterr().out


def test_forbid_keeps_the_judge_off_its_own_familys_items_without_a_call(
    tmp_path: Path, fake_server: FakeServer, capsys: pytest.CaptureFixture[str]
) -> None:
    path = job(tmp_path, fake_server, JSON_OPTIONS, self_preference="forbid")
    assert main(["plan", str(path)]) == 0
    assert "forbidden, so those tasks are recorded unscored" in " ".join(capsys.readouterr().out.split())
    assert main(["run", str(path), "--no-live"]) == 0  # held back on purpose: not a failure
    outcomes = read_lines(only_run(tmp_path) / "outcomes.jsonl")
    held = [o for o in outcomes if o["status"] == "unscored"]
    assert [o["item_id"] for o in held] == ["q0", "q3", "q6"]  # the gpt-4o items
    assert {(o["reason_code"], o["attempts"]) for o in held} == {("self_preference", 0)}
    assert "gpt-4o-2024-08-06" in held[0]["reason"]
    assert fake_server.stats()["requests_total"] == 6


def test_candidates_in_both_orders_are_mapped_back_and_their_consistency_reported(
    tmp_path: Path, fake_server: FakeServer
) -> None:
    options = {"output": "text", "candidates": "pair", "orders": 2,
               "template": "Which answer is better?\n{% for c in candidates %}Candidate {{ c.label }}: {{ c.text }}\n"
                           "{% endfor %}",
               "fields": {"better": {"type": "candidate", "score_map": {"short": 0, "long": 1}}}, "score": "better"}
    path = job(tmp_path, fake_server, options, items=6)
    raw = yaml.safe_load(path.read_text())
    del raw["judges"][0]["protocol_options"]["template_file"]
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    with (tmp_path / "items.jsonl").open("w", encoding="utf-8") as handle:
        for index in range(6):
            pair = [{"id": "short", "text": f"Boil it {index + 4} minutes."},
                    {"id": "long", "text": f"Boil it {index + 4} minutes, then cool it in cold water."}]
            handle.write(json.dumps({"id": f"q{index}", "pair": pair}) + "\n")
    assert main(["run", str(path), "--no-live"]) == 0
    run = only_run(tmp_path)
    outcomes = read_lines(run / "outcomes.jsonl")
    assert sorted({o["variant"] for o in outcomes}) == ["order0", "order1"] and len(outcomes) == 12
    for o in outcomes:
        shown = o["verdict"]["order"]
        assert shown == (["short", "long"] if o["variant"] == "order0" else ["long", "short"])
        assert o["verdict"]["better_id"] == shown["AB".index(o["verdict"]["better"])]
        assert o["score"] == (1.0 if o["verdict"]["better_id"] == "long" else 0.0)
    report = tmp_path / "stats.json"
    assert main(["stats", str(run), "--json", str(report), "--quiet"]) == 0
    (row,) = json.loads(report.read_text())["sections"]["candidate_consistency"]["rows"]
    by_item: dict[str, set[str]] = {}
    for o in outcomes:
        by_item.setdefault(o["item_id"], set()).add(o["verdict"]["better_id"])
    assert (row["field"], row["items"]) == ("better", 6)
    assert row["position_consistency"] == sum(len(ids) == 1 for ids in by_item.values()) / 6
