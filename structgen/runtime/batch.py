"""Filling the rows of a batch bitmask from many matchers in one call.

:func:`fill_next_token_bitmasks` is what a serving loop calls once per decoding step, with
one matcher per row (distinct grammars welcome). Rows whose masks are memoised cost one
lookup each in Python and are copied by the native core in one call with the GIL released;
masks not computed yet are computed by a small thread pool meanwhile. Rows of matchers that
track member names (structgen.runtime.names) are filled by the native core mask and name
clears together, also without the GIL: those waiting for a missing mask by the pool task
that computes it, the others by the calling thread while the pool works. The result is bit
for bit what :meth:`GrammarMatcher.fill_next_token_bitmask` writes row by row.

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
from .names import name_index
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
    arr = _as_matrix(bitmask)
    batch, words = arr.shape
    if indices is None:
        rows = list(range(len(matchers)))
    else:
        rows = [int(i) for i in indices]
        if len(rows) != len(matchers):
            raise MatcherError(f"{len(rows)} indices for {len(matchers)} matchers")
    if len(set(rows)) != len(rows):
        raise MatcherError("a bitmask row is named twice in indices")
    out_rows: list[int] = []
    out_masks: list[np.ndarray | None] = []
    # rows of matchers with name tracking: filled natively, mask and name clears in one call
    named: list[tuple[int, Any, Any, int]] = []  # (row, name index, name state, configuration)
    # (id(index), cid) -> (positions in out_*, positions in named) waiting for that mask
    missing: dict[tuple[int, int], tuple[list[int], list[int]]] = {}
    indexes: dict[int, tuple[Any, Any]] = {}
    for m, r in zip(matchers, rows):
        if m is None:
            continue
        if not 0 <= r < batch:
            raise MatcherError(f"index {r} is outside the bitmask's batch of {batch}")
        index = m._index
        if index.words > words:
            raise MatcherError(f"bitmask row has {words} words but the vocabulary needs {index.words} "
                               f"(vocab_size={m.compiled.tokenizer_info.vocab_size})")
        if m._terminated:
            out_rows.append(r)
            out_masks.append(stop_mask(m.compiled.tokenizer_info, index.words))
            continue
        cid = m._history[-1]
        mask = index.mask_if_ready(cid)
        waiting = None
        if mask is None:
            key = (id(index), cid)
            waiting = missing.get(key)
            if waiting is None:
                waiting = missing[key] = ([], [])
                indexes[key[0]] = (index, m.compiled.background)
        if m._names is not None:
            index._sync_limit()  # the name clears' searches may create configurations
            if waiting is not None:
                waiting[1].append(len(named))
            named.append((r, name_index(index), m._names[-1], cid))
            continue
        if waiting is not None:
            waiting[0].append(len(out_rows))
        out_rows.append(r)
        out_masks.append(mask)
    if missing:
        _fill_missing(arr, out_rows, out_masks, named, missing, indexes, DEFAULT_THREADS if threads is None else threads)
        return
    if out_rows:
        _core.fill_rows(arr, np.array(out_rows, np.int64), out_masks)
    if named:
        _fill_named(arr, named)


def _fill_named(arr: np.ndarray, named: list[tuple[int, Any, Any, int]]) -> None:
    """Rows of matchers with name tracking: mask, zero tail and name clears, natively and
    without the GIL (structgen.runtime.names)."""
    r, ni, st, cid = zip(*named)
    _guarded(_core.fill_named_rows, arr, r, ni, st, cid)


def _fill_missing(arr: np.ndarray, rows: list[int], masks: list[np.ndarray | None],
                  named: list[tuple[int, Any, Any, int]], missing: dict[tuple[int, int], tuple[list[int], list[int]]],
                  indexes: dict[int, tuple[Any, Any]], threads: int) -> None:
    """Compute the missing masks (in a pool when there are several; each task then fills the
    named rows waiting for its mask, names included) while the calling thread copies the
    memoised rows and fills the other named rows, then copy the rest."""
    hits = [k for k, mk in enumerate(masks) if mk is not None]
    later = {j for _, (_, js) in missing.items() for j in js}
    ready = [named[j] for j in range(len(named)) if j not in later]

    def compute(key: tuple[int, int]) -> np.ndarray:
        index, task = indexes[key[0]]
        mask = compute_mask(index, key[1], task)
        js = missing[key][1]
        if js:
            _fill_named(arr, [named[j] for j in js])
        return mask

    if threads == 1 or len(missing) == 1:
        if hits:
            _core.fill_rows(arr, np.array([rows[k] for k in hits], np.int64), [masks[k] for k in hits])
        if ready:
            _fill_named(arr, ready)
        for key, (where, _) in missing.items():
            mask = compute(key)
            for k in where:
                masks[k] = mask
    else:
        # One task per thread, each computing a share of the missing masks, the calling thread
        # taking the first share after the copies: a task per mask cost more in submitting,
        # futures and GIL hand-offs than a first-visit mask of a small grammar takes.
        keys = list(missing)
        shares = [keys[i::threads] for i in range(min(threads, len(keys)))]

        def run(share: list[tuple[int, int]]) -> list[tuple[tuple[int, int], np.ndarray]]:
            return [(key, compute(key)) for key in share]

        pool = _pool(threads - 1)
        futures = [pool.submit(run, share) for share in shares[1:]]
        # meanwhile, here: the copies and the ready named rows release the GIL
        if hits:
            _core.fill_rows(arr, np.array([rows[k] for k in hits], np.int64), [masks[k] for k in hits])
        if ready:
            _fill_named(arr, ready)
        results = run(shares[0])
        for fut in futures:
            results.extend(fut.result())
        for key, mask in results:
            for k in missing[key][0]:
                masks[k] = mask
    done = set(hits)
    rest = [k for k in range(len(rows)) if k not in done]
    if rest:
        _core.fill_rows(arr, np.array([rows[k] for k in rest], np.int64), [masks[k] for k in rest])
