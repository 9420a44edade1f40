"""``aiayn.accel.kv_buffer.KeyValueBuffer`` against the reference ``ConcatKeyValues``."""

import torch

from aiayn.accel.kv_buffer import SPARE_ROOM_FROM, KeyValueBuffer
from aiayn.modules import ConcatKeyValues

from ..test_modules import positions


def _step(t: int, rows: int = 2):
    return positions(rows, 1, t), positions(rows, 1, t)


def test_extends_contiguously_and_keeps_old_values_intact():
    steps = [KeyValueBuffer().extended(*_step(0))]
    for t in range(1, 40):
        steps.append(steps[-1].extended(*_step(t)))
    last = steps[-1]
    assert last.length == 40 and last.keys.is_contiguous()
    torch.testing.assert_close(last.keys, positions(2, 40))
    torch.testing.assert_close(steps[10].values, positions(2, 11))  # earlier values unchanged


def test_long_buffer_leaves_room_and_grows_in_place():
    n = SPARE_ROOM_FROM
    kv = KeyValueBuffer().extended(positions(1, n), positions(1, n))
    first = kv.extended(*_step(n, rows=1))
    second = first.extended(*_step(n + 1, rows=1))
    assert second.storage is first.storage  # written in place, no copy
    torch.testing.assert_close(second.keys, positions(1, n + 2))
    torch.testing.assert_close(first.keys, positions(1, n + 1))
    branch = first.extended(torch.full((1, 1, 1, 1), -1.0), torch.full((1, 1, 1, 1), -1.0))
    assert branch.storage is not first.storage and branch.keys[0, 0, -1, 0] == -1
    torch.testing.assert_close(second.keys, positions(1, n + 2))


def test_branches_never_overwrite_each_other():
    base = KeyValueBuffer().extended(positions(1, 3), positions(1, 3)).extended(*_step(3, 1))
    left = base.extended(torch.full((1, 1, 1, 1), -1.0), torch.full((1, 1, 1, 1), -1.0))
    right = base.extended(torch.full((1, 1, 1, 1), -2.0), torch.full((1, 1, 1, 1), -2.0))
    assert left.keys[0, 0, -1, 0] == -1 and right.keys[0, 0, -1, 0] == -2
    torch.testing.assert_close(base.keys, positions(1, 4))


def test_selections_are_recorded_and_gathered_by_the_next_extension():
    kv = KeyValueBuffer().extended(positions(3, 2), positions(3, 2)).extended(*_step(2, 3))
    picked = kv.select(torch.tensor([2, 2, 0])).select(torch.tensor([2, 0]))  # rows 0, 2
    assert picked.storage is kv.storage  # recorded, not copied
    torch.testing.assert_close(picked.keys, positions(3, 3)[[0, 2]])
    grown = picked.extended(*_step(3, 2))
    torch.testing.assert_close(grown.values[:, :, :3], positions(3, 3)[[0, 2]])
    torch.testing.assert_close(grown.values[:, :, 3], positions(2, 1, 3)[:, :, 0])
    assert grown.rows is None and grown.keys.is_contiguous()


def test_any_sequence_of_extensions_and_selections_equals_the_reference():
    g = torch.Generator().manual_seed(0)
    fast, ref = KeyValueBuffer(), ConcatKeyValues()
    rows = 4
    for step in range(SPARE_ROOM_FROM + 20):
        k, v = torch.randn(rows, 2, 1, 3, generator=g), torch.randn(rows, 2, 1, 3, generator=g)
        fast, ref = fast.extended(k, v), ref.extended(k, v)
        if step % 7 == 3:
            index = torch.randint(0, rows, (rows,), generator=g)
            fast, ref = fast.select(index), ref.select(index)
        if step % 11 == 5:  # a branch that must not disturb the main line
            fast.extended(k + 1, v + 1)
        assert torch.equal(fast.keys, ref.keys) and torch.equal(fast.values, ref.values)
