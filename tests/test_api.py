"""The public Python API: the names ``aiayn`` exports, imported on first use."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import aiayn


def test_import_aiayn_does_not_import_torch():
    code = "import sys, aiayn; print('torch' in sys.modules, len(aiayn.__all__))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", str(len(aiayn.__all__))]


def test_every_exported_name_is_its_module_object():
    for name, module in aiayn._SOURCES.items():
        assert getattr(aiayn, name) is getattr(importlib.import_module(module), name), name
    assert set(aiayn.__all__) <= set(dir(aiayn))


def test_every_exported_name_is_documented():
    for name in aiayn._SOURCES:
        doc = (getattr(aiayn, name).__doc__ or "").strip()
        # a dataclass without a docstring gets its signature as one: not documentation
        assert doc and not doc.startswith(f"{name}("), f"aiayn.{name} has no docstring"


def test_an_unknown_name_says_so():
    try:
        aiayn.Translater  # noqa: B018
    except AttributeError as error:
        assert "Translater" in str(error)
    else:
        raise AssertionError("aiayn.Translater resolved")


def test_the_package_is_typed():
    assert (Path(aiayn.__file__).parent / "py.typed").is_file()  # PEP 561
