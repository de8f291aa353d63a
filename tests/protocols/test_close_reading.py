"""novel-spans and nonpragmatic-spans: byte-exact prompts, parsing real answers, locating spans."""

from __future__ import annotations

import ast
import csv
import json
import re
from pathlib import Path

import pytest

from judge_engine.errors import ConfigError, ReasonCode, VerdictError
from judge_engine.fake.writers import get_writer
from judge_engine.protocols import get_protocol, templating
from judge_engine.protocols.close_reading import NonPragmaticSpans, NovelSpans, SpansVerdict
from judge_engine.protocols.close_reading_parse import count_words, read_expressions
from judge_engine.util.text import fold

PROMPT_FILES = {
    ("novel-spans", "zero"): "novelty_prompt.txt",
    ("novel-spans", "few"): "novelty_fewshot_prompt.txt",
    ("nonpragmatic-spans", "zero"): "pragmatic_prompt.txt",
    ("nonpragmatic-spans", "few"): "pragmatic_fewshot_prompt.txt",
}
PASSAGE = (
    "The lighthouse keeper counted gulls instead of ships. His daughter’s laugh, "
    "thin as  a paper cut, drifted over the rocks.\nNobody answered the radio."
)


def _claude_rows(shared_data: Path) -> list[dict[str, str]]:
    with open(
        shared_data / "ngram_creativity" / "claude_prag_responses_ft.csv", encoding="utf-8"
    ) as f:
        return list(csv.DictReader(f))


def _protocol(name: str, **options: object) -> NovelSpans | NonPragmaticSpans:
    protocol = get_protocol(name).from_options(options)
    assert isinstance(protocol, NovelSpans | NonPragmaticSpans)
    return protocol


# --- prompts ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "shots"), sorted(PROMPT_FILES))
def test_prompt_is_byte_exact_for_real_passages(shared_data: Path, name: str, shots: str) -> None:
    prompt = (shared_data / "ngram_creativity" / PROMPT_FILES[(name, shots)]).read_text(
        encoding="utf-8"
    )
    protocol = _protocol(name, shots=shots)
    passages = [row["para"] for row in _claude_rows(shared_data)]
    passages.append("Jinja-looking text stays literal: {{ x }} {% if %} {# c #} {passage}")
    for passage in passages:
        messages = protocol.render({"id": "x", "passage": passage})
        assert messages == [{"role": "user", "content": prompt.replace("{passage}", passage)}]


def test_templates_are_listed_and_hashable() -> None:
    for name in ("novel-spans", "nonpragmatic-spans"):
        for shots in ("zero", "few"):
            (template,) = _protocol(name, shots=shots).templates()
            assert templating.template_hash(template).startswith("b2:")


def test_unknown_shots_option_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="shots"):
        _protocol("novel-spans", shots="three")


# --- the 100 real Claude answers -----------------------------------------------------------


def test_all_real_claude_answers_parse(shared_data: Path) -> None:
    """The ``response`` column is a Python literal; the answers are read both in that form and
    as the JSON list the model sent. 367 expressions in 100 answers; 336 are exact substrings,
    30 more match after normalisation (straight vs curly apostrophes), 1 is elided with "...".
    """
    protocol = _protocol("nonpragmatic-spans")
    rows = _claude_rows(shared_data)
    assert len(rows) == 100
    total = exact = found = 0
    for row in rows:
        expected = ast.literal_eval(row["response"])
        item = {"id": row["id"], "passage": row["para"]}
        as_literal = protocol.parse(row["response"], item)
        as_json = protocol.parse(json.dumps(expected, ensure_ascii=False), item)
        assert as_literal == as_json
        assert [e.expression for e in as_json.expressions] == [d["expression"] for d in expected]
        assert all(e.expression.strip() for e in as_json.expressions)
        total += len(as_json.expressions)
        found += sum(bool(e.found) for e in as_json.expressions)
        exact += sum(e.expression in row["para"] for e in as_json.expressions)
        for e in as_json.expressions:
            if e.found:
                assert e.start is not None and e.end is not None
                assert _fold(row["para"][e.start : e.end]) == _fold(e.expression)
    assert (total, exact, found) == (367, 336, 366)


