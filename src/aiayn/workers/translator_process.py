"""A Translator in a process of its own, decoding the batches its caller sends.

Two callers, two reasons. ``aiayn serve``: a server's decoding threads and its event loop
share one interpreter lock, and beam search over a small batch is mostly Python between
small operators, so decoding threads starve the event loop; decoding processes leave the
lock to it (2 cores, 32 clients: ~100 sentences/s with threads, 153 with processes,
``bench/serve.py``). Whatever else needs the model (the server's attention picture) runs in
a decoding process too (``call``), so the server loads each model once per worker and never
in its own process.
``aiayn pipeline``: decoding in the training process carves its tensors from the trained
heap's scattered free chunks, so its memory depends on how training left that heap. A fresh
process decodes in a heap of its own, the same way every time, and keeps only oneDNN's 64
latest compiled kernels (``aiayn.memory.limit_kernel_cache``).

A decoding process ignores SIGINT and SIGTERM (a terminal's Ctrl-C or systemd reaches the
whole process group): its caller decides when it stops (a server after the last accepted
request). It ends when the caller sends ``None`` or goes away (its end of the pipe closes),
and is killed when the caller leaves a ``with`` block by an exception.
"""

from __future__ import annotations

import contextlib
import logging
import signal
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, ClassVar, TypeVar

from aiayn.errors import AiaynError
from aiayn.translate.translator import SearchOptions, Translation, TranslationError, Translator
from aiayn.workers.children import end_child, spawn_child

R = TypeVar("R")

LOGGER = logging.getLogger("aiayn")  # warnings where the caller passes no warn


LIVENESS_CHECK_S = 1.0  # while waiting for an answer, how often to check the process lives


