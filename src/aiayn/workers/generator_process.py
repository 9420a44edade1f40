"""A language model in a process of its own, sampling one request at a time and sending each
token back as soon as it is chosen.

The server's completions decode here for the reasons its translations do
(``aiayn.workers.translator_process``): the event loop keeps the interpreter lock, and a
request can be stopped. The caller stops a generation by answering ``False`` to a token (its client
went away, a stop sequence came); the process also stops on its own once the request's seconds are
spent, so a generation never outlives its time limit even when its caller is gone. The
process ignores SIGINT and SIGTERM, as a decoding process does: its caller ends it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection

from aiayn.decode.generate import GenerationError, generate, load_language_model
from aiayn.workers.translator_process import (
    ChildProcess,
    DecoderCrashed,
    DecoderSpec,
    serve_pipe,
    set_up_child,
)

STOP = "stop"  # the caller's message: end the generation under way


@dataclass(frozen=True)
class GenerationRequest:
    """One generation: the prompt's ids, how many tokens at most, sampling, and the seconds
    it may take (after which the process ends it with the reason ``"timeout"``)."""

    prompt: list[int]
    max_new_tokens: int
    temperature: float
    top_p: float
    seed: int | None
    seconds: float


class _Stop(Exception):
    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class GeneratorProcess(ChildProcess):
    """``generate`` on a language model directory, computed in a spawned process."""

    what = "generating"

    def __init__(self, spec: DecoderSpec):
        self.eos: int | None = None  # the model's end-of-text id, known once ready
        super().__init__(spec, target=_generate_requests, name="aiayn-generator")

    def wait_ready(self) -> None:
        """Raises:
        AiaynError: the process could not load the model.
        """
        self.eos = super().wait_ready()

    def generate(self, request: GenerationRequest, on_token: Callable[[int], bool]) -> str:
        """Send ``request``, hand each new token to ``on_token`` (which answers whether to
        go on) and return why it ended: ``"eos"``, ``"length"``, ``"stopped"`` (by
        ``on_token``) or ``"timeout"``.

        Raises:
            GenerationError: arguments the model cannot sample with.
            DecoderCrashed: the process died; a new one is started for the next request.
        """
        ended = False
        if not self._process.is_alive():  # it died while idle: no request of it is lost
            self._restart()
        try:
            self._conn.send(request)
            while True:
                kind, payload = self._receive()
                if kind == "token":
                    if not ended and not on_token(payload):
                        self._conn.send(STOP)
                        ended = True
                    continue
                ended = True
                if kind == "invalid":
                    raise GenerationError(payload)
                if kind == "error":
                    raise RuntimeError(payload)
                return payload
        except (EOFError, OSError):
            ended = True
            self._restart()
            raise DecoderCrashed("the generating process ended unexpectedly; retry") from None
        finally:
            if not ended:  # on_token raised: stop the process and read what it still sends
                self._drain()

    def _drain(self) -> None:
        with contextlib.suppress(EOFError, OSError):
            self._conn.send(STOP)
            while self._receive()[0] == "token":
                pass


def _generate_requests(conn: Connection, spec: DecoderSpec) -> None:
    """The generating process: load the model, then answer requests until told to stop."""
    set_up_child(spec)

    def load() -> tuple:
        model, _ = load_language_model(spec.model, device=spec.device, profile=spec.profile)
        return model, model.specials.eos

    def reply(model, request) -> tuple | None:
        if request == STOP:  # a stop that crossed the generation's end
            return None
        return ("end", _generate_one(conn, model, request))

    serve_pipe(conn, load, reply, GenerationError)


def _generate_one(conn: Connection, model, request: GenerationRequest) -> str:
    """Sample ``request``, sending each token; why it ended (see ``generate`` above)."""
    import torch

    deadline = time.monotonic() + request.seconds
    generator = None if request.seed is None else torch.Generator().manual_seed(request.seed)
    eos = model.specials.eos

    def on_token(token: int) -> None:
        conn.send(("token", token))
        if conn.poll(0):  # the only message a generation can get is STOP (or None: the end)
            raise _Stop("stopped")
        if time.monotonic() > deadline:
            raise _Stop("timeout")

    try:
        out = generate(
            model,
            request.prompt,
            max_new_tokens=request.max_new_tokens,
            temperature=request.temperature,
            top_p=request.top_p,
            generator=generator,
            stop_id=eos,
            on_token=on_token,
        )
    except _Stop as stop:
        if stop.reason == "stopped" and conn.recv() is None:
            raise EOFError from None  # the caller ends the process
        return stop.reason
    return "eos" if out and out[-1] == eos else "length"
