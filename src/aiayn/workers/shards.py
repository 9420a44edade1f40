"""A corpus translated shard by shard in a pool of decoding processes.

Each process is set up as every aiayn decoding process is (``process.set_up_child``: SIGINT
left to the caller, while SIGTERM, by which the pool ends its processes, ends it from its
first instruction; aiayn's allocator policy and kernel cache, its threads)
and holds one ``Translator``; a shard is one call of ``Translator.translate``, batched by
length as the translator batches, decoded by one process alone. Its translations therefore
do not depend on which process took it or on what it decoded before: the same model,
options and lines give the same shard, the ground a resumable corpus translation
(``aiayn.pipeline.distill_stage``) stands on.

A ``multiprocessing`` pool (``decode.pool.unordered``), not ``TranslatorProcess``es behind
threads: the pool ends its processes at once when its caller stops (Ctrl-C, an error), where a
thread waiting on a ``TranslatorProcess`` would start a new one; a process that dies (the
out-of-memory killer) is ``ProcessDied``, not a wait for the shard it took with it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from aiayn.search_options import SearchOptions
from aiayn.translate.inputs import TranslationError
from aiayn.translate.translator import Translator
from aiayn.workers.pool import unordered
from aiayn.workers.translator_process import DecoderSpec, set_up_child

LOWEST_SCORE = -1e9  # the score of an empty translation's log(0) confidence, kept finite


@dataclass(frozen=True)
class Translated:
    """One source line with its best translation, as the subword model read and wrote them.

    ``score``: the translation's mean log-probability per piece, EOS included (the log of
    its ``Translation.confidence``: independent of the length penalty); ``src_pieces`` and
    ``tgt_pieces``: each side's pieces, EOS included.
    """

    source: str
    translation: str
    score: float
    src_pieces: int
    tgt_pieces: int


@dataclass(frozen=True)
class Shard:
    """A shard's translations (in its lines' order) and the translator's warnings."""

    index: int
    rows: list[Translated]
    warnings: list[str]


def translate_shards(
    spec: DecoderSpec,
    shards: Iterable[tuple[int, list[str]]],
    options: SearchOptions,
    *,
    workers: int,
) -> Iterator[Shard]:
    """Each ``(index, lines)`` of ``shards`` translated by ``spec``'s model with ``options``
    (text as the subword model reads it: ``options.text`` is taken as "raw"), in ``workers``
    processes, yielded as each is done (not in order). Leaving the loop early ends the
    processes at once.

    Raises:
        TranslationError: the model could not be loaded, or could not translate a shard.
        ProcessDied: a decoding process died (the shards done then are yielded first).
    """
    options = dataclasses.replace(options, text="raw")
    tasks = ((index, lines, options) for index, lines in shards)
    yield from unordered(_translate, tasks, workers=workers, initializer=_start, initargs=(spec,))


_translator: Translator | None = None  # the process's model, once loaded
_failure = ""  # why it could not be loaded


def _start(spec: DecoderSpec) -> None:
    """A pool process's start: set up as a decoding process, then load the model (a failure
    is kept and raised by the first shard: a pool restarts a process whose start raised)."""
    global _translator, _failure
    set_up_child(spec, ends_by_sigterm=True)  # the pool ends its processes by SIGTERM
    try:
        _translator = Translator.from_dir(spec.model, device=spec.device, profile=spec.profile)
        _translator.calibration = None  # a shard's score is the model's own (``Translated``)
    except Exception as e:
        _failure = f"{spec.model}: {e}"


def _translate(task: tuple[int, list[str], SearchOptions]) -> Shard:
    index, lines, options = task
    if _translator is None:
        raise TranslationError(_failure or "the decoding process has no model")
    warnings: list[str] = []
    found = _translator.translate(lines, options, warn=warnings.append)
    pieces = _translator.src_tokenizer.encode([line.strip() for line in lines])
    rows = [
        Translated(
            source=line.strip(),
            translation=hyps[0].text,
            score=math.log(hyps[0].confidence) if hyps[0].confidence > 0 else LOWEST_SCORE,
            src_pieces=len(ids) + 1,
            tgt_pieces=len(hyps[0].tokens) + 1,
        )
        for line, hyps, ids in zip(lines, found, pieces, strict=True)
    ]
    return Shard(index, rows, warnings)
