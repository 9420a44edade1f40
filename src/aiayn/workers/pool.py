"""A pool of spawned processes whose death is an error, not a hang.

``multiprocessing.Pool`` replaces a process that dies (the out-of-memory killer, a SIGKILL)
but loses the task it was running, so whoever waits for that task's result waits forever.
:func:`unordered` waits for results a little at a time and, between waits, looks at the
processes the pool started: a pool never ends one of them on its own before it is closed
(no ``maxtasksperchild``), so one that has ended died, and :class:`ProcessDied` says how.
The results that were ready when it is noticed are yielded first, so a caller that keeps
each result as it comes (``pipeline.distill``'s shards) keeps every finished one.
"""

from __future__ import annotations

import multiprocessing
import signal
from collections.abc import Callable, Iterable, Iterator
from multiprocessing.pool import IMapIterator
from multiprocessing.process import BaseProcess
from typing import Any, TypeVar

from aiayn.errors import AiaynError

T = TypeVar("T")
R = TypeVar("R")

POLL_S = 0.5  # how long one wait for a result lasts before the processes are looked at


class ProcessDied(AiaynError):
    """A pool process ended while its pool was working; ``how`` says how, in words."""

    def __init__(self, pid: int | None, how: str) -> None:
        super().__init__(f"a worker process (pid {pid}) {how}")
        self.pid = pid
        self.how = how


def unordered(
    function: Callable[[T], R],
    tasks: Iterable[T],
    *,
    workers: int,
    initializer: Callable[..., object] | None = None,
    initargs: tuple[Any, ...] = (),
    poll_s: float = POLL_S,
) -> Iterator[R]:
    """``function`` over ``tasks`` in a pool of ``workers`` spawned processes (each started
    by ``initializer(*initargs)``), each result yielded as it is done (not in order), as
    ``Pool.imap_unordered`` does. Leaving the loop early ends the processes at once.

    Raises:
        ProcessDied: a process of the pool ended before the last result (after the results
            ready then are yielded).
    """
    context = multiprocessing.get_context("spawn")
    before = {p.pid for p in multiprocessing.active_children()}
    with context.Pool(workers, initializer=initializer, initargs=initargs) as pool:
        started = [p for p in multiprocessing.active_children() if p.pid not in before]
        results = pool.imap_unordered(function, tasks)
        while True:
            try:
                result = results.next(timeout=poll_s)
            except StopIteration:
                return
            except multiprocessing.TimeoutError:
                dead = next((p for p in started if p.exitcode is not None), None)
                if dead is not None:
                    yield from _ready(results)
                    raise ProcessDied(dead.pid, _how(dead)) from None
                continue
            yield result


def _ready(results: IMapIterator[R]) -> Iterator[R]:
    """The results already done, without waiting for more."""
    while True:
        try:
            yield results.next(timeout=0)
        except (StopIteration, multiprocessing.TimeoutError):
            return


def _how(process: BaseProcess) -> str:
    """How ``process`` ended, in words: the signal that killed it, or its exit status."""
    code = process.exitcode
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        cause = " (the out-of-memory killer sends it)" if name == "SIGKILL" else ""
        return f"was killed by {name}{cause}"
    return f"exited with status {code}"
