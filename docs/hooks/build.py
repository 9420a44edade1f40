"""MkDocs hooks: what the documentation draws and writes from aiayn's code at build time.

- ``reference/commands.md`` and ``reference/configuration.md`` from the parsers and the
  config dataclasses (``reference.py``).
- The tutorial's pictures, by running its notebook (built by ``notebook.py`` from
  ``tutorial/walkthrough.py``), which trains small models and draws with ``aiayn.viz``. The
  pictures, and the seconds the notebook took, are kept in ``$AIAYN_DOCS_CACHE`` (default
  ``.cache/docs`` beside ``mkdocs.yml``) under a hash of the notebook and of ``src/``, so a
  rebuild that changed neither does not run it again.
"""

from __future__ import annotations

import hashlib
import os
import sys
import time
from pathlib import Path

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import notebook  # noqa: E402
import reference  # noqa: E402

ROOT = HERE.parents[1]
NOTEBOOK = notebook.SOURCE
FIGURES = (
    "figure1.png",
    "masks.png",
    "positional.png",
    "schedules.png",
    "smoothing.png",
    "encoder_attention.png",
    "decoder_attention.png",
    "cross_attention.png",
)


def _fingerprint() -> str:
    digest = hashlib.sha256()
    for path in [NOTEBOOK, HERE / "notebook.py", *sorted((ROOT / "src").rglob("*.py"))]:
        digest.update(str(path.relative_to(ROOT)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def tutorial_figures() -> Path:
    """The directory of the notebook's pictures, running it unless they are cached."""
    cache = Path(os.environ.get("AIAYN_DOCS_CACHE", ROOT / ".cache" / "docs"))
    figures = cache / f"figures-{_fingerprint()}"
    if not all((figures / name).is_file() for name in FIGURES):
        start = time.perf_counter()
        notebook.execute(notebook.build(url=notebook.repository_url()), figures)
        seconds = time.perf_counter() - start
        (figures / "notebook-seconds.txt").write_text(f"{seconds:.1f}\n", encoding="utf-8")
    missing = [name for name in FIGURES if not (figures / name).is_file()]
    if missing:
        raise RuntimeError(f"{NOTEBOOK.name} did not draw {missing}")
    return figures


# after the i18n plugin's on_files (priority -100): a generated file is the same in every language
@event_priority(-110)
def on_files(files: Files, config) -> Files:
    files.append(File.generated(config, "reference/commands.md", content=reference.cli_reference()))
    files.append(
        File.generated(config, "reference/configuration.md", content=reference.config_reference())
    )
    figures = tutorial_figures()
    for name in FIGURES:
        files.append(
            File.generated(config, f"tutorial/figures/{name}", abs_src_path=str(figures / name))
        )
    return files
