"""What the server's app and its two APIs share: the settings resolved for the machine, the
error a route raises, reading a request's parameters, the key check, and the ``Service``
protocol each API implements. The app and the API modules import this module; it imports none of
them."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any, Protocol, runtime_checkable

import torch
from fastapi import FastAPI, Request

from aiayn.errors import AiaynError
from aiayn.runtime import decoding_precision
from aiayn.serve.checks import BadRequest, optional_key, parse_json
from aiayn.serve.settings import ServeSettings


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


def resolved_settings(settings: ServeSettings) -> ServeSettings:
    """``settings`` with what it leaves to the machine decided: precision ``auto`` for its
    device (refusing at start int8 off the CPU: ``aiayn.runtime.decoding_precision``)
    and the decoding processes per model (``ServeSettings.decoders``)."""
    device = torch.device(settings.device)
    precision = decoding_precision(settings.decode.precision, device)
    workers = settings.decoders(len(os.sched_getaffinity(0)))
    return replace(settings, decode=replace(settings.decode, precision=precision), workers=workers)


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
