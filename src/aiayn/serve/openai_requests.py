"""The requests of the OpenAI-compatible API (``aiayn.serve.openai_api``), checked: what
``/v1/completions`` and ``/v1/chat/completions`` take, refused with a 400 naming the field
otherwise, and the chat template that turns messages into the prompt a language model
continues."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from aiayn.errors import AiaynError
from aiayn.search_options import SearchOptions
from aiayn.serve import checks
from aiayn.serve.checks import BadRequest
from aiayn.serve.service import ApiError
from aiayn.serve.settings import ServeSettings

# Fields whose only values served are these: anything else is refused, never ignored.
PENALTIES = {
    "presence_penalty": (None, 0),
    "frequency_penalty": (None, 0),
    "logit_bias": (None, {}),
}
UNSUPPORTED = {
    "echo": (False, None),
    "best_of": (1, None),
    "logprobs": (None,),
    "suffix": (None,),
    **PENALTIES,
}
CHAT_UNSUPPORTED = {
    "logprobs": (False, None),
    "top_logprobs": (None,),
    "tools": (None, []),
    "response_format": (None,),
    **PENALTIES,
}
# A translation request's own fields (protected spans, glossary, minimum confidence, format):
# a language model has no use for them, so they are refused, never ignored.
TRANSLATION_FIELDS = {
    field.name: field.metadata["request"]
    for field in dataclasses.fields(SearchOptions)
    if field.metadata["request"]
}
MAX_STOPS = 4  # stop sequences per request, as OpenAI allows (each is looked for at every token)
ROLES = {"system": "System", "developer": "System", "user": "User", "assistant": "Assistant"}
CHAT_TEMPLATE = "{role}: {content}\n"  # one line per message, then "Assistant:"
TURN_STOPS = tuple(f"\n{name}:" for name in dict.fromkeys(ROLES.values()))
FORGED_TURN = re.compile(r"\r?\n(?=[ \t]*(?:{}):)".format("|".join(dict.fromkeys(ROLES.values()))))


def render_chat(messages: list[dict[str, str]]) -> str:
    """The prompt of a chat: ``CHAT_TEMPLATE`` for every message, then ``Assistant:``.

    ``messages`` are ``{"role", "content"}`` with a role of ``ROLES`` and text content. A
    line of a message that starts as a turn does (``Assistant:``) is indented by a space, so
    that no message can forge another's turn."""
    lines = [
        CHAT_TEMPLATE.format(role=ROLES[m["role"]], content=FORGED_TURN.sub("\n ", m["content"]))
        for m in messages
    ]
    return "".join(lines) + "Assistant:"


def check_language_model_settings(settings: ServeSettings) -> None:
    """Refuse server defaults that only a translation model uses (``aiayn serve --glossary``,
    ``--protect``, ``--min-confidence`` ... for a language model).

    Raises:
        AiaynError: naming them, in one line.
    """
    default = SearchOptions()
    given = [
        name
        for name in TRANSLATION_FIELDS
        if getattr(settings.decode, name) != getattr(default, name)
    ]
    if given:
        raise AiaynError(
            f"{', '.join(given)}: options of translation models, not of the language model "
            f"{settings.models[0]}"
        )


def _no_translation_fields(values: dict[str, Any]) -> None:
    for name in TRANSLATION_FIELDS.values():
        if values.get(name) is not None:
            raise BadRequest(
                f"{name} applies to translation models (LibreTranslate's /translate), not to "
                "a language model's completions"
            )


def completion_parameters(values: dict[str, Any], settings: ServeSettings) -> dict[str, Any]:
    _no_translation_fields(values)
    prompt = values.get("prompt")
    prompts = [prompt] if isinstance(prompt, str) else prompt
    if (
        not prompts
        or not isinstance(prompts, list)
        or not all(isinstance(p, str) and p for p in prompts)
    ):
        raise BadRequest("prompt must be a non-empty string or a list of them")
    if sum(len(p) for p in prompts) > settings.char_limit:
        raise BadRequest(f"prompt: longer than {settings.char_limit} characters")
    for prompt in prompts:
        checks.text(prompt, "prompt")
    for name, allowed in UNSUPPORTED.items():
        if values.get(name) not in allowed:
            raise BadRequest(f"{name} is not supported")
    return {"prompts": prompts, **_sampling(values, settings, "max_tokens")}


