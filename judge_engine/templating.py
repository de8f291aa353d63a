"""The one home of jinja2: a sandboxed, strict environment that renders prompt templates.

Templates are data (``judge_engine/prompts/<protocol>/<name>.j2``). Dataset text only ever enters
as variables, never as template source, so an item containing ``{{`` is rendered literally.

A custom judge's template (``protocol: custom``) comes from the user's config, as a file or inline
text: :func:`render_source` renders it in a second sandbox with the same rules but no loader, so
the template is one self-contained text (no ``include``/``import``) and the hash of that text
(:func:`~judge_engine.jsonio.text_hash`) covers everything that shapes its prompts.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
import jinja2.meta
import jinja2.sandbox

from judge_engine.errors import TemplateError
from judge_engine.jsonio import text_hash

PROMPTS_DIR = Path(__file__).parent / "prompts"


@lru_cache(maxsize=1)
def _environment() -> jinja2.sandbox.SandboxedEnvironment:
    return jinja2.sandbox.SandboxedEnvironment(
        loader=jinja2.FileSystemLoader(str(PROMPTS_DIR)),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        # Byte-exact prompts: keep every newline as written, including the final one.
        keep_trailing_newline=True,
        trim_blocks=False,
        lstrip_blocks=False,
        # Templates are part of the package and hashed once into cache keys (template_hash):
        # checking their mtimes on every render cost a stat() per prompt and could only make
        # the prompt disagree with its recorded hash.
        auto_reload=False,
    )


@lru_cache(maxsize=1)
def _source_environment() -> jinja2.sandbox.SandboxedEnvironment:
    """The sandbox of config templates: like the package's, without a loader."""
    return jinja2.sandbox.SandboxedEnvironment(
        undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True,
        trim_blocks=False, lstrip_blocks=False,
    )


@lru_cache(maxsize=64)
def _compiled(source: str) -> jinja2.Template:
    return _source_environment().from_string(source)


def check_source(source: str, *, name: str = "template") -> set[str]:
    """Compile template text from a config; returns the names of the variables it reads.

    Raises:
        TemplateError: a syntax error (with its line), or an ``include``/``import``/``extends``
            (a config template must be one text: its hash is what names its prompts).
    """
    environment = _source_environment()
    try:
        tree = environment.parse(source)
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateError(f"{name}: line {exc.lineno}: {exc.message}") from None
    if any(True for _ in jinja2.meta.find_referenced_templates(tree)):
        raise TemplateError(f"{name}: include, import and extends are not available in a config template "
                            "(write it as one file)")
    return set(jinja2.meta.find_undeclared_variables(tree))


def render_source(source: str, /, *, name: str = "template", **variables: Any) -> str:
    """Render template text from a config (a custom judge's) with ``variables``, in a sandbox
    with the same rules as :func:`render` (strict undefined, no autoescape, newlines kept).

    Raises:
        TemplateError: a syntax error or a variable that was not given (names ``name``).
    """
    try:
        return _compiled(source).render(**variables)
    except jinja2.UndefinedError as exc:
        raise TemplateError(f"{name}: {exc.message}") from exc
    except jinja2.TemplateError as exc:
        raise TemplateError(f"{name}: {exc}") from exc


def render(template: str, /, **variables: Any) -> str:
    """Render ``template`` (a path under ``judge_engine/prompts``) with ``variables``.

    Raises:
        TemplateError: the template is missing or refers to a variable that was not given.
    """
    try:
        return _environment().get_template(template).render(**variables)
    except jinja2.TemplateNotFound as exc:
        raise TemplateError(f"prompt template not found: {template}") from exc
    except jinja2.UndefinedError as exc:
        raise TemplateError(f"template {template}: {exc.message}") from exc
    except jinja2.TemplateError as exc:
        raise TemplateError(f"template {template}: {exc}") from exc


@lru_cache(maxsize=256)
def template_hash(template: str) -> str:
    """Content hash of one template file, recorded in run manifests and cache keys."""
    path = PROMPTS_DIR / template
    if not path.is_file():
        raise TemplateError(f"prompt template not found: {template}")
    return text_hash(path.read_bytes())
