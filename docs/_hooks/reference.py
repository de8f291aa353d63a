"""MkDocs hook: the documentation's references, generated from the code at every build.

A page asks for one with a marker line, replaced here:

    <!-- reference: cli -->                 every command and option, from judge_engine.cli.parser()
    <!-- reference: config -->              every config key, from the pydantic models (type, default,
                                            its docstring, an example validated against the model)
    <!-- reference: protocols -->           the protocols' table, from the registry
    <!-- reference: protocol NAME -->       one protocol's facts (version, fields, score, options)
    <!-- reference: contract -->            the import contract of pyproject.toml, drawn
    <!-- reference: moved -->               the module paths that moved (judge_engine/_moved.py)
    <!-- reference: cascade-words -->       the cascade's glossary (judge_engine/util/cascade_words.py)

A marker this hook does not know, a config key without an example, or an example the model
refuses fails the build: under ``mkdocs build --strict`` in CI, the docs cannot drift from the
code.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import os
import re
import textwrap
import tomllib
import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"^<!-- reference: ([a-z-]+)(?: ([\w-]+))? -->$", re.MULTILINE)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    def replace(match: re.Match[str]) -> str:
        kind, argument = match.group(1), match.group(2)
        maker = REFERENCES.get(kind)
        if maker is None:
            raise ValueError(f"{page.file.src_uri}: unknown reference {kind!r} (known: {', '.join(REFERENCES)})")
        return maker(argument, page=page) if argument else maker(page=page)

    return MARKER.sub(replace, markdown)


def _cell(text: str) -> str:
    """Text for a Markdown table cell: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


# --- the command line --------------------------------------------------------------------------


def cli_reference(*, page: Any = None) -> str:
    from judge_engine.cli import EPILOG, parser

    os.environ["COLUMNS"] = "80"  # argparse wraps the usage lines at the page's width, never mid-option

    root = parser()
    sub = next(a for a in root._actions if isinstance(a, argparse._SubParsersAction))
    helps = {action.dest: action.help for action in sub._choices_actions}
    out = ["| command | what it does |", "|---|---|"]
    out += [f"| [`judge-engine {name}`](#{name}) | {_cell(helps.get(name) or '')} |" for name in sub.choices]
    out += ["", f"Exit codes: {EPILOG.removeprefix('exit codes: ')}.", ""]
    for name, command in sub.choices.items():
        out += [f"## `{name}` {{#{name}}}", "", _cell(helps.get(name) or command.description or ""), ""]
        if command.description and command.description != helps.get(name):
            out += [command.description, ""]
        out += ["```text", command.format_usage().removeprefix("usage: ").rstrip(), "```", ""]
        rows = [_argument_row(action) for action in command._actions if not isinstance(action, argparse._HelpAction)]
        if rows:
            out += ["| argument | what | default |", "|---|---|---|", *rows, ""]
    return "\n".join(out)


def _argument_row(action: argparse.Action) -> str:
    if action.option_strings:
        names = ", ".join(f"`{o}`" for o in action.option_strings)
        if action.nargs != 0:
            metavar = action.metavar or (action.dest.upper() if not action.choices else None)
            if metavar:
                names += f" `{metavar if isinstance(metavar, str) else ' '.join(metavar)}`"
    else:
        names = f"`{action.metavar or action.dest}`"
    what = action.help if action.help not in (None, argparse.SUPPRESS) else ""
    if action.choices:
        what = f"{what} (one of: {', '.join(f'`{c}`' for c in action.choices)})".strip()
    if action.nargs in ("*", "+"):
        what += " (several may be given)"
    default = action.default
    shown = "" if default in (None, False, argparse.SUPPRESS) or action.nargs == 0 else f"`{default}`"
    return f"| {_cell(names)} | {_cell(what)} | {_cell(shown)} |"


# --- the config file ----------------------------------------------------------------------------