def set_up_child(spec: DecoderSpec, *, ends_by_sigterm: bool = False) -> None:
    """A worker process's set-up: the server's signals are the parent's to handle (SIGTERM
    too, unless the process ``ends_by_sigterm``, as a ``multiprocessing.Pool``'s do: one that
    ignored it while importing torch would miss the pool's end and be waited for ever),
    aiayn's allocator policy and kernel cache, ``spec.threads`` threads."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if not ends_by_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    import torch

    from aiayn.memory import limit_kernel_cache, tune_allocator

    tune_allocator()
    limit_kernel_cache()
    torch.set_num_threads(spec.threads)


class RequestAbandoned(AiaynError):
    """Every request of a batch timed out: its decode was stopped (the process killed and
    started again), so that the decoder serves the requests still waiting."""


class DecoderCrashed(AiaynError):
    """The decoding process ended while it had a batch (killed, out of memory)."""


@dataclass(frozen=True)
class DecoderSpec:
    """How a decoding process loads its model."""

    model: str
    device: str = "cpu"
    profile: str | None = None  # a name in aiayn.accel.PROFILES; None: the default
    threads: int = 1


class ChildProcess:
    """A model's worker process (``spawn_child``) seen from its caller: started at once,
    ready once its model is loaded, its answers read with a check that it still lives,
    started again after it died, ended on request. ``what`` names it in messages."""

    what: ClassVar[str]  # "decoding", "generating"

    def __init__(self, spec: DecoderSpec, *, target: Callable, name: str):
        """Start ``target(connection, spec)`` as process ``name``; ``wait_ready`` waits for
        its model to load (start several first, then wait, and they load side by side)."""
        self.spec = spec
        self.restarts = 0  # processes started again after one ended unexpectedly
        self._target, self._name = target, name
        self._spawn()

    def _spawn(self) -> None:
        self._conn, self._process = spawn_child(self._target, self.spec, self._name)

    def wait_ready(self) -> Any:
        """What the process sent with its word that the model is loaded.

        Raises:
            AiaynError: the process could not load the model.
        """
        try:
            kind, payload = self._receive()
        except EOFError:
            raise AiaynError(
                f"{self.spec.model}: the {self.what} process failed to start"
            ) from None
        if kind != "ready":
            raise AiaynError(f"{self.spec.model}: {payload}")
        return payload

    def _receive(self, abandoned: Callable[[], bool] | None = None) -> tuple[str, Any]:
        """The process's next message; EOFError as soon as the process is gone (even where a
        copy of its end of the pipe outlives it, and the pipe would never say so);
        ``RequestAbandoned`` as soon as ``abandoned()`` says nobody waits for it."""
        while not self._conn.poll(LIVENESS_CHECK_S):
            if abandoned is not None and abandoned():
                raise RequestAbandoned("nobody waits for this answer any more")
            if not self._process.is_alive():
                if self._conn.poll(0):  # it answered, then ended
                    break
                raise EOFError(f"the {self.what} process ended")
        return self._conn.recv()

    def close(self, wait_s: float = 30) -> None:
        """Ask the process to end; kill it if it has not within ``wait_s``."""
        with contextlib.suppress(OSError):
            self._conn.send(None)
        end_child(self._process, self._conn, wait_s)

    def _restart(self, *, crashed: bool = True) -> None:
        """A new process, its model loaded, in place of one that ended unexpectedly
        (``crashed``: counted in ``restarts``) or that is stopped at once."""
        self.restarts += crashed
        end_child(self._process, self._conn, 5 if crashed else 0)
        self._spawn()
        self.wait_ready()


class TranslatorProcess(ChildProcess):
    """``translate`` as a Translator has it, computed in a spawned process."""

    what = "decoding"

    def __init__(self, spec: DecoderSpec):
        super().__init__(spec, target=_decode_batches, name="aiayn-decoder")

    def __enter__(self) -> TranslatorProcess:
        self.wait_ready()
        return self

    def __exit__(self, kind, value, traceback) -> None:
        if kind is None:
            self.close()
        else:  # Ctrl-C or an error: no wait for the batch it may be decoding
            end_child(self._process, self._conn, 0)

    def translate(
        self,
        texts: list[str],
        options: SearchOptions,
        *,
        warn: Callable[[str], None] = LOGGER.warning,
        target_token: str | None = None,
        abandoned: Callable[[], bool] | None = None,
    ) -> list[list[Translation]]:
        """``abandoned``: asked every second; once it says True the decode is stopped.

        Raises:
            TranslationError: input the options cannot translate (as the Translator would).
            DecoderCrashed: the process died; a new one is started for the next batch.
            RequestAbandoned: ``abandoned()`` said so; a new process is started.
        """
        request = ("translate", list(texts), options, target_token)
        found, warnings = self._ask(request, abandoned)
        for message in warnings:
            warn(message)
        return found

    def call(self, task: Callable[..., R], *args: Any) -> R:
        """``task(translator, *args)`` computed in the process, on its model. ``task`` is a
        module-level function (sent by name) and its arguments and result are picklable.

        Raises:
            TranslationError: ``task`` raised it. DecoderCrashed: as ``translate``.
        """
        return self._ask(("call", task, args))

    def _ask(self, request: tuple, abandoned: Callable[[], bool] | None = None) -> Any:
        try:
            self._conn.send(request)
            kind, payload = self._receive(abandoned)
        except (EOFError, OSError):
            self._restart()
            raise DecoderCrashed("the decoding process ended unexpectedly; retry") from None
        except RequestAbandoned:
            self._restart(crashed=False)
            raise
        if kind == "invalid":
            raise TranslationError(payload)
        if kind == "error":
            raise RuntimeError(payload)
        return payload


def serve_pipe(
    conn: Connection,
    load: Callable[[], tuple[Any, Any]],
    answer: Callable[[Any, Any], tuple | None],
    invalid: type[Exception],
) -> None:
    """A worker process's life after its set-up: load its model (``load`` gives it and what
    the ``ready`` message tells the parent; a failure is its ``error``), then answer each
    request until the parent closes the pipe or sends None. ``answer(model, request)`` is
    the reply (None: none); an ``invalid`` error is answered ``invalid``, any other error
    ``error``, and a broken pipe ends the process."""
    try:
        model, ready = load()
    except Exception as e:
        conn.send(("error", str(e)))
        return
    conn.send(("ready", ready))
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            return
        if request is None:
            return
        try:
            reply = answer(model, request)
        except invalid as e:
            conn.send(("invalid", str(e)))
        except (EOFError, OSError):
            return
        except Exception as e:
            conn.send(("error", f"{type(e).__name__}: {e}"))
        else:
            if reply is not None:
                conn.send(reply)


def _decode_batches(conn: Connection, spec: DecoderSpec) -> None:
    """The decoding process: load the model, then answer batches until told to stop."""
    set_up_child(spec)

    def load() -> tuple[Translator, None]:
        return Translator.from_dir(spec.model, device=spec.device, profile=spec.profile), None

    def reply(translator: Translator, request: tuple) -> tuple:
        return ("ok", _answer(translator, request))

    serve_pipe(conn, load, reply, TranslationError)


def _answer(translator: Translator, request: tuple) -> Any:
    """A ``translate`` request's (translations, warnings), or a ``call``'s result."""
    if request[0] == "call":
        _, task, args = request
        return task(translator, *args)
    _, texts, options, target_token = request
    warnings: list[str] = []
    found = translator.translate(texts, options, warn=warnings.append, target_token=target_token)
    return found, warnings
