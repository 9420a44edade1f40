"""A busy machine: training's default threads are the idle cores, a run that slows down far
below its first window says so, and a log without a progress bar hears of the first updates."""

import pytest

from aiayn import runtime
from aiayn.cli.common import TerminalReporter
from aiayn.train.metrics import SLOW_FRACTION, SpeedWatch


@pytest.mark.parametrize(
    ("busy_percent", "threads"), [(0.0, 4), (30.0, 3), (97.0, 1), (100.0, 1), (60.0, 2)]
)
def test_idle_cores_leave_out_what_the_machine_keeps_busy(monkeypatch, busy_percent, threads):
    monkeypatch.setattr(runtime.os, "sched_getaffinity", lambda _: {0, 1, 2, 3}, raising=False)
    monkeypatch.setattr(runtime.psutil, "cpu_count", lambda: 4)
    monkeypatch.setattr(runtime.psutil, "cpu_percent", lambda interval: busy_percent)
    assert runtime.idle_cores() == threads


def test_idle_cores_are_at_most_the_cores_this_process_may_run_on(monkeypatch):
    monkeypatch.setattr(runtime.os, "sched_getaffinity", lambda _: {0, 1}, raising=False)
    monkeypatch.setattr(runtime.psutil, "cpu_count", lambda: 8)
    monkeypatch.setattr(runtime.psutil, "cpu_percent", lambda interval: 0.0)
    assert runtime.idle_cores() == 2


def test_a_window_far_slower_than_the_first_is_warned_about_once():
    watch = SpeedWatch()
    speeds = (900.0, 800.0, 900.0 * SLOW_FRACTION * 0.9, 100.0)
    said = [warning for speed in speeds if (warning := watch.check(speed, threads=2))]
    assert len(said) == 1 and "30% of the first window's" in said[0]
    assert "run.threads = 1" in said[0]


def test_a_log_hears_of_updates_1_and_10_before_the_first_report(monkeypatch, capsys):
    reporter = TerminalReporter()
    reporter._interactive = False  # standard error is a file or a pipe
    for update in range(1, 12):
        reporter.progress(update, 500, None)
    reporter.progress(100, 500, {"loss": 1.0})
    reporter.progress(101, 500, None)
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("update")]
    assert [line.split(" (")[0] for line in lines] == ["update 1 of 500", "update 10 of 500"]