# One example per key, in YAML as it is written under its section. Each is validated against its
# model at build time (with the section's required keys from BASE), and a key without one fails
# the build: a key added to the models must be documented here.
EXAMPLES: dict[str, str] = {
    "JobConfig.dataset": "dataset: {path: items.jsonl, fields: {source: src, target: tgt}}",
    "JobConfig.judges": "judges:\n  - {name: mqm, model: openai/gpt-4o-mini, protocol: gemba-mqm}",
    "JobConfig.output": "output: {dir: runs}",
    "JobConfig.cache": "cache: {dir: .judge_cache, enabled: true}",
    "JobConfig.budget": "budget: {max_cost_usd: 20, max_hours: 8}",
    "JobConfig.juries": "juries:\n  - {name: panel, judges: [a, b, c], aggregate: median}",
    "JobConfig.cascade": "cascade: {stages: [a, b], thresholds: thresholds.json}",
    "DatasetConfig.path": "path: data/items.jsonl",
    "DatasetConfig.format": "format: csv",
    "DatasetConfig.fields": "fields: {id: seg_id, source: src, target: mt}",
    "DatasetConfig.limit": "limit: 100",
    "JudgeConfig.name": "name: mqm-mini",
    "JudgeConfig.model": "model: anthropic/claude-sonnet-4-5",
    "JudgeConfig.protocol": "protocol: prometheus-absolute",
    "JudgeConfig.protocol_options": "protocol_options: {rubric: literary-sqm}",
    "JudgeConfig.api_base": "api_base: http://127.0.0.1:8000/v1",
    "JudgeConfig.api_key_env": "api_key_env: MY_GATEWAY_KEY",
    "JudgeConfig.api_key": "api_key: sk-...   # discouraged: prefer api_key_env",
    "JudgeConfig.transport": "transport: litellm",
    "JudgeConfig.proxy": "proxy: http://user:password@proxy.corp:3128",
    "JudgeConfig.ca_bundle": "ca_bundle: company-ca.pem",
    "JudgeConfig.verify": "verify: false   # a test server only: warned at every run",
    "JudgeConfig.temperatures": "temperatures: [0.0, 0.7]",
    "JudgeConfig.repeats": "repeats: 3",
    "JudgeConfig.max_tokens": "max_tokens: 1000",
    "JudgeConfig.params": "params: {top_p: 0.9, seed: 7}",
    "JudgeConfig.timeout_s": "timeout_s: 60",
    "JudgeConfig.limits": "limits: {rpm: 3000, tpm: 1000000, concurrency: 64}",
    "JudgeConfig.retries": "retries: {transport: 6, reasks: 2}",
    "JudgeConfig.deployments": "deployments:\n  - {name: east, api_base: http://10.0.0.1:8000/v1, limits: {rpm: 600}}\n"
                               "  - {name: west, api_base: http://10.0.0.2:8000/v1, limits: {rpm: 600}}",
    "JudgeConfig.budget": "budget: {max_cost_usd: 5}",
    "JudgeConfig.self_preference": "self_preference: forbid",
    "JudgeConfig.mode": "mode: batch",
    "JudgeConfig.batch": "batch: {poll_interval_s: 300, fallback: batch, max_rounds: 2}",
    "JudgeConfig.confidence": "confidence: logprobs",
    "Limits.rpm": "rpm: 3000",
    "Limits.tpm": "tpm: 1000000",
    "Limits.concurrency": "concurrency: 64",
    "Limits.headroom": "headroom: 0.02",
    "Limits.burst": "burst: 1",
    "Retries.transport": "transport: 10",
    "Retries.reasks": "reasks: 1",
    "Retries.backoff_max_s": "backoff_max_s: 60",
    "Retries.rate_limit_max": "rate_limit_max: 5000",
    "Retries.stop_after_exhausted": "stop_after_exhausted: 20",
    "Budget.max_cost_usd": "max_cost_usd: 20",
    "Budget.max_hours": "max_hours: 8",
    "DeploymentConfig.name": "name: east",
    "DeploymentConfig.model": "model: azure/prod-judge",
    "DeploymentConfig.api_base": "api_base: http://10.0.0.1:8000/v1",
    "DeploymentConfig.api_key_env": "api_key_env: EAST_KEY",
    "DeploymentConfig.api_key": "api_key: sk-...   # discouraged: prefer api_key_env",
    "DeploymentConfig.limits": "limits: {rpm: 600, concurrency: 32}",
    "DeploymentConfig.proxy": "proxy: direct",
    "DeploymentConfig.ca_bundle": "ca_bundle: /etc/ssl/west-ca.pem",
    "DeploymentConfig.verify": "verify: true",
    "BatchConfig.poll_interval_s": "poll_interval_s: 300",
    "BatchConfig.fallback": "fallback: batch",
    "BatchConfig.max_rounds": "max_rounds: 2",
    "BatchConfig.completion_window": "completion_window: 24h",
    "BatchConfig.max_requests_per_file": "max_requests_per_file: 10000",
    "BatchConfig.max_bytes_per_file": "max_bytes_per_file: 50000000",
    "BatchConfig.max_enqueued_tokens": "max_enqueued_tokens: 20000000",
    "ConfidenceConfig.method": "method: logprobs",
    "ConfidenceConfig.top_logprobs": "top_logprobs: 5",
    "ConfidenceConfig.score": "score: weighted",
    "JuryConfig.name": "name: panel",
    "JuryConfig.judges": "judges: [a, b, c]",
    "JuryConfig.aggregate": "aggregate: mean",
    "JuryConfig.weights": "weights: {a: 2, b: 1, c: 1}   # with aggregate: weighted",
    "JuryConfig.tie": "tie: abstain",
    "JuryConfig.quorum": "quorum: 2   # with a tie rule: the panel can vote as an even one",
    "CascadeConfig.name": "name: cascade",
    "CascadeConfig.stages": "stages: [cheap, mid, strong]",
    "CascadeConfig.thresholds": "thresholds: thresholds.json",
    "CascadeConfig.enabled": "enabled: false",
    "CascadeConfig.guarantee": "guarantee: cascade",
    "OutputConfig.dir": "dir: /data/runs",
    "CacheConfig.dir": "dir: /data/judge-cache",
    "CacheConfig.enabled": "enabled: false",
}

