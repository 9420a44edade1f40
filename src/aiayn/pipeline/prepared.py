"""Whether a work directory's prepared dataset still matches its recipe and its text, and
whether preparing it again would orphan the checkpoints trained on it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from aiayn.config import PrepareConfig
from aiayn.config_io import config_to_dict
from aiayn.data.binarize import resolve_split_file
from aiayn.data.corpus import MANIFEST
from aiayn.files import sha256_file
from aiayn.train import list_checkpoints
from aiayn.train.run_dir import RunDirectoryError

PATH_OPTIONS = {"train", "valid", "test"}  # where the text is, not how it is prepared


def prepared_manifest(data_dir: Path) -> dict:
    """The manifest of the dataset in ``data_dir``; empty when it holds none."""
    manifest = data_dir / MANIFEST
    return json.loads(manifest.read_text()) if manifest.is_file() else {}


def manifest_options(cfg: PrepareConfig) -> dict:
    """``cfg`` as a manifest records it (JSON values: lists, not tuples)."""
    return json.loads(json.dumps(config_to_dict(cfg)))


def recorded_options(manifest: dict) -> dict | None:
    """The options a manifest records, with the defaults of fields added to PrepareConfig
    since it was written (a dataset prepared before a new option had its default)."""
    options = manifest.get("options")
    if not isinstance(options, dict):
        return None
    defaults = {
        f.name: json.loads(json.dumps(f.default))
        for f in dataclasses.fields(PrepareConfig)
        if f.default is not dataclasses.MISSING
    }
    return defaults | options


def changed_text(manifest: dict, cfg: PrepareConfig) -> str | None:
    """The first training or validation file whose text differs from the one the dataset
    was prepared from (by the digest its manifest records); None when none does, or when
    the dataset records no digests."""
    splits = manifest.get("splits", {})
    for name, prefix in (("train", cfg.train), ("valid", cfg.valid)):
        recorded = splits.get(name, {}).get("text_sha256", {})
        for role, lang in (("src", cfg.src_lang), ("tgt", cfg.tgt_lang)):
            path = resolve_split_file(prefix, lang)
            if role in recorded and sha256_file(path) != recorded[role]:
                return str(path)
    return None


def check_checkpoints_allow(
    before: dict | None, now: dict, changed_text: str | None, run_dir: Path
) -> None:
    """Refuse to prepare the data again with options ``now`` instead of ``before``, or from
    ``changed_text`` (a file whose text changed), under a run that has checkpoints: the
    trainer would refuse the new data (``check_same_vocabularies``) only after the
    preparation, or resume on text its checkpoints never saw, and the data those
    checkpoints were trained on would be gone. A change of paths alone passes: the same
    text prepared again resumes.

    Raises:
        RunDirectoryError: naming the changed file, or the first option that changed,
            before and now.
    """
    if before is None or not list_checkpoints(run_dir):
        return
    if changed_text is not None:
        raise RunDirectoryError(
            f"{run_dir} has checkpoints trained on {changed_text} as it was, and its text "
            f"has changed since: choose another work directory (--work), or remove "
            f"{run_dir.parent} to start again"
        )
    changed = [k for k in now if k not in PATH_OPTIONS and before.get(k) != now[k]]
    if changed:
        key = changed[0]
        raise RunDirectoryError(
            f"{run_dir} has checkpoints trained on data prepared with {key} = "
            f"{before.get(key)!r}, the recipe now says {now[key]!r}: choose another work "
            f"directory (--work), or remove {run_dir.parent} to start again"
        )
