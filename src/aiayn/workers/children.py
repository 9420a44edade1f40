"""Starting and ending a worker process: no torch here, so that a process that needs none
(``aiayn.workers.document_process``) imports none."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any


def spawn_child(target: Callable, spec: Any, name: str) -> tuple[Connection, BaseProcess]:
    """A spawned (never forked: the server has threads) daemon process running
    ``target(connection, spec)``, and this side's end of their pipe."""
    context = multiprocessing.get_context("spawn")
    conn, child = context.Pipe()
    process = context.Process(target=target, args=(child, spec), name=name, daemon=True)
    process.start()
    child.close()
    return conn, process


def end_child(process: BaseProcess, conn: Connection, wait_s: float) -> None:
    """Wait up to ``wait_s`` for ``process`` to end, then kill it; close the pipe."""
    process.join(timeout=wait_s)
    if process.is_alive():
        process.kill()
        process.join()
    conn.close()
