"""The reference for token masks (test oracle): every token of the vocabulary stepped byte by
byte through the configuration's rows, with no trie, no plain/text split, no bulk sets.

Vectorised over tokens (one gather per byte position) so that a 152K vocabulary takes tens of
milliseconds per mask, not the seconds a per-token Python loop would take.
"""
from __future__ import annotations

import weakref

import numpy as np

from structgen.index.token_index import DEAD
from structgen.runtime.matcher import GrammarMatcher

from .walks import random_walk, structural_tokens

_PADDED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _padded(info) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Token ids with bytes, their lengths, and their bytes as a zero-padded matrix."""
    hit = _PADDED.get(info)
    if hit is None:
        ids = np.array([i for i, b in enumerate(info.token_bytes) if b], np.int64)
        lens = np.array([len(info.token_bytes[i]) for i in ids], np.int64)
        mat = np.zeros((len(ids), int(lens.max())), np.uint8)
        for k, i in enumerate(ids.tolist()):
            data = info.token_bytes[i]
            mat[k, :len(data)] = np.frombuffer(data, np.uint8)
        hit = _PADDED[info] = (ids, lens, mat)
    return hit


def reference_mask(index, cid: int) -> np.ndarray:
    """The packed int32 mask of configuration ``cid``, token by token."""
    info = index.info
    ids, lens, mat = _padded(info)
    states = np.full(len(ids), cid, np.int64)
    for j in range(mat.shape[1]):
        live = np.flatnonzero((lens > j) & (states != DEAD))
        if not len(live):
            break
        uniq, inv = np.unique(states[live], return_inverse=True)
        rows = np.stack([index.next_configs(c) for c in uniq.tolist()])  # computed on demand
        states[live] = rows[inv.reshape(-1), mat[live, j]]
    allowed = np.zeros(index.words * 32, bool)
    allowed[ids[states != DEAD]] = True
    if index.is_accepting(cid):
        allowed[list(info.stop_token_ids)] = True
    return np.packbits(allowed, bitorder="little").view("<i4")


# schemas the native-vs-reference tests share: string bodies (plain/text splits), declared and
# additional names, numbers, bounded strings; recursion (deep stacks) and a counted array
STRING_AND_RECURSION_SCHEMAS: list[dict] = [
    {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                                      "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}}},
     "required": ["name"]},
    {"$defs": {"node": {"type": "object", "properties": {
        "v": {"type": "string", "pattern": "^[a-z é]*$"},
        "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 40}}}},
     "$ref": "#/$defs/node"},
]


def walks_match_reference(compiled, info, rng: np.random.Generator, *, walks: int = 2, max_steps: int = 25) -> int:
    """Random walks (structural tokens preferred) asserting at every step that the mask equals
    :func:`reference_mask`; returns how many masks were compared."""
    preferred = structural_tokens(info)
    seen = 0
    for _ in range(walks):
        m = GrammarMatcher(compiled)

        def check() -> None:
            nonlocal seen
            seen += 1
            assert np.array_equal(compiled.index.mask(m.state), reference_mask(compiled.index, m.state))

        random_walk(m, info, rng, max_steps=max_steps, preferred=preferred, on_step=check)
    return seen
