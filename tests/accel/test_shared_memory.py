"""``BeamSharedCrossAttention`` over ``SharedMemory`` against the reference: every beam row
holding its own copy of its sentence's memory."""

import torch

from aiayn import masks
from aiayn.accel.shared_memory import BeamSharedCrossAttention, SharedMemory
from aiayn.modules import CrossAttention


def _attentions(seed: int = 0):
    torch.manual_seed(seed)
    ref = CrossAttention(d_model=16, n_heads=4).eval()
    fast = BeamSharedCrossAttention(d_model=16, n_heads=4).eval()
    fast.load_state_dict(ref.state_dict())
    return ref, fast


def _memory(b=3, s=6, seed=1):
    g = torch.Generator().manual_seed(seed)
    memory = torch.randn(b, s, 16, generator=g)
    src = torch.ones(b, s, dtype=torch.long)
    src[1, 4:] = 0
    return memory, masks.padding_mask(src, pad_id=0)


def test_rows_of_a_sentence_share_its_memory_and_equal_per_row_copies(monkeypatch):
    ref, fast = _attentions()
    memory, mask = _memory()
    width = 5  # beams per sentence
    x = torch.randn(3 * width, 2, 16)
    per_sentence = ref.project_memory(memory)
    rows = torch.arange(3).repeat_interleave(width)  # row b·W + w reads sentence b
    expected, expected_w = ref(
        x, per_sentence.select(rows), mask=mask.index_select(0, rows), need_weights=True
    )
    grouped_calls = []
    real = fast.attention
    monkeypatch.setattr(
        fast, "attention", lambda q, *a, **kw: grouped_calls.append(q.shape) or real(q, *a, **kw)
    )
    shared = SharedMemory(per_sentence.keys, per_sentence.values, width)
    out, weights = fast(x, shared, mask=mask, need_weights=True)
    assert grouped_calls == [(3, 4, width * 2, 4)]  # one call per sentence: its W·T queries
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(weights, expected_w)


def test_one_row_per_sentence_is_the_plain_cross_attention():
    ref, fast = _attentions()
    memory, mask = _memory()
    x = torch.randn(3, 4, 16)
    memory_kv = ref.project_memory(memory)
    expected, _ = ref(x, memory_kv, mask=mask)
    torch.testing.assert_close(fast(x, SharedMemory.of(memory_kv), mask=mask)[0], expected)
    torch.testing.assert_close(fast(x, memory_kv, mask=mask)[0], expected)


def test_regrouping_keeps_the_chosen_sentences_in_order():
    ref, _ = _attentions()
    memory, _ = _memory(b=4)
    shared = SharedMemory.of(ref.project_memory(memory))
    widened = shared.regrouped(5)
    assert widened.rows_per_sentence == 5 and widened.keys is shared.keys
    kept = widened.regrouped(5, torch.tensor([3, 1]))
    torch.testing.assert_close(kept.keys, shared.keys[[3, 1]])
    torch.testing.assert_close(kept.values, shared.values[[3, 1]])
