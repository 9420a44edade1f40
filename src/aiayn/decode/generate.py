"""Sampling text from the decoder-only language model, one cached position per new token.

Shapes: T prompt length, V vocabulary.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from aiayn.accel import Profile
from aiayn.data.tokenizer import Tokenizer
from aiayn.data.tokenizer_files import check_vocabularies, load_tokenizers
from aiayn.decode.sampling import sample_next
from aiayn.errors import AiaynError
from aiayn.models.lm import TransformerLM
from aiayn.modules import KVCache
from aiayn.store import ModelLoadError, load_model


class GenerationError(AiaynError, ValueError):
    """Arguments ``generate`` cannot sample with."""


def load_language_model(
    directory: str | Path, *, device: str = "cpu", profile: str | Profile | None = None
) -> tuple[TransformerLM, Tokenizer]:
    """A trained language model and its tokenizer, from a model directory."""
    model, cfg = load_model(directory, device=device, profile=profile)
    if not isinstance(model, TransformerLM):
        raise ModelLoadError(f"{directory}: a translation model, not a language model")
    _, tokenizer, info = load_tokenizers(directory)
    check_vocabularies(directory, info, cfg)
    return model, tokenizer


@torch.inference_mode()
def generate(
    model: TransformerLM,
    prompt: Sequence[int],
    *,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    generator: torch.Generator | None = None,
    stop_id: int | None = None,
    use_cache: bool = True,
    on_token: Callable[[int], None] | None = None,
) -> list[int]:
    """Continue ``prompt`` by up to ``max_new_tokens`` sampled tokens.

    With the cache each new token costs one position; without it (the reference, and the
    baseline of ``bench/lm_shakespeare.py``) the whole context is re-run every step. When a
    model with learned positions fills its context, the cached path restarts from the last
    half of the window (the uncached path, like nanoGPT, crops to the last full window).

    Args:
        stop_id: stop after emitting this id (e.g. EOS, or a newline).
        on_token: called with each new id as soon as it is chosen (for streaming).

    Returns:
        The new ids (the prompt not included).
    """
    if not prompt:
        raise GenerationError("the prompt must hold at least one token")
    check_arguments(model, prompt, max_new_tokens, temperature, top_k, top_p)
    model.eval()
    device = next(model.parameters()).device
    context = torch.tensor([list(prompt)], device=device)  # (1, T)
    window = model.max_context
    if use_cache:
        logits, cache = _decode_last(model, _crop(context, window), model.start_cache())
    out: list[int] = []
    for _ in range(max_new_tokens):
        if not use_cache:
            logits = model(_crop(context, window))[:, -1]  # (1, V)
        token = sample_next(
            logits, temperature=temperature, top_k=top_k, top_p=top_p, generator=generator
        )  # (1,)
        out.append(int(token))
        if on_token is not None:
            on_token(int(token))
        if stop_id is not None and int(token) == stop_id:
            break
        context = torch.cat([context, token[:, None]], dim=1)
        if use_cache and window and cache.length >= window:  # no position left for it
            logits, cache = _decode_last(model, context[:, -(window // 2) :], model.start_cache())
        elif use_cache:
            logits, cache = _decode_last(model, token[:, None], cache)
    return out


def _decode_last(
    model: TransformerLM, tokens: torch.Tensor, cache: KVCache
) -> tuple[torch.Tensor, KVCache]:
    """(1, V) logits after the last of ``tokens`` (1, T), and the cache extended by T."""
    hidden, cache = model.decode(tokens, cache=cache)
    return model.logits(hidden[:, -1]), cache


def _crop(context: torch.Tensor, window: int | None) -> torch.Tensor:
    return context if window is None else context[:, -window:]


def check_arguments(
    model: TransformerLM,
    prompt: Sequence[int],
    max_new_tokens: int,
    temperature: float,
    top_k: int,
    top_p: float,
) -> None:
    """Refuse what sampling cannot use, as the command line's options do."""
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int):
        raise GenerationError(f"max_new_tokens = {max_new_tokens!r}: expected a whole number")
    if max_new_tokens < 0:
        raise GenerationError(f"max_new_tokens = {max_new_tokens}: expected at least 0")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0:
        raise GenerationError(f"top_k = {top_k!r}: expected a whole number of at least 0")
    for name, value, ok in (
        ("temperature", temperature, lambda v: v >= 0),
        ("top_p", top_p, lambda v: 0 < v <= 1),
    ):
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not number or not math.isfinite(value) or not ok(value):
            allowed = "at least 0" if name == "temperature" else "above 0, at most 1"
            raise GenerationError(f"{name} = {value!r}: expected a number {allowed}")
    vocab = model.output.weight.size(0)
    for i in prompt:
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < vocab:
            raise GenerationError(f"prompt: {i!r} is not an id of the vocabulary (0..{vocab - 1})")
