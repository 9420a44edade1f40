"""Decoding: greedy search, batched beam search, and sampling (never imports train)."""

from aiayn.accel.profiles import stepper_for
from aiayn.decode.beam import Hypothesis, beam_search, length_penalty
from aiayn.decode.constrained import constrained_beam_search
from aiayn.decode.generate import generate, load_language_model
from aiayn.decode.greedy import greedy_decode, greedy_search
from aiayn.decode.sampling import filter_logits, sample_next
from aiayn.modules.stepper import StepDecoder, TransformerStepper

__all__ = [
    "Hypothesis",
    "StepDecoder",
    "TransformerStepper",
    "beam_search",
    "constrained_beam_search",
    "filter_logits",
    "generate",
    "greedy_decode",
    "greedy_search",
    "length_penalty",
    "load_language_model",
    "sample_next",
    "stepper_for",
]
