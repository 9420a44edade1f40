"""The documentation site builds with ``mkdocs build --strict`` (no broken link, snippet or
reference), in English and in every language of mkdocs.yml's i18n plugin, running the
tutorial's notebook for its pictures, and its reference pages hold every command, option and
configuration key."""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import os
import re
import subprocess
import sys
import typing
from pathlib import Path

import pytest

from aiayn import config

from .blocks import REPO
from .test_translations import languages

pytest.importorskip("mkdocs", reason="the documentation's packages are in the dev extra")
pytest.importorskip("jupytext", reason="the documentation's packages are in the dev extra")


def _hook_module(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "docs" / "hooks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


reference = _hook_module("reference")
build = _hook_module("build")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site, built from scratch: the notebook runs (its picture cache is empty)."""
    return _built_site(tmp_path_factory.getbasetemp() / "site")


@functools.cache
def _built_site(root: Path) -> Path:
    """Built once per test process: a module fixture is made again when another module's
    tests run between this module's on the same worker, and a build takes half a minute."""
    root.mkdir()
    env = {
        **os.environ,
        "AIAYN_DOCS_CACHE": str(root / "cache"),
        "PYTHONPATH": os.pathsep.join(
            filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")])
        ),
    }
    command = [
        sys.executable,
        "-m",
        "mkdocs",
        "build",
        "--strict",
        "--site-dir",
        str(root / "site"),
    ]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-5000:]
    return root / "site"


@pytest.mark.slow
def test_the_tutorial_holds_the_real_source_and_the_notebooks_pictures(site):
    page = (site / "tutorial" / "paper" / "index.html").read_text(encoding="utf-8")
    source = (REPO / "src" / "aiayn" / "modules" / "attention.py").read_text(encoding="utf-8")
    assert "def scaled_dot_product_attention" in source
    assert "scaled_dot_product_attention" in page and "--8&lt;--" not in page
    assert "masked_fill" in page  # a line of the included function body
    for name in build.FIGURES:
        picture = site / "tutorial" / "figures" / name
        assert picture.stat().st_size > 10_000, name
        assert f'src="../figures/{name}"' in page, name
    text = re.sub(r"<[^>]+>", "", page)  # the code without its highlighting
    assert "def beam_search(" in text and "def greedy_search(" in text  # the searches
    assert "def train_copy(" in text and "peeking = build_model(" in text  # the notebook's cells
    assert (site / "tutorial" / "walkthrough.py").is_file()  # the notebook's source
    assert (site / "tutorial" / "tutorial.ipynb").is_file()  # the notebook, to download


@pytest.mark.slow
def test_the_notebook_ran_top_to_bottom_within_three_minutes(site):
    """The build ran the notebook (its shapes and copy accuracy asserted in its cells)."""
    (timing,) = (site.parent / "cache").glob("figures-*/notebook-seconds.txt")
    assert float(timing.read_text()) < 180


@pytest.mark.slow
def test_the_executed_notebook_shows_its_pictures_and_prints_no_path(site):
    """Run as a reader's Jupyter runs it, the notebook holds every picture it draws, inline
    under its cell, and no cell's output is a bare path (a file written instead of shown)."""
    import nbformat

    (executed,) = (site.parent / "cache").glob("figures-*/executed.ipynb")
    book = nbformat.reads(executed.read_text(encoding="utf-8"), as_version=4)
    outputs = [o for cell in book.cells if cell.cell_type == "code" for o in cell.outputs]
    pictures = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(pictures) == len(build.FIGURES)
    texts = [o.get("data", {}).get("text/plain", "") for o in outputs]
    assert not [t for t in texts if "PosixPath(" in t]


@pytest.mark.slow
@pytest.mark.parametrize("language", languages())
def test_each_language_has_its_tutorial_with_the_source_the_pictures_and_a_switcher(site, language):
    page = site / language / "tutorial" / "paper" / "index.html"
    html = page.read_text(encoding="utf-8")
    assert f'<html lang="{language}"' in html
    assert "masked_fill" in html and "--8&lt;--" not in html  # the included source
    pictures = re.findall(r'<img [^>]*src="([^"]+)"', html)
    assert len(pictures) >= 3
    for src in pictures:
        assert (page.parent / src).resolve().is_file(), src
    for other in ("en", *languages()):
        assert f'hreflang="{other}"' in html, other
    assert (site / language / "start" / "index.html").is_file()


@pytest.mark.slow
def test_the_reference_pages_are_built_from_the_code(site):
    commands = (site / "reference" / "commands" / "index.html").read_text(encoding="utf-8")
    for name, parser, _ in reference.commands():
        assert name in commands
        for action in parser._actions:
            for option in action.option_strings:
                assert option in commands, f"{name} {option}"
    api = (site / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    for name in ("Translator", "SearchOptions", "corpus_scores", "Trainer", "generate"):
        assert 'id="aiayn.' in api and name in api


def test_every_configuration_key_is_in_the_reference():
    page = reference.config_reference()
    for table, cls in reference.SECTIONS:
        assert cls.__name__ in page
        types = typing.get_type_hints(cls)
        for field in dataclasses.fields(cls):
            if field.name in reference.TABLES.get(table, ()):
                # [model], [pipeline.decode], ...: tables of their own
                assert dataclasses.is_dataclass(types[field.name]), field.name
                assert f"`[{table + '.' if table else ''}{field.name}]`" in page, field.name
                continue
            assert f"| `{field.name}` |" in page, field.name
    for preset in config.MODEL_PRESETS:
        assert f"| `{preset}` |" in page


def test_ranges_and_defaults_come_from_the_dataclasses():
    assert reference.allowed_range(config.ModelConfig, "d_model", 512) == "at least 1"
    assert reference.allowed_range(config.ModelConfig, "dropout", 0.1) == "at least 0 and below 1"
    assert reference.allowed_range(config.OptimConfig, "lr", 5e-4) == "above 0"
    assert reference.allowed_range(config.PrepareConfig, "max_len", 256) == "at least 1"
    assert reference.allowed_range(config.ModelConfig, "norm_first", False) == ""
    assert reference.toml_value((0.9, 0.98)) == "[0.9, 0.98]"
    assert reference.toml_value(True) == "true" and reference.toml_value("bpe") == '"bpe"'
    comments = reference.field_comments(config.ModelConfig)
    assert comments["n_heads"] == "h" and comments["dropout"].startswith("P_drop")
