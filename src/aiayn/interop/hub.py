"""A Marian (opus-mt) model fetched from the Hugging Face Hub by its id, for ``aiayn import
marian Helsinki-NLP/opus-mt-en-de``: only the files the import reads, into the Hub's own
cache (``HF_HOME``, ``HF_HUB_CACHE``), so a second import downloads nothing and
``HF_HUB_OFFLINE=1`` works from that cache."""

from __future__ import annotations

import re
from pathlib import Path

from aiayn.errors import AiaynError

HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")  # ORG/NAME, as the Hub names models
MARIAN_FILES = [
    "config.json",
    "tokenizer_config.json",
    "source.spm",
    "target.spm",
    "vocab.json",
    "target_vocab.json",
    "model.safetensors",
    "pytorch_model.bin",
    "README.md",  # the model card: its licence goes on the imported model's card
]


class HubError(AiaynError):
    """A model that cannot be had from the Hub; the message says why, in one line."""


def is_hub_id(name: str) -> bool:
    """``name`` is a Hub id (``ORG/NAME``) and not a directory here."""
    return HUB_ID.fullmatch(name) is not None and not Path(name).exists()


def fetch_marian(repo_id: str, *, revision: str | None = None) -> Path:
    """The directory of ``repo_id``'s files in the Hub's cache, downloaded where missing.

    Raises:
        HubError: huggingface_hub is not installed, or the model cannot be downloaded (no
            network, no such model) and is not in the cache.
    """
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        raise HubError(
            f"{repo_id}: downloading from the Hugging Face Hub needs huggingface_hub "
            "(python3 -m pip install huggingface_hub)"
        ) from None
    # the Hub's failures are many types (HTTP, offline cache miss, no such repository,
    # the HTTP library's own): each becomes the one line below
    try:
        return Path(snapshot_download(repo_id, revision=revision, allow_patterns=MARIAN_FILES))
    except Exception as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise HubError(
            f"{repo_id}: cannot download it from the Hugging Face Hub ({first}); download "
            f"the directory elsewhere (hf download {repo_id} --local-dir DIR) and import DIR"
        ) from None
