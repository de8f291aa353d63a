"""Juries (issue 19, item 2): panels of judges whose verdicts are aggregated into an outcome of
their own, with each juror's vote and their agreement; ties settled by an explicit rule; checked
when the config is read; written when every juror has judged, and again after a --retry."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

import judge_engine.fake.writers as writers_module
from judge_engine.cli import main
from judge_engine.errors import ConfigError, ReasonCode
from judge_engine.fake import FakeServer
from judge_engine.fake.writers import register_writer
from judge_engine.inputs.config import JuryConfig, load_config
from judge_engine.planning.plan import build_protocol
from judge_engine.protocols.base import Message, VoteScale
from judge_engine.stats.runs import read_run
from judge_engine.stats.sections import judge_agreement_section
from judge_engine.trust.jury import Juror, aggregate, check_juries, jury_record
from tests.harness import TEST_KEY_ENV, read_lines
from tests.stats.fixtures import outcome, write_run

LABELS = VoteScale("categorical", values=("pass", "fail"))
ORDINAL = VoteScale("ordinal", bounds=(1.0, 5.0))


def jurors(*votes: str | float | None, scores: Sequence[float | None] | None = None) -> list[Juror]:
    """Jurors a, b, c... with these votes (None: unscored, unreadable)."""
    out = []
    for index, vote in enumerate(votes):
        name = "abcdefgh"[index]
        score = (scores[index] if scores else vote if isinstance(vote, float) else None)
        status = "scored" if vote is not None else "unscored"
        out.append(Juror(name, f"m/{name}", f"t-{name}", status, None if vote is not None else "unreadable",
                         score, vote))
    return out


def panel(n: int = 3, **options: Any) -> JuryConfig:
    return JuryConfig(name="panel", judges=list("abcdefgh"[:n]), **options)


# --- aggregating: hand-computed -----------------------------------------------------------------


def test_a_majority_of_three_labels_and_its_agreement() -> None:
    decided = aggregate(panel(), LABELS, jurors("pass", "fail", "pass", scores=[1.0, 0.0, 1.0]))
    # pass 2, fail 1 -> pass; pairs ab no, ac yes, bc no -> 1/3; the score of a juror who voted pass
    assert (decided.value, decided.score, decided.tie, decided.voted) == ("pass", 1.0, None, 3)
    assert decided.agreement == pytest.approx(1 / 3)


def test_mean_median_and_weighted_of_three_scores() -> None:
    votes = jurors(2.0, 5.0, 4.0)
    assert aggregate(panel(aggregate="mean"), ORDINAL, votes).value == pytest.approx(11 / 3)  # (2 + 5 + 4) / 3
    assert aggregate(panel(aggregate="median"), ORDINAL, votes).value == 4.0  # 2, 4, 5
    weighted = panel(aggregate="weighted", weights={"a": 2, "b": 1, "c": 1})
    assert aggregate(weighted, ORDINAL, votes).value == pytest.approx(13 / 4)  # (2*2 + 5 + 4) / 4
    decided = aggregate(panel(aggregate="majority"), ORDINAL, jurors(4.0, 5.0, 4.0))
    assert (decided.value, decided.spread, decided.agreement) == (4.0, 1.0, pytest.approx(1 / 3))


def test_a_weighted_vote_of_labels() -> None:
    weighted = panel(aggregate="weighted", weights={"a": 3, "b": 1, "c": 1})
    assert aggregate(weighted, LABELS, jurors("fail", "pass", "pass")).value == "fail"  # 3 against 2


@pytest.mark.parametrize(("tie", "value", "code"), [
    ("first", "fail", None),  # a (listed first) voted fail
    ("abstain", None, ReasonCode.JURY_TIE),
    ("pass", "pass", None),
])
def test_an_even_panel_settles_a_tie_by_its_rule(tie: str, value: str | None, code: ReasonCode | None) -> None:
    decided = aggregate(panel(4, tie=tie), LABELS, jurors("fail", "pass", "pass", "fail"))
    assert (decided.value, decided.code, decided.tie) == (value, code, tie)
    assert decided.agreement == pytest.approx(2 / 6)  # ad and bc agree among 6 pairs


def test_an_even_median_ties_between_its_two_middle_values() -> None:
    votes = jurors(2.0, 3.0, 4.0, 5.0)
    assert aggregate(panel(4, aggregate="median", tie="mean"), ORDINAL, votes).value == 3.5
    assert aggregate(panel(4, aggregate="median", tie="first"), ORDINAL, votes).value == 3.0  # b is listed first of 3, 4
    assert aggregate(panel(4, aggregate="median", tie=1), ORDINAL, votes).value == 1.0
    assert aggregate(panel(4, aggregate="median", tie="mean"), ORDINAL, jurors(2.0, 4.0, 4.0, 5.0)).tie is None


def test_an_odd_panel_abstains_on_a_three_way_split_unless_told_otherwise() -> None:
    three = VoteScale("categorical", values=("good", "fair", "bad"))
    assert aggregate(panel(), three, jurors("good", "fair", "bad")).code is ReasonCode.JURY_TIE
    assert aggregate(panel(tie="first"), three, jurors("good", "fair", "bad")).value == "good"


def test_too_few_votes_are_jury_incomplete_and_a_recused_juror_lowers_the_quorum() -> None:
    votes = jurors("pass", None, "pass")
    decided = aggregate(panel(), LABELS, votes)
    assert (decided.code, decided.value) == (ReasonCode.JURY_INCOMPLETE, None)
    assert decided.reason == "2 of 3 jurors scored, the jury needs 3 (b unreadable)"
    assert aggregate(panel(quorum=2, tie="abstain"), LABELS, votes).value == "pass"
    recused = [*votes[:1], Juror("b", "m/b", "t-b", "unscored", "self_preference", None, None), votes[2]]
    assert aggregate(panel(tie="abstain"), LABELS, recused).value == "pass"


def recused_b(a: str | float, c: str | float) -> list[Juror]:
    """Jurors a, b, c with b kept off the item by self_preference: forbid."""
    a_, _, c_ = jurors(a, None, c)
    return [a_, Juror("b", "m/b", "t-b", "unscored", "self_preference", None, None), c_]


@pytest.mark.parametrize(("tie", "value", "code"), [
    ("first", "fail", None),  # a, listed first, voted fail
    ("pass", "pass", None),
    ("abstain", None, ReasonCode.JURY_TIE),
])
def test_an_odd_panel_missing_a_vote_is_an_even_one_and_its_tie_rule_applies(
    tie: str, value: str | None, code: ReasonCode | None
) -> None:
    # b recused: a fail, c pass, one each; b unreadable with quorum 2: the same two votes.
    for votes, jury in ((recused_b("fail", "pass"), panel(tie=tie)),
                        (jurors("fail", None, "pass"), panel(quorum=2, tie=tie))):
        decided = aggregate(jury, LABELS, votes)
        assert (decided.value, decided.code, decided.tie, decided.voted) == (value, code, tie, 2)
    # The example's median of two grades: 2 and 4 tie between their middle values; mean gives 3.
    assert aggregate(panel(aggregate="median", tie="mean"), ORDINAL, recused_b(2.0, 4.0)).value == 3.0
    # Unreadable with the default quorum is incomplete, whatever the tie rule.
    assert aggregate(panel(tie=tie), LABELS, jurors("fail", None, "pass")).code is ReasonCode.JURY_INCOMPLETE


def test_the_jury_outcome_keeps_every_jurors_vote() -> None:
    record = jury_record(panel(), LABELS, ("i1", "", 0.0, 0), jurors("pass", None, "fail", scores=[1.0, None, 0.0]))
    assert (record.judge, record.protocol, record.status, record.reason_code) == \
        ("panel", "jury", "unscored", "jury_incomplete")
    assert record.verdict is not None and record.verdict["jurors"]["b"] == {
        "vote": None, "score": None, "status": "unscored", "reason_code": "unreadable", "task_id": "t-b"}
    assert record.scores == {"a": 1.0, "c": 0.0}
    assert jury_record(panel(), LABELS, ("i1", "", 0.0, 0), jurors("pass", "pass", "pass")).task_id == record.task_id


# --- the config -----------------------------------------------------------------------------------


def config_file(tmp_path: Path, juries: list[dict[str, Any]], *, judges: list[dict[str, Any]] | None = None,
                server: FakeServer | None = None, items: int = 4, cache: bool = True) -> Path:
    with (tmp_path / "items.jsonl").open("w", encoding="utf-8") as handle:
        for index in range(1, items + 1):
            handle.write(json.dumps({"id": f"i{index}", "answer": f"Answer number {index} to the question."}) + "\n")
    default = [juror_config(name, server) for name in "abc"]
    raw = {"dataset": {"path": "items.jsonl"}, "judges": judges or default, "juries": juries,
           "output": {"dir": "runs"}, "cache": {"dir": "cache", "enabled": cache}}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return path


def juror_config(name: str, server: FakeServer | None, **options: Any) -> dict[str, Any]:
    return {"name": name, "model": "openai/gpt-4o-mini", "protocol": "custom",
            "api_base": server.base_url if server else None, "api_key_env": TEST_KEY_ENV,
            "retries": {"transport": 2, "reasks": 1, "backoff_max_s": 0.01},
            "protocol_options": {"template": f"Juror {name}. Item {{{{ id }}}}: {{{{ answer }}}}", "output": "text",
                                 "fields": {"verdict": {"type": "label", "choices": ["pass", "fail"],
                                                        "score_map": {"pass": 1, "fail": 0}}},
                                 "score": "verdict", **options}}


def test_an_even_jury_without_a_tie_rule_is_a_config_error_that_names_it(tmp_path: Path) -> None:
    path = config_file(tmp_path, [{"name": "pair", "judges": ["a", "b"], "aggregate": "majority"}])
    with pytest.raises(ConfigError, match=r"juries\[pair\]\.tie: an even-sized panel \(2 judges\) needs a tie rule"):
        load_config(path)
    assert main(["plan", str(path)]) == 2
    path = config_file(tmp_path, [{"name": "pair", "judges": ["a", "b"], "aggregate": "majority", "tie": "fail"}])
    assert load_config(path).juries[0].tie == "fail"


def test_a_panel_that_can_vote_without_a_juror_needs_a_tie_rule(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # self_preference: forbid on a juror: on its family's items three jurors vote as two.
    judges = [juror_config("a", None), juror_config("b", None), juror_config("c", None)]
    judges[0]["self_preference"] = "forbid"
    path = config_file(tmp_path, [{"name": "panel", "judges": ["a", "b", "c"], "aggregate": "median"}], judges=judges)
    with pytest.raises(ConfigError, match=r"juries\[panel\]\.tie: self_preference: forbid keeps a off the items of "
                                          r"the same model family, where the panel of 3 can vote as an even panel, "
                                          r"whose ties are common: it needs a tie rule: tie: first, abstain, mean"):
        load_config(path)
    assert main(["plan", str(path)]) == 2
    assert f"{path}: juries[panel].tie: self_preference: forbid keeps a off" in capsys.readouterr().err
    for tie in ("abstain", "mean"):
        path = config_file(tmp_path, [{"name": "panel", "judges": ["a", "b", "c"], "aggregate": "median",
                                       "tie": tie}], judges=judges)
        assert load_config(path).juries[0].tie == tie
    mean = config_file(tmp_path, [{"name": "panel", "judges": ["a", "b", "c"], "aggregate": "mean"}], judges=judges)
    assert load_config(mean).juries[0].tie is None  # a mean cannot tie
    # A quorum below the panel: an unreadable juror's missing vote leaves two to decide.
    path = config_file(tmp_path, [{"name": "panel", "judges": ["a", "b", "c"], "quorum": 2}])
    with pytest.raises(ConfigError, match=r"juries\[panel\]\.tie: quorum 2 lets the panel of 3 decide without a "
                                          r"juror that gave no vote \(unreadable, failed\), so it can vote as an even"):
        load_config(path)
    assert main(["plan", str(path)]) == 2


def test_the_example_jury_with_forbid_on_a_juror_needs_a_tie_rule(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # examples/custom_rubric with forbid on helpful-json: its median of two votes on the openai
    # family's items tied (jury_tie, unscored) in 3 of 4 of them with the default abstention.
    example = Path(__file__).resolve().parents[2] / "examples" / "custom_rubric"
    raw = yaml.safe_load((example / "config.yaml").read_text(encoding="utf-8"))
    raw["judges"][0]["self_preference"] = "forbid"
    raw["dataset"]["path"] = str(example / raw["dataset"]["path"])
    raw["judges"][0]["protocol_options"]["template_file"] = str(example / "rubric.j2")
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    assert main(["plan", str(path)]) == 2
    assert "juries[panel].tie: self_preference: forbid keeps helpful-json off" in capsys.readouterr().err
    raw["juries"][0]["tie"] = "mean"
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    assert load_config(path).juries[0].tie == "mean"


@pytest.mark.parametrize(("jury", "words"), [
    ({"name": "p", "judges": ["a", "zed", "c"]}, "juries[p].judges: no judge named zed"),
    ({"name": "a", "judges": ["a", "b", "c"]}, "juries[a].name: already the name of a judge"),
    ({"name": "p", "judges": ["a", "a", "b"]}, "juries[p].judges: a judge sits on a panel once"),
    ({"name": "p", "judges": ["a", "b", "c"], "aggregate": "weighted", "weights": {"a": 1}}, "missing: b, c"),
    ({"name": "p", "judges": ["a", "b", "c"], "weights": {"a": 1, "b": 1, "c": 1}}, "only aggregate weighted"),
    ({"name": "p", "judges": ["a", "b", "c"], "quorum": 4}, "juries[p].quorum: 4 is more than the 3 jurors"),
])
def test_a_jury_is_checked_when_the_config_is_read(tmp_path: Path, jury: dict[str, Any], words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(config_file(tmp_path, [jury]))
    assert words in str(caught.value)


def test_jurors_must_vote_on_one_scale_that_fits_the_aggregate(tmp_path: Path) -> None:
    other = juror_config("c", None)
    other["protocol_options"]["fields"] = {"verdict": {"type": "integer", "min": 1, "max": 5}}
    cases = [
        ({"name": "p", "judges": ["a", "b", "c"]}, [juror_config("a", None), juror_config("b", None), other],
         "the jurors vote on different scales (0..1 vs 1..5)"),
        ({"name": "p", "judges": ["a", "b"], "aggregate": "mean"},
         [juror_config("a", None, score=None), juror_config("b", None, score=None)], "give no vote per item (a custom judge needs a score: option"),
        ({"name": "p", "judges": ["a", "b", "c"], "tie": "maybe"}, None, "juries[p].tie: 'maybe' is neither"),
    ]
    for jury, judges, words in cases:
        config = load_config(config_file(tmp_path, [jury], judges=judges))
        with pytest.raises(ConfigError) as caught:
            check_juries(config, {j.name: build_protocol(j) for j in config.judges})
        assert words in str(caught.value)
    labels = [juror_config(n, None) for n in "ab"]
    for options in labels:
        options["protocol_options"]["fields"]["verdict"].pop("score_map")
    config = load_config(config_file(tmp_path, [{"name": "p", "judges": ["a", "b"], "aggregate": "mean"}],
                                     judges=labels))
    with pytest.raises(ConfigError, match="mean needs numbers, and these jurors vote labels"):
        check_juries(config, {j.name: build_protocol(j) for j in config.judges})


# --- a run: known verdicts, hand-computed aggregate and agreement ----------------------------------

KNOWN = {("a", "i1"): "pass", ("b", "i1"): "pass", ("c", "i1"): "pass",
         ("a", "i2"): "pass", ("b", "i2"): "fail", ("c", "i2"): "pass",
         ("a", "i3"): "fail", ("b", "i3"): "fail", ("c", "i3"): "pass",
         ("a", "i4"): "fail", ("b", "i4"): "fail", ("c", "i4"): "fail"}


@pytest.fixture
def known_verdicts(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The fake server answers each juror's prompt with the verdict in KNOWN (asked before the
    custom writer: writers go in name order)."""
    monkeypatch.setattr(writers_module, "_REGISTERED", dict(writers_module._REGISTERED))
    monkeypatch.setattr(writers_module, "_ordered", None)

    def write(messages: Sequence[Message], /, *, seed: int, temperature: float, json_mode: bool) -> str | None:
        first = messages[-1]["content"].split("\n", 1)[0]  # "Juror a. Item i1: ..."
        if not first.startswith("Juror "):
            return None
        juror, item = first.removeprefix("Juror ")[0], first.split("Item ")[1].split(":")[0]
        return f"It is what it is. [RESULT] {KNOWN[(juror, item)]}"

    register_writer("aaa-known-verdicts", write)
    yield


