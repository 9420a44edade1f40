"""A decoding step of one new token per row, in few PyTorch calls.

Replaces, in CPU decoding (``aiayn.accel.stepper.TokenStepper``), the general decoder
pass ``Transformer.decode(tokens, src_mask, cache=...)`` for one position, and its
``KVCache``: the same layers (§3.1, §3.2.3) with the same weights, computed for exactly
one query per row, with a cache of its own (``TokenStepState``).

Why: at Transformer-Tiny size a decoding step spends more time in PyTorch's per-call
overhead than in arithmetic. The general pass serves any number of new positions, returns
attention weights on demand, keeps the cache as immutable objects and calls a module per
sub-layer: ~1,070 ATen calls per greedy step of the tiny model; this one makes ~610. With
one query per row:

- a linear map is one ``addmm`` on the weight as it is (packed maps are called as they are,
  a small map packed for many rows, ``PackedFromRows``, by its row count);
- the heads of one query need no transposes: (N, H, 1, Dh) is (N, D) in memory;
- self-attention needs no mask: keys and values are written in place into buffers with room
  to grow, and attention reads their first L+1 positions; after a beam reselection the
  buffers keep room for exactly one more position, so the next step reads them whole;
- softmax rows shorter than ``MIN_SOFTMAX_SPAN`` take a scalar path in PyTorch's CPU kernel ~7×
  slower (``aiayn.accel.attention.padded_softmax``): here the scores of such rows are
  computed over ``MIN_SOFTMAX_SPAN`` positions, the extra ones masked by the -inf bias of
  ``aiayn.accel.attention.biased_attention`` (zero keys and values behind them), not padded
  afterwards;
- memory keys are stored transposed, padded the same way, once per sentence and read by all
  its beams (as ``aiayn.accel.shared_memory``).

Measured: Transformer-Tiny greedy search 1.2-1.3× the general pass, the same tokens
(``bench/decode.py --sizes tiny``).

The state is a value, as ``KVCache``: stepping the same state twice (to branch) copies the
buffers rather than overwriting what the first step wrote.

Shapes: B sentences, W rows per sentence (its beams), N = B·W rows, H heads, L positions
decoded, C ≥ L buffer capacity, S source length, Sp = max(S, MIN_SOFTMAX_SPAN), D d_model,
Dh = D / H.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from aiayn.accel.attention import MIN_SOFTMAX_SPAN, additive_mask, biased_attention
from aiayn.accel.packed import PackedFromRows
from aiayn.modules import MemoryKeyValues
from aiayn.modules import parameters as parts
from aiayn.modules.layers import DecoderLayer, SublayerConnection


class _Written:
    """How many positions of a set of buffers hold values: a state whose length is less
    may not write into them (another state already did)."""

    def __init__(self, length: int):
        self.length = length


@dataclass(frozen=True)
class TokenStepState:
    """The decoder's cache for ``TokenStep``: per layer, self-attention keys and values of
    L positions, and the memory keys and values of each sentence."""

    keys: tuple[Tensor, ...]  # per layer (N, H, C, Dh): positions 0 .. L-1 written
    values: tuple[Tensor, ...]  # per layer (N, H, C, Dh)
    length: int  # L
    written: _Written
    memory_keys: tuple[Tensor, ...]  # per layer (B, H, Dh, Sp): transposed
    memory_values: tuple[Tensor, ...]  # per layer (B, H, Sp, Dh)
    memory_bias: Tensor  # float32 (B·H, 1, Sp): 0 to attend, -inf for padding
    span_bias: Tensor  # float32 (MIN_SOFTMAX_SPAN, 1, 1, MIN_SOFTMAX_SPAN): row L attends 0 .. L
    rows_per_sentence: int  # W


Affine = Callable[[Tensor], Tensor]


def affine(linear: nn.Module) -> Affine:
    """(N, I) -> (N, O): an ``nn.Linear`` as one ``addmm`` (``mm`` without a bias) on its
    weight; a ``PackedFromRows`` as that where it does not pack the rows; any other map
    (``aiayn.accel.packed.PackedLinear``) called as it is."""
    if isinstance(linear, PackedFromRows):
        few, many, packs = affine(linear.linear), linear.packed.forward, linear.packs
        return lambda x: many(x) if packs(x.size(0)) else few(x)
    if type(linear) is not nn.Linear:
        return linear
    weight_t, bias = linear.weight.t(), linear.bias  # (I, O) view, (O,)
    if bias is None:
        return lambda x: torch.mm(x, weight_t)
    return lambda x: torch.addmm(bias, x, weight_t)


READS = {  # every part of a decoder layer (``aiayn.modules.parameters``) and what reads it
    parts.SELF_QKV: "LayerWeights.qkv",
    parts.SELF_OUT: "LayerWeights.self_out",
    parts.CROSS_Q: "LayerWeights.query",
    parts.CROSS_KV: "the memory keys/values: the model's start_cache computes them",
    parts.CROSS_OUT: "LayerWeights.cross_out",
    parts.FFN_1: "LayerWeights.w_1",
    parts.FFN_2: "LayerWeights.w_2",
    parts.SELF_NORM: "LayerWeights.connections",
    parts.CROSS_NORM: "LayerWeights.connections",
    parts.FFN_NORM: "LayerWeights.connections",
}
DECODER_LAYER_PARAMETERS = frozenset(parts.parameter_names(READS))
"""Every parameter a DecoderLayer may have, each read by ``layer_weights`` (biases optional)."""

HANDLED_OPTIONS = {  # every constructor option of the parts the step reads, and how it does
    "Transformer": {
        "src_embed": "encoding: the model's own",
        "tgt_embed": "called as it is, with the position offset",
        "encoder": "encoding: the model's own",
        "decoder": "its layers (layer_weights) and final_norm (called as it is)",
        "output": "logits: the model's own",
        "specials": "the search's",
        "profile": "chose this step",
    },
    "Stack": {"layers": "layer_weights", "final_norm": "called as it is"},
    "DecoderLayer": {
        "self_attn": "qkv, self_out, heads",
        "self_attn_connection": "connections[0]",
        "cross_attn": "query, cross_out (its kv_proj: start_cache); required",
        "cross_attn_connection": "connections[1]; required",
        "ffn": "w_1, activation, w_2",
        "ffn_connection": "connections[2]",
    },
    "SublayerConnection": {
        "norm": "called as it is (sublayer_input, add)",
        "dropout": "eval mode only: the identity",
        "norm_first": "sublayer_input, add",
    },
    "SelfAttention": {
        "d_model": "the maps' shapes",
        "n_heads": "heads",
        "dropout": "eval mode only: none",
        "bias": "affine: addmm with a bias, mm without",
        "attention": "replaced by biased_attention, eq. (1) with a float32 softmax",
    },
    "CrossAttention": {
        "d_model": "the maps' shapes",
        "n_heads": "heads",
        "dropout": "eval mode only: none",
        "bias": "affine",
        "attention": "replaced by biased_attention",
    },
    "PositionwiseFeedForward": {
        "d_model": "the maps' shapes",
        "d_ff": "the maps' shapes",
        "activation": "called as it is",
        "dropout": "eval mode only: the identity",
        "bias": "affine",
    },
}


class UnsupportedLayerError(ValueError):
    """A decoder layer with parts that ``layer_weights`` does not read."""


@dataclass(frozen=True)
class LayerWeights:
    """A ``DecoderLayer`` as the step computes it: its weights as maps, its options as
    values. ``layer_weights`` is the one place that reads a layer's parts."""

    heads: int  # H
    qkv: Affine  # (N, D) -> (N, 3D): [W_Q; W_K; W_V] of masked self-attention
    self_out: Affine  # W_O of self-attention
    query: Affine  # W_Q of encoder–decoder attention
    cross_out: Affine  # W_O of encoder–decoder attention
    w_1: Affine  # the feed-forward network's first map (§3.3)
    activation: Callable[[Tensor], Tensor]
    w_2: Affine
    connections: tuple[SublayerConnection, SublayerConnection, SublayerConnection]


