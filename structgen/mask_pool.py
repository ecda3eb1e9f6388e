"""Identical masks stored once per process.

Many configurations of a grammar allow exactly the same tokens (every position inside a
string body, after each comma of an array, ...), and grammars of one tokenizer share masks
too: over 32 MaskBench schemas walked on Llama-3, 43 masks were computed per grammar but
only 19.5 distinct per grammar and 12 distinct per grammar across all of them. At 16 KB per
mask (128K vocabulary) the copies were most of a grammar's memory.

:func:`share` returns the stored array with the same words when there is one (a hash of the
words as key, confirmed by comparing them), else stores the given one. Stored arrays are
held weakly: a mask lives as long as some grammar's memo holds it.
"""
from __future__ import annotations

import threading
import weakref

import numpy as np

from . import _core

__all__ = ["share"]

_pool: "weakref.WeakValueDictionary[tuple[int, int], np.ndarray]" = weakref.WeakValueDictionary()
_lock = threading.Lock()


def share(mask: np.ndarray) -> np.ndarray:
    """``mask``, or an equal read-only mask already stored (then ``mask`` can be dropped).
    ``mask`` must be read-only and contiguous: it is shared from now on."""
    key = (_core.mask_hash(mask), mask.shape[0])
    with _lock:
        hit = _pool.get(key)
        if hit is not None and hit.dtype == mask.dtype and _core.same_bytes(hit, mask):
            return hit
        if hit is None:  # a different mask under the same key (a hash collision) stays unshared
            _pool[key] = mask
    return mask
