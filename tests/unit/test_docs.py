"""The manual stays whole: a page per command, every JSON field documented, the generated config reference
fresh, and a README that is a short front door whose links all land on real pages."""

from __future__ import annotations

import dataclasses
import importlib.util
import re
from pathlib import Path
from types import ModuleType

import click
import pytest
import yaml

from tokometer.cli import cli

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
README_LIMIT = 12_000

_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _commands() -> list[str]:
    return cli.list_commands(click.Context(cli))


def _nav_pages() -> set[str]:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text("utf-8"))

    def walk(node: object) -> set[str]:
        if isinstance(node, str):
            return {node}
        if isinstance(node, list):
            return set().union(*(walk(item) for item in node)) if node else set()
        if isinstance(node, dict):
            return set().union(*(walk(value) for value in node.values())) if node else set()
        return set()

    return walk(config["nav"])


def _generator() -> ModuleType:
    path = ROOT / "scripts" / "gen_config_reference.py"
    spec = importlib.util.spec_from_file_location("gen_config_reference", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("command", _commands())
def test_every_command_has_a_page_in_the_manual(command: str) -> None:
    page = DOCS / "commands" / f"{command}.md"
    assert page.is_file(), f"no page for 'tokometer {command}': write {page.relative_to(ROOT)}"
    assert page.read_text("utf-8").startswith(f"# tokometer {command}\n")
    assert f"commands/{command}.md" in _nav_pages(), f"{page.relative_to(ROOT)} is not in mkdocs.yml's nav"


def test_every_page_is_in_the_navigation() -> None:
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert pages == _nav_pages()


def test_the_config_reference_is_what_the_script_writes() -> None:
    generator = _generator()
    assert generator.PAGE.read_text("utf-8") == generator.render(), (
        "docs/reference/gateway-config.md is stale: run .venv/bin/python scripts/gen_config_reference.py")


def test_the_config_reference_names_every_setting() -> None:
    from tokometer.gateway.config import GatewayConfig

    page = (DOCS / "reference" / "gateway-config.md").read_text("utf-8")
    for section, field in GatewayConfig.model_fields.items():
        assert f"[{section}]" in page
        model = field.annotation
        for arg in getattr(model, "__args__", ()):  # list[UpstreamConfig] -> UpstreamConfig
            model = arg
        for key in getattr(model, "model_fields", {}):
            assert f"| `{key}` |" in page, f"{section}.{key} is missing from the config reference"


def test_every_field_of_the_json_result_is_documented() -> None:
    from tokometer.benchmark.spec import BenchSpec
    from tokometer.load.selfcheck import ClientHealth
    from tokometer.metrics import StepSummary
    from tokometer.report.csv_out import CSV_COLUMNS

    page = (DOCS / "reference" / "json.md").read_text("utf-8")
    summary_keys = set(StepSummary.json_keys()) - {
        "output_tokens_total", "output_tokens_source", "input_tokens_total", "input_tokens_source"}
    names = [
        *(k for k, f in BenchSpec.model_fields.items() if not f.exclude), *summary_keys, "naive_summary",
        *(f.name for f in dataclasses.fields(ClientHealth)), *CSV_COLUMNS,
    ]
    missing = sorted(name for name in set(names) if f"`{name}`" not in page)
    assert not missing, f"docs/reference/json.md does not mention {missing}"


def test_the_readme_is_a_short_front_door() -> None:
    size = len(README.read_text("utf-8"))
    assert size < README_LIMIT, f"README.md is {size:,} characters; move detail into docs/ (limit {README_LIMIT:,})"


def test_the_readme_links_to_pages_that_exist() -> None:
    text = README.read_text("utf-8")
    local = [t for t in _LINK.findall(text) if not re.match(r"[a-z]+:", t) and not t.startswith("#")]
    assert local, "the README links to no docs pages"
    for target in local:
        path = (ROOT / target.split("#", 1)[0]).resolve()
        assert path.exists(), f"README.md links to {target}, which does not exist"


def test_the_readme_links_every_command_page() -> None:
    text = README.read_text("utf-8")
    for command in _commands():
        assert f"(docs/commands/{command}.md)" in text, f"README.md has no link to docs/commands/{command}.md"


def test_code_points_only_at_docs_pages_that_exist() -> None:
    pointers = re.compile(r"\bdocs/[\w./-]+\.md\b")
    for path in sorted((ROOT / "src" / "tokometer").rglob("*.py")):
        text = path.read_text("utf-8")
        where = path.relative_to(ROOT)
        assert "METRICS.md" not in text, f"{where} cites METRICS.md: point at docs/reference/metrics.md"
        for target in pointers.findall(text):
            if target == "docs/gguf.md":  # ggml's own docs, named as such in tokometer/util/gguf.py
                continue
            assert (ROOT / target).is_file(), f"{where} points at {target}, which does not exist"
