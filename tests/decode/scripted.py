"""A decoder whose next-token probabilities are set by hand, per sentence and prefix."""

from __future__ import annotations

import math

import torch

from aiayn.config import BOS_ID, PAD_ID

V = 700  # 4 special ids, the words A=4, B=5, C=6, D=7, then filler words: rows long enough
# for the fast profile's two-stage top-k (``aiayn.accel.topk``) to take its blocked path
A, B, C, D = 4, 5, 6, 7

Script = dict[tuple[int, ...], dict[int, float]]


class ScriptedDecoder:
    """``StepDecoder`` for tests. Sentence i of the batch follows ``scripts[src[i, 0]]``: for a
    prefix, the listed tokens get the listed probabilities and the remaining mass is spread
    evenly over the other words and EOS (never PAD or BOS)."""

    def __init__(self, scripts: dict[int, Script]):
        self.scripts = scripts
        self.steps = 0

    def start(self, src):
        return [(s, ()) for s in src[:, 0].tolist()]

    def step(self, tokens, state, *, normalize=True):
        self.steps += 1
        rows = []
        new_state = []
        for (sentence, prefix), token in zip(state, tokens[:, 0].tolist(), strict=True):
            if token != BOS_ID:
                prefix = (*prefix, token)
            new_state.append((sentence, prefix))
            rows.append(self._log_probs(self.scripts[sentence].get(prefix, {})))
        return torch.tensor(rows), new_state

    def reorder(self, state, index, *, sentences=None):
        return [state[i] for i in index.tolist()]

    @staticmethod
    def _log_probs(listed: dict[int, float]) -> list[float]:
        others = [t for t in range(V) if t not in listed and t not in (PAD_ID, BOS_ID, 1)]
        rest = max(1.0 - sum(listed.values()), 1e-12) / max(len(others), 1)
        probs = [0.0] * V
        for t in others:
            probs[t] = rest
        for t, p in listed.items():
            probs[t] = p
        return [math.log(p) if p > 0 else float("-inf") for p in probs]
