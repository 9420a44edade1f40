"""What the server's app and its two APIs share: the settings, the error a route raises,
reading a request's parameters, the key check, and the ``Service`` protocol each API
implements. The app and the API modules import this module; it imports none of them."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import torch
from fastapi import FastAPI, Request

from aiayn.checks import Number, Rule, Whole, check
from aiayn.decode.terms import pattern_problem
from aiayn.errors import AiaynError, ConfigError
from aiayn.runtime import check_decoding_precision, resolve_precision
from aiayn.search_options import SearchOptions
from aiayn.serve.checks import BadRequest, optional_key, parse_json


@dataclass(frozen=True, kw_only=True)
class ServeSettings:
    # model directories: translation models (one per language pair) or one language model
    models: tuple[str, ...]
    # how translations are decoded; a request may change the fields that name a request
    # parameter (aiayn.serve.terms.requested_options)
    decode: SearchOptions = field(default_factory=SearchOptions)
    profile: str | None = None  # a name in aiayn.accel.PROFILES; None: the default
    device: str = "cpu"
    workers: int = 1  # batches decoded side by side, per model (processes for a translator)
    threads: int = 1  # threads of each worker
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
            ConfigError: naming the field and what it must be.
        """
        if not isinstance(self.decode, SearchOptions):
            raise ConfigError(f"ServeSettings.decode must be a SearchOptions, got {self.decode!r}")
        check(self, SETTINGS_RULES, ConfigError, "ServeSettings.")
        if problem := pattern_problem(self.decode.protect_patterns):
            raise ConfigError(f"ServeSettings.decode: {problem}")


SETTINGS_RULES: dict[str, Rule] = {
    **dict.fromkeys(("workers", "threads", "queue_size", "char_limit"), Whole(1)),
    **dict.fromkeys(("file_max_bytes", "file_max_parts", "file_max_texts"), Whole(1)),
    **dict.fromkeys(("max_alternatives", "max_tokens_limit"), Whole(0)),
    **dict.fromkeys(("timeout", "files_expire_s"), Number(0.0, above=True)),
    "max_wait_ms": Number(0.0),
}


class ApiError(AiaynError):
    """An error answered with an HTTP status and a message, in the API's own error shape."""

    def __init__(self, status: int, message: str, *, code: str | None = None):
        super().__init__(message)
        self.status = status
        self.code = code  # a machine-readable code, where the API has them (OpenAI's)


HEALTH = ("requests", "processes_restarted")  # in every /health body, named the same


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
        """What ``/health`` reports beside ``"status": "ok"``: every API names its answered
        requests ``requests`` and its decoding processes replaced after dying
        ``processes_restarted`` (``HEALTH``), then what is its own."""
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
    refusing at start int8 off the CPU (``aiayn.runtime.check_decoding_precision``)."""
    device = torch.device(settings.device)
    precision = resolve_precision(settings.decode.precision, device)
    check_decoding_precision(precision, device)
    return replace(settings, decode=replace(settings.decode, precision=precision))


async def request_values(request: Request) -> dict[str, Any]:
    """The parameters of a request, from its query string, form or JSON body (what the
    LibreTranslate clients send: libretranslatepy a form, deep-translator the query
    string, browsers JSON).

    Raises:
        BadRequest: a body that is not JSON / a JSON object, or an unreadable form.
    """
    values: dict[str, Any] = dict(request.query_params)
    kind = request.headers.get("content-type", "")
    if "json" in kind or "text/plain" in kind or not kind:
        raw = await request.body()
        if raw.strip() and ("json" in kind or raw.lstrip()[:1] == b"{"):
            values.update(_json_object(raw))
        elif raw.strip():
            raise BadRequest(
                f"Invalid request: send JSON (Content-Type: application/json), got {kind!r}"
            )
    elif "form" in kind:
        try:
            form = await request.form()
        except ApiError:  # a body over its limit (serve.limits)
            raise
        except Exception as e:  # multipart parser errors have no common base
            raise BadRequest(f"Invalid request: unreadable form ({type(e).__name__})") from None
        keys = list(form)
        if len(keys) == 1 and keys[0].lstrip().startswith("{") and not form[keys[0]]:
            values.update(_json_object(keys[0]))  # curl -d '{...}': JSON sent as a form
        else:
            for key in keys:
                found = form.getlist(key)
                values[key] = found[0] if len(found) == 1 else found
    return values


def _json_object(raw: bytes | str) -> dict[str, Any]:
    data = parse_json(raw)
    if not isinstance(data, dict):
        raise BadRequest("Invalid request: the JSON body must be an object")
    return data


def check_key(settings: ServeSettings, key: Any) -> None:
    """Raise 403 unless ``key`` is one of the server's keys (when it has any); 400 when it
    is not a string."""
    key = optional_key(key)
    if settings.api_keys is not None and key not in settings.api_keys:
        raise ApiError(403, "Invalid API key")
