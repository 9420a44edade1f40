"""Linear maps with their weights packed once for oneDNN, for decoding on CPU.

Replaces the large ``nn.Linear`` layers of a model, in a copy used only for decoding
(``packed_for_decoding``); the model itself is left as it is.

Why: a decoding step multiplies a few rows by every weight matrix of the decoder. PyTorch's
default CPU path (MKL's sgemm) re-packs the weight at every call, and under bfloat16
autocast also casts every weight to bfloat16 again at every call (autocast's cast cache is
off in ``torch.inference_mode``). Packing each weight once into oneDNN's blocked layout, in
the dtype it is multiplied in, removes both: what ``torch.compile`` does for frozen CPU
models, without compiling anything. Where it pays is decided by what was measured:

- oneDNN builds a kernel for every row count it meets, and a decoding process keeps only
  the latest 64 (``aiayn.memory``): a row count not kept costs ~300 µs per call. So rows
  are padded to few distinct counts (``padded_rows``).
- Small weights multiply as fast through MKL unpacked, and bfloat16 loses its gain to the
  casts: only weights of ``MIN_PACKED_WEIGHT`` elements or more are packed, and a small map
  once its product is large (``PackedFromRows``: rows × weight elements of at least
  ``MIN_PACKED_PRODUCT``, e.g. a beam search's rows).
- Where a map multiplies whole sentences at once (``many_rows``: the encoder, the decoder's
  memory projections), every map is packed.

When every linear map of the model is packed, their outputs stay in the packed dtype, as
under autocast (attention products then run in bfloat16 too, which pays at base size).
When small maps stay float32, packed maps return float32, so that the two never meet in one
product and the rest of a step (attention, softmax, layer norm) stays in float32. The
result equals ``F.linear`` in the packed dtype up to the order of summation.

Measured: the trained tiny model translates test2016 greedily at 1,412 → 1,762 sentences/s
(fp32) with the encoder packed: ``bench/decode.py --model``.

Shapes: N rows, I input features, O output features.
"""

from __future__ import annotations

import copy
import functools

import torch
import torch.nn.functional as F
from torch import Tensor, nn


@functools.cache
def onednn_available() -> bool:
    """Whether this PyTorch's private oneDNN operators (``torch.ops.mkldnn``'s
    ``_reorder_linear_weight`` and ``_linear_pointwise``) exist and compute ``F.linear``:
    probed once, on a small weight. When they do not, nothing is packed (``can_pack``) and
    decoding keeps the plain ``nn.Linear`` maps."""
    return torch.backends.mkldnn.is_available() and probe_onednn(torch.ops.mkldnn)


def probe_onednn(ops) -> bool:
    """Whether ``ops`` (``torch.ops.mkldnn``) packs a weight and multiplies by it as
    ``F.linear`` does; any error, a missing operator included, is a no."""
    g = torch.Generator().manual_seed(0)
    weight, bias, x = (torch.randn(shape, generator=g) for shape in ((24, 16), (24,), (3, 16)))
    try:
        packed = ops._reorder_linear_weight(weight, None)  # (24, 16), blocked
        out = ops._linear_pointwise(x, packed, bias, "none", [], "")  # (3, 24)
        return bool(torch.allclose(out, F.linear(x, weight, bias), atol=1e-4, rtol=1e-4))
    except Exception:  # a private API: any failure means the plain path
        return False


@functools.cache
def packs_bfloat16() -> bool:
    """Whether oneDNN packs bfloat16 weights on this CPU: it refuses without AVX512-BW/VL/DQ
    or AVX-NE-CONVERT (e.g. on an AVX2-only CPU), so it is asked once with a small weight."""
    if not onednn_available():
        return False
    try:
        torch.ops.mkldnn._reorder_linear_weight(torch.zeros(16, 16, dtype=torch.bfloat16), None)
    except RuntimeError:
        return False
    return True


def can_pack(model: nn.Module, dtype: torch.dtype = torch.float32) -> bool:
    """Whether ``packed_for_decoding`` applies in ``dtype``: float32 weights on the CPU, and
    oneDNN (able to pack ``dtype`` on this CPU)."""
    weight = next(model.parameters())
    return (
        weight.device.type == "cpu"
        and weight.dtype == torch.float32
        and onednn_available()
        and (dtype != torch.bfloat16 or packs_bfloat16())
    )


EXACT_ROWS = 8  # up to this many rows (a sentence, its beams), packed maps compute them as they are
ROWS_MULTIPLE = 8  # above, a multiple of this many rows (of more past 128: ``padded_rows``)
MIN_PACKED_WEIGHT = 1 << 17  # weights of fewer elements stay ``nn.Linear`` (MKL's sgemm)
MIN_PACKED_PRODUCT = 1 << 22  # ... until rows × weight elements reach this (``PackedFromRows``)


