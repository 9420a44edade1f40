# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # The paper in aiayn's code: the notebook
#
# The walkthrough of [the paper in aiayn's code](paper.md), as code to run: §3.1–3.5, §5
# and §6 of "Attention Is All You Need" through aiayn's own modules, with the tensor shapes
# at each step checked as they are printed. It trains a small model on the copy task and
# draws all three of its attentions; its exercises break one piece of the paper at a time and
# check what happens. It runs on two CPU cores in under three minutes, as a script or in
# Jupyter (`docs/tutorial/tutorial.ipynb` is this file as a notebook), with aiayn installed
# and nothing of its extras.
#
# In Jupyter each picture shows under its cell; with `$AIAYN_FIGURES` set, each is also written
# there (the documentation's build runs this notebook to draw the tutorial's pictures).
#
# Shapes: B batch, S source length, T target length, D d_model, H heads, Dh = D / H, V
# vocabulary.

# %%
import dataclasses
import math
import os
from pathlib import Path

import torch
from torch import nn

from aiayn import ModelConfig, build_model, masks
from aiayn.accel import REFERENCE
from aiayn.config import BOS_ID, EOS_ID, PAD_ID
from aiayn.decode import beam_search, greedy_decode, stepper_for
from aiayn.modules.attention import merge_heads, scaled_dot_product_attention, split_heads
from aiayn.train import label_smoothed_nll, noam_lr
from aiayn.viz import (
    architecture_figure,
    attention_figure,
    attention_plot_data,
    masks_figure,
    positional_figure,
    save_figure,
    schedule_figure,
    smoothed_target,
    smoothing_figure,
)

FIGURES = os.environ.get("AIAYN_FIGURES")  # where the pictures are also written, if anywhere


def show(figure, name: str) -> None:
    """The figure, shown under the cell in Jupyter; written to $AIAYN_FIGURES/name if set."""
    if FIGURES:
        save_figure(figure, Path(FIGURES) / name, close=False)


torch.manual_seed(0)
torch.set_num_threads(1)  # a small model: one thread is as fast, and fair to a busy machine

# %% [markdown]
# ## §3.1 A model: encoder and decoder stacks
#
# A configuration uses the paper's names; `build_model` is the one place a configuration
# becomes modules. `profile="reference"` is the paper's plain code, without the speed
# tricks of `aiayn.accel`.

# %%
VOCAB = 14  # 4 special ids (pad 0, unk 1, <s> 2, </s> 3) and 10 symbols
cfg = ModelConfig(
    src_vocab_size=VOCAB,
    tgt_vocab_size=VOCAB,
    d_model=64,  # d_model
    n_heads=4,  # h
    d_ff=128,  # d_ff
    n_encoder_layers=2,  # N
    n_decoder_layers=2,
    dropout=0.0,  # P_drop
)
model = build_model(cfg, profile="reference")
D, H = cfg.d_model, cfg.n_heads
print(f"{sum(p.numel() for p in model.parameters()):,} parameters")
show(architecture_figure(model), "figure1.png")  # Figure 1, from the modules

# Two source sentences, the second padded; the targets start with <s>.
src = torch.tensor([[5, 6, 7, 8, 9, EOS_ID], [5, 6, 7, EOS_ID, PAD_ID, PAD_ID]])  # (B, S)
tgt = torch.tensor([[BOS_ID, 5, 6, 7, 8, 9], [BOS_ID, 5, 6, 7, PAD_ID, PAD_ID]])  # (B, T)
B, S = src.shape
T = tgt.size(1)

# %% [markdown]
# ## §3.2.3 Masks
#
# Every mask is bool, True = attend, built in `aiayn.masks`: the source padding mask serves
# the encoder's self-attention and the encoder–decoder attention; the decoder's is also
# causal.

# %%
src_mask = masks.padding_mask(src, PAD_ID)
tgt_mask = masks.decoder_self_mask(tgt, PAD_ID)
assert src_mask.shape == (B, 1, 1, S) and tgt_mask.shape == (B, 1, T, T)
print("source mask", tuple(src_mask.shape), "target mask", tuple(tgt_mask.shape))
show(masks_figure(src, tgt, pad_id=PAD_ID), "masks.png")

# %% [markdown]
# ## §3.4 Embeddings, §3.5 positional encoding
#
# Token embeddings times √d_model, plus the sinusoids of each position.