def test_real_answers_in_every_shape_models_send(shared_data: Path) -> None:
    """Each real answer rewritten as models also send it: fenced, after prose, as blank-line
    separated objects, in several fences, with curly-quote delimiters, with the misspelled key."""
    for row in _claude_rows(shared_data):
        records = ast.literal_eval(row["response"])
        expressions = [d["expression"] for d in records]
        for answer in _shapes(records):
            got = [r["expression"] for r in read_expressions(answer)]
            assert got == expressions, answer[:200]


def _shapes(records: list[dict[str, str]]) -> list[str]:
    plain = json.dumps(records, ensure_ascii=False, indent=1)
    objects = [json.dumps(r, ensure_ascii=False) for r in records]
    curly = (
        "["
        + ",\n".join(
            f"{{“expression”: “{r['expression']}”, “justification”: “{r['justification']}”}}"
            for r in records
        )
        + "]"
    )
    misspelled = json.dumps(
        [
            {"expressionlovled": r["expression"], "justification": r["justification"]}
            for r in records
        ]
    )
    return [
        f"```json\n{plain}\n```",
        f"Here are the expressions I found:\n\n{plain}\n\nLet me know if you need more.",
        "\n\n".join(objects),
        "\n\n".join(f"```json\n{o}\n```" for o in objects),
        curly,
        misspelled,
    ]


def _fold(text: str) -> str:
    return fold(text)[0].strip()


# --- fixtures from the reference files -------------------------------------------------------


def test_novelty_prompt_example_output_with_unescaped_quotes() -> None:
    """The zero-shot novelty prompt's own example is invalid JSON (unescaped inner quotes);
    a model that imitates it must still be read."""
    prompt = Path(templating.PROMPTS_DIR, "novel_spans", "zero_shot.j2").read_text(encoding="utf-8")
    example = prompt.split("Output:\n", 1)[1].split("\nPassage:\n", 1)[0]
    with pytest.raises(json.JSONDecodeError):
        json.loads(example)
    passage = prompt.split("Passage: ", 1)[1].split("\n", 1)[0]
    verdict = _protocol("novel-spans").parse(example, {"passage": passage})
    (expression,) = verdict.expressions
    assert expression.expression == "the first of them at the end of the Qing dynasty"
    assert expression.justification.startswith('the juxtaposition of "first" and "end" in')
    assert expression.justification.endswith("they are also new beginnings.")
    assert expression.found and passage[expression.start : expression.end] == expression.expression


@pytest.mark.parametrize(
    ("name", "expected"), [("novel-spans", [4, 5, 6]), ("nonpragmatic-spans", [6, 5, 5])]
)
def test_few_shot_gold_outputs_parse_and_are_found(name: str, expected: list[int]) -> None:
    """The three gold outputs inside each few-shot prompt, read against their own passages.
    Every gold expression is in its passage (some are truncated mid-word, as the annotators left them)."""
    protocol = _protocol(name, shots="few")
    prompt = Path(templating.PROMPTS_DIR, protocol.templates()[0]).read_text(encoding="utf-8")
    body = prompt.split("Examples:\n", 1)[1].split("\nNow, analyze the following passage:", 1)[0]
    blocks = re.findall(r"Passage:\n(.*?)\nOutput:\n(.*?)(?=\n\nPassage:\n|\Z)", body, re.DOTALL)
    counts = []
    for passage, output in blocks:
        verdict = protocol.parse(output, {"passage": passage})
        counts.append(len(verdict.expressions))
        assert all(e.found for e in verdict.expressions), [
            e.expression for e in verdict.expressions
        ]
    assert counts == expected


def test_pragmatic_format_line_with_curly_quotes() -> None:
    answer = "[{“expression”: “thin as a paper cut”, “justification”: “Odd next to “laugh”.”}]"
    (expression,) = _protocol("nonpragmatic-spans").parse(answer, {"passage": PASSAGE}).expressions
    assert expression.expression == "thin as a paper cut"
    assert expression.justification == "Odd next to “laugh”."
    assert expression.found  # "as  a" in the passage: whitespace collapsed


def test_authors_refusal_record_is_a_verdict_error() -> None:
    with pytest.raises(VerdictError, match="refused"):
        read_expressions('[{"error":"PROHIBITED_CONTENT"}]')


