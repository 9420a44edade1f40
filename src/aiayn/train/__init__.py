"""Training: loss, schedules, checkpoints and the loop (never imports decode or cli)."""

from aiayn.accel.fused_loss import fused_label_smoothed_nll
from aiayn.train.checkpoint import average_checkpoints, list_checkpoints
from aiayn.train.loop import Trainer, TrainerState, TrainingError, Validator
from aiayn.train.loss import label_smoothed_nll
from aiayn.train.schedule import learning_rate, noam_lr

__all__ = [
    "Trainer",
    "TrainerState",
    "TrainingError",
    "Validator",
    "average_checkpoints",
    "fused_label_smoothed_nll",
    "label_smoothed_nll",
    "learning_rate",
    "list_checkpoints",
    "noam_lr",
]
