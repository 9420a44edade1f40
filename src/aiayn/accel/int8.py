"""Linear maps in int8 for decoding on CPU: weights quantised once per output channel,
activations quantised at every call (dynamic), products in PyTorch's quantised kernels.

Replaces every ``nn.Linear`` of a model (the encoder's, the decoder's, the memory
projections and the output projection), in a copy used only for decoding
(``quantized_for_decoding``, chosen by precision ``int8`` in ``aiayn.accel.stepper``); the
model itself is left as it is, its float32 weights shared, not copied.

Why: a decoding step multiplies few rows by every weight matrix, so its products are bound
by reading the weights and by the multiply units: int8 weights are a quarter of float32's,
and x86's integer dot products (AVX2's ``vpmaddubsw``, AVX512-VNNI's ``vpdpbusd``) do four
times the multiplies of a float32 FMA per instruction. This is CTranslate2's ``int8``
(what Argos Translate and LibreTranslate run): symmetric int8 weights with one scale per
output row, activations quantised per call, here to unsigned 8 bits with a zero point, and
int32 sums scaled back to float32 with the bias added, all in one PyTorch call per map
(``torch.ops.quantized.linear_dynamic``, the kernels of ``torch.ao``'s dynamic
quantisation: FBGEMM or oneDNN, whichever ``torch.backends.quantized.engine`` names; the
default ``x86`` picks per shape). Measured against it, ``torch._int_mm`` with the
quantisation written in PyTorch calls was 1.1-1.5x slower with VNNI, 1.6-2.7x without.

Without VNNI (AVX2 only), ``vpmaddubsw`` adds two u8 × s8 products into a saturating
16-bit sum: activations are then quantised to 7 bits (``reduce_range``), as ``torch.ao``
does on such CPUs, so no sum can overflow.

Measured (2-core AMD EPYC, one thread, CPU time, 64 rows × 512 → 1536): packed float32
943 µs, int8 274 µs; with the kernels held to AVX2 (``ONEDNN_MAX_CPU_ISA=AVX2``,
``FBGEMM_ENABLE_INSTRUCTIONS=AVX2``) 1,699 vs 576 µs, relative error ~1.5e-2 of the largest
output (0.1 with 8-bit activations there). Whole decoding, beside CTranslate2's int8:
``python bench/decode.py --sizes tiny base marian --precisions fp32 int8``.

Shapes: N rows, I input features, O output features.
"""

from __future__ import annotations

import copy
import functools
import os
import warnings

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from aiayn.errors import AiaynError


class Int8Error(AiaynError, ValueError):
    """int8 decoding asked for where it cannot run."""


@functools.cache
def int8_available() -> bool:
    """Whether this PyTorch has quantised CPU kernels that compute ``F.linear`` from int8
    weights (``torch.ops.quantized``'s ``linear_prepack`` and ``linear_dynamic``): probed
    once, on a small weight. Any failure, a missing operator included, is a no."""
    g = torch.Generator().manual_seed(0)
    weight, bias, x = (torch.randn(shape, generator=g) for shape in ((24, 16), (24,), (3, 16)))
    try:
        out = _product(x, _packed(weight, bias), reduce_range=reduces_range())
        return bool(torch.allclose(out, F.linear(x, weight, bias), atol=0.1, rtol=0.05))
    except Exception:  # private operators: any failure means no int8 here
        return False


# FBGEMM_ENABLE_INSTRUCTIONS values that hold FBGEMM's kernels to an instruction set
# without VNNI (FBGEMM's fbgemmInstructionSet; ``bench/decode.py --isa avx2`` sets AVX2)
NO_VNNI_KERNELS = {"AVX2", "AVX512", "AVX512_256"}


@functools.cache
def reduces_range() -> bool:
    """Whether activations are quantised to 7 bits: on x86 CPUs without VNNI, whose 8-bit
    products add in pairs into a saturating 16-bit sum, and where FBGEMM is told to use
    kernels without it (``FBGEMM_ENABLE_INSTRUCTIONS``)."""
    vnni = getattr(torch.cpu, "_is_vnni_supported", lambda: False)
    held = os.environ.get("FBGEMM_ENABLE_INSTRUCTIONS", "").upper() in NO_VNNI_KERNELS
    return held or not vnni()


def weight_scales(weight: Tensor) -> Tensor:
    """(O, I) float weight -> (O,) float64 scales: each row's largest magnitude maps to 127
    (symmetric, zero point 0; an all-zero row gets a tiny scale)."""
    return (weight.detach().abs().amax(dim=1).clamp(min=1e-12) / 127).double()


def _packed(weight: Tensor, bias: Tensor | None):
    """The weight quantised per output channel and packed for the engine (a TorchScript
    object holding the bias too)."""
    scales = weight_scales(weight)
    zero_points = torch.zeros(weight.size(0), dtype=torch.long)
    with warnings.catch_warnings():  # quantised tensors are deprecated; the kernels are not
        warnings.simplefilter("ignore", UserWarning)
        quantized = torch.quantize_per_channel(
            weight.detach().float(), scales, zero_points, 0, torch.qint8
        )  # (O, I) qint8
    return torch.ops.quantized.linear_prepack(
        quantized, None if bias is None else bias.detach().float()
    )


def _product(x: Tensor, packed, *, reduce_range: bool) -> Tensor:
    """(N, I) float32 -> (N, O) float32 through the packed int8 weight."""
    return torch.ops.quantized.linear_dynamic(x, packed, reduce_range)


class Int8Linear(nn.Module):
    """``y = x Wᵀ + b`` with W in int8 (one scale per output row, a snapshot taken at
    construction) and x quantised at each call; float32 in and out.

    ``weight`` and ``bias`` stay the original float32 parameters (shared, not copied), so
    that code reading a layer's parameters still finds them.
    """

    def __init__(self, linear: nn.Linear):
        super().__init__()
        self.weight = linear.weight  # (O, I)
        self.bias = linear.bias  # (O,) or None
        self.packed = _packed(linear.weight, linear.bias)
        self.reduce_range = reduces_range()

    def forward(self, x: Tensor) -> Tensor:
        """(..., I) -> (..., O)."""
        flat = x.reshape(-1, x.size(-1)).float()  # (N, I)
        out = _product(flat, self.packed, reduce_range=self.reduce_range)  # (N, O)
        return out.view(*x.shape[:-1], out.size(-1))  # (..., O)


def quantized_for_decoding(model: nn.Module) -> nn.Module:
    """A copy of ``model`` (in eval mode) whose ``nn.Linear`` layers are ``Int8Linear``.

    Every parameter and buffer is shared with ``model``, not copied; only the int8 weights
    are new. The copy is a snapshot: make a new one after the weights change.

    Raises:
        Int8Error: the model is not on the CPU, or this PyTorch has no quantised CPU kernels.
    """
    device = next(model.parameters()).device
    if device.type != "cpu":
        raise Int8Error(
            f"precision int8 decodes on the CPU only (PyTorch's quantised CPU kernels); "
            f"the model is on {device}: use fp32 or bf16 there"
        )
    if not int8_available():
        raise Int8Error(
            "precision int8 needs PyTorch's quantised CPU kernels (FBGEMM or oneDNN), which "
            "this PyTorch build lacks: use fp32"
        )
    shared = {id(t): t for t in [*model.parameters(), *model.buffers()]}
    twin = copy.deepcopy(model, memo=shared)
    linears = [
        (module, name, child)
        for module in twin.modules()
        for name, child in module.named_children()
        if type(child) is nn.Linear
    ]
    for module, name, child in linears:
        setattr(module, name, Int8Linear(child))
    return twin.eval()
