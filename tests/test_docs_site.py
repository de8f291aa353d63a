"""The docs site (issue 31.4): its references are generated from the code, so they name every
config key and every command and option; and, where MkDocs is installed (the docs extra, as in
CI), the site builds strictly and the built pages say so too."""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from pydantic import BaseModel

from judge_engine.cli import parser
from judge_engine.inputs import config as models
from judge_engine.protocols import available

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"


def _hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_reference_hook", DOCS / "_hooks" / "reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    root = parser()
    sub = next(a for a in root._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_the_config_reference_names_every_key_of_every_section() -> None:
    text = _hook().config_reference()
    for key in models.JobConfig.model_fields:
        assert f"`{key}`" in text, key
    for key in models.JudgeConfig.model_fields:
        assert f"`judges[].{key}`" in text, key
    sections = {model.__name__ for model in _hook()._models_under(models.JobConfig)}
    assert sections >= {"JudgeConfig", "Limits", "Retries", "Budget", "DeploymentConfig", "BatchConfig",
                        "ConfidenceConfig", "DatasetConfig", "JuryConfig", "CascadeConfig", "OutputConfig", "CacheConfig"}
    for name in sections:
        model: type[BaseModel] = getattr(models, name)
        for key in model.model_fields:
            assert re.search(rf"`[\w\[\].]*{re.escape(key)}`\n:   ", text), (name, key)


def test_a_config_key_without_an_example_or_with_a_wrong_one_fails_the_build(monkeypatch: pytest.MonkeyPatch) -> None:
    hook = _hook()
    monkeypatch.delitem(hook.EXAMPLES, "Limits.rpm")
    with pytest.raises(ValueError, match="no example for Limits.rpm"):
        hook.config_reference()
    monkeypatch.setitem(hook.EXAMPLES, "Limits.rpm", "rpm: -5")
    with pytest.raises(ValueError, match="example for Limits.rpm is refused by the model"):
        hook.config_reference()


def test_the_cli_reference_names_every_command_and_option() -> None:
    text = _hook().cli_reference()
    for name, command in _subcommands().items():
        assert f"## `{name}`" in text, name
        for action in command._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    assert f"`{option}`" in text, (name, option)


def test_every_protocol_has_a_page_that_shows_its_facts() -> None:
    hook = _hook()
    for name in available():
        page = DOCS / "protocols" / hook._protocol_page(name)
        assert page.is_file(), name
        assert f"<!-- reference: protocol {name} -->" in page.read_text(encoding="utf-8"), name


def test_the_architecture_page_draws_the_contract_of_pyproject() -> None:
    drawn = _hook().contract_reference()
    for part in ("cli", "viewer  |  running", "trust  |  fake", "planning", "protocols  |  providers", "rundir",
                 "inputs", "util"):
        assert part in drawn, part
    assert "acyclic_siblings" in drawn


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built strictly (skipped where MkDocs is not installed: the docs extra)."""
    if importlib.util.find_spec("mkdocs") is None:
        pytest.skip("MkDocs is not installed (the docs extra)")
    built = tmp_path_factory.mktemp("docs") / "site"
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(built)], cwd=REPO,
                            capture_output=True, text=True, timeout=300, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert result.returncode == 0, result.stdout + result.stderr
    return built


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_site_builds_strictly_and_names_every_command_and_key(site: Path) -> None:
    cli = (site / "cli.html").read_text(encoding="utf-8")
    for name in _subcommands():
        assert f'id="{name}"' in cli, name
    configuration = (site / "configuration.html").read_text(encoding="utf-8")
    for key in (*models.JobConfig.model_fields, *(f"judges[].{k}" for k in models.JudgeConfig.model_fields)):
        assert f"<code>{key}</code>" in configuration, key
    pages = {p.relative_to(site).as_posix() for p in site.rglob("*.html")}
    assert {"index.html", "getting-started.html", "configuration.html", "providers.html", "batch.html",
            "auditing.html", "stats.html", "trust.html", "cli.html", "design.html", "benchmarks.html",
            "protocols/index.html", "protocols/gemba-mqm.html", "protocols/custom.html"} <= pages


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_the_site_read_from_the_disk_searches_and_asks_nothing_of_the_network(site: Path) -> None:
    """Opened as files (file://), as a user reads it offline: the search box is there, finds pages,
    and no page asks for anything but its own files (fonts, scripts and shims are the site's)."""
    playwright = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (the dev extra)")
    if not Path("/usr/bin/chromium").exists():
        pytest.skip("Debian's chromium is not installed")
    with playwright.sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path="/usr/bin/chromium",
                                         args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        page = browser.new_page()
        asked: list[str] = []
        page.on("request", lambda request: asked.append(request.url))
        page.goto((site / "protocols" / "bws.html").as_uri())
        box = page.locator("input.md-search__input")
        assert box.is_visible()
        box.click()
        box.press_sequentially("cascade", delay=30)
        page.wait_for_selector(".md-search-result__item", timeout=10_000)
        assert page.locator(".md-search-result__item").count() >= 3
        browser.close()
    assert [url for url in asked if not url.startswith("file://")] == []
