"""ARCHITECTURE.md's layering, checked on the source: each layer imports only the layers
above it, decode and train never each other, and heavy libraries stay where they belong."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "aiayn"
LAYERS = [  # top to bottom, as ARCHITECTURE.md's table
    {
        "errors",
        "files",
        "checks",
        "search_options",
        "config",
        "config_io",
        "exports",
        "memory",
        "masks",
        "runtime",
    },
    {"text"},
    {"modules"},
    {"accel"},
    {"models"},
    {"data"},
    {"store"},
    {"decode", "train"},
    {"translate"},
    {"workers"},
    {"interop"},
    {"eval", "viz", "validation", "pipeline"},
    {"serve"},
    {"cli"},
    {"__init__", "__main__"},
]
APART = [{"decode", "train"}]  # same layer, never each other
FORBIDDEN = {unit: {"train"} for unit in ("translate", "workers", "interop", "serve")}
NO_TORCH = (LAYERS[0] - {"masks", "runtime"}) | {"text"}
ONLY_IN = {"fastapi": {"serve"}, "uvicorn": {"cli"}, "transformers": {"interop"}}


def _unit(path: Path) -> str:
    return path.relative_to(PACKAGE).with_suffix("").parts[0]


def _imports(path: Path) -> tuple[set[str], set[str]]:
    """What ``path`` imports: aiayn's units (``aiayn.X`` as ``X``), and other packages by
    their top-level name (translate-toolkit's ``translate`` is no aiayn unit)."""
    own, libraries = set(), set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            parts = node.module.split(".")
            if parts[0] == "aiayn":
                own |= {parts[1]} if len(parts) > 1 else {a.name for a in node.names}
            else:
                libraries.add(parts[0])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "aiayn" and len(parts) > 1:
                    own.add(parts[1])
                else:
                    libraries.add(parts[0])
    return own, libraries


def _depth(unit: str) -> int:
    return next(i for i, layer in enumerate(LAYERS) if unit in layer)


SOURCES = sorted(PACKAGE.rglob("*.py"))


def test_every_module_has_a_layer():
    assert {_unit(p) for p in SOURCES} <= set().union(*LAYERS)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_follow_the_layers(path):
    unit = _unit(path)
    own, libraries = _imports(path)
    own = {u for u in own if u in set().union(*LAYERS)} - {unit}
    upward = {u for u in own if _depth(u) > _depth(unit)}
    assert not upward, f"{unit} imports a lower layer: {sorted(upward)}"
    for apart in APART:
        if unit in apart:
            assert not own & apart, f"{unit} imports {sorted(own & apart)}"
    assert not own & FORBIDDEN.get(unit, set())
    if unit in NO_TORCH:
        assert "torch" not in libraries
    for library, allowed in ONLY_IN.items():
        assert library not in libraries or unit in allowed, f"{library} imported in {unit}"


def test_help_and_text_preparation_start_without_torch(tmp_path):
    """``aiayn --help`` and ``aiayn prepare --text`` never import torch (its import is most
    of their time): the packages' names load on first use (``aiayn.exports``)."""
    text = tmp_path / "corpus.txt"
    text.write_text("To be, or not to be, that is the question.\n" * 50, encoding="utf-8")
    code = textwrap.dedent(
        f"""
        import contextlib, io, sys
        from aiayn.cli import main
        with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
            main(["--help"])
        assert main(["prepare", "--text", {str(text)!r}, "--out", {str(tmp_path / "lm")!r}]) == 0
        print(sorted(m for m in ("torch", "numpy") if m in sys.modules))
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "['numpy']"


def test_lazy_package_names_resolve_like_imports():
    import aiayn.data
    import aiayn.train
    from aiayn.data.batching import TokenBatchSampler
    from aiayn.train.loop import Trainer

    assert aiayn.train.Trainer is Trainer and aiayn.data.TokenBatchSampler is TokenBatchSampler
    for package in (aiayn.data, aiayn.train):
        assert set(package.__all__) <= set(dir(package))
        assert all(getattr(package, name) is not None for name in package.__all__)
    with pytest.raises(AttributeError, match="no attribute 'Trainerr'"):
        aiayn.train.Trainerr  # noqa: B018


def _module_name(path: Path) -> str:
    parts = ("aiayn", *path.relative_to(PACKAGE).with_suffix("").parts)
    return ".".join(parts[:-1]) if parts[-1] == "__init__" else ".".join(parts)


MODULES = {_module_name(p): p for p in SOURCES}


def _package_of(path: Path) -> str:
    return ".".join(("aiayn", *path.relative_to(PACKAGE).parent.parts))


def _aiayn_imports(path: Path) -> set[str]:
    """Every aiayn module ``path`` imports, at any depth of its code (function-level
    imports too): ``from aiayn.x import y`` is ``aiayn.x.y`` when that is a module."""
    own = _module_name(path)
    package = own if path.name == "__init__.py" else own.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "aiayn"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            if module.split(".")[0] != "aiayn":
                continue
            for alias in node.names:
                found.add(
                    f"{module}.{alias.name}" if f"{module}.{alias.name}" in MODULES else module
                )
    return {m for m in found if m in MODULES} - {own}


def _cycles_inside_packages() -> list[list[str]]:
    """Import cycles among the modules of one package (one directory of src/aiayn)."""
    graph = {
        name: {m for m in _aiayn_imports(path) if _package_of(MODULES[m]) == _package_of(path)}
        for name, path in MODULES.items()
    }
    cycles, done = [], set()

    def visit(name: str, trail: list[str]) -> None:
        if name in trail:
            cycles.append([*trail[trail.index(name) :], name])
            return
        if name in done:
            return
        for target in sorted(graph[name]):
            visit(target, [*trail, name])
        done.add(name)

    for name in sorted(graph):
        visit(name, [])
    return cycles


def test_no_import_cycle_inside_a_package():
    assert _cycles_inside_packages() == []


def test_the_cycle_check_sees_a_function_level_import(tmp_path, monkeypatch):
    """A function-level import back into a module that imports it is a cycle."""
    a, b = PACKAGE / "serve" / "app.py", PACKAGE / "serve" / "service.py"
    hidden = "\n\ndef f():\n    from aiayn.serve.app import create_app\n"
    real_read = Path.read_text

    def read(path: Path, *args, **kwargs) -> str:
        text = real_read(path, *args, **kwargs)
        return text + hidden if path == b else text

    monkeypatch.setattr(Path, "read_text", read)
    assert "aiayn.serve.service" in _aiayn_imports(a)
    cycles = _cycles_inside_packages()
    assert any({"aiayn.serve.app", "aiayn.serve.service"} <= set(c) for c in cycles)


def _docstring(path: Path) -> str:
    return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""


def _dotted(path: Path) -> str:
    return "aiayn." + ".".join(path.relative_to(PACKAGE).with_suffix("").parts)


def test_a_module_name_repeats_only_with_its_reason():
    """Two packages' modules share a name only when the docstring says why: a command's
    module (``cli/shortlist.py``) names its command (``aiayn shortlist``); of the others, one
    may be the original and each other names a module of that name (``viz/attention.py``
    names ``aiayn.modules.attention``, whose weights it draws)."""
    named: dict[str, list[Path]] = {}
    for path in SOURCES:
        if path.stem not in ("__init__", "__main__"):
            named.setdefault(path.stem, []).append(path)
    for stem, paths in named.items():
        if len(paths) < 2:
            continue
        others = []
        for path in paths:
            if _unit(path) == "cli":
                assert f"aiayn {stem}" in _docstring(path), f"{_dotted(path)}: names no command"
            else:
                others.append(path)
        unexplained = [
            _dotted(p)
            for p in others
            if not any(_dotted(q) in _docstring(p) for q in others if q != p)
        ]
        assert len(unexplained) <= 1, f"{stem}: {unexplained} repeat a name without a reason"


def test_no_file_over_450_lines_and_no_function_over_80():
    for path in SOURCES:
        text = path.read_text(encoding="utf-8")
        assert text.count("\n") <= 450, f"{path.relative_to(PACKAGE)}: over 450 lines"
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                assert lines <= 80, f"{path.relative_to(PACKAGE)}: {node.name} has {lines} lines"
