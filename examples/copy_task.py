"""Train a tiny Transformer to copy its input, the Annotated Transformer's first exercise.

    python examples/copy_task.py

Takes about ten seconds on two CPU cores and prints a few decoded examples.
"""

from __future__ import annotations

import torch
from torch import nn

from aiayn.config import BOS_ID, EOS_ID, ModelConfig
from aiayn.decode import greedy_decode
from aiayn.models import build_model

VOCAB = 14  # 4 special ids + 10 symbols
LENGTH = 8


CONFIG = ModelConfig(
    src_vocab_size=VOCAB,
    tgt_vocab_size=VOCAB,
    d_model=64,
    n_heads=4,
    d_ff=128,
    n_encoder_layers=2,
    n_decoder_layers=2,
    dropout=0.0,
)


def batch(n: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    src = torch.randint(4, VOCAB, (n, LENGTH), generator=g)
    tgt_in = torch.cat([torch.full((n, 1), BOS_ID), src], dim=1)
    tgt_out = torch.cat([src, torch.full((n, 1), EOS_ID)], dim=1)
    return src, tgt_in, tgt_out


def train(steps: int = 400, log_every: int = 100) -> nn.Module:
    """Train a 2+2-layer model on random sequences; return it in eval mode."""
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    model = build_model(CONFIG)
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3, betas=(0.9, 0.98), eps=1e-9)
    # Linear warm-up over 100 steps, then linear decay to zero: the copy converges exactly.
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min((step + 1) / 100, (steps - step) / (steps - 100))
    )
    model.train()
    for step in range(1, steps + 1):
        src, tgt_in, tgt_out = batch(64, g)
        loss = nn.functional.cross_entropy(model(src, tgt_in).flatten(0, 1), tgt_out.flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        if log_every and step % log_every == 0:
            print(f"step {step:4d}  loss {loss.item():.4f}")
    return model.eval()


def evaluate(model: nn.Module, n: int = 200) -> tuple[float, torch.Tensor, torch.Tensor]:
    """Exact-copy accuracy of greedy decoding on ``n`` unseen sequences, and the sequences."""
    src, _, tgt_out = batch(n, torch.Generator().manual_seed(2))
    out = greedy_decode(model, src, max_len=LENGTH + 1)
    return (out == tgt_out).all(dim=1).float().mean().item(), src, out


def main() -> None:
    accuracy, src, out = evaluate(train())
    print(f"exact-copy accuracy on 200 new sequences: {accuracy:.1%}")
    for row in range(3):
        print(f"  in  {src[row].tolist()}\n  out {out[row, :LENGTH].tolist()}")


if __name__ == "__main__":
    main()
