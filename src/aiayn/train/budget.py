"""A run's time budget (``run.max_minutes``): how much of it is spent, the clock of the
budget schedule (``train.schedule``, ``optim.schedule = "budget"``), and where it will end
the run at the speed so far. Pure functions of a run's counts; the trainer shares the
progress across ranks and logs the plan."""

from __future__ import annotations


def budget_share(
    update: int, max_updates: int, seconds: float, max_minutes: float
) -> tuple[float, float | None]:
    """(updates' share of ``max_updates``, training time's share of ``max_minutes`` or
    None without a time budget): the run's progress is the further of the two."""
    return update / max_updates, (seconds / (60.0 * max_minutes) if max_minutes else None)


def planned_end(
    update: int, seconds: float, max_updates: int, max_minutes: float
) -> tuple[int, str] | None:
    """The update at which the time budget ends the run at the speed so far, and why; None
    before the first timed update or without a time budget."""
    if not max_minutes or not seconds:
        return None
    at_end = update * 60.0 * max_minutes / seconds
    if at_end >= max_updates:
        return max_updates, "max_updates ends it within the time budget"
    return round(at_end), f"the {max_minutes:g}-minute budget ends it"


def plan_lines(planned: int, why: str, max_updates: int, warmup_steps: int) -> list[str]:
    """What the trainer logs of a (new) plan: the planned end, and a warning when it falls
    before the warm-up ends."""
    lines = [f"planned end: update {planned:,} of {max_updates:,} at this speed ({why})"]
    if planned < warmup_steps:
        lines.append(
            f"warning: that is before the warm-up ends (optim.warmup_steps "
            f"{warmup_steps:,}): lower it, or give the run more time"
        )
    return lines
