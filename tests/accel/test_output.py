"""The in-place log-softmax against the reference ``log_softmax(logits)``."""

import torch

from aiayn.accel import output as fast_output
from aiayn.accel.output import log_probs_in_place


def test_in_place_log_softmax_equals_the_reference_and_reuses_the_logits():
    logits = torch.randn(6, 50)
    expected = logits.log_softmax(dim=-1)
    assert fast_output._log_softmax_can_overwrite(50)
    out = log_probs_in_place(logits)
    torch.testing.assert_close(out, expected)
    assert out.data_ptr() == logits.data_ptr()


def test_low_precision_logits_give_float32_log_probabilities():
    logits = torch.randn(4, 30).bfloat16()
    out = log_probs_in_place(logits)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, logits.float().log_softmax(dim=-1))
