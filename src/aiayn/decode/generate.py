"""Sampling text from the decoder-only language model, one cached position per new token.

Shapes: T prompt length, V vocabulary.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from aiayn.data.tokenizer import Tokenizer, load_tokenizer
from aiayn.decode.sampling import sample_next
from aiayn.models import ModelLoadError, load_model
from aiayn.models.io import TOKENIZER_FILE
from aiayn.models.lm import TransformerLM


def load_language_model(
    directory: str | Path, *, device: str = "cpu"
) -> tuple[TransformerLM, Tokenizer]:
    """A trained language model and its tokenizer, from a model directory."""
    directory = Path(directory)
    model, _ = load_model(directory, device=device)
    if not isinstance(model, TransformerLM):
        raise ModelLoadError(f"{directory}: a translation model, not a language model")
    info_path = directory / TOKENIZER_FILE
    if not info_path.is_file():
        raise ModelLoadError(f"{info_path}: missing (the model has no tokenizer)")
    info = json.loads(info_path.read_text())
    return model, load_tokenizer(directory / info["file"])


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
        raise ValueError("the prompt must hold at least one token")
    model.eval()
    device = next(model.parameters()).device
    context = torch.tensor([list(prompt)], device=device)  # (1, T)
    window = model.max_context
    if use_cache:
        logits, cache = model.decode(_crop(context, window))
    out: list[int] = []
    for _ in range(max_new_tokens):
        if not use_cache:
            logits = model(_crop(context, window))
        token = sample_next(
            logits[:, -1], temperature=temperature, top_k=top_k, top_p=top_p, generator=generator
        )  # (1,)
        out.append(int(token))
        if on_token is not None:
            on_token(int(token))
        if stop_id is not None and int(token) == stop_id:
            break
        context = torch.cat([context, token[:, None]], dim=1)
        if use_cache and window and cache.length >= window:  # no position left for it
            logits, cache = model.decode(context[:, -(window // 2) :])
        elif use_cache:
            logits, cache = model.decode(token[:, None], cache=cache)
    return out


def _crop(context: torch.Tensor, window: int | None) -> torch.Tensor:
    return context if window is None else context[:, -window:]
