"""The OpenAI-compatible API for a language model: ``POST /v1/completions`` (``prompt``),
``POST /v1/chat/completions`` (``messages``, rendered by ``openai_requests.CHAT_TEMPLATE``),
both with ``max_tokens``, ``temperature``, ``top_p``, ``seed``, ``stop``, ``usage`` in the
answer, and ``stream`` as server-sent events ending in ``[DONE]``
(``stream_options.include_usage``: a last chunk with the usage and no choices, as OpenAI
sends it); ``GET /v1/models`` and ``GET /v1/models/{id}``. A model name other than the
served one is refused as OpenAI does (404, code ``model_not_found``). Keys come as
``Authorization: Bearer KEY``; errors in OpenAI's ``{"error": {"message", "type", "param",
"code"}}`` shape.

The chat template: a language model trained on plain text continues a transcript, so the
messages are written one a line as ``Role: content`` (``System``, ``User``, ``Assistant``),
followed by ``Assistant:``; the reply is what the model writes next, its leading spaces
removed, and it ends where the model starts a new turn (a line beginning with one of the
role names) or at ``stop``, ``max_tokens`` or the end of text."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from aiayn.data.tokenizer_files import load_tokenizers
from aiayn.errors import AiaynError
from aiayn.serve.checks import BadRequest
from aiayn.serve.openai_requests import (
    chat_parameters,
    check_language_model_settings,
    completion_parameters,
)
from aiayn.serve.service import ApiError, check_key, request_values
from aiayn.serve.settings import ServeSettings
from aiayn.workers.engines import (
    MAX_GENERATION_SECONDS,
    Busy,
    Generation,
    LanguageModelEngine,
    ShuttingDown,
)
from aiayn.workers.generator_process import GenerationRequest, GeneratorProcess
from aiayn.workers.translator_process import DecoderCrashed, DecoderSpec

DISCONNECT_CHECK_S = 1.0  # how often a waiting answer looks whether its client went away


class _Stopped(Exception):
    """Ends a generation early: a stop sequence was produced, or the client went away."""


@dataclass(frozen=True)
class _End:
    """The last item of a generation's queue."""

    reason: str  # "stop", "length", or "error: ..."
    tokens: int  # tokens generated


@dataclass(frozen=True)
class _Run:
    """A generation under way: its text pieces, then an ``_End``, arrive on ``out``."""

    out: asyncio.Queue
    prompt_tokens: int


class OpenAICompletions:
    """A language model, named by its directory, and the engine that generates with it."""

    def __init__(self, settings: ServeSettings):
        self.settings = settings
        if len(settings.models) != 1:
            raise AiaynError(
                f"one language model per server, got {len(settings.models)}: "
                f"{', '.join(settings.models)}"
            )
        check_language_model_settings(settings)
        self.name = Path(settings.models[0]).resolve().name
        _, self.tokenizer, _ = load_tokenizers(settings.models[0])
        spec = DecoderSpec(
            settings.models[0],
            device=settings.device,
            profile=settings.profile,
            threads=settings.threads,
        )
        generators = [GeneratorProcess(spec) for _ in range(settings.workers)]
        try:  # started together, loading side by side
            for generator in generators:
                generator.wait_ready()
        except BaseException:
            for generator in generators:
                generator.close(wait_s=0)
            raise
        self.engine = LanguageModelEngine(generators, queue_size=settings.queue_size)

    def install(self, app: FastAPI) -> None:
        _install(app, self)

    def error_body(self, status: int, message: str, code: str | None) -> dict[str, Any]:
        kind = "invalid_request_error" if status < 500 else "server_error"
        message = message.removeprefix("Invalid request: ")  # OpenAI's type says so already
        return {"error": {"message": message, "type": kind, "param": None, "code": code}}

    def health(self) -> dict[str, Any]:
        self.engine.replace_dead_workers()
        return {
            "requests": self.engine.completed,
            "workers": self.engine.alive,
            "workers_restarted": self.engine.restarted,
            "processes_restarted": self.engine.processes_restarted,
        }

    def close(self) -> None:
        self.engine.close()

    def summary(self) -> str:
        return f"answered {self.engine.completed:,} completions"

    def model_entry(self) -> dict[str, Any]:
        return {"id": self.name, "object": "model", "created": 0, "owned_by": "aiayn"}

    def check_model(self, name: Any) -> None:
        """Raises:
        ApiError: 400 without a model name, 404 (``model_not_found``) for another model's.
        """
        if name is None or name == "":
            raise BadRequest("you must provide a model parameter")
        if name != self.name:
            raise ApiError(
                404,
                f"The model `{name}` does not exist or you do not have access to it.",
                code="model_not_found",
            )

    def complete(self, prompt: str, params: dict[str, Any]) -> _Run:
        """Start a generation after ``prompt``."""
        ids = self.tokenizer.encode([prompt])[0]
        if not ids:
            raise BadRequest("the prompt is empty after tokenisation")
        loop = asyncio.get_running_loop()
        out: asyncio.Queue = asyncio.Queue()
        produced: list[int] = []
        shown = [0]  # characters of the text sent so far
        stops = params["stop"]
        cancelled = params["cancelled"]
        strip = params.get("strip_leading", False)

        def text_now() -> str:
            text = self.tokenizer.decode(produced)
            return text.lstrip() if strip else text

        def send(text: str) -> None:
            if len(text) > shown[0]:
                loop.call_soon_threadsafe(out.put_nowait, text[shown[0] :])
                shown[0] = len(text)

        def on_token(token: int) -> None:
            if cancelled.is_set():
                raise _Stopped
            produced.append(token)
            text = text_now()
            hit = min((text.index(s) for s in stops if s in text), default=None)
            if hit is not None:
                send(text[:hit])
                raise _Stopped
            send(text[: len(text) - _held_back(text, stops)])

        def on_end(error: BaseException | None) -> None:
            if isinstance(error, _Stopped):
                reason = "stop"
            elif isinstance(error, TimeoutError):
                reason = "timeout"
            elif isinstance(error, DecoderCrashed):
                reason = f"crashed: {error}"
            elif error is not None:
                reason = f"error: {error}"
            else:
                send(text_now())  # what was held back for a stop sequence that did not come
                eos = produced and produced[-1] == self.engine.eos
                reason = "stop" if eos else "length"
            loop.call_soon_threadsafe(out.put_nowait, _End(reason, len(produced)))

        request = GenerationRequest(
            ids,
            params["max_tokens"],
            params["temperature"],
            params["top_p"],
            params["seed"],
            seconds=MAX_GENERATION_SECONDS,
        )
        generation = Generation(request, on_token, on_end, deadline=params["deadline"])
        try:
            self.engine.submit(generation)
        except Busy as e:
            raise ApiError(429, f"Slow down: {e}") from None
        except ShuttingDown as e:
            raise ApiError(503, str(e)) from None
        return _Run(out, len(ids))