_JUDGE = {"name": "a", "model": "openai/gpt-4o-mini", "protocol": "prometheus-absolute", "confidence": "logprobs"}
# The sibling keys an example needs to be valid (said in the example's comment).
CONTEXT: dict[str, dict[str, Any]] = {
    "JuryConfig.weights": {"aggregate": "weighted"},
    "JuryConfig.quorum": {"tie": "abstain"},
}
BASE: dict[str, dict[str, Any]] = {
    "JobConfig": {"dataset": {"path": "items.jsonl"},
                  "judges": [_JUDGE, {**_JUDGE, "name": "b"}, {**_JUDGE, "name": "c"}]},
    "JudgeConfig": {"name": "a", "model": "openai/gpt-4o-mini", "protocol": "gemba-mqm"},
    "DatasetConfig": {"path": "items.jsonl"},
    "ConfidenceConfig": {"method": "logprobs"},
    "JuryConfig": {"name": "panel", "judges": ["a", "b", "c"], "aggregate": "median"},
    "CascadeConfig": {"stages": ["a", "b"], "thresholds": "thresholds.json"},
}


def config_reference(*, page: Any = None) -> str:
    from judge_engine.inputs import config as models

    sections: list[tuple[str, type[BaseModel], str]] = [
        ("The file's top level", models.JobConfig, ""),
        ("`dataset`", models.DatasetConfig, "dataset."),
        ("`judges[]`: each judge", models.JudgeConfig, "judges[]."),
        ("`judges[].limits`: what the provider allows", models.Limits, "judges[].limits."),
        ("`judges[].retries`: the two retry budgets", models.Retries, "judges[].retries."),
        ("`budget` and `judges[].budget`", models.Budget, "budget."),
        ("`judges[].deployments[]`: several deployments of one judge", models.DeploymentConfig,
         "judges[].deployments[]."),
        ("`judges[].batch`: batch mode", models.BatchConfig, "judges[].batch."),
        ("`judges[].confidence`: how sure the judge is", models.ConfidenceConfig, "judges[].confidence."),
        ("`juries[]`: panels of judges", models.JuryConfig, "juries[]."),
        ("`cascade`: Trust or Escalate", models.CascadeConfig, "cascade."),
        ("`output`", models.OutputConfig, "output."),
        ("`cache`", models.CacheConfig, "cache."),
    ]
    documented = {model for _, model, _ in sections}
    missing = [m.__name__ for m in _models_under(models.JobConfig) if m not in documented]
    if missing:
        raise ValueError(f"config models with no section in the reference: {missing}")
    out: list[str] = []
    for title, model, prefix in sections:
        out += [f"### {title}", "", _markdown(_first_paragraph(model.__doc__ or "")), ""]
        docs = _attribute_docstrings(model)
        for name, info in model.model_fields.items():
            example = _checked_example(model, name)
            out += [f"`{prefix}{name}`", f":   {_type_name(info)}; {_default(info)}.", "",
                    f"    {_markdown(docs.get(name, '')) or '(undocumented)'}", "",
                    "    ```yaml", *[f"    {line}" for line in example.splitlines()], "    ```", ""]
    return "\n".join(out)