@pytest.mark.usefixtures("known_verdicts")
def test_a_jury_of_three_gives_the_hand_computed_verdicts_agreement_and_stats(
    tmp_path: Path, fake_server: FakeServer, capsys: pytest.CaptureFixture[str]
) -> None:
    judges = [juror_config(name, fake_server) for name in "abc"]
    for judge in judges:  # labels with no number: a categorical vote
        judge["protocol_options"]["fields"]["verdict"].pop("score_map")
    path = config_file(tmp_path, [{"name": "panel", "judges": ["a", "b", "c"]}], judges=judges)
    assert main(["run", str(path), "--no-live"]) == 0
    run = next(p for p in (tmp_path / "runs").iterdir() if not p.is_symlink())
    outcomes = read_lines(run / "outcomes.jsonl")
    juries = {o["item_id"]: o for o in outcomes if o["judge"] == "panel"}
    assert len(outcomes) == 16 and len(juries) == 4  # 12 jurors' outcomes, kept apart from the jury's
    # Majority per item: pass, pass (2-1), fail (2-1), fail; pairwise agreement 1, 1/3, 1/3, 1.
    assert {i: (o["verdict"]["value"], o["status"]) for i, o in juries.items()} == \
        {"i1": ("pass", "scored"), "i2": ("pass", "scored"), "i3": ("fail", "scored"), "i4": ("fail", "scored")}
    assert [round(juries[i]["verdict"]["agreement"], 4) for i in ("i1", "i2", "i3", "i4")] == [1, 0.3333, 0.3333, 1]
    assert juries["i2"]["verdict"]["jurors"]["b"]["vote"] == "fail"
    manifest = json.loads((run / "run.json").read_text())
    assert manifest["counts"]["judges"]["panel"] == {"tasks": 4, "scored": 4, "unscored": 0, "unscored_by_code": {},
                                                     "planned": 4}

    report = tmp_path / "stats.json"
    assert main(["stats", str(run), "--json", str(report), "--quiet"]) == 0
    sections = json.loads(report.read_text())["sections"]
    (agreement,) = sections["jury_agreement"]["rows"]
    # Fleiss: per item (pass, fail) = (3,0) (2,1) (1,2) (0,3); P_i = 1, 1/3, 1/3, 1 -> P = 2/3;
    # p_pass = p_fail = 6/12 -> Pe = 1/2; kappa = (2/3 - 1/2) / (1 - 1/2) = 1/3.
    assert (agreement["scale"], agreement["coefficient"], agreement["n_items"]) == ("categorical", "kappa", 4)
    assert agreement["value"] == pytest.approx(1 / 3) and agreement["exact_agreement"] == pytest.approx(2 / 3)
    differs = {row["juror"]: (row["differs"], row["n_items"]) for row in sections["jury_differs"]["rows"]}
    assert differs == {"a": (0, 4), "b": (1, 4), "c": (1, 4)}  # b on i2, c on i3