@pytest.mark.parametrize(
    "answer",
    ["", "I'm sorry, but I can't help with annotating this passage.", "No issues.", '{"foo": 1}'],
)
def test_no_expression_list_is_a_verdict_error(answer: str) -> None:
    with pytest.raises(VerdictError):
        _protocol("novel-spans").parse(answer, {"passage": PASSAGE})


@pytest.mark.parametrize(
    "answer",
    ["[]", "```json\n[]\n```", '{"expressions": []}', "None found:\n[]", "{'expressions': []}", "[]\nNone stood out."],
)
def test_explicit_empty_list_is_none_found(answer: str) -> None:
    protocol = _protocol("nonpragmatic-spans")
    verdict = protocol.parse(answer, {"passage": PASSAGE})
    assert verdict == SpansVerdict(expressions=[])
    assert protocol.score(verdict, {"passage": PASSAGE}).score == 0.0


@pytest.mark.parametrize("name", ["novel-spans", "nonpragmatic-spans"])
@pytest.mark.parametrize("output", ["text", "json"])
@pytest.mark.parametrize(
    ("answer", "code"),
    [
        ('{"errors": []}', ReasonCode.UNREADABLE),  # another format's empty list: it scored 0
        ('{"result": {"expressions": []}}', ReasonCode.UNREADABLE),
        ('Found: {"notes": [], "expressions": "none"}', ReasonCode.UNREADABLE),
        ('{"expressions": []', ReasonCode.INCOMPLETE),  # the well-formed empty answer, cut at "]"
        ("```json\n{\"expressions\": [", ReasonCode.INCOMPLETE),
        ("{}", ReasonCode.INCOMPLETE),
    ],
)
def test_an_empty_list_that_is_not_the_answer_is_not_none_found(
    name: str, output: str, answer: str, code: ReasonCode
) -> None:
    with pytest.raises(VerdictError) as caught:
        _protocol(name, output=output).parse(answer, {"passage": PASSAGE})
    assert caught.value.code == code, caught.value.problems


def test_empty_expression_is_a_verdict_error() -> None:
    with pytest.raises(VerdictError, match="expression 2 is empty"):
        read_expressions(
            '[{"expression": "a", "justification": "b"}, {"expression": " ", "justification": "c"}]'
        )


def test_partly_broken_answer_is_read_whole_not_shortened() -> None:
    answer = (
        '{"expression": "counted gulls", "justification": "fine"}\n\n'
        '{"expression": "paper cut", "justification": "the "cut" is odd"}'
    )
    got = read_expressions(answer)
    assert [r["expression"] for r in got] == ["counted gulls", "paper cut"]
    assert got[1]["justification"] == 'the "cut" is odd'


FERRY = '{"expression": "The ferry left at six", "justification": "x"}'


@pytest.mark.parametrize("name", ["novel-spans", "nonpragmatic-spans"])
@pytest.mark.parametrize(
    "answer",
    [
        '{"expressions": [' + FERRY,  # cut after a whole expression: it was scored on the partial list
        '{"expressions": [' + FERRY + ",",
        '{"expressions": [' + FERRY + "]",  # the list closed, the wrapper not
        '```json\n{"expressions": [' + FERRY + "]\n```",
        "[" + FERRY,
        "[" + FERRY + ", ",
        "[\n  " + FERRY + ",\n  " + FERRY[:-1],
    ],
)
def test_an_answer_cut_after_a_whole_expression_is_incomplete(name: str, answer: str) -> None:
    passage = {"passage": "The ferry left at six and nobody waved."}
    with pytest.raises(VerdictError) as caught:
        _protocol(name, output="json").parse(answer, passage)
    assert caught.value.code == ReasonCode.INCOMPLETE, caught.value.problems


@pytest.mark.parametrize(
    "answer",
    [
        '{"expressions": [' + FERRY + "]}",
        '```json\n{"expressions": [' + FERRY + "]}\n```\nThat is all.",
        "[" + FERRY + "]",
        FERRY + "\n\n" + FERRY,  # the novelty prompt's bare objects: each closes itself
        "{'expressions': [{'expression': 'The ferry left at six', 'justification': 'x'}]}",
    ],
)
def test_an_answer_closed_after_its_last_expression_is_read(answer: str) -> None:
    assert read_expressions(answer)[0]["expression"] == "The ferry left at six"


