"""Process-wide interpreter state that compiling touches: the recursion limit, automatic
garbage collection, and the warnings structgen emits.

The recursion limit and the collector are global to the interpreter, so concurrent compiles
share one change: the first to enter makes it, the last to leave undoes it, under a lock.
Nothing else in structgen may call ``sys.setrecursionlimit``, ``gc.disable`` or
``gc.set_threshold`` (tests/test_concurrency.py checks that a multi-threaded run leaves both
as it found them). Silencing structgen's own warnings is per thread (a context variable), not
``warnings.catch_warnings()``, which swaps the process's filters and races between threads.
"""
from __future__ import annotations

import gc
import sys
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from .errors import StructgenWarning

__all__ = ["DEEP_RECURSION_LIMIT", "deep_recursion", "gc_paused", "silenced_warnings", "warn"]

DEEP_RECURSION_LIMIT = 20_000
"""The interpreter's recursion limit while any compile runs (restored after the last)."""

_rec_lock = threading.Lock()
_rec_depth = 0
_rec_old = 0


@contextmanager
def deep_recursion(limit: int | None = None) -> Iterator[None]:
    """Raise the recursion limit while compiling: schema nesting becomes expression depth,
    walked recursively by the converter, the automaton builder and jsonschema (1,000 nested
    levels need ~5,000 frames; CPython 3.11+ runs Python-to-Python calls without C stack).

    The limit is process-wide, so concurrent compiles share one raise: the first to enter
    raises it, the last to leave restores it. (Each restoring its own saved value let a
    thread that finished first pull the limit down under another one's deep recursion, and a
    thread that saved the raised value left it raised for good.)"""
    global _rec_depth, _rec_old
    limit = DEEP_RECURSION_LIMIT if limit is None else limit
    with _rec_lock:
        if _rec_depth == 0:
            _rec_old = sys.getrecursionlimit()
            if _rec_old < limit:
                sys.setrecursionlimit(limit)
        _rec_depth += 1
    try:
        yield
    finally:
        with _rec_lock:
            _rec_depth -= 1
            if _rec_depth == 0:
                sys.setrecursionlimit(_rec_old)


_gc_lock = threading.Lock()
_gc_depth = 0
_gc_was_enabled = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """Suspend automatic garbage collection while compiling (nesting- and thread-safe).

    Compiling allocates many short-lived containers, and each allocation burst triggers
    collections that traverse every live object of the process: with a vocabulary trie and a
    model loaded, full passes made the large schemas about 30% slower (bench: total compile
    time of the MaskBench sample 3.5 s -> 2.5 s). Cycles made meanwhile are collected by the
    first automatic collection after compiling."""
    global _gc_depth, _gc_was_enabled
    with _gc_lock:
        if _gc_depth == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_depth += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_depth -= 1
            if _gc_depth == 0 and _gc_was_enabled:
                gc.enable()


_silenced: ContextVar[bool] = ContextVar("structgen_warnings_silenced", default=False)


@contextmanager
def silenced_warnings() -> Iterator[None]:
    """Drop :class:`~structgen.errors.StructgenWarning` from :func:`warn` in this thread (or
    task) while the block runs; other threads still warn."""
    token = _silenced.set(True)
    try:
        yield
    finally:
        _silenced.reset(token)


def warn(message: str, *, stacklevel: int = 2) -> None:
    """Emit a :class:`~structgen.errors.StructgenWarning` unless silenced here; ``stacklevel``
    counts from the caller, as for ``warnings.warn``."""
    if not _silenced.get():
        warnings.warn(message, StructgenWarning, stacklevel=stacklevel + 1)
