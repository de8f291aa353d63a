"""Every example config: each judge's protocol renders every item (after the config's field
mapping) and accepts the fake server's answers under every variant, in its output mode."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from judge_engine.errors import ReasonCode, VerdictError
from judge_engine.fake.writers import get_writer
from judge_engine.inputs.config import load_config
from judge_engine.inputs.dataset import to_item
from judge_engine.planning.plan import build_protocol
from judge_engine.protocols.embeddings import minilm_problem

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*/config.yaml"))
# An estimate needs a study's shape: several systems, each with more verdicts than human labels.
# literary_systems is four systems of 50 segments (make_data.py writes them); the rest stay small.
STUDY_SIZED = {"literary_systems": 200}


@pytest.mark.parametrize("config_path", EXAMPLES, ids=[p.parent.name for p in EXAMPLES])
def test_example_items_render_and_fake_answers_parse(config_path: Path) -> None:
    if config_path.parent.name == "cdat" and minilm_problem():
        pytest.skip(minilm_problem() or "")
    config = yaml.safe_load(config_path.read_text(encoding="utf-8"))
    lines = (config_path.parent / config["dataset"]["path"]).read_text(encoding="utf-8").splitlines()
    if config_path.parent.name in STUDY_SIZED:
        assert len(lines) == STUDY_SIZED[config_path.parent.name], "make_data.py writes this many"
    else:
        assert 10 <= len(lines) <= 20, "examples carry small data written for them"
    # Through load_config: options naming files (a custom judge's template_file) are relative to it.
    for judge in load_config(config_path).judges:
        protocol = build_protocol(judge)
        for number, line in enumerate(lines, start=1):
            item = to_item(json.loads(line), config["dataset"].get("fields", {}), protocol.required_fields, f"{number}")
            assert protocol.check_item(item) == []
            for variant in protocol.variants(item):
                messages = protocol.render(item, variant)
                for temperature in (0.0, 1.0):
                    answer = get_writer(protocol.name)(messages, seed=number, temperature=temperature, json_mode=protocol.json_mode)
                    assert answer is not None, (judge.name, number, variant)
                    try:
                        protocol.score(protocol.parse(answer, item, variant), item, variant)
                    except VerdictError as exc:
                        # A generation protocol's first answer is the data, and some fake lists hold
                        # too few nouns on purpose (the valid-response rate has something to count).
                        assert not protocol.reasks and exc.code is ReasonCode.TOO_FEW_VALID, exc.problems
