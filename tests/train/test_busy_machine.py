"""A busy machine: training's default threads are the idle cores, a run that slows down far
below its first window says so, and a log without a progress bar hears of the first updates."""

import pytest

from aiayn import runtime
from aiayn.cli.common import TerminalReporter
from aiayn.train.metrics import SLOW_FRACTION, SpeedWatch


def _machine(monkeypatch, *, cpus: int, affinity: set[int], others: float, own: float) -> None:
    """A machine of ``cpus`` cores on which other processes keep ``others`` cores busy and
    this process ``own``, seen through two CPU samples one second apart."""
    samples = iter([runtime.CpuSample(0.0, 0.0, 0.0), runtime.CpuSample(1.0, others + own, own)])
    monkeypatch.setattr(runtime, "cpu_sample", lambda: next(samples))
    monkeypatch.setattr(runtime.time, "sleep", lambda seconds: None)
    monkeypatch.setattr(runtime.os, "sched_getaffinity", lambda _: affinity, raising=False)
    monkeypatch.setattr(runtime.psutil, "cpu_count", lambda: cpus)


@pytest.mark.parametrize(("others", "threads"), [(0.0, 4), (1.2, 3), (3.88, 1), (4.0, 1), (2.4, 2)])
def test_idle_cores_leave_out_what_other_processes_keep_busy(monkeypatch, others, threads):
    _machine(monkeypatch, cpus=4, affinity={0, 1, 2, 3}, others=others, own=0.0)
    assert runtime.idle_cores() == threads


def test_idle_cores_do_not_count_this_process_own_work(monkeypatch):
    """Loading a model between the first sample and the count keeps this process busy: that
    is not a competitor."""
    _machine(monkeypatch, cpus=2, affinity={0, 1}, others=0.0, own=2.0)
    start = runtime.cpu_sample()
    assert runtime.idle_cores(since=start) == 2


def test_idle_cores_are_at_most_the_cores_this_process_may_run_on(monkeypatch):
    _machine(monkeypatch, cpus=8, affinity={0, 1}, others=0.0, own=0.0)
    assert runtime.idle_cores() == 2


def test_idle_cores_on_this_machine_are_between_one_and_its_cores():
    cores = len(runtime.os.sched_getaffinity(0))
    assert 1 <= runtime.idle_cores() <= cores


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