def _held_back(text: str, stops: list[str]) -> int:
    """How many characters at the end of ``text`` may be the start of a stop sequence
    (not sent until the next token tells)."""
    return max((k for s in stops for k in range(1, len(s)) if text.endswith(s[:k])), default=0)


def _install(app: FastAPI, service: OpenAICompletions) -> None:
    settings = service.settings

    @app.get("/v1/models")
    async def models(request: Request) -> dict[str, Any]:
        _check_bearer(settings, request)
        return {"object": "list", "data": [service.model_entry()]}

    @app.get("/v1/models/{name:path}")
    async def model(name: str, request: Request) -> dict[str, Any]:
        _check_bearer(settings, request)
        service.check_model(name)
        return service.model_entry()

    @app.post("/v1/completions")
    async def completions(request: Request):
        deadline = time.monotonic() + settings.timeout  # for the whole request
        values = await _json_values(settings, request)
        service.check_model(values.get("model"))
        params = {**completion_parameters(values, settings), "deadline": deadline}
        prompts = params["prompts"]
        if params["stream"]:
            if len(prompts) != 1:
                raise BadRequest("stream takes one prompt")
            params["cancelled"] = asyncio.Event()
            run = service.complete(prompts[0], params)
            events = _events(service, run, params, _text_chunk, "text_completion")
            return StreamingResponse(events, media_type="text/event-stream")
        choices, usage = [], _usage(0, 0)
        for index, prompt in enumerate(prompts):
            params["cancelled"] = asyncio.Event()
            run = service.complete(prompt, params)
            text, end = await _collect(service, run, params, request)
            choices.append(
                {"text": text, "index": index, "logprobs": None, "finish_reason": end.reason}
            )
            usage = _usage(
                usage["prompt_tokens"] + run.prompt_tokens,
                usage["completion_tokens"] + end.tokens,
            )
        return JSONResponse(_answer(service, "text_completion", choices, usage=usage))

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        deadline = time.monotonic() + settings.timeout
        values = await _json_values(settings, request)
        service.check_model(values.get("model"))
        params = chat_parameters(values, settings)
        params["cancelled"], params["deadline"] = asyncio.Event(), deadline
        run = service.complete(params["prompt"], params)
        if params["stream"]:
            events = _events(service, run, params, _chat_chunk, "chat.completion.chunk")
            return StreamingResponse(events, media_type="text/event-stream")
        text, end = await _collect(service, run, params, request)
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "logprobs": None,
            "finish_reason": end.reason,
        }
        usage = _usage(run.prompt_tokens, end.tokens)
        return JSONResponse(_answer(service, "chat.completion", [choice], usage=usage))