def chat_parameters(values: dict[str, Any], settings: ServeSettings) -> dict[str, Any]:
    _no_translation_fields(values)
    for name, allowed in CHAT_UNSUPPORTED.items():
        if values.get(name) not in allowed:
            raise BadRequest(f"{name} is not supported")
    limit = "max_completion_tokens" if "max_completion_tokens" in values else "max_tokens"
    params = _sampling(values, settings, limit)
    params["stop"] = [*params["stop"], *TURN_STOPS]
    params["strip_leading"] = True
    prompt = render_chat(_messages(values.get("messages")))
    if len(prompt) > settings.char_limit:  # what the model reads: every message, its role
        raise ApiError(
            400,
            f"messages: {len(prompt):,} characters with their role lines, "
            f"more than the limit of {settings.char_limit:,}",
        )
    return {"prompt": prompt, **params}


def _messages(raw: Any) -> list[dict[str, str]]:
    """Chat messages as ``{"role", "content"}`` with text content (a string, or a list of
    ``{"type": "text", "text": ...}`` parts).

    Raises:
        ApiError: 400 for anything else.
    """
    if not isinstance(raw, list) or not raw:
        raise BadRequest("messages must be a non-empty list")
    messages = []
    for i, message in enumerate(raw):
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            raise BadRequest(f"messages[{i}]: an object with a role of {', '.join(ROLES)}")
        content = message.get("content")
        if isinstance(content, list):
            if not all(isinstance(p, dict) and p.get("type") == "text" for p in content):
                raise BadRequest(f"messages[{i}].content: only text parts are supported")
            if not all(isinstance(p.get("text"), str) for p in content):
                raise BadRequest(f"messages[{i}].content: each text part's text is a string")
            content = "".join(p["text"] for p in content)
        if not isinstance(content, str):
            raise BadRequest(f"messages[{i}].content must be text")
        messages.append(
            {"role": message["role"], "content": checks.text(content, f"messages[{i}].content")}
        )
    return messages


def _sampling(values: dict[str, Any], settings: ServeSettings, limit: str) -> dict[str, Any]:
    """What both endpoints take: ``n`` (1), ``stop``, ``seed``, the length limit, sampling
    and streaming."""
    stop = values.get("stop") or []
    stop = [stop] if isinstance(stop, str) else stop
    if not isinstance(stop, list) or not all(isinstance(s, str) and s for s in stop):
        raise BadRequest("stop must be a string or a list of strings")
    if len(stop) > MAX_STOPS:
        raise BadRequest(f"stop: at most {MAX_STOPS} sequences, got {len(stop)}")
    if checks.whole_number(values, "n", 1, minimum=1, maximum=1_000_000, strict=True) != 1:
        raise BadRequest("n: only 1 is supported")
    for text in stop:
        checks.text(text, "stop")
    stream = checks.boolean(values, "stream", strict=True)
    options = values.get("stream_options")
    if options is not None and (not isinstance(options, dict) or not stream):
        raise BadRequest("stream_options: an object, only with stream")
    return {
        "max_tokens": checks.whole_number(
            values, limit, 16, minimum=0, maximum=settings.max_tokens_limit, strict=True
        ),
        "temperature": checks.finite_number(
            values, "temperature", 1.0, minimum=0.0, maximum=2.0, strict=True
        ),
        "top_p": checks.finite_number(values, "top_p", 1.0, minimum=1e-9, maximum=1.0, strict=True),
        "seed": checks.seed(values, strict=True),
        "stop": stop,
        "stream": stream,
        "include_usage": checks.boolean(options or {}, "include_usage", strict=True),
    }
