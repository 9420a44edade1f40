"""The model behind the server: one worker thread owns it, and requests reach it through a
bounded queue, so the event loop never waits on the model.

Translation requests that arrive close together are decoded together: the worker takes the
first waiting request, then keeps taking requests with the same search options for at most
``max_wait_ms`` or until ``batch_tokens`` source tokens are gathered, and decodes them as
one batch. aiayn's search treats every sentence alone (its beams, its length limit, its
stopping), so what a request gets never depends on what it was batched with.

Language-model completions are generated one request at a time by their own worker, each
new token handed to the request's callback as soon as it is chosen (for streaming).
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from aiayn.decode import generate
from aiayn.decode.translator import SearchOptions, Translation, Translator
from aiayn.errors import AiaynError


class Busy(AiaynError):
    """The queue is full: the client should slow down and retry."""


class ShuttingDown(AiaynError):
    """The server is stopping and takes no new work."""


@dataclass(eq=False)
class _Job:
    texts: list[str]
    options: SearchOptions
    target_token: str | None
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future
    cancelled: bool = False
    tokens: int = 0  # source tokens, known once encoded

    def finish(self, result=None, error: BaseException | None = None) -> None:
        def settle() -> None:
            if self.future.done():
                return
            if error is not None:
                self.future.set_exception(error)
            else:
                self.future.set_result(result)

        self.loop.call_soon_threadsafe(settle)


@dataclass
class BatchStats:
    """What the worker has decoded: for tests and the health endpoint."""

    batches: int = 0
    requests: int = 0
    sentences: int = 0
    largest: int = 0  # most requests in one batch
    history: list[int] = field(default_factory=list)  # requests per batch, the last 1,000


class TranslationEngine:
    """A Translator behind a queue and a worker thread that batches requests."""

    def __init__(
        self,
        translator: Translator,
        *,
        batch_tokens: int = 4096,
        max_wait_ms: float = 10.0,
        queue_size: int = 256,
    ):
        self.translator = translator
        self.batch_tokens = batch_tokens
        self.max_wait = max_wait_ms / 1000.0
        self.stats = BatchStats()
        self._queue: queue.Queue[_Job | None] = queue.Queue(maxsize=queue_size)
        self._aside: deque[_Job] = deque()  # taken, but with other options than the batch
        self._accepting = True
        self._thread = threading.Thread(target=self._run, name="aiayn-translate", daemon=True)
        self._thread.start()

    async def translate(
        self,
        texts: list[str],
        options: SearchOptions,
        *,
        target_token: str | None = None,
        timeout: float | None = None,
    ) -> list[list[Translation]]:
        """The translations of ``texts`` (n-best lists), decoded by the worker.

        Raises:
            Busy: the queue is full. ShuttingDown: the server is stopping.
            TimeoutError: not done within ``timeout`` seconds (the job is dropped if it
                has not started).
        """
        if not self._accepting:
            raise ShuttingDown("the server is shutting down")
        loop = asyncio.get_running_loop()
        job = _Job(list(texts), options, target_token, loop, loop.create_future())
        try:
            self._queue.put_nowait(job)
        except queue.Full:
            raise Busy(f"the queue is full ({self._queue.maxsize} requests)") from None
        try:
            return await asyncio.wait_for(asyncio.shield(job.future), timeout)
        except TimeoutError:
            job.cancelled = True
            raise

    def close(self) -> None:
        """Take no new work, finish what was accepted, then stop the worker."""
        self._accepting = False
        self._queue.put(None)
        self._thread.join()

    def _run(self) -> None:
        while (batch := self._next_batch()) is not None:
            self._decode(batch)
        while self._aside:  # accepted before the stop: still answered
            self._decode(self._gather(self._aside.popleft(), deadline=0.0))

    def _next_batch(self) -> list[_Job] | None:
        first = self._aside.popleft() if self._aside else self._queue.get()
        if first is None:
            return None
        return self._gather(first, deadline=time.monotonic() + self.max_wait)

    def _gather(self, first: _Job, *, deadline: float) -> list[_Job]:
        """``first`` and the requests that join it: same options, within the token budget
        and the wait."""
        self._estimate_tokens(first)
        batch, tokens = [first], first.tokens
        while tokens < self.batch_tokens:
            try:
                job = self._queue.get(timeout=max(deadline - time.monotonic(), 0.0))
            except queue.Empty:
                break
            if job is None:  # stop: finish this batch and what was set aside, then end
                self._queue.put(None)
                break
            self._estimate_tokens(job)
            if job.options != first.options or job.target_token != first.target_token:
                self._aside.append(job)
                continue
            batch.append(job)
            tokens += job.tokens
        return batch

    def _estimate_tokens(self, job: _Job) -> None:
        """Source tokens of a request, estimated from its length (subwords average about
        four characters); the translator encodes the text itself."""
        job.tokens = sum(len(t) for t in job.texts) // 4 + len(job.texts)

    def _decode(self, batch: list[_Job]) -> None:
        jobs = [job for job in batch if not job.cancelled]
        if not jobs:
            return
        texts = [text for job in jobs for text in job.texts]
        try:
            results = self.translator.translate(
                texts, jobs[0].options, target_token=jobs[0].target_token
            )
        except Exception as e:
            for job in jobs:
                job.finish(error=e)
            return
        start = 0
        for job in jobs:
            job.finish(results[start : start + len(job.texts)])
            start += len(job.texts)
        self._count(jobs, len(texts))

    def _count(self, jobs: list[_Job], sentences: int) -> None:
        stats = self.stats
        stats.batches += 1
        stats.requests += len(jobs)
        stats.sentences += sentences
        stats.largest = max(stats.largest, len(jobs))
        stats.history = [*stats.history[-999:], len(jobs)]


@dataclass(eq=False)
class Generation:
    """One completion request: its sampling settings, and where its tokens go."""

    prompt: list[int]
    max_new_tokens: int
    temperature: float
    top_p: float
    seed: int | None
    on_token: Callable[[int], None]  # each new token, as it is chosen
    on_end: Callable[[BaseException | None], None]  # at the end, with the error if any


class LanguageModelEngine:
    """A language model behind a queue; one worker generates one request at a time."""

    def __init__(self, model, tokenizer, *, queue_size: int = 64):
        self.model = model
        self.tokenizer = tokenizer
        self._queue: queue.Queue[Generation | None] = queue.Queue(maxsize=queue_size)
        self._accepting = True
        self.completed = 0  # generations ended, stopped early or failed included
        self._thread = threading.Thread(target=self._run, name="aiayn-generate", daemon=True)
        self._thread.start()

    def submit(self, generation: Generation) -> None:
        if not self._accepting:
            raise ShuttingDown("the server is shutting down")
        try:
            self._queue.put_nowait(generation)
        except queue.Full:
            raise Busy(f"the queue is full ({self._queue.maxsize} requests)") from None

    def close(self) -> None:
        self._accepting = False
        self._queue.put(None)
        self._thread.join()

    def _run(self) -> None:
        while (job := self._queue.get()) is not None:
            generator = torch.Generator().manual_seed(job.seed) if job.seed is not None else None
            try:
                generate(
                    self.model,
                    job.prompt,
                    max_new_tokens=job.max_new_tokens,
                    temperature=job.temperature,
                    top_p=job.top_p,
                    generator=generator,
                    stop_id=self.model.specials.eos,
                    on_token=job.on_token,
                )
            except Exception as e:
                job.on_end(e)
            else:
                job.on_end(None)
            self.completed += 1
