"""The one home of jinja2: a sandboxed, strict environment that renders prompt templates.

Templates are data (``judge_engine/prompts/<protocol>/<name>.j2``). Dataset text only ever enters
as variables, never as template source, so an item containing ``{{`` is rendered literally.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
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
