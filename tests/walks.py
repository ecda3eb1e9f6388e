"""Seeded random walks over allowed tokens (test helper)."""
from __future__ import annotations

import numpy as np

STRUCTURAL = set(b'"{}[],:0123456789-')


def structural_tokens(info) -> np.ndarray:
    """Short tokens made of JSON punctuation and digits: steering walks towards an end."""
    ids = [i for i, b in enumerate(info.token_bytes) if b and len(b) <= 2 and set(b) <= STRUCTURAL]
    return np.array(ids, dtype=np.int64)


def random_walk(matcher, info, rng: np.random.Generator, *, max_steps: int = 300, preferred=None):
    """Sample only allowed tokens until a stop token; returns (output bytes, terminated, states)."""
    out = bytearray()
    states = []
    stops = list(info.stop_token_ids)
    for _ in range(max_steps):
        allowed = matcher.allowed_token_ids()
        assert len(allowed) > 0, f"dead end after {bytes(out)!r}"
        states.append(matcher.state)
        stop_ok = any(s in allowed for s in stops)
        r = rng.random()
        if stop_ok and r < 0.25:
            tok = stops[0]
        elif preferred is not None and r < 0.75:
            cand = np.intersect1d(allowed, preferred, assume_unique=True)
            tok = int(rng.choice(cand if len(cand) else allowed))
        else:
            tok = int(rng.choice(allowed))
        assert matcher.accept_token(tok), f"allowed token {tok} rejected after {bytes(out)!r}"
        if matcher.is_terminated():
            return bytes(out), True, states
        out += info.token_bytes[tok]
    return bytes(out), False, states