def _models_under(model: type[BaseModel]) -> list[type[BaseModel]]:
    found: list[type[BaseModel]] = []

    def walk(annotation: Any) -> None:
        if inspect.isclass(annotation) and issubclass(annotation, BaseModel):
            if annotation not in found:
                found.append(annotation)
                for info in annotation.model_fields.values():
                    walk(info.annotation)
            return
        for argument in typing.get_args(annotation):
            walk(argument)

    walk(model)
    return found


def _attribute_docstrings(model: type[BaseModel]) -> dict[str, str]:
    """Each field's docstring (the string literal under it in the class body), a base class's
    fields included (a protocol's options inherit ``output``)."""
    docs: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        if not (isinstance(cls, type) and issubclass(cls, BaseModel) and cls.__module__.startswith("judge_engine")):
            continue
        body = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0].body  # type: ignore[attr-defined]
        for node, following in zip(body, body[1:], strict=False):
            if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                    and isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant)
                    and isinstance(following.value.value, str)):
                docs[node.target.id] = inspect.cleandoc(following.value.value)
    return docs


def _first_paragraph(doc: str) -> str:
    return inspect.cleandoc(doc).split("\n\n")[0].replace("\n", " ")


def _type_name(info: FieldInfo) -> str:
    text = _annotation(info.annotation)
    bounds = []
    for item in info.metadata:
        for attribute, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"), ("min_length", "at least")):
            value = getattr(item, attribute, None)
            if value is not None:
                bounds.append(f"{value} items" if attribute == "min_length" and "list" in text else
                              (f"{sign} {value}" if attribute != "min_length" else "not empty"))
    return text + (f" ({', '.join(bounds)})" if bounds else "")


def _annotation(annotation: Any) -> str:
    origin, arguments = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _annotation(arguments[0])
    if origin in (typing.Union, types.UnionType):
        parts = [_annotation(a) for a in arguments if a is not type(None)]
        return " or ".join(dict.fromkeys(parts)) + (" or null" if type(None) in arguments else "")
    if origin is typing.Literal:
        return " or ".join(f"`{a}`" for a in arguments)
    if origin is list:
        return f"list of {_annotation(arguments[0])}"
    if origin is dict:
        return f"mapping of {_annotation(arguments[0])} to {_annotation(arguments[1])}"
    if inspect.isclass(annotation) and issubclass(annotation, BaseModel):
        return "mapping"
    names = {str: "text", int: "integer", float: "number", bool: "true/false", Path: "path"}
    if annotation in names:
        return names[annotation]
    if getattr(annotation, "__name__", "") == "SecretStr":
        return "text (secret: never recorded)"
    if annotation is Any:
        return "any"
    return getattr(annotation, "__name__", str(annotation))


def _default(info: FieldInfo) -> str:
    """The default as a phrase: ``**required**``, ``default `16```."""
    value = _default_value(info)
    return "**required**" if value == "required" else f"default {value}"