def padded_rows(n: int) -> int:
    """The row count a packed map computes for ``n`` rows: ``n`` itself up to 8 rows (one
    sentence's beams: padding them to 16 costs 2-3x, e.g. 216 vs 76 µs for one row through
    10,000 × 128), then ``n`` rounded up to a multiple of 8, or past 128 rows of a sixteenth
    of the power of two at or above ``n``. At most 7 or 1/8 more rows; eight row counts
    per doubling of ``n``."""
    if n <= EXACT_ROWS:
        return n
    multiple = max(ROWS_MULTIPLE, 1 << ((n - 1).bit_length() - 4))
    return -(-n // multiple) * multiple


class PackedLinear(nn.Module):
    """``y = x Wᵀ + b`` computed in ``dtype`` with W packed for oneDNN: a snapshot of the
    weight, taken at construction. The input is cast to ``dtype`` and padded to
    ``padded_rows``; the output comes back without the padding, in ``out_dtype`` (None:
    the input's dtype).

    ``weight`` and ``bias`` stay the original float32 parameters (shared, not copied), so
    that code reading them, and autocast, still work: under autocast the product defers to
    ``F.linear`` on them, which autocast then runs in its own precision.
    """

    def __init__(
        self,
        linear: nn.Linear,
        dtype: torch.dtype = torch.float32,
        *,
        out_dtype: torch.dtype | None = None,
    ):
        super().__init__()
        self.weight = linear.weight  # (O, I)
        self.bias = linear.bias  # (O,) or None
        self.dtype = dtype
        self.out_dtype = out_dtype
        weight = linear.weight.detach().to(dtype)
        self.packed = torch.ops.mkldnn._reorder_linear_weight(weight, None)  # (O, I), blocked
        self.packed_bias = None if linear.bias is None else linear.bias.detach().to(dtype)

    def forward(self, x: Tensor) -> Tensor:
        """(..., I) -> (..., O)."""
        if torch.is_autocast_enabled(x.device.type):
            return F.linear(x, self.weight, self.bias)
        flat = x.reshape(-1, x.size(-1)).to(self.dtype)  # (N, I)
        n = flat.size(0)
        padded = padded_rows(n)
        if padded > n:
            flat = F.pad(flat, (0, 0, 0, padded - n))  # (N', I), N' > N
        out = torch.ops.mkldnn._linear_pointwise(
            flat, self.packed, self.packed_bias, "none", [], ""
        )  # (N', O)
        out = out[:n].to(self.out_dtype or x.dtype)  # (N, O)
        return out.view(*x.shape[:-1], out.size(-1))  # (..., O)


class PackedFromRows(nn.Module):
    """A small map that multiplies as ``nn.Linear`` (MKL's sgemm) below ``min_rows`` rows
    and through its weight packed in ``dtype`` (``PackedLinear``, float32 out) from there:
    oneDNN's fixed cost per call (~20 µs here) pays once a product is large enough. The
    crossover, measured here (2-core AMD Zen 5, bfloat16): 384 × 128 at ~64 rows, 256 × 128
    at ~160, 128 × 128 at ~300, i.e. about ``MIN_PACKED_PRODUCT`` rows × weight elements.
    """

    def __init__(self, linear: nn.Linear, dtype: torch.dtype, min_product: int):
        super().__init__()
        self.linear = linear
        self.packed = PackedLinear(linear, dtype, out_dtype=torch.float32)
        self.min_rows = -(-min_product // linear.weight.numel())

    def packs(self, rows: int) -> bool:
        """Whether ``rows`` rows multiply through the packed weight."""
        return rows >= self.min_rows

    def forward(self, x: Tensor) -> Tensor:
        """(..., I) -> (..., O)."""
        if not self.packs(x.numel() // x.size(-1)):
            return self.linear(x)
        return self.packed(x)


def packed_for_decoding(
    model: nn.Module,
    dtype: torch.dtype = torch.float32,
    *,
    min_weight: int = MIN_PACKED_WEIGHT,
    many_rows: tuple[str, ...] = (),
    min_product: int | None = None,
) -> nn.Module:
    """A copy of ``model`` whose ``nn.Linear`` layers of at least ``min_weight`` weight
    elements are ``PackedLinear`` in ``dtype``, and every one within the submodules named in
    ``many_rows`` (qualified names, e.g. ``"encoder"``): maps that multiply many rows at
    once, whole sentences rather than one position per row, where packing pays at any
    weight size (measured: this module's docstring). Other maps stay as they are (float32),
    or with ``min_product`` become ``PackedFromRows``: packed once rows × weight elements
    reach it.

    Every parameter and buffer is shared with ``model``, not copied; only the packed
    weights are new. The copy is a snapshot: make a new one after the weights change.
    With ``bfloat16``, the packed maps multiply in bfloat16 without casting any weight
    again. If every map is packed, the copy computes what the model computes under
    bfloat16 autocast; otherwise packed maps return float32 and the rest runs in float32.
    """
    shared = {id(t): t for t in [*model.parameters(), *model.buffers()]}
    twin = copy.deepcopy(model, memo=shared)
    linears = [
        (module, name, child, f"{prefix}.{name}".lstrip("."))
        for prefix, module in twin.named_modules()
        for name, child in module.named_children()
        if isinstance(child, nn.Linear)
    ]
    packed = [
        (module, name, child)
        for module, name, child, qualified in linears
        if child.weight.numel() >= min_weight or _within(qualified, many_rows)
    ]
    out_dtype = dtype if len(packed) == len(linears) else None
    for module, name, child in packed:
        setattr(module, name, PackedLinear(child, dtype, out_dtype=out_dtype))
    if min_product is not None:
        for module, name, child, _ in linears:
            if type(getattr(module, name)) is nn.Linear:
                setattr(module, name, PackedFromRows(child, dtype, min_product))
    return twin.eval()


def _within(qualified: str, names: tuple[str, ...]) -> bool:
    """Whether the module named ``qualified`` is one of ``names`` or inside one."""
    return any(qualified == name or qualified.startswith(f"{name}.") for name in names)