async def _json_values(settings: ServeSettings, request: Request) -> dict[str, Any]:
    _check_bearer(settings, request)
    return await request_values(request)  # JSON, also sent as text/plain or a bare form


async def _collect(
    service: OpenAICompletions, run: _Run, params: dict, request: Request
) -> tuple[str, _End]:
    """The text of a generation and how it ended; the generation is stopped when the request
    times out or its client goes away (looked at every ``DISCONNECT_CHECK_S``)."""
    pieces = []
    try:
        while True:
            left = params["deadline"] - time.monotonic()
            try:
                item = await asyncio.wait_for(
                    run.out.get(), min(max(left, 0.001), DISCONNECT_CHECK_S)
                )
            except TimeoutError:
                if left > DISCONNECT_CHECK_S and not await request.is_disconnected():
                    continue
                item = _End("timeout" if left <= DISCONNECT_CHECK_S else "gone", 0)
            if isinstance(item, _End):
                if item.reason in ("timeout", "gone"):
                    raise ApiError(503, f"Timed out after {service.settings.timeout:g}s")
                if item.reason.startswith("crashed"):
                    raise ApiError(503, item.reason.removeprefix("crashed: "))
                if item.reason.startswith("error"):
                    raise ApiError(500, item.reason)
                return "".join(pieces), item
            pieces.append(item)
    finally:
        params["cancelled"].set()  # nothing generates for an answer no one waits for


def _text_chunk(piece: str | None, reason: str | None, first: bool) -> dict[str, Any]:
    return {"text": piece or "", "index": 0, "logprobs": None, "finish_reason": reason}


def _chat_chunk(piece: str | None, reason: str | None, first: bool) -> dict[str, Any]:
    delta: dict[str, Any] = {"role": "assistant"} if first else {}
    if piece is not None:
        delta["content"] = piece
    return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": reason}


async def _events(
    service: OpenAICompletions,
    run: _Run,
    params: dict,
    chunk: Callable[[str | None, str | None, bool], dict[str, Any]],
    kind: str,
) -> AsyncIterator[str]:
    """The chunks of a streamed generation: one per text piece, one with the finish reason,
    the usage chunk if asked for, then ``[DONE]``."""
    cancelled = params["cancelled"]
    include_usage = params["include_usage"]
    usage_field = {"usage": None} if include_usage else {}
    first = True
    name = _answer_id(kind)  # every chunk of one generation carries its id
    deadline = params["deadline"]
    try:
        if kind == "chat.completion.chunk":  # the role comes first, as OpenAI sends it
            yield _sse(_answer(service, kind, [chunk("", None, True)], name=name, **usage_field))
            first = False
        while True:
            try:
                item = await asyncio.wait_for(
                    run.out.get(), max(deadline - time.monotonic(), 0.001)
                )
                if isinstance(item, _End) and item.reason == "timeout":
                    raise TimeoutError
            except TimeoutError:  # bounded like any request: say so, and end the stream
                message = f"Timed out after {service.settings.timeout:g}s"
                yield _sse(service.error_body(503, message, "timeout"))
                yield "data: [DONE]\n\n"
                return
            if isinstance(item, _End):
                failed = item.reason.startswith(("error", "crashed"))
                reason = "stop" if failed else item.reason
                yield _sse(
                    _answer(service, kind, [chunk(None, reason, first)], name=name, **usage_field)
                )
                if include_usage:
                    usage = _usage(run.prompt_tokens, item.tokens)
                    yield _sse(_answer(service, kind, [], name=name, usage=usage))
                yield "data: [DONE]\n\n"
                return
            yield _sse(_answer(service, kind, [chunk(item, None, first)], name=name, **usage_field))
            first = False
    finally:
        cancelled.set()  # a client that went away (or a time-out) stops the generation


def _sse(body: dict[str, Any]) -> str:
    return f"data: {json.dumps(body)}\n\n"


def _usage(prompt: int, completion: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


_IDS = {
    "text_completion": "cmpl",
    "chat.completion": "chatcmpl",
    "chat.completion.chunk": "chatcmpl",
}


def _answer_id(kind: str) -> str:
    return f"{_IDS[kind]}-{uuid.uuid4().hex[:24]}"


def _answer(
    service: OpenAICompletions,
    kind: str,
    choices: list[dict],
    *,
    name: str | None = None,
    **fields: Any,
) -> dict[str, Any]:
    return {
        "id": name or _answer_id(kind),
        "object": kind,
        "created": int(time.time()),
        "model": service.name,
        "choices": choices,
        **fields,
    }


def _check_bearer(settings: ServeSettings, request: Request) -> None:
    """OpenAI's clients send ``Authorization: Bearer KEY``; a wrong key is 401 there."""
    header = request.headers.get("authorization", "")
    try:
        check_key(settings, header.removeprefix("Bearer ").strip() or None)
    except ApiError:
        raise ApiError(401, "Invalid API key") from None
