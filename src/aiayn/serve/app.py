"""``aiayn serve``: model directories behind HTTP, for the clients that already exist.

Translation models speak LibreTranslate's API (``aiayn.serve.libretranslate``: ``/translate``,
``/languages``, ``/detect``) and have a web page at ``/``; a language model speaks the
OpenAI-compatible API (``aiayn.serve.openai_api``). Either answers ``/health``. The models
live in worker threads and decoding processes (``aiayn.workers.engines``); the FastAPI event loop
only parses, queues and answers.

On SIGTERM the server (uvicorn) stops accepting connections, finishes every request it
accepted, then the engine finishes its queue and the process ends (by the signal, as
uvicorn re-raises it: exit status 143 in a shell, which systemd counts as a clean stop).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from aiayn.errors import AiaynError
from aiayn.serve.checks import BadRequest
from aiayn.serve.libretranslate import LibreTranslate
from aiayn.serve.limits import BodyLimit, body_limit, upload_limit
from aiayn.serve.openai_api import OpenAICompletions
from aiayn.serve.service import ApiError, Service, resolved_settings
from aiayn.serve.settings import ServeSettings
from aiayn.store import read_model_config


def create_app(settings: ServeSettings, on_stop: Callable[[str], None] | None = None) -> FastAPI:
    """The FastAPI application serving ``settings.models``; ``on_stop`` is given a summary
    once the last accepted request has been answered."""
    settings = resolved_settings(settings)
    service = open_service(settings)

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
        allow_origins=list(settings.cors),
        allow_methods=["*"],
        allow_headers=["*"],
    )
    app.add_middleware(HeadAsGet)
    app.add_middleware(
        BodyLimit,
        limit=body_limit(settings),
        upload_limit=upload_limit(settings),
        error_body=service.error_body,
    )
    _install_error_handlers(app, service)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", **service.health()}

    service.install(app)
    return app


class HeadAsGet:
    """Answers ``HEAD`` wherever ``GET`` is answered: the same status and headers, no body
    (HTTP's rule; monitors and ``curl -I`` send HEAD)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def headers_only(message) -> None:
            if message["type"] == "http.response.body":
                if message.get("more_body", False):
                    return
                message = {"type": "http.response.body", "body": b"", "more_body": False}
            await send(message)

        await self.app({**scope, "method": "GET"}, receive, headers_only)


def open_service(settings: ServeSettings) -> Service:
    """LibreTranslate's API for translation models, OpenAI's for a language model.

    Raises:
        AiaynError: no model, or translation and language models together.
    """
    if not settings.models:
        raise AiaynError("no model to serve")
    translation = [read_model_config(m).is_encoder_decoder for m in settings.models]
    if all(translation):
        return LibreTranslate(settings)
    if not any(translation):
        return OpenAICompletions(settings)
    raise AiaynError("serve translation models or one language model, not both")


def _install_error_handlers(app: FastAPI, service: Service) -> None:
    def body(status: int, message: str, code: str | None = None) -> JSONResponse:
        return JSONResponse(service.error_body(status, message, code), status_code=status)

    @app.exception_handler(ApiError)
    async def api_error(_request: Request, e: ApiError) -> JSONResponse:
        return body(e.status, str(e), e.code)

    @app.exception_handler(BadRequest)
    async def bad_request(_request: Request, e: BadRequest) -> JSONResponse:
        return body(400, str(e))

    @app.exception_handler(RequestValidationError)
    async def invalid(_request: Request, e: RequestValidationError) -> JSONResponse:
        return body(400, f"Invalid request: {e.errors()[0].get('msg', 'malformed')}")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, e: StarletteHTTPException) -> JSONResponse:
        return body(e.status_code, str(e.detail))

    @app.exception_handler(Exception)
    async def bug(_request: Request, e: Exception) -> JSONResponse:
        return body(500, f"Internal error: {type(e).__name__}: {e}")
