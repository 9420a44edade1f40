"""What decodes for the server: decoders (translation models in their own processes,
``aiayn.workers.translator_process``), each fed by a worker thread from one bounded queue, so the
event loop never waits on a model. Other work on a translation model (the page's attention picture)
goes through the same queue to a decoder, which computes it where the model already is.

Translation requests that arrive close together are decoded together: a free worker takes
the first waiting request and every queued request with the same search options, up to
``batch_tokens`` source tokens, and while its batch is smaller than its previous one it waits
(at most ``max_wait_ms``) for more: under load those clients send their next request as
soon as they have their answer, and a lone client never waits. aiayn's search treats every
sentence alone (its beams, its length limit, its stopping, its shortlist rows), so in fp32
and bf16 what a request gets does not depend on what it was batched with; in int8 it can,
in close calls: a call's activations share one quantisation scale.

Several decoders of one thread each, rather than one of several threads, is the CPU default
(as CTranslate2's ``inter_threads``): small batches use one core well and several poorly. On
two cores, 32 clients, Multi30k's model (``bench/serve.py``), sentences/s went 80 -> 100 ->
153 from one two-thread decoding thread, to two one-thread decoding threads, to two decoding
processes with the wait above (threads also lose time to OpenMP: in a thread other than the
main one, two-thread beam search is 2× slower once the process has more OpenMP threads than
cores).

Language-model completions are generated in processes of their own too
(``aiayn.workers.generator_process``), one request at a time per process, each new token
handed to the request's callback as soon as it is chosen (streaming); a request stops at its
deadline, or sooner when its client goes away.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, Generic, Protocol, TypeVar

from aiayn.errors import AiaynError
from aiayn.translate.translator import SearchOptions, Translation
from aiayn.workers.generator_process import GenerationRequest

R = TypeVar("R")
J = TypeVar("J")  # a job of an engine
B = TypeVar("B")  # what a worker serves jobs with: a decoder, a generator
STOP_CHECK_SECONDS = 0.2  # how often an idle worker looks whether the server is stopping
MAX_GENERATION_SECONDS = 24 * 3600.0  # a request without a deadline (pickled as a number)


class Busy(AiaynError):
    """The queue is full: the client should slow down and retry."""


class ShuttingDown(AiaynError):
    """The server is stopping and takes no new work."""


class QueueEngine(Generic[J, B]):
    """Worker threads, one per backend (a process that decodes or generates), fed from one
    bounded queue: the same acceptance, stop and restart for both engines.

    ``_put`` queues a job (``Busy`` when the queue is full, ``ShuttingDown`` once closing);
    each worker runs ``_serve(backend)``, taking jobs with ``_take`` until it answers None;
    ``close`` takes no new job, lets the workers finish every accepted one, refuses what
    was queued as they ended (``_refuse``) and closes the backends. A worker that ends
    anyway (a bug, or an exception no job handler catches) is replaced at the next
    submission, and ``restarted`` counts it.
    """

    def __init__(self, backends: Sequence[B], *, queue_size: int, name: str):
        self.backends = list(backends)
        self._name = name
        self._queue: queue.Queue[J] = queue.Queue(maxsize=queue_size)
        self._counting = threading.Lock()
        self._accepting = True
        self._stopping = False  # the stop was seen: finish what is queued, wait for nothing
        self.restarted = 0  # workers replaced after ending unexpectedly
        self._threads = [self._start(i) for i in range(len(self.backends))]

    def _start(self, number: int) -> threading.Thread:
        thread = threading.Thread(
            target=self._serve,
            args=(self.backends[number],),
            name=f"aiayn-{self._name}-{number}",
            daemon=True,
        )
        thread.start()
        return thread

    def replace_dead_workers(self) -> int:
        """Start a new worker for each that ended while the engine runs; how many."""
        dead = 0
        for i, thread in enumerate(self._threads):
            if self._accepting and not thread.is_alive():
                self._threads[i] = self._start(i)
                dead += 1
        with self._counting:
            self.restarted += dead
        return dead

    @property
    def alive(self) -> int:
        return sum(thread.is_alive() for thread in self._threads)

    @property
    def processes_restarted(self) -> int:
        """Backend processes restarted after dying (``TranslatorProcess.restarts``)."""
        return sum(getattr(backend, "restarts", 0) for backend in self.backends)

    def _put(self, job: J) -> None:
        if not self._accepting:
            raise ShuttingDown("the server is shutting down")
        self.replace_dead_workers()
        try:
            self._queue.put_nowait(job)
        except queue.Full:
            raise Busy(f"the queue is full ({self._queue.maxsize} requests)") from None

    def _take(self) -> J | None:
        """The next queued job, waiting for one in slices that let a stop be seen; None
        when stopping and none is left."""
        while True:
            stopping = self._stopping
            try:
                return self._queue.get(timeout=0 if stopping else STOP_CHECK_SECONDS)
            except queue.Empty:
                if stopping:
                    return None

    def close(self) -> None:
        """Take no new work, finish what was accepted, then stop the workers and their
        backends."""
        self._accepting = False
        self._stopping = True  # workers wait for nothing more and end once the queue is empty
        for thread in self._threads:
            thread.join()
        while True:  # a job queued as the workers ended
            try:
                self._refuse(self._queue.get_nowait(), ShuttingDown("the server stopped"))
            except queue.Empty:
                break
        for backend in self.backends:
            backend.close()

    def _serve(self, backend: B) -> None:
        """A worker: take jobs and answer them with ``backend`` until ``_take`` gives None."""
        raise NotImplementedError

    def _refuse(self, job: J, error: BaseException) -> None:
        """Answer a job that will not be served with ``error``."""
        raise NotImplementedError


@dataclass(eq=False)
class _Job:
    texts: list[str]
    options: SearchOptions
    target_token: str | None
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future
    cancelled: bool = False
    tokens: int = 0  # source tokens, known once encoded
    task: tuple[Callable[..., Any], tuple] | None = None  # a call on the model, not a translation

    def finish(self, result=None, error: BaseException | None = None) -> None:
        def settle() -> None:
            if self.future.done() or self.cancelled:  # nobody waits for it: nothing to log
                return
            if error is not None:
                self.future.set_exception(error)
            else:
                self.future.set_result(result)

        self.loop.call_soon_threadsafe(settle)


@dataclass
class BatchStats:
    """What the worker has decoded: for tests and the health endpoint."""

    accepted: int = 0  # requests queued (translations and calls)
    batches: int = 0
    requests: int = 0
    texts: int = 0  # texts translated (a paragraph is one, however many sentences)
    largest: int = 0  # most requests in one batch
    history: list[int] = field(default_factory=list)  # requests per batch, the last 1,000


class Decoder(Protocol):
    """What decodes a batch and runs other work on its model: a Translator in its own
    process (``aiayn.workers.translator_process.TranslatorProcess``)."""

    def translate(
        self,
        texts: list[str],
        options: SearchOptions,
        *,
        target_token: str | None = None,
        abandoned: Callable[[], bool] | None = None,
    ) -> list[list[Translation]]:
        """``abandoned()``, asked while decoding: True stops the decode (``RequestAbandoned``)."""

    def call(self, task: Callable[..., R], *args: Any) -> R: ...

    def close(self) -> None: ...


class TranslationEngine(QueueEngine[_Job, Decoder]):
    """Decoders behind a queue, each fed batches of requests by its own worker thread."""

    def __init__(
        self,
        decoders: Sequence[Decoder],
        *,
        batch_tokens: int = 4096,
        max_wait_ms: float = 25.0,
        queue_size: int = 256,
    ):
        self.batch_tokens = batch_tokens
        self.max_wait = max_wait_ms / 1000.0
        self.stats = BatchStats()
        self._aside: deque[_Job] = deque()  # taken, but with other options than the batch
        super().__init__(decoders, queue_size=queue_size, name="translate")

    @property
    def decoders(self) -> list[Decoder]:
        return self.backends

    async def translate(
        self,
        texts: list[str],
        options: SearchOptions,
        *,
        target_token: str | None = None,
        timeout: float | None = None,
    ) -> list[list[Translation]]:
        """The translations of ``texts`` (n-best lists), decoded by a worker.

        Raises:
            Busy: the queue is full. ShuttingDown: the server is stopping.
            TimeoutError: not done within ``timeout`` seconds (the job is dropped if it
                has not started).
        """
        loop = asyncio.get_running_loop()
        job = _Job(list(texts), options, target_token, loop, loop.create_future())
        return await self._submit(job, timeout)

    async def call(self, task: Callable[..., R], *args: Any, timeout: float | None = None) -> R:
        """``task(translator, *args)`` computed by a worker's decoder, on its model
        (``TranslatorProcess.call``); queued as a translation is, and never batched.

        Raises:
            as ``translate``.
        """
        loop = asyncio.get_running_loop()
        job = _Job([], SearchOptions(), None, loop, loop.create_future(), task=(task, args))
        return await self._submit(job, timeout)

    async def _submit(self, job: _Job, timeout: float | None):
        self._put(job)
        with self._counting:
            self.stats.accepted += 1
        try:
            return await asyncio.wait_for(asyncio.shield(job.future), timeout)
        except TimeoutError:
            job.cancelled = True
            raise

    def _refuse(self, job: _Job, error: BaseException) -> None:
        job.finish(error=error)

    def _serve(self, decoder: Decoder) -> None:
        answered = 0
        while (batch := self._next_batch(expect=answered)) is not None:
            self._decode(decoder, batch)
            answered = len(batch)

    def _next_batch(self, *, expect: int) -> list[_Job] | None:
        """The next batch to decode; None once stopping and nothing is left."""
        first = self._take()
        if first is None:
            return None
        deadline = 0.0 if self._stopping else time.monotonic() + self.max_wait
        return self._gather(first, deadline=deadline, expect=expect)

    def _take(self) -> _Job | None:
        """The next request: set aside by a batch, else queued (``QueueEngine._take``)."""
        try:
            return self._aside.popleft()
        except IndexError:
            return super()._take()

    def _gather(self, first: _Job, *, deadline: float, expect: int) -> list[_Job]:
        """``first`` and the requests that join it: same options, within the token budget.
        Everything already queued joins; then the worker waits (until ``deadline``) only
        while the batch has fewer than ``expect`` requests, the size of its last batch:
        those clients are likely to send their next request now. A lone client's requests
        so never wait, and clients under load keep their batch together."""
        self._estimate_tokens(first)
        batch, tokens = [first], first.tokens
        if first.task is not None:
            return batch
        while tokens < self.batch_tokens:
            wait = deadline - time.monotonic() if len(batch) < expect else 0.0
            try:
                job = self._queue.get(timeout=max(wait, 0.0))
            except queue.Empty:
                break
            self._estimate_tokens(job)
            if (
                job.task is not None
                or job.options != first.options
                or job.target_token != first.target_token
            ):
                self._aside.append(job)
                continue
            batch.append(job)
            tokens += job.tokens
        return batch

    def _estimate_tokens(self, job: _Job) -> None:
        """Source tokens of a request, estimated from its length (subwords average about
        four characters); the translator encodes the text itself."""
        job.tokens = sum(len(t) for t in job.texts) // 4 + len(job.texts)

    def _decode(self, decoder: Decoder, batch: list[_Job]) -> None:
        jobs = [job for job in batch if not job.cancelled]
        if not jobs:
            return
        if jobs[0].task is not None:
            task, args = jobs[0].task
            try:
                jobs[0].finish(decoder.call(task, *args))
            except Exception as e:
                jobs[0].finish(error=e)
            return
        texts = [text for job in jobs for text in job.texts]
        try:
            results = decoder.translate(
                texts,
                jobs[0].options,
                target_token=jobs[0].target_token,
                abandoned=lambda: all(job.cancelled for job in jobs),  # every one timed out
            )
        except Exception as e:
            if len(jobs) == 1:
                jobs[0].finish(error=e)
                return
            for job in jobs:  # one request's fault must not fail the others: each alone
                self._decode(decoder, [job])
            return
        start = 0
        for job in jobs:
            job.finish(results[start : start + len(job.texts)])
            start += len(job.texts)
        self._count(jobs, len(texts))

    def _count(self, jobs: list[_Job], texts: int) -> None:
        with self._counting:
            stats = self.stats
            stats.batches += 1
            stats.requests += len(jobs)
            stats.texts += texts
            stats.largest = max(stats.largest, len(jobs))
            stats.history = [*stats.history[-999:], len(jobs)]


@dataclass(eq=False)
class Generation:
    """One completion request: what to generate (its ``seconds``: the most it may take
    once started), when it must end, queue included, and where its tokens go."""

    request: GenerationRequest
    on_token: Callable[[int], None]  # each new token, as it is chosen; raises to stop
    on_end: Callable[[BaseException | None], None]  # at the end, with the error if any
    deadline: float = math.inf  # time.monotonic() after which it stops (queue included)


class Generator(Protocol):
    """What samples for the engine: a language model in its own process
    (``aiayn.workers.generator_process.GeneratorProcess``)."""

    eos: int | None

    def generate(self, request: GenerationRequest, on_token: Callable[[int], bool]) -> str: ...

    def close(self) -> None: ...


class LanguageModelEngine(QueueEngine[Generation, Generator]):
    """Generating processes behind a queue, each fed one request at a time by its own worker
    thread, which hands the tokens to the request's callbacks.

    A request ends at its deadline wherever it is: one still queued is dropped, and the
    process stops one under way by itself (a client that went away stops it sooner, through
    ``on_token``). A worker ends a request that fails with the error, never itself."""

    def __init__(self, generators: Sequence[Generator], *, queue_size: int = 64):
        self.eos = generators[0].eos
        self.completed = 0  # generations ended, stopped early or failed included
        super().__init__(generators, queue_size=queue_size, name="generate")

    @property
    def generators(self) -> list[Generator]:
        return self.backends

    def submit(self, generation: Generation) -> None:
        self._put(generation)

    def _refuse(self, job: Generation, error: BaseException) -> None:
        _end(job, error)

    def _serve(self, generator: Generator) -> None:
        while (job := self._take()) is not None:
            try:
                seconds = job.deadline - time.monotonic()
                if seconds <= 0:
                    raise TimeoutError("the request's time ran out before it started")
                request = replace(job.request, seconds=min(seconds, job.request.seconds))
                reason = generator.generate(request, partial(_pass_on, job))
                if reason == "timeout":
                    raise TimeoutError("the request's time ran out")
            except Exception as e:
                _end(job, e)
            else:
                _end(job, None)
            with self._counting:
                self.completed += 1


def _pass_on(job: Generation, token: int) -> bool:
    job.on_token(token)  # raises to stop the generation
    return True


def _end(job: Generation, error: BaseException | None) -> None:
    """Tell the request it ended; a callback that fails must not end the worker."""
    with contextlib.suppress(Exception):
        job.on_end(error)
