"""What every optional stage module reads of the pipeline's ``Job`` (``pipeline.stages``),
as a Protocol, so that a stage's module need not import the pipeline that runs it."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from aiayn.config import PipelineConfig


class StageJob(Protocol):
    """The recipe's pipeline settings, the model directory and the log line."""

    @property
    def p(self) -> PipelineConfig: ...

    @property
    def model_dir(self) -> Path: ...

    def log(self, message: str) -> None: ...
