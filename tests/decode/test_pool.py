"""A pool process that dies is an error naming how, never a wait for the task it took with
it; the results done before are still yielded. The pool runs in a thread the test waits for
at most ``LIMIT_S``, so a pool that hangs fails the test instead of hanging the suite."""

from __future__ import annotations

import threading
from types import SimpleNamespace

from aiayn.workers.pool import ProcessDied, _how, unordered

from .dying import square_or_die

LIMIT_S = 60.0


def test_a_killed_process_is_an_error_and_the_results_done_are_yielded():
    seen: list[int] = []
    raised: list[BaseException] = []

    def work() -> None:
        try:
            for result in unordered(square_or_die, range(6), workers=1, poll_s=0.1):
                seen.append(result)
        except BaseException as e:  # handed to the test
            raised.append(e)

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    thread.join(LIMIT_S)
    assert not thread.is_alive(), f"the pool still waited after {LIMIT_S:g} s"
    assert len(raised) == 1 and isinstance(raised[0], ProcessDied), raised
    message = str(raised[0])
    assert "was killed by SIGKILL" in message and "\n" not in message
    assert {0, 1, 4} <= set(seen) <= {0, 1, 4, 16, 25}  # one process: 0-2 came before 3


def test_how_a_process_ended_in_words():
    assert _how(SimpleNamespace(exitcode=-15)) == "was killed by SIGTERM"
    assert _how(SimpleNamespace(exitcode=7)) == "exited with status 7"