def _default_value(info: FieldInfo) -> str:
    if info.is_required():
        return "required"
    value = info.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        return "each of its keys' defaults"
    if isinstance(value, Path):
        value = str(value)
    return f"`{yaml.safe_dump(value, default_flow_style=True).strip().removesuffix('...').strip()}`"


_ROLE = re.compile(r":(?:func|class|meth|mod|attr|data|exc|obj):`~?([^`<]*?)(?:\s*<[^>]*>)?`")


def _markdown(text: str) -> str:
    """A docstring's reStructuredText, as Markdown on one line: ``code`` and :role:`target`
    become `code` (a role's target shown by its last name)."""
    text = _ROLE.sub(lambda m: f"`{m.group(1).rsplit('.', 1)[-1] if '.' in m.group(1) and ' ' not in m.group(1) else m.group(1)}`", text)
    return " ".join(text.replace("``", "`").split())


def _checked_example(model: type[BaseModel], name: str) -> str:
    key = f"{model.__name__}.{name}"
    example = EXAMPLES.get(key)
    if example is None:
        raise ValueError(f"the config reference has no example for {key}: add one to EXAMPLES in {__file__}")
    document = yaml.safe_load(example)
    if not isinstance(document, dict) or list(document) != [name]:
        raise ValueError(f"the example for {key} must set {name} alone: {example!r}")
    try:
        model.model_validate({**BASE.get(model.__name__, {}), **CONTEXT.get(key, {}), **document})
    except ValueError as exc:
        raise ValueError(f"the config reference's example for {key} is refused by the model: {exc}") from None
    return example


def _example_cell(example: str) -> str:
    if "\n" not in example:
        return f"`{_cell(example)}`"
    return "<br>".join(f"<code>{_cell(line).replace(' ', '&nbsp;')}</code>" for line in example.splitlines())


# --- the protocols -------------------------------------------------------------------------------


def protocols_reference(*, page: Any = None) -> str:
    from judge_engine.protocols import available, get_protocol

    out = ["| protocol | version | what it asks | item fields | score |", "|---|---|---|---|---|"]
    for name in available():
        cls = get_protocol(name)
        here = "" if page is not None and page.file.src_uri.startswith("protocols/") else "protocols/"
        label = f"[`{name}`]({here}{_protocol_page(name)})"
        fields = "the template's variables" if cls.output_per_config else (
            ", ".join(f"`{f}`" for f in cls.required_fields) or "none but an `id`")
        out.append(f"| {label} | {cls.version} | {_cell(cls.description)} | {_cell(fields)} | {_cell(_score(cls))} |")
    return "\n".join(out) + "\n"


_PAGES = {"gemba-mqm": "gemba-mqm.md", "gemba-mqm-literary": "gemba-mqm.md", "prometheus-absolute": "prometheus.md",
          "prometheus-relative": "prometheus.md", "ttct": "ttct.md", "novel-spans": "close-reading.md",
          "nonpragmatic-spans": "close-reading.md", "bws": "bws.md", "cdat": "cdat.md", "dat": "cdat.md",
          "pairwise-annotators": "pairwise-annotators.md", "custom": "custom.md"}


def _protocol_page(name: str) -> str:
    page = _PAGES.get(name)
    if page is None:
        raise ValueError(f"protocol {name!r} has no page in docs/protocols/: add it to _PAGES in {__file__}")
    return page


def _score(cls: Any) -> str:
    if cls.output_per_config:
        return "from the config (`score`)"
    low_high = cls().score_range()
    return f"{low_high[0]:g} .. {low_high[1]:g}" if low_high else "not fixed (by rubric, sentences or candidate)"


