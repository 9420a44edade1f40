"""Parameter counts per component, each shared tensor counted once."""

from __future__ import annotations

from torch import nn


def parameter_table(model: nn.Module) -> list[tuple[str, int]]:
    """Rows (component, parameters) for each top-level child, then the total.

    A parameter shared between components (tied embeddings) is counted where it first
    appears; later components show it as shared.
    """
    seen: set[int] = set()
    rows = []
    for name, child in model.named_children():
        count = 0
        shared = 0
        for p in child.parameters():
            if id(p) in seen:
                shared += p.numel()
            else:
                seen.add(id(p))
                count += p.numel()
        label = f"{name} (+{shared:,} shared)" if shared else name
        rows.append((label, count))
    rows.append(("total", sum(n for _, n in rows)))
    return rows
