"""JSON Schemas of the protocols' output models, written to ``schemas/`` and checked for drift."""

from __future__ import annotations

from pathlib import Path

from judge_engine.protocols import available, get_protocol
from judge_engine.util.jsonio import pretty


def rendered_schemas() -> dict[str, str]:
    """File name -> JSON Schema text for every registered protocol's output model (not for a
    protocol whose output model a config declares, ``custom``: its schema is the judge's own,
    and ``judge-engine protocols --check CONFIG`` prints it)."""
    out = {}
    for name in available():
        cls = get_protocol(name)
        if cls.output_per_config:
            continue
        schema = cls.output_model.model_json_schema()
        schema["$comment"] = f"judge-engine protocol {name} version {cls.version}; generated, do not edit"
        out[f"{name}.json"] = pretty(schema)
    return out


def write_schemas(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for file_name, text in rendered_schemas().items():
        path = directory / file_name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def check_schemas(directory: Path) -> list[str]:
    """Names of schema files that are missing or differ from the models (empty when in sync)."""
    stale = []
    for file_name, text in rendered_schemas().items():
        path = directory / file_name
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            stale.append(file_name)
    return stale
