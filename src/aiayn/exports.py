"""A package's public names, imported on first use (PEP 562).

``aiayn.data`` and ``aiayn.train`` list their public names in their ``__init__`` but import
each only when it is first asked for, so that importing one of their light modules (the
corpus reader, the metric names) does not import torch: ``aiayn prepare --text`` and
``aiayn --help`` start without it (~0.4 instead of ~2.3 s here, most of it torch's import).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable


def lazy_exports(
    package: str, sources: dict[str, str]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """A module-level ``__getattr__`` and ``__dir__`` for ``package``: ``name`` is imported
    from the module ``sources[name]`` the first time it is asked for, then kept in the
    package; ``dir()`` lists the names before they are imported (for completion)."""

    def __getattr__(name: str) -> object:
        if name not in sources:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(sources[name]), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(sources))

    return __getattr__, __dir__
