"""Filling the rows of a batch bitmask from many matchers in one call.

:func:`fill_next_token_bitmasks` is what a serving loop calls once per decoding step, with
one matcher per row (distinct grammars welcome). Python reads each matcher's position (a
few attribute reads per row); one native call with the GIL released then fills every row:
memoised masks are copied (zero tail and, for matchers that track member names,
structgen.runtime.names, the name clears), and the missing masks are computed by a pool of
native threads, each thread taking the next missing configuration from a shared counter.
While a grammar of the batch has a background precompute running (whose demand protocol
is in Python), the rows whose masks are missing are handed back instead and filled by a
second call. The result is bit for bit what
:meth:`GrammarMatcher.fill_next_token_bitmask` writes row by row.

Threads help where the work is native: the mask computation and the name clears. What
stays in Python is reading each matcher's position (see docs/performance.md for the
measured speedup of two threads). In a step with masks to compute, the rows whose masks are
memoised are items of the same pool loop, after the missing masks; in a step without, the
calling thread copies them alone (waking a thread costs more than a few copies).
"""
from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np

from .. import _core
from ..errors import MatcherError
from ..index.token_index import _guarded
from .matcher import GrammarMatcher, stop_mask
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
    batch, words = arr.shape
    if indices is None:
        rows: Sequence[int] = range(len(matchers))
        checked = len(matchers) <= batch  # every row in range: no check per row
    else:
        rows = [int(i) for i in indices]
        if len(rows) != len(matchers):
            raise MatcherError(f"{len(rows)} indices for {len(matchers)} matchers")
        if len(set(rows)) != len(rows):
            raise MatcherError("a bitmask row is named twice in indices")
        checked = False
    # one entry per row to fill, in the argument lists of _core.fill_batch
    out_rows: list[int] = []
    views: list[int] = []
    cids: list[int] = []
    names: list[Any] = []  # the row's NameIndex, or None: no name tracking
    states: list[Any] = []
    stops: list[np.ndarray | None] = []  # a terminated matcher's stop-token mask
    indexes: dict[int, tuple[Any, Any]] = {}  # view -> (TokenIndex, its background task)
    stop_masks: dict[int, np.ndarray] = {}  # id(TokenizerInfo) -> its stop mask (the lookup is a weak dict's)
    for m, r in zip(matchers, rows):
        if m is None:
            continue
        if not checked and not 0 <= r < batch:
            raise MatcherError(f"index {r} is outside the bitmask's batch of {batch}")
        index = m._index
        if index.words > words:
            raise MatcherError(f"bitmask row has {words} words but the vocabulary needs {index.words} "
                               f"(vocab_size={m.compiled.tokenizer_info.vocab_size})")
        out_rows.append(r)
        view = index._view
        views.append(view)
        if view not in indexes:
            indexes[view] = (index, m.compiled.background)
            if index._counted:  # first visits and name clears may create configurations
                index._sync_limit()
        if m._terminated:
            info = m.compiled.tokenizer_info
            stop = stop_masks.get(id(info))
            if stop is None:
                stop = stop_masks[id(info)] = stop_mask(info, index.words)
            stops.append(stop)
            cids.append(0)
            names.append(None)
            states.append(None)
            continue
        stops.append(None)
        cids.append(m._history[-1])
        if m._names is None:
            names.append(None)
            states.append(None)
        else:
            names.append(m._name_index)
            states.append(m._names[-1])
    if not out_rows:
        return
    if not arr.flags.writeable:
        raise MatcherError("bitmask is read-only")
    # the native fill writes whole C-ordered rows: a strided view is filled through a copy
    target = arr if arr.flags.c_contiguous else np.ascontiguousarray(arr)
    args = (out_rows, views, cids, names, states, stops)
    threads = DEFAULT_THREADS if threads is None else threads
    # one GIL-free call; only while a grammar's background precompute runs are its missing
    # masks handed back (its demand protocol is in Python), and every other missing mask too
    compute = all(task is None or task.finished.is_set() for _, task in indexes.values())
    missing = _guarded(_core.fill_batch, target, *args, compute, threads)
    if missing:
        _fill_missing(target, args, missing, indexes, threads)
    if target is not arr:
        arr[out_rows] = target[out_rows]


def _fill_missing(arr: np.ndarray, args: tuple[list, ...], missing: list[int],
                  indexes: dict[int, tuple[Any, Any]], threads: int) -> None:
    """Fill the rows whose masks are not computed yet, in one native call whose pool of
    ``threads`` threads computes the missing masks without the GIL, taking one configuration
    at a time from a shared counter (a few large masks do not leave a thread idle)."""
    rows, views, cids, names, states, stops = args
    waited: set[tuple[int, int]] = set()
    for k in missing:
        index, task = indexes[views[k]]
        if task is not None and not task.finished.is_set() and (views[k], cids[k]) not in waited:
            waited.add((views[k], cids[k]))
            compute_mask(index, cids[k], task)  # the background task's workers wait for it meanwhile
    _guarded(_core.fill_batch, arr, [rows[k] for k in missing], [views[k] for k in missing],
             [cids[k] for k in missing], [names[k] for k in missing], [states[k] for k in missing],
             [stops[k] for k in missing], True, threads)
