"""The fast profile's steppers: ``aiayn.modules.stepper.TransformerStepper`` with the decoding
tricks of this package, behind the same ``StepDecoder`` interface.

``fast_stepper`` (the fast profile's ``StepperFactory``) picks one once, for the model and
precision it is given:

- on the CPU, a model in eval mode (and no autocast) decodes through ``TokenStepper``: one
  token per row in few calls (``aiayn.accel.token_step``), with a cache of its own;
- elsewhere (a GPU, bfloat16 autocast, a model in training mode), ``SharedMemoryStepper``:
  the model's own pass, the beams of a sentence sharing one copy of its memory keys/values
  and source mask (``aiayn.accel.shared_memory``).

In precision ``int8`` the model first becomes a copy with every linear map in int8
(``aiayn.accel.int8``, CPU only), which then decodes as fp32 does (its maps are no
``nn.Linear`` to pack).

On the CPU the model first becomes a copy with its large weights, and every weight of the
encoder and the memory projections, packed once in the precision's dtype
(``aiayn.accel.packed``), which needs no autocast (a CPU on which oneDNN cannot pack
bfloat16 decodes under autocast instead); build a new stepper after changing the weights.
Both log-softmaxes overwrite the logits, and a vocabulary shortlist's projection is packed
or quantised as the full one (``aiayn.accel.output``).

Shapes: B sentences, W rows per sentence, N = B·W rows, S source length, D d_model,
V vocabulary.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch
from torch import Tensor, nn

from aiayn.accel.int8 import quantized_for_decoding
from aiayn.accel.output import log_probs_in_place, output_rows
from aiayn.accel.packed import MIN_PACKED_PRODUCT, can_pack, packed_for_decoding
from aiayn.accel.shared_memory import SharedMemory
from aiayn.accel.token_step import TokenStep, TokenStepState
from aiayn.modules.parameters import CROSS_KV, DECODER_NORM, OUTPUT, layer_prefix
from aiayn.modules.stepper import Precision, StepDecoder, TransformerState, TransformerStepper


def fast_stepper(model: Any, *, precision: Precision = "fp32", packed: bool = True) -> StepDecoder:
    """The fast profile's ``StepperFactory`` (above).

    ``packed=False`` decodes through the model's own weights: for a model whose weights
    change between decodings (a trainer's validation), where each packed copy would only add
    oneDNN kernels of its own row shapes to the process. Measured in training (400 updates
    of the Multi30k tiny recipe, validated at 200 and 400): the trainer's heap after
    training 233 MiB instead of 416, the same translations.
    """
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    training = model.training
    if precision == "int8":
        model, precision, training = quantized_for_decoding(model), "fp32", False
    elif packed and can_pack(model, dtype):
        model = packed_for_decoding(
            model, dtype, many_rows=_many_rows(model), min_product=MIN_PACKED_PRODUCT
        )
        precision = "fp32"  # the packed maps compute in dtype themselves
    on_cpu = next(model.parameters()).device.type == "cpu"
    if on_cpu and precision == "fp32" and not training:
        return TokenStepper(model)
    return SharedMemoryStepper(model, precision=precision)


def _many_rows(model: Any) -> tuple[str, ...]:
    """The maps that multiply whole source sentences at once: the encoder's, and each
    decoder layer's memory projection."""
    layers = range(len(model.decoder.layers))
    return ("encoder", *(layer_prefix("decoder", i) + CROSS_KV.path for i in layers))


class SharedMemoryStepper(TransformerStepper):
    """The model's own decoder pass, each sentence's memory keys/values and source mask held
    once for all its beams (``SharedMemory``, read by ``BeamSharedCrossAttention``)."""

    def start(self, src: Tensor) -> TransformerState:
        state = super().start(src)
        memory = tuple(SharedMemory.of(kv) for kv in state.cache.memory)
        return TransformerState(state.src_mask, replace(state.cache, memory=memory))

    def log_probs(self, hidden: Tensor) -> Tensor:
        return log_probs_in_place(self.model.logits(hidden))

    def output_rows(self, rows: Tensor) -> nn.Module:
        return output_rows(OUTPUT.of(self.model), rows)

    def reorder(
        self, state: TransformerState, index: Tensor, *, sentences: Tensor | None = None
    ) -> TransformerState:
        src_mask = (
            state.src_mask if sentences is None else state.src_mask.index_select(0, sentences)
        )
        rows_per_sentence = len(index) // src_mask.size(0)
        cache = replace(
            state.cache,
            self_attn=tuple(kv.select(index) for kv in state.cache.self_attn),
            memory=tuple(kv.regrouped(rows_per_sentence, sentences) for kv in state.cache.memory),
        )
        return TransformerState(src_mask, cache)


class TokenStepper(TransformerStepper):
    """Encodes with the model, then decodes one token per row through ``TokenStep`` over the
    model's decoder layers (CPU, eval mode, float32 activations)."""

    def __init__(self, model: Any):
        super().__init__(model)
        final_norm = DECODER_NORM.find(model)
        self.token_step = TokenStep(model.decoder.layers, model.tgt_embed, final_norm)

    def start(self, src: Tensor) -> TokenStepState:
        state = super().start(src)
        return self.token_step.start(state.cache.memory, state.src_mask)

    def step(
        self, tokens: Tensor, state: TokenStepState, *, normalize: bool = True
    ) -> tuple[Tensor, TokenStepState]:
        hidden, state = self.token_step.step(tokens, state)  # (N, D)
        return self.scores(hidden, normalize), state

    def hidden(self, tokens: Tensor, state: TokenStepState) -> tuple[Tensor, TokenStepState]:
        return self.token_step.step(tokens, state)  # (N, D)

    def log_probs(self, hidden: Tensor) -> Tensor:
        return log_probs_in_place(self.model.logits(hidden))

    def output_rows(self, rows: Tensor) -> nn.Module:
        return output_rows(OUTPUT.of(self.model), rows)

    def reorder(
        self, state: TokenStepState, index: Tensor, *, sentences: Tensor | None = None
    ) -> TokenStepState:
        return self.token_step.reorder(state, index, sentences=sentences)
