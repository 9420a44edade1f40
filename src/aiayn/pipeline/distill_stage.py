"""Sequence-level knowledge distillation (Kim & Rush, 2016): a teacher model translates a
corpus's source side with beam search, and a smaller student trains on the teacher's
translations in place of the references (``aiayn distill``, the pipeline's "distill" stage).

What a distillation directory holds:

- ``manifest.json``: the teacher's identity (the SHA-256 of its ``config.json``, which
  records its weights' digest, and of its ``tokenizer.json``), the source file's, the
  languages, the decoding settings and the shard size; its paths, for reading only.
- ``shards/NNNNNN.jsonl``: the translations of ``shard_lines`` source lines each, one JSON
  object a line (``decode.shards.Translated``), each written whole when it is complete
  (``files.write_file``).
- ``train.SRC`` and ``train.TGT``: the pairs that pass the filters, in corpus order: the
  student's training corpus (file prefix ``DIR/train``).

Killed at any point and run again, it translates only the shards missing: a shard's
translations depend on the teacher, the settings and its lines alone (``decode.shards``), so
the files come out the same. A directory made by another teacher, from another source or
with other decoding settings is refused in one line (``restart=True``: its shards are
removed and it is translated again); the filters are applied afresh on every run.

The text is the subword model's own on both sides (decoding ``text`` "raw"): a corpus
already in the form the teacher was trained on (its ``tokenizer.json`` preprocessing), so
that a student prepared with the teacher's tokenizers (``prepare.vocab_from``) reads the
same pieces the teacher did.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from aiayn.config import DistillConfig
from aiayn.config_io import model_config_of
from aiayn.data.corpus import read_lines
from aiayn.data.tokenizer_files import TOKENIZER_FILE, read_tokenizer_info
from aiayn.errors import AiaynError, ConfigError
from aiayn.files import check_writable, remove_stale_temporaries, sha256_file, write_file
from aiayn.workers.pool import ProcessDied
from aiayn.workers.shards import Shard, Translated, translate_shards
from aiayn.workers.translator_process import DecoderSpec

MANIFEST = "manifest.json"
SHARDS = "shards"
FORMAT = "aiayn-distillation"


class DistillError(AiaynError):
    """A teacher, a corpus or a distillation directory that cannot be used."""


@dataclass(frozen=True)
class Teacher:
    """A translation model directory checked to teach ``languages``."""

    path: Path
    languages: tuple[str, str]
    identity: dict[str, str]  # file name -> SHA-256


@dataclass(frozen=True)
class Counts:
    """What the filters did, each dropped line counted under the first filter it failed."""

    lines: int = 0
    empty: int = 0  # an empty source or translation
    ratio: int = 0  # one side more than max_ratio times the other's pieces
    score: int = 0  # the teacher's mean log-probability per piece below min_score
    duplicate: int = 0  # a (source, translation) pair already kept
    kept: int = 0

    def message(self) -> str:
        return (
            f"kept {self.kept:,} of {self.lines:,} pairs; dropped {self.empty:,} empty, "
            f"{self.ratio:,} over the length ratio, {self.score:,} under the score, "
            f"{self.duplicate:,} duplicates"
        )


@dataclass(frozen=True)
class Distilled:
    """A finished distillation: the training corpus's file prefix, its languages, the filter
    counts, the shards translated now and those reused, and the seconds it took."""

    prefix: Path
    languages: tuple[str, str]
    counts: Counts
    translated: int
    reused: int
    seconds: float


def check_teacher(path: str | Path, languages: tuple[str, str] = ("", "")) -> Teacher:
    """The teacher at ``path``, checked to translate ``languages`` (source, target; "" takes
    the teacher's own, as its ``tokenizer.json`` records them).

    Raises:
        DistillError: no model directory there, a language model, a teacher of another
            language pair, or languages neither given nor recorded.
    """
    path = Path(path)
    try:
        model = model_config_of(path, where="teacher")
    except ConfigError as e:
        raise DistillError(str(e)) from None
    if not model.is_encoder_decoder:
        raise DistillError(
            f"teacher {path}: a language model; a teacher is a translation model directory"
        )
    info = read_tokenizer_info(path)
    own = (info.src_lang, info.tgt_lang)
    if all(own) and any(
        asked and asked != theirs for asked, theirs in zip(languages, own, strict=True)
    ):
        raise DistillError(
            f"teacher {path} translates {own[0]}-{own[1]}, not the "
            f"{languages[0] or own[0]}-{languages[1] or own[1]} asked for"
        )
    chosen = (languages[0] or own[0], languages[1] or own[1])
    if not all(chosen):
        raise DistillError(
            f"teacher {path}: its languages are not recorded; name them (--src-lang, --tgt-lang)"
        )
    identity = {name: sha256_file(path / name) for name in ("config.json", TOKENIZER_FILE)}
    return Teacher(path, chosen, identity)


def read_source(path: str | Path) -> list[str]:
    """The source corpus's lines (plain or .gz, one sentence a line).

    Raises:
        CorpusError: a missing or unreadable file. DistillError: no text in it.
    """
    lines = list(read_lines(path))
    if not any(lines):
        raise DistillError(f"{path}: no text to distil (the corpus is empty)")
    return lines


def distill(
    teacher: Teacher,
    source: str | Path,
    out: str | Path,
    cfg: DistillConfig,
    *,
    restart: bool = False,
    log: Callable[[str], None] = lambda _: None,
) -> Distilled:
    """Translate ``source`` with ``teacher`` into ``out`` (resuming what a run before left
    there), filter the translations and write the training corpus ``out/train.SRC`` /
    ``out/train.TGT``.

    Raises:
        DistillError: an empty corpus, ``out`` made by another teacher, source or settings
            (unless ``restart``), or holding files of its own, or no pair kept.
    """
    begin = time.perf_counter()
    out = Path(out)
    lines = read_source(source)
    manifest = _manifest(teacher, Path(source), cfg, len(lines))
    _open_directory(out, manifest, restart=restart, log=log)
    n = cfg.shard_lines
    shards = [(k, lines[k * n : (k + 1) * n]) for k in range(-(-len(lines) // n))]
    for k, _ in shards:  # what writers killed half-way through a shard left
        remove_stale_temporaries(_shard_path(out, k))
    todo = [(k, rows) for k, rows in shards if not _shard_path(out, k).is_file()]
    if todo:
        log(
            f"{teacher.path}: translating {sum(len(r) for _, r in todo):,} lines in "
            f"{len(todo)} shards ({len(shards) - len(todo)} done before), "
            f"{min(cfg.workers, len(todo))} processes, beam {cfg.decode.beam}"
        )
        _translate(teacher, todo, out, cfg, log)
    rows = [row for k, _ in shards for row in _read_shard(_shard_path(out, k))]
    pairs, counts = filter_pairs(rows, cfg)
    log(counts.message())
    if not pairs:
        raise DistillError(f"{out}: no translation passed the filters ({counts.message()})")
    prefix = out / "train"
    for lang, side in zip(teacher.languages, zip(*pairs, strict=True), strict=True):
        _write_if_changed(prefix.with_name(f"train.{lang}"), "".join(f"{t}\n" for t in side))
    seconds = time.perf_counter() - begin
    return Distilled(prefix, teacher.languages, counts, len(todo), len(shards) - len(todo), seconds)


def filter_pairs(
    rows: list[Translated], cfg: DistillConfig
) -> tuple[list[tuple[str, str]], Counts]:
    """The (source, translation) pairs of ``rows`` that pass ``cfg``'s filters, in order, and
    how many each filter dropped: empty sides, a length ratio over ``max_ratio`` (in pieces,
    EOS counted), a score under ``min_score``, and (with ``dedupe``) repeated pairs."""
    counts = dict.fromkeys(("empty", "ratio", "score", "duplicate"), 0)
    seen: set[tuple[str, str]] = set()
    kept: list[tuple[str, str]] = []
    for row in rows:
        pair = (row.source, row.translation)
        longer, shorter = sorted((row.src_pieces, row.tgt_pieces), reverse=True)
        if not (row.source and row.translation):
            counts["empty"] += 1
        elif longer > cfg.max_ratio * shorter:
            counts["ratio"] += 1
        elif row.score < cfg.min_score:
            counts["score"] += 1
        elif cfg.dedupe and pair in seen:
            counts["duplicate"] += 1
        else:
            seen.add(pair)
            kept.append(pair)
    return kept, Counts(lines=len(rows), kept=len(kept), **counts)


def _manifest(teacher: Teacher, source: Path, cfg: DistillConfig, lines: int) -> dict:
    """What the shards depend on (``work``: compared on a rerun) and where it came from."""
    work = {
        "teacher": teacher.identity,
        "languages": list(teacher.languages),
        "source": {"sha256": sha256_file(source), "lines": lines},
        "decode": dataclasses.asdict(cfg.decode),
        "shard_lines": cfg.shard_lines,
    }
    paths = {"teacher": str(teacher.path), "source": str(source)}
    return json.loads(json.dumps({"format": FORMAT, "work": work, "paths": paths}))


def _open_directory(out: Path, manifest: dict, *, restart: bool, log) -> None:
    """Make ``out`` ready for ``manifest``'s work: new, resumed, or (``restart``) emptied of
    another distillation's shards."""
    check_writable(out, what="the distilled corpus", create=True)
    path = out / MANIFEST
    if path.is_file():
        try:
            before = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise DistillError(f"{path}: not a distillation manifest ({e})") from None
        changed = _changed(before, manifest)
        if changed is None:
            (out / SHARDS).mkdir(exist_ok=True)
            return
        if not restart:
            raise DistillError(
                f"{out} holds translations of another {changed}; pass --restart to translate "
                "again (its shards are removed), or choose another directory"
            )
        log(f"{out}: another {changed}: translating again")
        shutil.rmtree(out / SHARDS, ignore_errors=True)
    elif out.is_dir() and any(out.iterdir()):
        raise DistillError(f"{out}: holds files that are not a distillation's; choose another")
    (out / SHARDS).mkdir(parents=True, exist_ok=True)
    write_file(path, json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")


def _changed(before: dict, now: dict) -> str | None:
    """What differs between two manifests' work, in words; None when nothing does."""
    if before.get("format") != FORMAT:
        return "kind (not a distillation manifest)"
    old, new = before.get("work", {}), now["work"]
    names = {
        "teacher": "teacher",
        "languages": "language pair",
        "source": "source corpus",
        "decode": "decoding setting",
        "shard_lines": "shard size",
    }
    for key, words in names.items():
        if old.get(key) != new[key]:
            return words
    return None


def _translate(teacher: Teacher, todo: list, out: Path, cfg: DistillConfig, log) -> None:
    """Translate the ``todo`` shards, writing each as soon as it is done.

    Raises:
        DistillError: a decoding process died (every shard finished before is kept)."""
    spec = DecoderSpec(str(teacher.path), threads=1)
    try:
        _write_shards(
            translate_shards(spec, todo, cfg.decode, workers=min(cfg.workers, len(todo))),
            out,
            log,
            sum(len(rows) for _, rows in todo),
        )
    except ProcessDied as e:
        kept = sum(1 for _ in (out / SHARDS).glob("*.jsonl"))
        raise DistillError(
            f"{teacher.path}: {e} while translating; {kept} finished shard(s) kept in "
            f"{out / SHARDS}: run again to resume (fewer workers need less memory)"
        ) from None


def _write_shards(
    shards: Iterator[Shard], out: Path, log: Callable[[str], None], lines: int
) -> None:
    """Write each of ``shards`` as it comes, logging the progress over ``lines`` lines."""
    done = 0
    begin = time.perf_counter()
    for shard in shards:
        text = "".join(
            json.dumps(dataclasses.asdict(row), ensure_ascii=False) + "\n" for row in shard.rows
        )
        write_file(_shard_path(out, shard.index), text)
        for warning in shard.warnings:
            log(f"shard {shard.index}: {warning}")
        done += len(shard.rows)
        rate = done / max(time.perf_counter() - begin, 1e-9)
        log(f"shard {shard.index}: {done:,}/{lines:,} lines ({rate:.1f} lines/s)")


def _shard_path(out: Path, index: int) -> Path:
    return out / SHARDS / f"{index:06d}.jsonl"


def _read_shard(path: Path) -> list[Translated]:
    try:
        return [Translated(**json.loads(line)) for line in path.read_text("utf-8").splitlines()]
    except (ValueError, TypeError) as e:
        raise DistillError(f"{path}: not a shard of translations ({e}); remove it") from None


def _write_if_changed(path: Path, text: str) -> None:
    """Write ``path`` unless it holds ``text`` already (a rerun leaves the files untouched)."""
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return
    write_file(path, text)
