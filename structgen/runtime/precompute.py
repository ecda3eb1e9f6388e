"""Background precomputation of masks, while the model runs its prefill.

``GrammarCompiler(..., precompute="background")`` returns a compiled grammar as soon as its
automaton exists and queues a :class:`BackgroundPrecompute` for it: daemon workers compute
the masks of the configurations reachable from the start, nearest first (breadth-first by
bytes, as :meth:`TokenIndex.precompute <structgen.index.token_index.TokenIndex.precompute>` walks
them), up to ``limit`` masks. Decoding never waits for the whole precompute:

* a mask already computed is read without a lock, as always;
* a mask not computed yet is computed on demand by the decoding thread. While it does, the
  task registers a *demand* and the workers start no new mask of that grammar until the
  demand is served, so the decoding thread waits at most for the one mask a worker is
  computing at that moment (each mask is computed under the grammar's lock);
* the workers serve the tasks of several grammars in turns of a few masks each, so a grammar
  compiled later is not queued behind a long precompute of an earlier one.

A task holds its grammar's index only weakly: dropping the compiled grammar (and its
matchers) cancels the task at the workers' next turn, and :meth:`BackgroundPrecompute.cancel`
stops it at once.
"""
from __future__ import annotations

import collections
import threading
import weakref
from contextlib import contextmanager
from typing import Iterator

import numpy as np

from ..index.token_index import DEAD, TokenIndex

__all__ = ["BackgroundPrecompute", "DEFAULT_LIMIT", "WORKERS", "compute_mask"]

DEFAULT_LIMIT = 512
"""Masks a background task computes at most (memory: ``limit × vocab_size / 8`` bytes, 8 MB
for a 128K vocabulary)."""

WORKERS = 1
"""Daemon threads shared by every background task. A mask is computed natively without the
GIL, but each one's bookkeeping (the demand check, the configurations it leads to) takes the
GIL: one worker runs beside the decoding thread, more would take turns with it for that part."""

_TURN = 4  # masks per turn before the next task's turn


class BackgroundPrecompute:
    """Computes the masks of configurations reachable from the start of one grammar.

    Attributes:
        limit: masks computed at most.
        computed: configurations whose masks the task has gone through so far.
        finished: set once the task has nothing left (every reachable configuration done,
            ``limit`` reached, cancelled, or its grammar dropped).
    """

    def __init__(self, index: TokenIndex, *, limit: int = DEFAULT_LIMIT) -> None:
        if limit < 0:
            raise ValueError("limit must be >= 0")
        self.limit = limit
        self.computed = 0
        self.finished = threading.Event()
        self._index = weakref.ref(index)
        self._todo: collections.deque[int] = collections.deque([index.initial])
        self._seen = {index.initial}
        self._cancelled = False
        self._demand = 0
        self._served = threading.Condition(threading.Lock())
        if limit == 0:
            self.finished.set()

    def cancel(self) -> None:
        """Stop after the mask being computed (if any); masks already computed stay."""
        self._cancelled = True

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the task has finished; ``False`` if ``timeout`` passed first."""
        return self.finished.wait(timeout)

    @contextmanager
    def demand(self) -> Iterator[None]:
        """Held while a decoding thread computes a mask itself: no new mask of this grammar
        is started by the workers meanwhile (the one in progress, if any, finishes)."""
        with self._served:
            self._demand += 1
        try:
            yield
        finally:
            with self._served:
                self._demand -= 1
                if not self._demand:
                    self._served.notify_all()

    def _turn(self, masks: int) -> bool:
        """Compute up to ``masks`` masks; ``False`` once nothing is left to do."""
        for _ in range(masks):
            with self._served:  # let decoding threads' own masks go first
                while self._demand and not self._cancelled:
                    self._served.wait()
            index = self._index()
            if index is None or self._cancelled or not self._todo or self.computed >= self.limit:
                self._todo.clear()
                self.finished.set()
                return False
            cid = self._todo.popleft()
            index.mask(cid)  # a memo hit when decoding needed it first
            self.computed += 1
            for nxt in np.unique(index.next_configs(cid)).tolist():
                if nxt != DEAD and nxt not in self._seen:
                    self._seen.add(nxt)
                    self._todo.append(nxt)
            del index  # held weakly between masks: dropping the grammar cancels the task
        return True


def compute_mask(index: TokenIndex, cid: int, task: BackgroundPrecompute | None) -> np.ndarray:
    """``index.mask(cid)`` for a decoding thread: with a background task still running, its
    workers wait for this mask instead of starting others."""
    if task is None or task.finished.is_set():
        return index.mask(cid)
    with task.demand():
        return index.mask(cid)


# -- the shared workers ---------------------------------------------------------------

_queue: collections.deque[BackgroundPrecompute] = collections.deque()
_ready = threading.Condition(threading.Lock())
_workers: list[threading.Thread] = []


def start(task: BackgroundPrecompute) -> BackgroundPrecompute:
    """Queue ``task`` for the shared daemon workers (started on first use)."""
    if task.finished.is_set():
        return task
    with _ready:
        _queue.append(task)
        while len(_workers) < WORKERS:
            t = threading.Thread(target=_work, name=f"structgen-precompute-{len(_workers)}", daemon=True)
            _workers.append(t)
            t.start()
        _ready.notify()
    return task


def _work() -> None:
    while True:
        with _ready:
            while not _queue:
                _ready.wait()
            task = _queue.popleft()
        try:
            more = task._turn(_TURN)
        except BaseException:  # noqa: BLE001 - a failing mask fails again, and visibly, on demand
            task._todo.clear()
            task.finished.set()
            more = False
        if more:
            with _ready:
                _queue.append(task)  # round robin: the other grammars' turns first
                _ready.notify()