def protocol_reference(name: str, *, page: Any = None) -> str:
    from judge_engine.protocols import get_protocol

    cls = get_protocol(name)
    rows = [("name", f"`{name}`"), ("version", str(cls.version)), ("what it asks", cls.description),
            ("score", _score(cls))]
    if cls.output_per_config:
        rows += [("item fields", "the template's variables"), ("answer", "the fields the config declares")]
    else:
        rows += [("item fields (required)", ", ".join(f"`{f}`" for f in cls.required_fields) or "none"),
                 ("answer fields", ", ".join(f"`{f}`" for f in cls.output_model.model_fields)),
                 ("JSON Schema", f"`schemas/{name}.json`")]
    templates = sorted({t for t in _templates(cls)})
    if templates:
        rows.append(("templates", ", ".join(f"`judge_engine/protocols/prompts/{t}`" for t in templates)))
    rows = [(key, _markdown(value)) for key, value in rows]
    out = [*[f"- **{key}**: {_cell(value)}" for key, value in rows], ""]
    options = cls.options_model
    if options.model_fields:
        docs = _attribute_docstrings(options)
        out += [f"`protocol_options` of `{name}`:", "", "| option | type | default | what it is |", "|---|---|---|---|"]
        for option, info in options.model_fields.items():
            what = _markdown(docs.get(option) or info.description or "")
            out.append(f"| `{option}` | {_cell(_type_name(info))} | {_cell(_default_value(info))} | {_cell(what)} |")
        out.append("")
    return "\n".join(out)


def _templates(cls: Any) -> list[str]:
    try:
        return list(cls().templates())
    except Exception:  # a protocol whose templates depend on its options (custom): none to list
        return []


# --- the architecture ------------------------------------------------------------------------------


def contract_reference(*, page: Any = None) -> str:
    """The import contract of pyproject.toml, drawn: the layers top to bottom, siblings side by side."""
    settings = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    out: list[str] = []
    for contract in settings["contracts"]:
        out += [f"**{contract['name']}** (`{contract['type']}`)", ""]
        if contract["type"] == "layers":
            rows = [[part.strip().removeprefix(f"{settings['root_package']}.") for part in re.split(r"[|:]", layer)]
                    for layer in contract["layers"]]
            width = max(len("  |  ".join(r)) for r in rows) + 4
            lines = []
            for index, row in enumerate(rows):
                text = "  |  ".join(row)
                lines.append(f"  {text.center(width)}")
                if index < len(rows) - 1:
                    lines.append(f"  {'v'.center(width)}")
            out += ["```text", *lines, "```", "",
                    "Each layer may import the layers below it, never one above; names side by side "
                    "(`|`) are independent: neither imports the other.", ""]
        elif contract["type"] == "acyclic_siblings":
            out += [f"No two modules or packages under the same parent of `{', '.join(contract['ancestors'])}` "
                    "import each other, directly or through others, at run time (an import only a type "
                    "checker reads, under `TYPE_CHECKING`, is not one).", ""]
        elif contract["type"] == "forbidden":
            out += [f"`{'`, `'.join(contract['source_modules'])}` never imports "
                    f"`{'`, `'.join(contract['forbidden_modules'])}`.", ""]
        elif contract["type"] == "independence":
            out += [f"`{'`, `'.join(contract['modules'])}`: none imports another.", ""]
        if contract.get("ignore_imports"):
            out += ["Allowed exceptions: " + ", ".join(f"`{i}`" for i in contract["ignore_imports"]), ""]
    return "\n".join(out)


def moved_reference(*, page: Any = None) -> str:
    from judge_engine._moved import MOVED

    out = ["| old path (0.1, warns until 0.3) | new path |", "|---|---|"]
    out += [f"| `judge_engine.{old}` | `judge_engine.{new}` |" for old, new in sorted(MOVED.items())]
    return "\n".join(out) + "\n"


def cascade_words_reference(*, page: Any = None) -> str:
    """The cascade's glossary, from judge_engine/util/cascade_words.py: the words every command and
    the viewer use."""
    from judge_engine.util.cascade_words import GLOSSARY

    out = ["| word | what it means |", "|---|---|"]
    out += [f"| **{word}** | {_cell(meaning)} |" for word, meaning in GLOSSARY.items()]
    return "\n".join(out) + "\n"


REFERENCES: dict[str, Callable[..., str]] = {
    "cli": cli_reference,
    "config": config_reference,
    "protocols": protocols_reference,
    "protocol": protocol_reference,
    "contract": contract_reference,
    "moved": moved_reference,
    "cascade-words": cascade_words_reference,
}
