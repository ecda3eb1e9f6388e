"""Seeded random walks over allowed tokens (test helper)."""
from __future__ import annotations

import numpy as np

STRUCTURAL = set(b'"{}[],:0123456789-')


def structural_tokens(info) -> np.ndarray:
    """Short tokens made of JSON punctuation and digits: steering walks towards an end."""
    ids = [i for i, b in enumerate(info.token_bytes) if b and len(b) <= 2 and set(b) <= STRUCTURAL]
    return np.array(ids, dtype=np.int64)


def random_walk(matcher, info, rng: np.random.Generator, *, max_steps: int = 300, preferred=None,
                stop_p: float = 0.25, prefer_p: float = 0.75, on_step=None):
    """Sample only allowed tokens until a stop token; returns (output bytes, terminated, states).

    Checks on the way: no dead end (empty mask before termination), a stop token is allowed
    exactly when the matcher says the output is complete, and every allowed token is accepted.
    With probability ``stop_p`` a stop token is taken when allowed, with ``prefer_p`` a token
    from ``preferred`` (short structural tokens steer walks towards an end).
    """
    out = bytearray()
    states = []
    stops = list(info.stop_token_ids)
    for _ in range(max_steps):
        allowed = matcher.allowed_token_ids()
        assert len(allowed) > 0, f"dead end (empty mask, not terminated) after {bytes(out)!r}"
        states.append(matcher.state)
        if on_step is not None:
            on_step()
        stop_ok = any(s in allowed for s in stops)
        assert stop_ok == matcher.is_completed(), f"stop allowed={stop_ok} but is_completed={matcher.is_completed()}"
        r = rng.random()
        if stop_ok and r < stop_p:
            tok = stops[0]
        elif preferred is not None and len(preferred) and r < prefer_p:
            cand = np.intersect1d(allowed, preferred, assume_unique=True)
            tok = int(rng.choice(cand if len(cand) else allowed))
        else:
            tok = int(rng.choice(allowed))
        assert matcher.accept_token(tok), f"allowed token {tok} ({info.token_bytes[tok]!r}) rejected after {bytes(out)!r}"
        if matcher.is_terminated():
            return bytes(out), True, states
        out += info.token_bytes[tok]
    return bytes(out), False, states


def budget_walk(compiled, info, rng: np.random.Generator, max_new_tokens: int, *, stop_p: float = 0.1,
                on_step=None):
    """A walk under budget-aware masking (``structgen.runtime.budget.TokenBudget``), at most
    ``max_new_tokens`` tokens; returns (output bytes, terminated, tokens taken, matcher).

    Checks on the way: the budgeted mask is never empty and only narrows the grammar's mask;
    the budget's plan always fits in what is left; every allowed token is accepted.
    Sampling is uniform over allowed tokens (long strings and deep nesting are likely).
    """
    from structgen import GrammarMatcher, allocate_token_bitmask
    from structgen.runtime.budget import TokenBudget

    matcher = GrammarMatcher(compiled)
    budget = TokenBudget(compiled, max_new_tokens)
    bitmask = allocate_token_bitmask(1, info.vocab_size, backend="numpy")
    stops = set(info.stop_token_ids)
    out = bytearray()
    for step in range(max_new_tokens):
        assert len(budget.plan) <= budget.remaining == max_new_tokens - step
        matcher.fill_next_token_bitmask(bitmask)
        full = np.unpackbits(bitmask[0].view(np.uint8), bitorder="little")[: info.vocab_size].astype(bool)
        budget.restrict(matcher.state, bitmask, names=matcher.name_state)
        bits = np.unpackbits(bitmask[0].view(np.uint8), bitorder="little")[: info.vocab_size].astype(bool)
        allowed = np.flatnonzero(bits)
        assert len(allowed), f"budgeted mask empty after {bytes(out)!r} with {budget.remaining} tokens left"
        assert not (bits & ~full).any(), "the budget allowed a token the grammar forbids"
        if on_step is not None:
            on_step()
        stop_ok = [t for t in allowed.tolist() if t in stops]
        tok = stop_ok[0] if stop_ok and rng.random() < stop_p else int(rng.choice(allowed))
        assert matcher.accept_token(tok), f"allowed token {tok} rejected after {bytes(out)!r}"
        budget.advance(tok, matcher.state, matcher.is_terminated(), names=matcher.name_state)
        if matcher.is_terminated():
            return bytes(out), True, step + 1, matcher
        out += info.token_bytes[tok]
    return bytes(out), False, max_new_tokens, matcher
