"""The OpenAI-compatible completions API for a language model: ``POST /v1/completions``
(``prompt``, ``max_tokens``, ``temperature``, ``top_p``, ``seed``, ``stop``, and ``stream`` as
server-sent events ending in ``[DONE]``) and ``GET /v1/models``. Keys come as
``Authorization: Bearer KEY``; errors in OpenAI's ``{"error": {"message": ...}}`` shape."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from aiayn.decode import load_language_model
from aiayn.errors import AiaynError
from aiayn.serve.common import ApiError, ServeSettings, check_key, request_values
from aiayn.serve.engine import Busy, Generation, LanguageModelEngine, ShuttingDown

UNSUPPORTED = {"echo": (False, None), "best_of": (1, None), "logprobs": (None,), "suffix": (None,)}


class _Stopped(Exception):
    """Ends a generation early: a stop sequence was produced, or the client went away."""


class OpenAICompletions:
    """A language model, named by its directory, and the engine that generates with it."""

    def __init__(self, settings: ServeSettings):
        self.settings = settings
        if len(settings.models) != 1:
            raise AiaynError(
                f"one language model per server, got {len(settings.models)}: "
                f"{', '.join(settings.models)}"
            )
        self.name = Path(settings.models[0]).resolve().name
        model, tokenizer = load_language_model(
            settings.models[0], device=settings.device, profile=settings.profile
        )
        self.tokenizer = tokenizer
        self.engine = LanguageModelEngine(
            model, tokenizer, workers=settings.workers, queue_size=settings.queue_size
        )

    def install(self, app: FastAPI) -> None:
        _install(app, self)

    def error_body(self, status: int, message: str, code: str | None) -> dict[str, Any]:
        kind = "invalid_request_error" if status < 500 else "server_error"
        return {"error": {"message": message, "type": kind, "param": None, "code": code}}

    def health(self) -> dict[str, Any]:
        return {"completions": self.engine.completed}

    def close(self) -> None:
        self.engine.close()

    def summary(self) -> str:
        return f"answered {self.engine.completed:,} completions"

    def complete(self, prompt: str, params: dict[str, Any]) -> asyncio.Queue:
        """Start a completion; its queue receives text pieces, then ``("end", reason)``."""
        ids = self.tokenizer.encode([prompt])[0]
        if not ids:
            raise ApiError(400, "the prompt is empty after tokenisation")
        loop = asyncio.get_running_loop()
        out: asyncio.Queue = asyncio.Queue()
        produced: list[int] = []
        shown = [""]
        stops = params["stop"]
        cancelled = params["cancelled"]

        def on_token(token: int) -> None:
            if cancelled.is_set():
                raise _Stopped
            produced.append(token)
            text = self.tokenizer.decode(produced)
            hit = next((text.index(s) for s in stops if s in text), None)
            new = text[len(shown[0]) : hit if hit is not None else len(text)]
            shown[0] = text if hit is None else text[:hit]
            if new:
                loop.call_soon_threadsafe(out.put_nowait, new)
            if hit is not None:
                raise _Stopped

        def on_end(error: BaseException | None) -> None:
            if isinstance(error, _Stopped):
                reason = "stop"
            elif error is not None:
                reason = f"error: {error}"
            else:
                eos = produced and produced[-1] == self.engine.model.specials.eos
                reason = "stop" if eos else "length"
            loop.call_soon_threadsafe(out.put_nowait, ("end", reason))

        generation = Generation(
            ids,
            params["max_tokens"],
            params["temperature"],
            params["top_p"],
            params["seed"],
            on_token,
            on_end,
        )
        try:
            self.engine.submit(generation)
        except Busy as e:
            raise ApiError(429, f"Slow down: {e}") from None
        except ShuttingDown as e:
            raise ApiError(503, str(e)) from None
        return out


def _install(app: FastAPI, service: OpenAICompletions) -> None:
    settings = service.settings

    @app.get("/v1/models")
    async def models(request: Request) -> dict[str, Any]:
        _check_bearer(settings, request)
        entry = {"id": service.name, "object": "model", "created": 0, "owned_by": "aiayn"}
        return {"object": "list", "data": [entry]}

    @app.post("/v1/completions")
    async def completions(request: Request):
        _check_bearer(settings, request)
        if "json" not in request.headers.get("content-type", ""):
            raise ApiError(400, "the body must be JSON")
        values = await request_values(request)
        params = _parameters(values, settings)
        prompts = params["prompts"]
        if params["stream"]:
            if len(prompts) != 1:
                raise ApiError(400, "stream takes one prompt")
            return StreamingResponse(
                _events(service, prompts[0], params, request), media_type="text/event-stream"
            )
        choices = []
        for index, prompt in enumerate(prompts):
            text, reason = await _collect(service, prompt, params)
            choices.append(
                {"text": text, "index": index, "logprobs": None, "finish_reason": reason}
            )
        return JSONResponse(_completion(service, choices))


async def _collect(service: OpenAICompletions, prompt: str, params: dict) -> tuple[str, str]:
    out = service.complete(prompt, {**params, "cancelled": asyncio.Event()})
    pieces = []
    deadline = time.monotonic() + service.settings.timeout
    while True:
        try:
            item = await asyncio.wait_for(out.get(), max(deadline - time.monotonic(), 0.001))
        except TimeoutError:
            raise ApiError(503, f"Timed out after {service.settings.timeout:g}s") from None
        if isinstance(item, tuple):
            if item[1].startswith("error"):
                raise ApiError(500, item[1])
            return "".join(pieces), item[1]
        pieces.append(item)


async def _events(
    service: OpenAICompletions, prompt: str, params: dict, request: Request
) -> AsyncIterator[str]:
    cancelled = asyncio.Event()
    out = service.complete(prompt, {**params, "cancelled": cancelled})
    try:
        while True:
            item = await out.get()
            if isinstance(item, tuple):
                reason = "stop" if item[1].startswith("error") else item[1]
                yield _event(service, "", reason)
                yield "data: [DONE]\n\n"
                return
            yield _event(service, item, None)
    finally:
        cancelled.set()  # a client that went away stops the generation


def _event(service: OpenAICompletions, text: str, reason: str | None) -> str:
    choice = {"text": text, "index": 0, "logprobs": None, "finish_reason": reason}
    return f"data: {json.dumps(_completion(service, [choice]))}\n\n"


def _completion(service: OpenAICompletions, choices: list[dict]) -> dict[str, Any]:
    return {
        "id": f"cmpl-{uuid.uuid4().hex[:24]}",
        "object": "text_completion",
        "created": int(time.time()),
        "model": service.name,
        "choices": choices,
    }


def _parameters(values: dict[str, Any], settings: ServeSettings) -> dict[str, Any]:
    prompt = values.get("prompt")
    prompts = [prompt] if isinstance(prompt, str) else prompt
    if (
        not prompts
        or not isinstance(prompts, list)
        or not all(isinstance(p, str) and p for p in prompts)
    ):
        raise ApiError(400, "prompt must be a non-empty string or a list of them")
    for name, allowed in UNSUPPORTED.items():
        if values.get(name) not in allowed:
            raise ApiError(400, f"{name} is not supported")
    if values.get("n", 1) != 1:
        raise ApiError(400, "n: only 1 is supported")
    stop = values.get("stop") or []
    stop = [stop] if isinstance(stop, str) else stop
    if not isinstance(stop, list) or not all(isinstance(s, str) and s for s in stop):
        raise ApiError(400, "stop must be a string or a list of strings")
    seed = values.get("seed")
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool) or seed < 0):
        raise ApiError(400, f"seed must be a whole number >= 0, got {seed!r}")
    return {
        "prompts": prompts,
        "max_tokens": _number(values, "max_tokens", 16, 0, settings.max_tokens_limit, whole=True),
        "temperature": _number(values, "temperature", 1.0, 0.0, 2.0),
        "top_p": _number(values, "top_p", 1.0, 1e-9, 1.0),
        "seed": seed,
        "stop": stop,
        "stream": bool(values.get("stream", False)),
    }


def _number(values: dict, name: str, default, low, high, *, whole: bool = False):
    value = values.get(name, default)
    if value is None:
        value = default
    kinds = (int,) if whole else (int, float)
    if not isinstance(value, kinds) or isinstance(value, bool) or not low <= value <= high:
        raise ApiError(
            400,
            f"{name} must be {'a whole number ' if whole else ''}"
            f"from {low:g} to {high:g}, got {value!r}",
        )
    return value


def _check_bearer(settings: ServeSettings, request: Request) -> None:
    """OpenAI's clients send ``Authorization: Bearer KEY``; a wrong key is 401 there."""
    header = request.headers.get("authorization", "")
    try:
        check_key(settings, header.removeprefix("Bearer ").strip() or None)
    except ApiError:
        raise ApiError(401, "Invalid API key") from None
