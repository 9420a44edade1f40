"""What the server's app and its two APIs share: the settings, the error a route raises,
reading a request's parameters, the key check, and the ``Service`` protocol each API
implements. The app and the API modules import this module; it imports none of them."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol, get_args, runtime_checkable

import torch
from fastapi import FastAPI, Request

from aiayn.decode.stepper import Precision
from aiayn.decode.terms import check_terms
from aiayn.errors import AiaynError
from aiayn.runtime import resolve_precision
from aiayn.serve.checks import BadRequest, optional_key, parse_json
from aiayn.text.glossary import Glossary


@dataclass(frozen=True, kw_only=True)
class ServeSettings:
    # model directories: translation models (one per language pair) or one language model
    models: tuple[str, ...]
    beam: int = 5
    alpha: float = 0.6
    max_len_b: int = 50
    precision: str = "fp32"
    stopping: str = "exact"  # when beam search ends a sentence (aiayn.decode.beam.STOPPING)
    text: str = "natural"  # natural or raw (SearchOptions.text)
    split_sentences: bool = True  # natural text: a request's sentences translated one by one
    # the requests' defaults (aiayn.serve.terms): protected spans, glossary, minimum confidence
    protect: bool = True
    protect_patterns: tuple[str, ...] = ()
    glossary: Glossary | None = None
    min_confidence: float = 0.0
    profile: str | None = None  # a name in aiayn.accel.PROFILES; None: the default
    device: str = "cpu"
    workers: int = 1  # batches decoded side by side, per model (processes for a translator)
    threads: int = 1  # threads of each worker
    batch_tokens: int = 4096  # source tokens decoded together at most
    max_wait_ms: float = 25.0  # how long a batch may wait for more requests
    queue_size: int = 256  # requests waiting at most; more get 429
    timeout: float = 60.0  # seconds a request may take, queue included; more gets 503
    char_limit: int = 5000  # characters per request; more gets 400
    # /translate_file's documents (aiayn.serve.files): bounds answered 413, and how long a
    # translated file is kept for /download_file
    file_max_bytes: int = 20 * 2**20
    file_max_parts: int = 1_000  # slides, e-book chapters, subtitle cues
    file_max_texts: int = 20_000  # paragraphs, table cells, cues: texts to translate
    files_expire_s: float = 3600.0
    max_alternatives: int = 4
    max_tokens_limit: int = 2048  # completions: the most tokens one request may ask for
    api_keys: frozenset[str] | None = None  # None: no key needed
    suggestions: str | None = None  # a file /suggest appends to; None: /suggest is refused
    cors_origins: tuple[str, ...] = ("*",)

    def __post_init__(self) -> None:
        """Refuse settings no server could answer with (``aiayn serve`` checks its options
        the same way).

        Raises:
            AiaynError: naming the field and what it must be.
        """
        for name in (
            *("workers", "threads", "batch_tokens", "queue_size", "char_limit", "beam"),
            *("file_max_bytes", "file_max_parts", "file_max_texts"),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise AiaynError(f"ServeSettings.{name} must be a whole number >= 1, got {value!r}")
        for name in ("max_alternatives", "max_len_b", "max_tokens_limit"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise AiaynError(f"ServeSettings.{name} must be a whole number >= 0, got {value!r}")
        for name, low in (
            ("timeout", 0.0),
            ("max_wait_ms", 0.0),
            ("alpha", 0.0),
            ("files_expire_s", 0.0),
        ):
            value = getattr(self, name)
            number = isinstance(value, int | float) and not isinstance(value, bool)
            if (
                not number
                or not math.isfinite(value)
                or value < low
                or (name in ("timeout", "files_expire_s") and value == 0)
            ):
                raise AiaynError(
                    f"ServeSettings.{name} must be a finite number >= 0, got {value!r}"
                )
        problem = check_terms(
            self.min_confidence, self.protect, self.protect_patterns, self.glossary
        )
        if problem:
            raise AiaynError(problem.replace("SearchOptions.", "ServeSettings."))


class ApiError(AiaynError):
    """An error answered with an HTTP status and a message, in the API's own error shape."""

    def __init__(self, status: int, message: str, *, code: str | None = None):
        super().__init__(message)
        self.status = status
        self.code = code  # a machine-readable code, where the API has them (OpenAI's)