def test_jury_outcomes_survive_resume_and_follow_a_retried_juror(tmp_path: Path, fake_server: FakeServer) -> None:
    # No cache: the retried tasks are asked again, not re-read.
    path = config_file(tmp_path, [{"name": "panel", "judges": ["a", "b", "c"]}], server=fake_server, items=6,
                       cache=False)
    fake_server.update(malformed_rate=1.0)  # every answer prose: every juror unscored, the jury incomplete
    assert main(["run", str(path), "--no-live"]) == 3
    run = next(p for p in (tmp_path / "runs").iterdir() if not p.is_symlink())
    juries = [o for o in read_lines(run / "outcomes.jsonl") if o["judge"] == "panel"]
    assert len(juries) == 6 and {o["reason_code"] for o in juries} == {"jury_incomplete"}
    assert all(o["status"] == "unscored" and o["score"] is None for o in read_lines(run / "outcomes.jsonl"))

    fake_server.update(malformed_rate=0.0)
    assert main(["resume", str(run), "--retry", "unreadable", "--no-live"]) == 0
    lines = read_lines(run / "outcomes.jsonl")
    latest = {o["task_id"]: o for o in lines}
    juries = [o for o in latest.values() if o["judge"] == "panel"]
    assert len(juries) == 6 and all(o["status"] == "scored" for o in juries)
    assert sum(1 for o in lines if o["judge"] == "panel") == 12  # each jury line written again, superseding

    # A jury added to the config after its run finished is computed from the outcomes recorded.
    raw = yaml.safe_load(path.read_text())
    raw["juries"].append({"name": "pair", "judges": ["a", "b"], "tie": 0})  # labels with numbers vote numbers
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    requests = fake_server.stats()["requests_total"]
    assert main(["run", str(path), "--no-live"]) == 0
    assert fake_server.stats()["requests_total"] == requests  # nothing asked again
    pairs = [o for o in read_lines(run / "outcomes.jsonl") if o["judge"] == "pair"]
    assert len(pairs) == 6 and json.loads((run / "run.json").read_text())["counts"]["judges"]["pair"]["tasks"] == 6


def test_a_jury_is_left_out_of_the_agreement_between_judges(tmp_path: Path) -> None:
    # A jury's verdict is made of its jurors' votes: beside them it would inflate the agreement.
    scores = {"a": [1, 2, 3, 4], "b": [2, 1, 4, 3], "panel": [1, 2, 3, 4]}
    records = [outcome(f"i{n}", judge, 0.0, 0, float(score), protocol="jury" if judge == "panel" else "custom")
               for judge, values in scores.items() for n, score in enumerate(values)]
    section = judge_agreement_section(read_run(write_run(tmp_path / "run", records)))
    assert [row["judges"] for row in section.rows] == ["a ~ b"]
    alone = [r for r in records if r["judge"] != "b"]
    assert "this run has 1: a" in judge_agreement_section(read_run(write_run(tmp_path / "one", alone))).absent
