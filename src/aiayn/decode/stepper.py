"""The interface search algorithms decode through (``aiayn.modules.stepper``), and the
stepper of a model's profile.

Shapes: B sentences, W rows (beams) per sentence, N = B·W rows, V vocabulary.
"""

from __future__ import annotations

from aiayn.modules.stepper import (
    Precision,
    StepDecoder,
    TransformerState,
    TransformerStepper,
    UncachedTransformerStepper,
)

__all__ = [
    "Precision",
    "StepDecoder",
    "TransformerState",
    "TransformerStepper",
    "UncachedTransformerStepper",
    "stepper_for",
]


def stepper_for(model, *, precision: Precision = "fp32", packed: bool = True) -> StepDecoder:
    """The stepper of the model's profile (``model.profile.stepper``), computing in
    ``precision``; ``packed=False`` keeps it on the model's own weights
    (``aiayn.modules.stepper.StepperFactory``)."""
    return model.profile.stepper(model, precision=precision, packed=packed)