def parameter_names(layer: nn.Module) -> set[str]:
    """The layer's parameter names, a packed map's (``PackedFromRows.linear``) as the
    plain map's."""
    return {name.replace(".linear.", ".") for name, _ in layer.named_parameters()}


def layer_weights(layer: DecoderLayer) -> LayerWeights:
    """``layer`` read for the step.

    Raises:
        UnsupportedLayerError: the layer has no encoder–decoder attention, or parameters
            this function does not read (the step would compute something else).
    """
    if layer.cross_attn is None or layer.cross_attn_connection is None:
        raise UnsupportedLayerError(
            "TokenStep decodes for an encoder: every layer needs cross_attn"
        )
    unread = parameter_names(layer) - DECODER_LAYER_PARAMETERS
    if unread:
        raise UnsupportedLayerError(f"TokenStep does not read {sorted(unread)} of a DecoderLayer")
    return LayerWeights(
        heads=layer.self_attn.n_heads,
        qkv=affine(parts.SELF_QKV.of(layer)),
        self_out=affine(parts.SELF_OUT.of(layer)),
        query=affine(parts.CROSS_Q.of(layer)),
        cross_out=affine(parts.CROSS_OUT.of(layer)),
        w_1=affine(parts.FFN_1.of(layer)),
        activation=layer.ffn.activation,
        w_2=affine(parts.FFN_2.of(layer)),
        connections=(
            layer.self_attn_connection,
            layer.cross_attn_connection,
            layer.ffn_connection,
        ),
    )