# %%
x = model.src_embed(src)
assert x.shape == (B, S, D)
print("embedded source", tuple(x.shape))
show(positional_figure(d_model=D, length=50), "positional.png")

# %% [markdown]
# ## §3.2.1–3.2.2 Scaled dot-product attention, many heads
#
# The first encoder layer's self-attention, step by step: one projection gives Q, K and V,
# the heads are split off, each attends, and the heads are concatenated again.

# %%
attention = model.encoder.layers[0].self_attn
qkv = attention.qkv_proj(x).view(B, S, 3, D)  # (B, S, 3, D)
q, k, v = (split_heads(qkv[:, :, i], H) for i in range(3))
assert q.shape == (B, H, S, D // H)
out, weights = scaled_dot_product_attention(q, k, v, mask=src_mask, need_weights=True)
assert out.shape == (B, H, S, D // H) and weights.shape == (B, H, S, S)
assert torch.allclose(weights.sum(-1), torch.ones(B, H, S))  # each query's weights sum to 1
assert (weights[1, :, :, 4:] == 0).all()  # nothing attends the padding
heads = merge_heads(out)
assert heads.shape == (B, S, D)
print("q", tuple(q.shape), "weights", tuple(weights.shape), "heads merged", tuple(heads.shape))

# %% [markdown]
# ## §3.3 Position-wise feed-forward networks, and the whole stacks
#
# The encoder turns the source into memory; the decoder reads its own past (causally) and the
# memory; the output projection gives a distribution over the vocabulary at every position.

# %%
ffn = model.encoder.layers[0].ffn
assert ffn(heads).shape == (B, S, D)
memory = model.encode(src)
logits = model(src, tgt)
assert memory.shape == (B, S, D) and logits.shape == (B, T, VOCAB)
print("memory", tuple(memory.shape), "logits", tuple(logits.shape))

# %% [markdown]
# Decoding one position at a time reuses the keys and values of the positions before it: the
# cache is a value, passed in and returned. Step by step, the decoder computes what it
# computes on the whole target at once.

# %%
cache = model.start_cache(memory)
steps = []
for t in range(T):
    hidden, cache = model.decode(tgt[:, t : t + 1], model.source_mask(src), cache=cache)
    steps.append(model.logits(hidden))  # (B, 1, V)
cached = torch.cat(steps, dim=1)  # (B, T, V)
real = tgt != PAD_ID
assert torch.allclose(cached[real], logits[real], atol=1e-5)
print("cached decoding == whole-target decoding at every real position")

# %% [markdown]
# ## §5.3 The learning rate, §5.4 label smoothing
#
# The paper's schedule rises linearly for `warmup_steps` updates, then falls with the inverse
# square root of the step; fairseq's `inverse_sqrt` has the same shape with an explicit peak.
# Label smoothing trains the softmax towards 1 − ε_ls + ε_ls / V on the reference and
# ε_ls / V on every other token, read here from the loss's own gradient.

# %%
show(schedule_figure(), "schedules.png")
peak = noam_lr(4000, d_model=512, warmup_steps=4000)
assert math.isclose(peak, 512**-0.5 * 4000**-0.5)  # the top: step = warmup_steps
rising, falling = (noam_lr(s, d_model=512, warmup_steps=4000) for s in (2000, 8000))
assert rising < peak and falling < peak
target = smoothed_target(VOCAB, 5, 0.1)  # (V,)
assert math.isclose(target[5].item(), 0.9 + 0.1 / VOCAB, rel_tol=1e-5)
assert math.isclose(target[0].item(), 0.1 / VOCAB, rel_tol=1e-4)
show(smoothing_figure(vocab_size=VOCAB, target=5, epsilon=0.1), "smoothing.png")
print(f"peak lr {peak:.6f}; smoothed target {target[5]:.4f} on the reference, {target[0]:.4f} else")

# %% [markdown]
# ## §5 Training: the copy task
#
# The Annotated Transformer's first exercise: copy a random sequence. Adam with the paper's
# β and ε, the paper's learning rate schedule (§5.3, eq. 3; scaled down for this small
# model), label smoothing (§5.4).

# %%
LENGTH = 8


def copy_batch(n: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random sequences (n, LENGTH), the decoder's inputs and its targets (n, LENGTH + 1)."""
    seq = torch.randint(4, VOCAB, (n, LENGTH), generator=g)
    tgt_in = torch.cat([torch.full((n, 1), BOS_ID), seq], dim=1)
    tgt_out = torch.cat([seq, torch.full((n, 1), EOS_ID)], dim=1)
    return seq, tgt_in, tgt_out


STEPS, WARMUP = 300, 100
EXERCISE_STEPS = 200  # enough for each exercise to show its outcome


# --8<-- [start:train_copy]
def train_copy(model: nn.Module, *, causal: bool = True, steps: int = STEPS) -> float:
    """Train ``model`` on copies; its last batch's NLL per token. ``causal=False`` trains
    the decoder without the causal mask (an exercise below)."""
    optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda i: noam_lr(i + 1, d_model=D, warmup_steps=WARMUP, scale=0.2)
    )
    g = torch.Generator().manual_seed(1)
    model.train()
    for step in range(1, steps + 1):
        seq, tgt_in, tgt_out = copy_batch(64, g)
        if causal:
            tgt_mask = masks.decoder_self_mask(tgt_in, PAD_ID)  # (B, 1, T, T)
        else:
            tgt_mask = masks.padding_mask(tgt_in, PAD_ID)  # (B, 1, 1, T): sees the future
        memory = model.encode(seq)  # (B, S, D)
        hidden = model.decode(
            tgt_in, model.source_mask(seq), memory=memory, tgt_mask=tgt_mask
        ).hidden  # (B, T, D): teacher forcing, every position at once
        loss, nll = label_smoothed_nll(
            hidden.flatten(0, 1), model.output, tgt_out.flatten(), epsilon=0.1
        )
        optimizer.zero_grad()
        (loss / tgt_out.numel()).backward()
        optimizer.step()
        schedule.step()
        if step % 100 == 0:
            rate, per_token = schedule.get_last_lr()[0], nll.item() / tgt_out.numel()
            print(f"step {step}  lr {rate:.5f}  nll per token {per_token:.4f}")
    model.eval()
    return nll.item() / tgt_out.numel()


# --8<-- [end:train_copy]
def copy_accuracy(model: nn.Module) -> float:
    """Greedy decoding's exact-copy accuracy on 200 sequences it never saw."""
    seq, _, tgt_out = copy_batch(200, torch.Generator().manual_seed(2))
    copies = greedy_decode(model, seq, max_len=LENGTH + 1)  # (200, LENGTH + 1)
    return (copies == tgt_out).all(dim=1).float().mean().item()


trained_nll = train_copy(model)

# %% [markdown]
# ## §6 Decoding: greedy and beam search
#
# Greedy search takes the best token at each step; beam search (§6.1) keeps the best few
# partial outputs, ranked with a length penalty.

# %%
seq, _, tgt_out = copy_batch(200, torch.Generator().manual_seed(2))
accuracy = copy_accuracy(model)
print(f"greedy exact-copy accuracy on 200 new sequences: {accuracy:.1%}")
assert accuracy > 0.9
best = beam_search(stepper_for(model), seq[:4], beam=4, alpha=0.6)
for row, hypotheses in enumerate(best):
    print(seq[row].tolist(), "->", hypotheses[0].tokens)

# %% [markdown]
# ## What the trained model attends to
#
# All three attentions of the trained model, every layer and head, for one new sequence:
# the encoder's self-attention, the decoder's masked self-attention (grey cells are hidden
# by the causal mask) and the encoder–decoder attention, where each output position looks
# at the source position it copies.

# %%
example = seq[0].tolist()
pieces = [str(i) for i in example]
data = attention_plot_data(model, example, example, src_pieces=pieces, tgt_pieces=pieces)
L, S1, T1 = cfg.n_encoder_layers, LENGTH + 1, LENGTH + 1  # with </s> and <s>
assert data.encoder.shape == (L, H, S1, S1) and data.decoder.shape == (L, H, T1, T1)
assert data.cross.shape == (L, H, T1, S1)
assert (data.decoder[:, :, 0, 1:] == 0).all()  # the first position sees only itself
for kind in ("encoder", "decoder", "cross"):
    show(attention_figure(data, kind), f"{kind}_attention.png")
# the copy: in the last layer, some head puts most of output i's weight on source i
diagonal = data.cross[-1][:, range(LENGTH), range(LENGTH)].mean(axis=1)  # (H,)
print("last layer's mean weight on the copied position, per head:", diagonal.round(2))
assert diagonal.max() > 0.5

# %% [markdown]
# ## Exercises
#
# Each exercise takes one piece of the paper away. Guess what happens before you run the
# cell; each cell checks its answer with `assert`.
#
# ### 1. Train without the causal mask
#
# Give the decoder's self-attention the padding mask alone, so that during training each
# position can see the tokens after it.

# %%
# --8<-- [start:exercise_causal]
torch.manual_seed(0)
peeking = build_model(cfg, profile="reference")
peeking_nll = train_copy(peeking, causal=False, steps=EXERCISE_STEPS)
peeking_accuracy = copy_accuracy(peeking)
print(
    f"training NLL {peeking_nll:.3f} (with the mask: {trained_nll:.3f}); "
    f"greedy accuracy {peeking_accuracy:.1%} (with the mask: {accuracy:.1%})"
)
# --8<-- [end:exercise_causal]
assert peeking_nll < 1.5 * trained_nll  # it learns its training batches as well ...
assert peeking_accuracy < 0.3  # ... and fails to copy when it must produce the tokens itself

# %% [markdown]
# ### 2. Train without positional encodings
#
# Replace both sinusoid tables by zeros: attention alone does not see order.


# %%
# --8<-- [start:exercise_positions]
class NoPositions(nn.Module):
    def forward(self, length: int, offset: int = 0) -> torch.Tensor:
        return torch.zeros(length, D)  # (T, D)


torch.manual_seed(0)
orderless = build_model(cfg, profile="reference")
orderless.src_embed.positions = NoPositions()
orderless.tgt_embed.positions = NoPositions()
orderless_nll = train_copy(orderless, steps=EXERCISE_STEPS)
orderless_accuracy = copy_accuracy(orderless)
print(f"training NLL {orderless_nll:.3f}; greedy accuracy {orderless_accuracy:.1%}")
# --8<-- [end:exercise_positions]
assert orderless_nll > 5 * trained_nll and orderless_accuracy < 0.1

# %% [markdown]
# ### 3. Attention without the 1/√d_k scale
#
# Scores of queries and keys whose components have mean 0 and variance 1 have variance d_k
# (§3.2.1, footnote 4): without the scale, large d_k pushes the softmax to put almost all
# weight on one key, where its gradients are tiny.


# %%
# --8<-- [start:exercise_scale]
def unscaled(q, k, v, **options):
    """scaled_dot_product_attention without dividing the scores by √d_k."""
    return scaled_dot_product_attention(q * math.sqrt(q.size(-1)), k, v, **options)


g = torch.Generator().manual_seed(3)
largest = {}  # d_k -> mean largest weight per query, (scaled, unscaled)
for d_k in (16, 64, 512):
    q, k, v = (torch.randn(1, 1, 10, d_k, generator=g) for _ in range(3))  # (B, H, T, Dh)
    _, scaled_w = scaled_dot_product_attention(q, k, v, need_weights=True)
    _, unscaled_w = unscaled(q, k, v, need_weights=True)
    largest[d_k] = (scaled_w.amax(-1).mean().item(), unscaled_w.amax(-1).mean().item())
    print(
        f"d_k {d_k:3d}: largest weight per query {largest[d_k][0]:.2f} scaled, "
        f"{largest[d_k][1]:.2f} unscaled"
    )
torch.manual_seed(0)
no_scale = build_model(cfg, profile=dataclasses.replace(REFERENCE, attention=unscaled))
train_copy(no_scale, steps=EXERCISE_STEPS)
no_scale_accuracy = copy_accuracy(no_scale)
print(f"copy accuracy without the scale, d_k = {D // H}: {no_scale_accuracy:.1%}")
# --8<-- [end:exercise_scale]
assert all(scaled < 0.5 for scaled, _ in largest.values())  # spread over several keys
assert largest[512][1] > 0.8 and largest[512][1] > largest[64][1] > largest[16][1]
assert no_scale_accuracy > 0.9  # at d_k = 16 the copy is still learned

# %%
print("pictures also written to", FIGURES or "nowhere (AIAYN_FIGURES is not set)")
