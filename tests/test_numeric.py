"""int_range_expr matches exactly the canonical decimals of the integers in [lo, hi]."""
from __future__ import annotations

import random

import pytest

from structgen.grammar import NOTHING, Alt, CharSet, Expr, Lit, Repeat, Seq
from structgen.schema.numeric import int_range_expr

from .exprmatch import expr_fullmatch

# --------------------------------------------------------------------------- reference matcher


def _nodes(e: Expr):
    yield e
    for child in (e.items if isinstance(e, Seq) else e.options if isinstance(e, Alt)
                  else (e.item,) if isinstance(e, Repeat) else ()):
        yield from _nodes(child)


# --------------------------------------------------------------------------- checks

NON_CANONICAL = ["", "-", "-0", "00", "007", "01", "-01", "-007", "+1", "+0", "1.0", " 1", "1 ",
                 "--1", "0x10", "1e3", "٣"]


def _in(n: int, lo: int | None, hi: int | None) -> bool:
    return (lo is None or lo <= n) and (hi is None or n <= hi)


def _probes(lo: int | None, hi: int | None, rng: random.Random) -> set[int]:
    """Integers worth testing: windows around the bounds, 0 and powers of ten, random ones."""
    centres = [0]
    for b in (lo, hi):
        if b is not None:
            centres.append(b)
            for k in range(len(str(abs(b))) + 2):
                centres += [10 ** k, -(10 ** k)]
    out = {c + d for c in centres for d in range(-40, 41)}
    span = max(abs(lo or 0), abs(hi or 0), 10) * 10
    for _ in range(300):
        out.add(rng.randint(-span, span))
        if lo is not None and hi is not None:
            out.add(rng.randint(lo, hi))
    return out


def _check(lo: int | None, hi: int | None, seed: int = 0) -> None:
    e = int_range_expr(lo, hi)
    for node in _nodes(e):
        assert isinstance(node, (Lit, CharSet, Seq, Alt, Repeat)), node
    rng = random.Random(seed)
    for n in sorted(_probes(lo, hi, rng)):
        assert expr_fullmatch(e, str(n)) == _in(n, lo, hi), (lo, hi, n)
    for s in NON_CANONICAL:
        assert not expr_fullmatch(e, s), (lo, hi, s)
    # non-canonical spellings of in-range numbers (leading zeros) never match
    for n in list(_probes(lo, hi, rng))[:50]:
        body = str(abs(n))
        sign = "-" if n < 0 else ""
        assert not expr_fullmatch(e, sign + "0" + body), (lo, hi, n)


PAIRS = [
    (0, 0), (0, 9), (1, 9), (0, 10), (5, 5), (7, 123), (10, 99), (10, 100), (9, 10), (1, 100),
    (13, 1234), (100, 999), (15, 15_000_000), (999, 1000), (123, 456), (-5, 5), (-1, 0), (-1, 1),
    (-10, -1), (-120, -3), (-999, -100), (-1000, 1000), (-37, 4096), (0, None), (1, None),
    (7, None), (10, None), (99, None), (100, None), (12345, None), (None, 0), (None, -1),
    (None, 5), (None, -10), (None, -999), (None, 1000), (-7, None), (-100, None), (None, None),
    (2 ** 31 - 1, 2 ** 31 + 5), (-(2 ** 63), 2 ** 63 - 1), (-(2 ** 53) + 1, 2 ** 53 - 1),
    (10 ** 20, 10 ** 25 - 1), (123456789012345678901234567890, None),
    (None, -98765432109876543210), (0, 2 ** 64 - 1),
]


@pytest.mark.parametrize("lo,hi", PAIRS)
def test_pairs(lo: int | None, hi: int | None) -> None:
    _check(lo, hi)


def test_small_ranges_exhaustive() -> None:
    values = list(range(-23, 24, 3)) + [-10, -1, 0, 1, 9, 10, 11, 19, 20, 99, 100, 101]
    for lo in values:
        for hi in values:
            if lo <= hi:
                e = int_range_expr(lo, hi)
                for n in range(-130, 131):
                    assert expr_fullmatch(e, str(n)) == (lo <= n <= hi), (lo, hi, n)


@pytest.mark.parametrize("seed", range(10))
def test_random_pairs(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(6):
        a = rng.randint(-(10 ** rng.randint(0, 25)), 10 ** rng.randint(0, 25))
        b = rng.randint(-(10 ** rng.randint(0, 25)), 10 ** rng.randint(0, 25))
        lo, hi = min(a, b), max(a, b)
        lo = None if rng.random() < 0.1 else lo
        hi = None if rng.random() < 0.1 else hi
        _check(lo, hi, seed)


def test_empty_range() -> None:
    assert int_range_expr(5, 4) == NOTHING
    assert int_range_expr(0, -1) == NOTHING
    assert int_range_expr(-3, -10) == NOTHING


def test_unbounded_uses_open_repeat() -> None:
    digit = CharSet(((0x30, 0x39),))
    for lo, hi in [(0, None), (None, 0), (None, None), (123, None)]:
        reps = [n for n in _nodes(int_range_expr(lo, hi)) if isinstance(n, Repeat)]
        assert any(r.item == digit and r.max is None for r in reps), (lo, hi)


@pytest.mark.parametrize("digits", [1, 5, 20, 60])
def test_size_linear_in_digits(digits: int) -> None:
    rng = random.Random(digits)
    for _ in range(20):
        a = rng.randrange(10 ** (digits - 1), 10 ** digits) * rng.choice([1, -1])
        b = rng.randrange(10 ** (digits - 1), 10 ** digits)
        lo, hi = min(a, b), max(a, b)
        size = sum(1 for _ in _nodes(int_range_expr(lo, hi)))
        assert size <= 40 * digits + 20, (lo, hi, size)
