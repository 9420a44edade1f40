"""``aiayn serve``: a model directory behind HTTP, for the clients that already exist.

A translation model speaks LibreTranslate's API (``/translate``, ``/languages``, ``/detect``,
``/health``) and has a web page at ``/``; a language model speaks the OpenAI-compatible
completions API (``/v1/completions``, ``/v1/models``). The model lives in a worker thread
(``aiayn.serve.engine``); the FastAPI event loop only parses, queues and answers.

On SIGTERM the server (uvicorn) stops accepting connections, finishes every request it
accepted, then the engine finishes its queue and the process ends (by the signal, as
uvicorn re-raises it: exit status 143 in a shell, which systemd counts as a clean stop).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, get_args

import torch
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from aiayn.errors import AiaynError


@dataclass(frozen=True, kw_only=True)
class ServeSettings:
    model: str
    beam: int = 5
    alpha: float = 0.6
    max_len_b: int = 50
    precision: str = "fp32"
    stopping: str = "exact"  # when beam search ends a sentence (aiayn.decode.beam.STOPPING)
    profile: str = "fast"
    device: str = "cpu"
    workers: int = 1  # batches decoded side by side (processes for a translator)
    threads: int = 1  # threads of each worker
    batch_tokens: int = 4096  # source tokens decoded together at most
    max_wait_ms: float = 25.0  # how long a batch may wait for more requests
    queue_size: int = 256  # requests waiting at most; more get 429
    timeout: float = 60.0  # seconds a request may take, queue included; more gets 503
    char_limit: int = 5000  # characters per request; more gets 400
    max_alternatives: int = 4
    max_tokens_limit: int = 2048  # completions: the most tokens one request may ask for
    api_keys: frozenset[str] | None = None  # None: no key needed
    cors_origins: tuple[str, ...] = ("*",)


class ApiError(AiaynError):
    """An error answered with an HTTP status and a message, in the API's own error shape."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def read_api_keys(path: str | Path) -> frozenset[str]:
    """One key per line (blank lines and ``#`` comments ignored)."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise AiaynError(f"{path}: cannot read the API keys ({e})") from None
    keys = frozenset(line.strip() for line in lines if line.strip() and not line.startswith("#"))
    if not keys:
        raise AiaynError(f"{path}: no API key in the file")
    return keys


def with_resolved_precision(settings: ServeSettings) -> ServeSettings:
    """``settings`` with precision ``auto`` resolved for its device (as ``aiayn serve`` does),
    refusing at start a precision no request could be decoded in."""
    from aiayn.decode.stepper import Precision
    from aiayn.runtime import resolve_precision

    precision = resolve_precision(settings.precision, torch.device(settings.device))
    if precision not in get_args(Precision):
        raise AiaynError(f"precision must be fp32, bf16 or auto, got {settings.precision!r}")
    return replace(settings, precision=precision)


def create_app(settings: ServeSettings, on_stop: Callable[[str], None] | None = None) -> FastAPI:
    """The FastAPI application serving ``settings.model``; ``on_stop`` is given a summary
    once the last accepted request has been answered."""
    from aiayn.data.tokenizer_files import read_tokenizer_info
    from aiayn.store import read_model_config

    settings = with_resolved_precision(settings)
    cfg = read_model_config(settings.model)
    read_tokenizer_info(settings.model)  # a clear error now rather than at the first request
    if cfg.is_encoder_decoder:
        from aiayn.serve import libretranslate

        routes, openai_errors = libretranslate, False
    else:
        from aiayn.serve import openai_api

        routes, openai_errors = openai_api, True
    service = routes.Service(settings)

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI):
        yield
        service.close()  # after uvicorn finished every accepted request
        if on_stop is not None:
            on_stop(service.summary())

    app = FastAPI(title="aiayn", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.service = service
    app.add_middleware(
        CORSMiddleware,
        allow_origins=list(settings.cors_origins),
        allow_methods=["*"],
        allow_headers=["*"],
    )
    _install_error_handlers(app, openai_errors)
    routes.install(app, service)
    return app


def _install_error_handlers(app: FastAPI, openai: bool) -> None:
    def body(status: int, message: str) -> JSONResponse:
        if openai:
            kind = "invalid_request_error" if status < 500 else "server_error"
            error = {"message": message, "type": kind, "param": None, "code": None}
            return JSONResponse({"error": error}, status_code=status)
        return JSONResponse({"error": message}, status_code=status)

    @app.exception_handler(ApiError)
    async def api_error(_request: Request, e: ApiError) -> JSONResponse:
        return body(e.status, str(e))

    @app.exception_handler(RequestValidationError)
    async def invalid(_request: Request, e: RequestValidationError) -> JSONResponse:
        return body(400, f"Invalid request: {e.errors()[0].get('msg', 'malformed')}")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, e: StarletteHTTPException) -> JSONResponse:
        return body(e.status_code, str(e.detail))

    @app.exception_handler(Exception)
    async def bug(_request: Request, e: Exception) -> JSONResponse:
        return body(500, f"Internal error: {type(e).__name__}: {e}")


async def request_values(request: Request) -> dict[str, Any]:
    """The parameters of a request, from its query string, form or JSON body (what the
    LibreTranslate clients send: libretranslatepy a form, deep-translator the query
    string, browsers JSON).

    Raises:
        ApiError: 400 for a body that is not JSON / a JSON object.
    """
    values: dict[str, Any] = dict(request.query_params)
    kind = request.headers.get("content-type", "")
    if "json" in kind:
        raw = await request.body()
        if raw.strip():
            try:
                data = json.loads(raw)
            except (ValueError, UnicodeDecodeError) as e:
                raise ApiError(400, f"Invalid request: the body is not JSON ({e})") from None
            if not isinstance(data, dict):
                raise ApiError(400, "Invalid request: the JSON body must be an object")
            values.update(data)
    elif "form" in kind:
        form = await request.form()
        for key in form:
            found = form.getlist(key)
            values[key] = found[0] if len(found) == 1 else found
    return values


def check_key(settings: ServeSettings, key: str | None) -> None:
    """Raise 403 unless ``key`` is one of the server's keys (when it has any)."""
    if settings.api_keys is not None and key not in settings.api_keys:
        raise ApiError(403, "Invalid API key")
