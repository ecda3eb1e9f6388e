"""Filling the rows of a batch bitmask from many matchers in one call.

:func:`fill_next_token_bitmasks` is what a serving loop calls once per decoding step, with
one matcher per row (distinct grammars welcome). Rows whose masks are memoised cost one
lookup each in Python and are filled by the native core in one call with the GIL released:
mask copy, zero tail and, for matchers that track member names (structgen.runtime.names),
the name clears. Masks not computed yet are computed by a small thread pool meanwhile, each
task filling the rows that wait for its mask. The result is bit for bit what
:meth:`GrammarMatcher.fill_next_token_bitmask` writes row by row.

Threads help where the work releases the GIL: the mask computation and the name clears are
native; what stays in Python is the bookkeeping around them (see docs/performance.md for the
measured speedup of two threads). Memoised rows gain nothing from threads and are never
sent to the pool.
"""
from __future__ import annotations

import concurrent.futures
import os
import threading
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

_pools: dict[int, concurrent.futures.ThreadPoolExecutor] = {}
_pools_lock = threading.Lock()


def _pool(threads: int) -> concurrent.futures.ThreadPoolExecutor:
    with _pools_lock:
        pool = _pools.get(threads)
        if pool is None:
            pool = _pools[threads] = concurrent.futures.ThreadPoolExecutor(
                max_workers=threads, thread_name_prefix="structgen-fill")
        return pool


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
        threads: threads computing the masks not memoised yet (default
            :data:`DEFAULT_THREADS`; ``1``: in the calling thread). Memoised masks are
            copied in the calling thread whatever this says.

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
    masks: list[np.ndarray | None] = []
    names: list[Any] = []  # the row's NameIndex, or None: no name tracking
    states: list[Any] = []
    cids: list[int] = []
    # (id(index), cid) -> positions in the lists waiting for that mask
    missing: dict[tuple[int, int], list[int]] = {}
    indexes: dict[int, tuple[Any, Any]] = {}
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
        if m._terminated:
            masks.append(stop_mask(m.compiled.tokenizer_info, index.words))
            names.append(None)
            states.append(None)
            cids.append(0)
            continue
        cid = m._history[-1]
        mask = index._masks.get(cid)
        if mask is None:
            key = (id(index), cid)
            waiting = missing.get(key)
            if waiting is None:
                waiting = missing[key] = []
                indexes[key[0]] = (index, m.compiled.background)
            waiting.append(len(masks))
        masks.append(mask)
        if m._names is None:
            names.append(None)
            states.append(None)
        else:
            index._sync_limit()  # the name clears' searches may create configurations
            names.append(m._name_index)
            states.append(m._names[-1])
        cids.append(cid)
    if not out_rows:
        return
    if not arr.flags.writeable:
        raise MatcherError("bitmask is read-only")
    # the native fill writes whole C-ordered rows: a strided view is filled through a copy
    target = arr if arr.flags.c_contiguous else np.ascontiguousarray(arr)
    if not missing:
        _guarded(_core.fill_batch, target, out_rows, masks, names, states, cids)
    else:
        _fill_missing(target, out_rows, masks, names, states, cids, missing, indexes,
                      DEFAULT_THREADS if threads is None else threads)
    if target is not arr:
        arr[out_rows] = target[out_rows]


def _fill_missing(arr: np.ndarray, rows: list[int], masks: list[np.ndarray | None], names: list[Any],
                  states: list[Any], cids: list[int], missing: dict[tuple[int, int], list[int]],
                  indexes: dict[int, tuple[Any, Any]], threads: int) -> None:
    """Compute the missing masks, each task filling the rows waiting for its mask (name
    clears included), while the calling thread fills the rows whose masks are memoised."""
    hits = [k for k, mk in enumerate(masks) if mk is not None]

    def fill(ks: list[int], mask: np.ndarray | None = None) -> None:
        _guarded(_core.fill_batch, arr, [rows[k] for k in ks], [mask if mask is not None else masks[k] for k in ks],
                 [names[k] for k in ks], [states[k] for k in ks], [cids[k] for k in ks])

    def compute(key: tuple[int, int]) -> None:
        index, task = indexes[key[0]]
        fill(missing[key], compute_mask(index, key[1], task))

    keys = list(missing)
    if threads == 1 or len(keys) == 1:
        if hits:
            fill(hits)
        for key in keys:
            compute(key)
        return
    # One task per thread, each computing a share of the missing masks, the calling thread
    # taking the first share after the memoised rows: a task per mask cost more in submitting,
    # futures and GIL hand-offs than a first-visit mask of a small grammar takes.
    shares = [keys[i::threads] for i in range(min(threads, len(keys)))]

    def run(share: list[tuple[int, int]]) -> None:
        for key in share:
            compute(key)

    pool = _pool(threads - 1)
    futures = [pool.submit(run, share) for share in shares[1:]]
    try:
        if hits:
            fill(hits)  # releases the GIL for the copies and clears
        run(shares[0])
    finally:
        concurrent.futures.wait(futures)  # no thread writes to the bitmask after the call
    for fut in futures:
        fut.result()  # a task's error (a LimitError, say) is the call's
