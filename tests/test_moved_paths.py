"""The module paths of 0.1 still import for one release (issue 31.1): each is the very module at
its new path, with a DeprecationWarning that names it, raised at the importing line."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from judge_engine._moved import MOVED, new_name

OLD_TOP_LEVEL = (
    "attempt", "blocks", "budget", "cache", "calibration", "config", "config_file", "dataset", "decisions", "demo",
    "disk", "embeddings", "engine", "export", "families", "frames", "index", "interrupts", "jsonio",
    "jury", "languages", "layout", "lexicon", "logprobs", "money", "naming", "parquet", "plan", "records",
    "redaction", "rescore", "resumption", "retry", "routing", "runtime", "schemas", "self_preference", "session",
    "store", "task", "templating", "text", "thresholds",
)
"""The 0.1 top-level modules that moved (errors.py stayed where it was; estimate.py, the dry-run cost
estimate now at running/estimate.py, gave its name to the public function judge_engine.estimate)."""
OLD_IN_PACKAGES = (
    *(f"cascade.{m}" for m in ("outcome", "report", "router", "rows", "session", "stages", "state")),
    *(f"batch.{m}" for m in ("board", "cancel", "chunks", "driver", "killpoints", "ledger", "results", "status", "submit")),
    "stats.calibration",
)


def _probe(code: str) -> dict[str, object]:
    """Run ``code`` in a fresh interpreter (so every import is a first one) and return what it
    printed as JSON."""
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                            check=True, timeout=120)
    return json.loads(result.stdout)


def test_every_old_path_is_the_new_module_with_a_warning_naming_it() -> None:
    olds = [f"judge_engine.{name}" for name in (*OLD_TOP_LEVEL, *OLD_IN_PACKAGES)]
    found = _probe(f"""
        import importlib, json, sys, warnings
        out = {{}}
        for old in {olds!r}:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                module = importlib.import_module(old)
            out[old] = {{"name": module.__name__, "spec": module.__spec__.name,
                         "same": sys.modules[module.__name__] is module,
                         "warnings": [(w.category.__name__, str(w.message)) for w in caught]}}
        print(json.dumps(out))
    """)
    for old in olds:
        new = new_name(old)
        assert new is not None and new != old, old
        entry = found[old]
        assert entry["name"] == entry["spec"] == new, (old, entry)
        assert entry["same"], old
        assert ("DeprecationWarning", f"{old} has moved to {new}: import it from there ({old} goes in judge-engine 0.3)") \
            in [tuple(w) for w in entry["warnings"]], (old, entry["warnings"])


def test_names_imported_from_an_old_path_are_the_same_objects() -> None:
    found = _probe("""
        import json, warnings
        warnings.simplefilter("ignore")
        from judge_engine.config import JobConfig as old_config
        from judge_engine.inputs.config import JobConfig
        from judge_engine.cascade.stages import CascadePlan as old_plan
        from judge_engine.trust.cascade.stages import CascadePlan
        from judge_engine import session as old_session
        from judge_engine.running import session
        from judge_engine.stats import calibration as old_stats
        from judge_engine.stats import risk_control
        print(json.dumps([old_config is JobConfig, old_plan is CascadePlan, old_session is session,
                          old_stats is risk_control]))
    """)
    assert found == [True, True, True, True]


def test_the_warning_points_at_the_line_that_imports(tmp_path) -> None:  # type: ignore[no-untyped-def]
    script = tmp_path / "user_code.py"
    script.write_text("import warnings\nwarnings.simplefilter('always')\nimport judge_engine.store\n", encoding="utf-8")
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True, timeout=60)
    assert f"{script}:3: DeprecationWarning: judge_engine.store has moved to judge_engine.rundir.store" in result.stderr


def test_the_new_paths_warn_nothing_and_nothing_else_is_redirected() -> None:
    assert new_name("judge_engine.errors") is None
    assert new_name("judge_engine.protocols.gemba_mqm") is None
    assert new_name("judge_engine.cascade.session") == "judge_engine.running.cascade"  # the longest old path decides
    assert new_name("judge_engine.batch.status") == "judge_engine.running.status"
    assert new_name("somewhere_else.config") is None
    assert all(not new.startswith(tuple(f"{old}." for old in MOVED)) for new in MOVED.values())
    found = _probe("""
        import json, warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import judge_engine, judge_engine.running.session, judge_engine.cli, judge_engine.rundir.frames
        print(json.dumps([str(w.message) for w in caught if w.category is DeprecationWarning]))
    """)
    assert found == []


def test_names_that_moved_out_of_a_module_still_read_from_it_with_a_warning() -> None:
    moved = {
        "judge_engine.session": ("demo_endpoint", "judge_engine.running.demo"),
        "judge_engine.runtime": ("build_runtime", "judge_engine.running.session"),
        "judge_engine.cascade.report": ("expected_plans", "judge_engine.running.estimate"),
        "judge_engine.providers.batch": ("batch_api_for", "judge_engine.providers"),
        "judge_engine.protocols.confidence": ("json_value_span", "judge_engine.protocols.verdict_spans"),
        "judge_engine.protocols.base": ("scale_values", "judge_engine.protocols.verdict_spans"),
    }
    found = _probe(f"""
        import importlib, json, warnings
        out = {{}}
        for old, (name, home) in {moved!r}.items():
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                value = getattr(importlib.import_module(old), name)
            out[old] = [value is getattr(importlib.import_module(home), name),
                        [str(w.message) for w in caught if w.category is DeprecationWarning]]
        print(json.dumps(out))
    """)
    for old, (name, home) in moved.items():
        same, said = found[old]
        assert same, old
        assert any(f"{name} has moved to {home}.{name}" in message for message in said), (old, said)


@pytest.mark.slow
def test_judge_engine_estimate_is_the_function_not_the_old_module() -> None:
    found = _probe("""
        import json, judge_engine
        import judge_engine.running.estimate
        from judge_engine import estimate, label_plan
        print(json.dumps({"estimate": callable(estimate) and estimate.__module__,
                          "label_plan": callable(label_plan) and label_plan.__module__,
                          "attr": judge_engine.estimate is estimate}))
    """)
    assert found == {"estimate": "judge_engine.trust.estimates", "label_plan": "judge_engine.trust.label_plan",
                     "attr": True}