@runtime_checkable
class Service(Protocol):
    """One API over the served models: its routes, its error shape, what ``/health`` adds,
    and its end."""

    settings: ServeSettings

    def install(self, app: FastAPI) -> None:
        """Add the API's routes to ``app``."""
        ...

    def error_body(self, status: int, message: str, code: str | None) -> dict[str, Any]:
        """The JSON body of an error, in the API's own shape."""
        ...

    def health(self) -> dict[str, Any]:
        """What ``/health`` reports beside ``"status": "ok"``."""
        ...

    def summary(self) -> str:
        """What was answered, said once the server has stopped."""
        ...

    def close(self) -> None:
        """Finish every accepted request, then release the models."""
        ...


def read_api_keys(path: str | Path) -> frozenset[str]:
    """One key per line (blank lines and ``#`` comments ignored)."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise AiaynError(f"{path}: cannot read the API keys ({e})") from None
    keys = frozenset(
        line.strip() for line in lines if line.strip() and not line.strip().startswith("#")
    )
    if not keys:
        raise AiaynError(f"{path}: no API key in the file")
    return keys


def with_resolved_precision(settings: ServeSettings) -> ServeSettings:
    """``settings`` with precision ``auto`` resolved for its device (as ``aiayn serve`` does),
    refusing at start a precision no request could be decoded in."""
    precision = resolve_precision(settings.precision, torch.device(settings.device))
    if precision not in get_args(Precision):
        raise AiaynError(f"precision must be fp32, bf16 or auto, got {settings.precision!r}")
    return replace(settings, precision=precision)


async def request_values(request: Request) -> dict[str, Any]:
    """The parameters of a request, from its query string, form or JSON body (what the
    LibreTranslate clients send: libretranslatepy a form, deep-translator the query
    string, browsers JSON).

    Raises:
        ApiError: 400 for a body that is not JSON / a JSON object.
    """
    values: dict[str, Any] = dict(request.query_params)
    kind = request.headers.get("content-type", "")
    if "json" in kind or "text/plain" in kind or not kind:
        raw = await request.body()
        if raw.strip() and ("json" in kind or raw.lstrip()[:1] == b"{"):
            values.update(_json_object(raw))
        elif raw.strip():
            raise ApiError(
                400, f"Invalid request: send JSON (Content-Type: application/json), got {kind!r}"
            )
    elif "form" in kind:
        try:
            form = await request.form()
        except ApiError:  # a body over its limit (serve.limits)
            raise
        except Exception as e:  # multipart parser errors have no common base
            raise ApiError(400, f"Invalid request: unreadable form ({type(e).__name__})") from None
        keys = list(form)
        if len(keys) == 1 and keys[0].lstrip().startswith("{") and not form[keys[0]]:
            values.update(_json_object(keys[0]))  # curl -d '{...}': JSON sent as a form
        else:
            for key in keys:
                found = form.getlist(key)
                values[key] = found[0] if len(found) == 1 else found
    return values


def _json_object(raw: bytes | str) -> dict[str, Any]:
    try:
        data = parse_json(raw)
    except BadRequest as e:
        raise ApiError(400, str(e)) from None
    if not isinstance(data, dict):
        raise ApiError(400, "Invalid request: the JSON body must be an object")
    return data


def check_key(settings: ServeSettings, key: Any) -> None:
    """Raise 403 unless ``key`` is one of the server's keys (when it has any); 400 when it
    is not a string."""
    try:
        key = optional_key(key)
    except BadRequest as e:
        raise ApiError(400, str(e)) from None
    if settings.api_keys is not None and key not in settings.api_keys:
        raise ApiError(403, "Invalid API key")