@pytest.mark.parametrize(
    "answer",
    [
        '{"expressions": [{"justification": "x"}, ' + FERRY + "]}",
        '{"expressions": [{"justification": "x"}]}',  # no record read at all
        "[" + FERRY + ', {"justification": "x"}]',
        FERRY + '\n\n{"justification": "x"}',
        "[{“expression”: “The ferry”, “justification”: “a”}, {“justification”: “b”}]",
    ],
)
def test_an_object_without_its_expression_is_incomplete_not_dropped(answer: str) -> None:
    """It was left out silently, and the answer scored as if the judge had found one fewer."""
    with pytest.raises(VerdictError) as caught:
        read_expressions(answer)
    assert caught.value.code == ReasonCode.INCOMPLETE


def test_missing_justification_reads_as_empty() -> None:
    assert read_expressions('[{"expression": "x"}]') == [{"expression": "x", "justification": ""}]


# --- found or not, and scoring --------------------------------------------------------------------


def test_not_found_is_flagged_kept_and_not_counted() -> None:
    protocol = _protocol("novel-spans")
    item = {"passage": PASSAGE}
    answer = json.dumps(
        [
            {"expression": "counted gulls instead of ships", "justification": "a"},
            {"expression": "a silver whale", "justification": "b"},
            {"expression": "counted gulls instead of ships", "justification": "repeat"},
        ]
    )
    verdict = protocol.parse(answer, item)
    assert [e.found for e in verdict.expressions] == [True, False, True]
    missing = verdict.expressions[1]
    assert (missing.start, missing.end) == (None, None)
    score = protocol.score(verdict, item)
    words = count_words(PASSAGE)
    assert words == 24  # whitespace tokens: 8 + 12 + 4 ("as  a" is two words, "rocks.\nNobody" two)
    assert score.score == pytest.approx(1 / words)  # the repeated span counts once
    assert score.scores == {"expressions": 3.0, "found": 2.0, "not_found": 1.0, "words": 24.0}


def test_json_mode_recomputes_protocol_fields() -> None:
    protocol = _protocol("nonpragmatic-spans", output="json")
    response_format = protocol.response_format()
    assert response_format is not None
    assert "expressions" in response_format["json_schema"]["schema"]["properties"]
    answer = json.dumps(
        {
            "expressions": [
                {
                    "expression": "a silver whale",
                    "justification": "x",
                    "found": True,
                    "start": 0,
                    "end": 3,
                }
            ]
        }
    )
    (expression,) = protocol.parse(answer, {"passage": PASSAGE}).expressions
    assert (expression.found, expression.start, expression.end) == (False, None, None)


# --- the fake server's answers ---------------------------------------------------------------


@pytest.mark.parametrize("name", ["novel-spans", "nonpragmatic-spans"])
@pytest.mark.parametrize("shots", ["zero", "few"])
@pytest.mark.parametrize("json_mode", [False, True])
def test_fake_answers_parse_and_are_found(name: str, shots: str, json_mode: bool) -> None:
    protocol = _protocol(name, shots=shots, output="json" if json_mode else "text")
    write = get_writer(name)
    item = {"passage": PASSAGE}
    messages = protocol.render(item)
    answers = set()
    for seed in range(40):
        for temperature in (0.0, 0.7, 1.0):
            answer = write(messages, seed=seed, temperature=temperature, json_mode=json_mode)
            assert answer is not None
            assert answer == write(messages, seed=seed, temperature=temperature, json_mode=json_mode)
            verdict = protocol.parse(answer, item)
            assert all(e.found for e in verdict.expressions)
            protocol.score(verdict, item)
            answers.add(answer)
    assert len(answers) > 20


def test_fake_answer_varies_with_temperature_and_ignores_other_prompts() -> None:
    write = get_writer("novel-spans")
    messages = _protocol("novel-spans").render({"passage": PASSAGE})
    cold = [write(messages, seed=s, temperature=0.0, json_mode=False) for s in range(30)]
    hot = [write(messages, seed=s, temperature=1.0, json_mode=False) for s in range(30)]
    assert cold != hot
    other = _protocol("nonpragmatic-spans").render({"passage": PASSAGE})
    assert write(other, seed=1, temperature=0.0, json_mode=False) is None
    hello = [{"role": "user", "content": "hello"}]
    assert write(hello, seed=1, temperature=0.0, json_mode=False) is None