class TokenStep:
    """The decoder of an encoder–decoder Transformer, one new token per row at a time
    (without autograd: for decoding only).

    Args:
        layers: the decoder's layers (in eval mode: no dropout is applied).
        embed: ``(ids (N, 1), offset) -> (N, 1, D)``, the target embedding with positions.
        final_norm: the decoder's final LayerNorm (pre-norm layers), or None.
    """

    def __init__(
        self,
        layers: Sequence[DecoderLayer],
        embed: Callable[..., Tensor],
        final_norm: nn.LayerNorm | None = None,
    ):
        self.layers = [layer_weights(layer) for layer in layers]
        self.embed = embed
        self.final_norm = final_norm

    @torch.no_grad()
    def start(self, memory: Sequence[MemoryKeyValues], src_mask: Tensor) -> TokenStepState:
        """The state before the first position, one row per sentence.

        Args:
            memory: per layer, the encoder–decoder keys and values, (B, H, S, Dh) each.
            src_mask: (B, 1, 1, S) bool, True = attend.
        """
        b, h, s, dh = memory[0].keys.shape
        span = max(s, MIN_SOFTMAX_SPAN)
        dtype, device = memory[0].keys.dtype, memory[0].keys.device
        attend = F.pad(src_mask.reshape(b, 1, 1, s), (0, span - s), value=False)  # (B,1,1,Sp)
        bias = additive_mask(attend, device).expand(b, h, 1, span)  # float32 (B,H,1,Sp)
        future = torch.full((MIN_SOFTMAX_SPAN, MIN_SOFTMAX_SPAN), float("-inf"), device=device)
        buffers = [
            torch.zeros(b, h, MIN_SOFTMAX_SPAN, dh, dtype=dtype, device=device) for _ in memory
        ]
        return TokenStepState(
            keys=tuple(buffers),
            values=tuple(torch.zeros_like(k) for k in buffers),
            length=0,
            written=_Written(0),
            memory_keys=tuple(
                F.pad(kv.keys.transpose(2, 3), (0, span - s)) for kv in memory
            ),  # (B, H, Dh, Sp) each, contiguous: transposed and padded in one copy
            memory_values=tuple(F.pad(kv.values, (0, 0, 0, span - s)) for kv in memory),
            memory_bias=bias.reshape(b * h, 1, span),  # (B·H, 1, Sp)
            span_bias=future.triu(diagonal=1).view(MIN_SOFTMAX_SPAN, 1, 1, MIN_SOFTMAX_SPAN),
            rows_per_sentence=1,
        )

    @torch.no_grad()
    def step(self, tokens: Tensor, state: TokenStepState) -> tuple[Tensor, TokenStepState]:
        """Feed each row's newest token (N, 1); return the (N, D) final decoder states and
        the state one position longer."""
        n, length = tokens.size(0), state.length
        state = _writable(state)
        x = self.embed(tokens, offset=length).view(n, -1)  # (N, D)
        if length + 1 < MIN_SOFTMAX_SPAN:
            self_bias = state.span_bias[length]  # (1, 1, MIN_SOFTMAX_SPAN)
        else:
            self_bias = state.span_bias.new_zeros(1, 1, 1)
        for i, layer in enumerate(self.layers):
            attn, cross, ffn = layer.connections
            h = self._self_attention(layer, attn.sublayer_input(x), state, i, self_bias)
            x = attn.add(x, h)
            x = cross.add(x, self._cross_attention(layer, cross.sublayer_input(x), state, i))
            x = ffn.add(x, layer.w_2(layer.activation(layer.w_1(ffn.sublayer_input(x)))))
        if self.final_norm is not None:
            x = self.final_norm(x)
        state.written.length = length + 1
        return x, replace(state, length=length + 1)

    @torch.no_grad()
    def reorder(
        self, state: TokenStepState, index: Tensor, *, sentences: Tensor | None = None
    ) -> TokenStepState:
        """Rows ``index`` (N',); with ``sentences`` (B',), only those sentences remain, in
        that order (``aiayn.decode.StepDecoder.reorder``)."""
        length = state.length
        head_rows = _head_rows(index, state.keys[0].size(1))  # (N'·H,)
        keys = tuple(_selected(k, head_rows, length) for k in state.keys)
        values = tuple(_selected(v, head_rows, length) for v in state.values)
        memory_keys, memory_values, memory_bias = (
            state.memory_keys,
            state.memory_values,
            state.memory_bias,
        )
        if sentences is not None:
            memory_keys = tuple(k.index_select(0, sentences) for k in memory_keys)
            memory_values = tuple(v.index_select(0, sentences) for v in memory_values)
            _, h, _, span = state.memory_keys[0].shape
            grouped = state.memory_bias.view(-1, h, 1, span)  # (B, H, 1, Sp)
            memory_bias = grouped.index_select(0, sentences).view(-1, 1, span)  # (B'·H, 1, Sp)
        return replace(
            state,
            keys=keys,
            values=values,
            written=_Written(length),
            memory_keys=memory_keys,
            memory_values=memory_values,
            memory_bias=memory_bias,
            rows_per_sentence=len(index) // memory_keys[0].size(0),
        )

    def _self_attention(
        self, layer: LayerWeights, x: Tensor, state: TokenStepState, i: int, bias: Tensor
    ) -> Tensor:
        """Masked self-attention (§3.2.3) of each row's new position over positions 0 .. L."""
        n, d = x.shape
        h, length = layer.heads, state.length
        keys, values = state.keys[i], state.values[i]  # (N, H, C, Dh) each
        qkv = layer.qkv(x).view(n, 3, h, d // h)  # (N, 3, H, Dh)
        keys[:, :, length] = qkv[:, 1]
        values[:, :, length] = qkv[:, 2]
        span = max(length + 1, MIN_SOFTMAX_SPAN)
        q = qkv[:, 0].reshape(n * h, 1, d // h)  # (N·H, 1, Dh)
        k = keys.view(n * h, -1, d // h)[:, :span]  # (N·H, span, Dh)
        v = values.view(n * h, -1, d // h)[:, :span]  # (N·H, span, Dh)
        out, _ = biased_attention(q, k.transpose(1, 2), v, bias)  # (N·H, 1, Dh)
        return layer.self_out(out.view(n, d))

    def _cross_attention(
        self, layer: LayerWeights, x: Tensor, state: TokenStepState, i: int
    ) -> Tensor:
        """Encoder–decoder attention (§3.2.3): the W rows of a sentence query its memory in
        one product."""
        n, d = x.shape
        h, w = layer.heads, state.rows_per_sentence
        b, dh = n // w, d // h
        q = layer.query(x)  # (N, D)
        if w == 1:
            q = q.view(b * h, 1, dh)  # (B·H, 1, Dh)
        else:
            q = q.view(b, w, h, dh).transpose(1, 2).reshape(b * h, w, dh)  # (B·H, W, Dh)
        keys = state.memory_keys[i].view(b * h, dh, -1)  # (B·H, Dh, Sp)
        values = state.memory_values[i].view(b * h, -1, dh)  # (B·H, Sp, Dh)
        out, _ = biased_attention(q, keys, values, state.memory_bias)  # (B·H, W, Dh)
        if w > 1:
            out = out.view(b, h, w, dh).transpose(1, 2)  # (B, W, H, Dh)
        return layer.cross_out(out.reshape(n, d))


def _writable(state: TokenStepState) -> TokenStepState:
    """The state with buffers it may write position L into: its own if no other state has
    written there and they have room, else copies (twice the room when full)."""
    length, capacity = state.length, state.keys[0].size(2)
    if state.written.length == length and length < capacity:
        return state
    capacity = 2 * capacity if length == capacity else capacity

    def copied(buffer: Tensor) -> Tensor:
        n, h, _, dh = buffer.shape
        copy = buffer.new_zeros(n, h, capacity, dh)  # (N, H, C', Dh)
        copy[:, :, :length] = buffer[:, :, :length]
        return copy

    return replace(
        state,
        keys=tuple(copied(k) for k in state.keys),
        values=tuple(copied(v) for v in state.values),
        written=_Written(length),
    )


def _head_rows(index: Tensor, heads: int) -> Tensor:
    """(N',) rows -> (N'·H,) the rows of a buffer seen as (N·H, C·Dh): one per row and head."""
    return (index[:, None] * heads + torch.arange(heads, device=index.device)).view(-1)


def _selected(buffer: Tensor, head_rows: Tensor, length: int) -> Tensor:
    """Rows ``head_rows`` (``_head_rows``) of a (N, H, C, Dh) buffer's first L positions,
    in a new buffer with room for exactly one more position (so the next step reads it
    whole: contiguous), at least MIN_SOFTMAX_SPAN, whose positions L .. MIN_SOFTMAX_SPAN-1
    are zero (read, masked, by short rows). Selected as rows of 2-D views: PyTorch's fast
    path, 39 vs 68 µs through the 4-D views (320 rows of 20 positions, 4 × 32)."""
    n, h, capacity, dh = buffer.shape
    room = max(length + 1, MIN_SOFTMAX_SPAN)
    out = buffer.new_empty(len(head_rows) // h, h, room, dh)  # (N', H, C', Dh)
    written = buffer.view(n * h, capacity * dh)[:, : length * dh]  # (N·H, L·Dh)
    torch.index_select(written, 0, head_rows, out=out.view(-1, room * dh)[:, : length * dh])
    if length < MIN_SOFTMAX_SPAN:
        out[:, :, length:MIN_SOFTMAX_SPAN].zero_()
    return out
