"""Filling the rows of a batch bitmask from many matchers in one call.

:func:`fill_next_token_bitmasks` is what a serving loop calls once per decoding step, with
one matcher per row (distinct grammars welcome). One native call reads each matcher's
position (its slots, through the C API: a Python loop over the rows was the largest serial
part of a step) and, with the GIL released, fills every row: memoised masks are copied (zero
tail and, for matchers that track member names, structgen.runtime.names, the name clears),
and the missing masks are computed by a pool of native threads, each thread taking the next
missing configuration from a shared counter, the first ones while the call is still reading
the other matchers. While a grammar of the batch has a background
precompute running (whose demand protocol is in Python), its rows whose masks are missing
are handed back instead and filled by a second call. The result is bit for bit what
:meth:`GrammarMatcher.fill_next_token_bitmask` writes row by row.

In a step with masks to compute, the rows whose masks are memoised are items of the same
pool loop, after the missing masks; in a step without, the calling thread copies them alone
(waking a thread costs more than a few copies). See docs/performance.md for the measured
speedup of two threads.
"""
from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np

from .. import _core
from ..errors import MatcherError
from ..index import counters
from ..index.token_index import _guarded
from .matcher import GrammarMatcher
from .precompute import compute_mask

__all__ = ["DEFAULT_THREADS", "fill_next_token_bitmasks"]

DEFAULT_THREADS = max(1, min(4, os.cpu_count() or 1))
"""Threads computing a batch's missing masks when ``threads`` is not given."""


def _as_matrix(bitmask: Any) -> np.ndarray:
    """A writable 2-D numpy view of a CPU int32 bitmask (numpy array or torch tensor)."""
    arr = bitmask
    if not isinstance(arr, np.ndarray):
        device = getattr(bitmask, "device", None)
        if device is not None and device.type != "cpu":
            raise MatcherError(f"fill the bitmask on the CPU and copy it to {device} afterwards "
                               f"(apply_token_bitmask_inplace accepts a CPU bitmask and moves it)")
        arr = bitmask.numpy()
    if arr.dtype != np.int32 or arr.ndim not in (1, 2):
        raise MatcherError(f"bitmask must be int32 of shape (batch, words) or (words,), "
                           f"found {arr.dtype} of shape {arr.shape}")
    return arr.reshape(1, -1) if arr.ndim == 1 else arr


def fill_next_token_bitmasks(
    matchers: Sequence[GrammarMatcher | None],
    bitmask: Any,
    indices: Sequence[int] | None = None,
    *,
    threads: int | None = None,
) -> None:
    """Fill one row of ``bitmask`` per matcher, as each matcher's
    :meth:`~GrammarMatcher.fill_next_token_bitmask` would, in one call.

    Args:
        matchers: one matcher per row to fill; ``None`` leaves its row untouched (an
            unconstrained request). Matchers of different grammars may be mixed.
        bitmask: CPU int32 numpy array or torch tensor ``(batch, words)``.
        indices: the row of ``bitmask`` each matcher fills (default ``0, 1, ...``); rows
            not named are left as they are.
        threads: threads computing the masks not memoised yet and the member-name
            clears (default :data:`DEFAULT_THREADS`; ``1``: in the calling thread).

    Raises:
        MatcherError: a bitmask of the wrong kind or too narrow for a vocabulary, a row
            outside the batch, a row named twice, or ``indices`` of another length.
    """
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise MatcherError(f"threads must be an int >= 1, not {threads!r}")
    if indices is None and len(matchers) == 1 and matchers[0] is not None:
        # batch 1 (a local generate()): the matcher's own one-call fill is the same bits
        matchers[0].fill_next_token_bitmask(bitmask, 0)
        return
    arr = _as_matrix(bitmask)
    live = matchers if type(matchers) is list else list(matchers)
    rows: list[int] | None = None  # default: row k for matchers[k]
    if indices is not None:
        rows = [int(i) for i in indices]
        if len(rows) != len(live):
            raise MatcherError(f"{len(rows)} indices for {len(live)} matchers")
        if len(set(rows)) != len(rows):
            raise MatcherError("a bitmask row is named twice in indices")
    if not arr.flags.writeable:
        raise MatcherError("bitmask is read-only")
    # the native fill writes whole C-ordered rows: a strided view is filled through a copy
    target = arr if arr.flags.c_contiguous else np.ascontiguousarray(arr)
    threads = DEFAULT_THREADS if threads is None else threads
    # One call reads every matcher's position and fills every row, its masks computed by the
    # native pool without the GIL. Only a grammar whose background precompute is running has
    # its missing masks handed back (its demand protocol is in Python): see _fill_handed_back.
    try:
        handed = _guarded(_core.fill_matchers, target, live, rows, counters.MAX_CONFIG_STACKS, False, threads)
    except ValueError as e:
        if type(e) is not ValueError:  # a LimitError (a configuration past the stack limit)
            raise
        raise MatcherError(str(e)) from None  # the native fill's refusal of its arguments
    if handed:
        _fill_handed_back(target, [live[k] for k in handed], handed if rows is None else [rows[k] for k in handed],
                          threads)
    if target is not arr:
        filled = [r for r, m in zip(range(len(live)) if rows is None else rows, live) if m is not None]
        arr[filled] = target[filled]


def _fill_handed_back(arr: np.ndarray, matchers: list[GrammarMatcher], rows: list[int], threads: int) -> None:
    """Fill the rows whose masks are missing while their grammar's background precompute
    runs: each missing mask is asked of the precompute first (its workers wait for it
    meanwhile), then one native call fills the rows, computing whatever is still missing."""
    waited: set[tuple[int, int]] = set()
    for m in matchers:
        index, task = m._index, m.compiled.background
        cid = m._history[-1]
        if m._terminated or task is None or task.finished.is_set() or (index._view, cid) in waited:
            continue
        waited.add((index._view, cid))
        compute_mask(index, cid, task)
    _guarded(_core.fill_matchers, arr, matchers, rows, counters.MAX_CONFIG_STACKS, True, threads)
