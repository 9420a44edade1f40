"""Training: loss, schedules, checkpoints and the loop (never imports decode or cli).

Names are imported on first use (``aiayn.exports``): ``aiayn.train.metrics`` imports without
torch.
"""

from aiayn.exports import lazy_exports

_SOURCES = {
    "Trainer": "aiayn.train.loop",
    "TrainerState": "aiayn.train.state",
    "TrainingError": "aiayn.train.loop",
    "Validator": "aiayn.train.loop",
    "average_checkpoints": "aiayn.train.checkpoint",
    "fused_label_smoothed_nll": "aiayn.accel.fused_loss",
    "label_smoothed_nll": "aiayn.modules.loss",
    "learning_rate": "aiayn.train.schedule",
    "list_checkpoints": "aiayn.train.checkpoint",
    "noam_lr": "aiayn.train.schedule",
}
__all__ = list(_SOURCES)
__getattr__, __dir__ = lazy_exports(__name__, _SOURCES)
