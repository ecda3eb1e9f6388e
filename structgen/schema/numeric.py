"""Integer ranges as regular expressions over canonical decimal text.

JSON Schema's ``minimum``/``maximum`` on integers become a regular language: the canonical
decimal strings (no leading zeros, ``0`` for zero, ``-`` only before non-zero numbers) of the
integers in ``[lo, hi]``. :func:`int_range_expr` builds it with O(number of digits)
alternatives by splitting on digit count and then on the first differing digit.
"""
from __future__ import annotations

from decimal import Decimal
from fractions import Fraction
from math import gcd
from typing import Any, Callable

from ..errors import AutomatonSizeError
from ..grammar import EMPTY, NOTHING, CharSet, Dfa, Expr, Lit, Repeat, alt, seq
from ..regex.regular import _dfa, _minimise

__all__ = ["int_range_expr", "number_range_expr", "multiples_expr", "integer_multiples_of_decimal",
           "number_multiples_of_decimal"]

_DIGIT = CharSet(((0x30, 0x39),))
_NONZERO = CharSet(((0x31, 0x39),))


def _digit_range(lo: int, hi: int) -> Expr:
    """One decimal digit in ``[lo, hi]``."""
    return Lit(str(lo)) if lo == hi else CharSet(((0x30 + lo, 0x30 + hi),))


def _digits(n: int) -> Expr:
    """Exactly ``n`` arbitrary digits."""
    return EMPTY if n == 0 else _DIGIT if n == 1 else Repeat(_DIGIT, n, n)


def _same_length(x: str, y: str) -> Expr:
    """Digit strings of ``len(x) == len(y)`` between ``x`` and ``y`` (leading zeros allowed).

    Splits at the first digit: ``x[0]`` then the tail ``>= x[1:]``, the digits strictly
    between with any tail, and ``y[0]`` then a tail ``<= y[1:]``. Tails of all 0s/all 9s
    are folded into the middle, so each side recurses along one path only: O(len) size.
    """
    if not x:
        return EMPTY
    if x[0] == y[0]:
        return seq(Lit(x[0]), _same_length(x[1:], y[1:]))
    n = len(x) - 1
    lo_d, hi_d = int(x[0]), int(y[0])
    low = high = None
    if x[1:] != "0" * n:
        low = seq(Lit(x[0]), _same_length(x[1:], "9" * n))
        lo_d += 1
    if y[1:] != "9" * n:
        high = seq(Lit(y[0]), _same_length("0" * n, y[1:]))
        hi_d -= 1
    middle = seq(_digit_range(lo_d, hi_d), _digits(n)) if lo_d <= hi_d else None
    return alt(*(p for p in (low, middle, high) if p is not None))


def _natural_range(lo: int, hi: int | None) -> Expr:
    """Canonical decimal strings of ``lo <= n <= hi`` for ``lo >= 0`` (``hi=None``: no bound)."""
    if hi is not None and hi < lo:
        return NOTHING
    parts: list[Expr] = []
    if lo == 0:  # "0" is the only canonical number starting with 0
        parts.append(Lit("0"))
        lo = 1
        if hi is not None and hi < 1:
            return parts[0]
    lo_len = len(str(lo))
    if hi is not None and len(str(hi)) == lo_len:
        parts.append(_same_length(str(lo), str(hi)))
        return alt(*parts)
    # Digit count of the first length all of whose numbers are in range.
    first_full = lo_len if lo == 10 ** (lo_len - 1) else lo_len + 1
    if first_full > lo_len:
        parts.append(_same_length(str(lo), "9" * lo_len))
    if hi is None:
        parts.append(seq(_NONZERO, Repeat(_DIGIT, first_full - 1, None)))
        return alt(*parts)
    hi_len = len(str(hi))
    last_full = hi_len if hi == 10 ** hi_len - 1 else hi_len - 1
    if first_full <= last_full:  # whole lengths in between: one alternative for all of them
        body = Repeat(_DIGIT, first_full - 1, last_full - 1)
        if first_full == last_full:
            body = _digits(first_full - 1)
        parts.append(seq(_NONZERO, body))
    if last_full < hi_len:
        parts.append(_same_length("1" + "0" * (hi_len - 1), str(hi)))
    return alt(*parts)


def int_range_expr(lo: int | None, hi: int | None) -> Expr:
    """Canonical decimal representations of the integers ``n`` with ``lo <= n <= hi``.

    ``None`` leaves that side unbounded. Canonical means no leading zeros, ``"0"`` for zero,
    ``"-"`` before negatives and never ``"-0"``. An empty range gives ``NOTHING``.
    """
    if lo is not None and hi is not None and lo > hi:
        return NOTHING
    parts: list[Expr] = []
    # Negatives n in [lo, min(hi, -1)] are "-" + m for m = -n in [max(1, -hi), -lo].
    if lo is None or lo < 0:
        m_lo = 1 if hi is None or hi >= 0 else -hi
        m_hi = None if lo is None else -lo
        parts.append(seq(Lit("-"), _natural_range(m_lo, m_hi)))
    if hi is None or hi >= 0:
        parts.append(_natural_range(0 if lo is None else max(lo, 0), hi))
    return alt(*parts)


# --------------------------------------------------------------------------- decimals

_ANY_DIGITS = Repeat(_DIGIT, 0, None)


def _split(v: Decimal) -> tuple[int, str]:
    """A non-negative decimal as (integer part, fraction digits without trailing zeros)."""
    i = int(v)
    frac = format(v - i, "f")
    return i, (frac.split(".")[1].rstrip("0") if "." in frac else "")


def _frac(low: str, low_strict: bool, high: str | None, high_strict: bool) -> tuple[bool, Expr]:
    """Digit strings F with 0.low <= 0.F <= 0.high (``<`` where strict; ``high=None``: below 1).

    Returns (whether the empty F qualifies, Expr of the non-empty ones). Recursion on the
    first digit of F: digits strictly between the bounds' first digits free the rest.
    """
    if high == "":  # upper bound is exactly 0 from here on
        if high_strict or low or low_strict:
            return False, NOTHING
        return True, Repeat(Lit("0"), 1, None)
    if not low and high is None:
        if low_strict:
            return False, seq(_ANY_DIGITS, _NONZERO, _ANY_DIGITS)
        return True, Repeat(_DIGIT, 1, None)
    empty_ok = not low and not low_strict  # F empty = value 0, above any upper bound > 0
    a0 = int(low[0]) if low else 0
    b0 = int(high[0]) if high is not None else 9
    options: list[Expr] = []

    def rest(lo_s: str, lo_st: bool, hi_s: str | None, hi_st: bool) -> Expr:
        e_ok, ne = _frac(lo_s, lo_st, hi_s, hi_st)
        return alt(*(([EMPTY] if e_ok else []) + ([ne] if ne != NOTHING else []))) if (e_ok or ne != NOTHING) else NOTHING

    if a0 == b0 and high is not None:
        options.append(seq(Lit(str(a0)), rest(low[1:], low_strict, high[1:], high_strict)))
    else:
        options.append(seq(Lit(str(a0)), rest(low[1:], low_strict, None, False)))
        if b0 - a0 >= 2:
            options.append(seq(_digit_range(a0 + 1, b0 - 1), _ANY_DIGITS))
        if high is None:
            if b0 > a0:
                options.append(seq(Lit(str(b0)), _ANY_DIGITS))
        else:
            options.append(seq(Lit(str(b0)), rest("", False, high[1:], high_strict)))
    return empty_ok, alt(*options)


def _fraction_part(empty_ok: bool, nonempty: Expr) -> Expr:
    parts = ([EMPTY] if empty_ok else []) + ([seq(Lit("."), nonempty)] if nonempty != NOTHING else [])
    return alt(*parts) if parts else NOTHING


def _magnitude_range(lo: Decimal, lo_strict: bool, hi: Decimal | None, hi_strict: bool) -> Expr:
    """``(0|[1-9][0-9]*)(\\.[0-9]+)?`` texts whose value v has lo <= v <= hi (strict as flagged)."""
    li, lf = _split(lo)
    if hi is None:
        return alt(seq(int_range_expr(li, li), _fraction_part(*_frac(lf, lo_strict, None, False))),
                   seq(int_range_expr(li + 1, None), _fraction_part(True, Repeat(_DIGIT, 1, None))))
    if hi < lo or (hi == lo and (lo_strict or hi_strict)):
        return NOTHING
    hi_i, hf = _split(hi)
    if li == hi_i:
        return seq(int_range_expr(li, li), _fraction_part(*_frac(lf, lo_strict, hf, hi_strict)))
    parts = [seq(int_range_expr(li, li), _fraction_part(*_frac(lf, lo_strict, None, False)))]
    if hi_i - 1 >= li + 1:
        parts.append(seq(int_range_expr(li + 1, hi_i - 1), _fraction_part(True, Repeat(_DIGIT, 1, None))))
    parts.append(seq(int_range_expr(hi_i, hi_i), _fraction_part(*_frac("", False, hf, hi_strict))))
    return alt(*parts)


def number_range_expr(lo: Decimal | None, lo_strict: bool, hi: Decimal | None, hi_strict: bool) -> Expr:
    """JSON numbers without exponent (``-?(0|[1-9]\\d*)(\\.\\d+)?``) whose value lies in the range.

    Exact on decimal bounds (no float rounding); ``None`` leaves a side unbounded; ``-0`` is
    never written.
    """
    zero = Decimal(0)
    parts: list[Expr] = []
    if hi is None or hi > zero or (hi == zero and not hi_strict):  # values >= 0
        if lo is None or lo < zero:
            parts.append(_magnitude_range(zero, False, hi, hi_strict))
        else:
            parts.append(_magnitude_range(lo, lo_strict, hi, hi_strict))
    if lo is None or lo < zero:  # values v = -m < 0 with -hi <= m <= -lo
        if hi is None or hi >= zero:
            m_lo, m_lo_strict = zero, True
        else:
            m_lo, m_lo_strict = -hi, hi_strict
        parts.append(seq(Lit("-"), _magnitude_range(m_lo, m_lo_strict, None if lo is None else -lo, lo_strict)))
    return alt(*parts)


# --------------------------------------------------------------------------- multiples

MAX_MODULUS = 10_000
"""The largest integer ``multipleOf`` enforced (its automaton has a state per remainder)."""
MAX_MULTIPLE_STATES = 50_000
"""States of one "multiple of k within the bounds" automaton (remainders x range states)."""


def _product(r_trans: Any, start: tuple[int, ...],
             step: Callable[[tuple[int, ...], int, int], tuple[int, ...] | None],
             what: str) -> tuple[list[tuple[int, ...]], list[tuple[tuple[int, int, int], ...]]]:
    """The reachable part of the product of a range DFA (``r_trans``: per state, ``(lo, hi,
    target)`` byte intervals) with a counter over the bytes read, breadth first from
    ``start``. A product state is a tuple whose first item is the range state;
    ``step(state, byte, range target)`` gives the next one (None: no edge). Refused with
    ``AutomatonSizeError`` as soon as it passes MAX_MULTIPLE_STATES. Returns the states in
    order and each one's transitions as byte intervals."""
    ids: dict[tuple[int, ...], int] = {start: 0}
    order: list[tuple[int, ...]] = [start]
    trans: list[tuple[tuple[int, int, int], ...]] = []
    i = 0
    while i < len(order):
        key = order[i]
        i += 1
        row: list[tuple[int, int, int]] = []
        for c_lo, c_hi, q2 in r_trans[key[0]]:
            for c in range(c_lo, c_hi + 1):
                nxt = step(key, c, q2)
                if nxt is None:
                    continue
                t = ids.get(nxt)
                if t is None:
                    if len(order) >= MAX_MULTIPLE_STATES:
                        raise AutomatonSizeError(
                            f"{what} within these bounds needs more than {MAX_MULTIPLE_STATES:,} states",
                            limit=MAX_MULTIPLE_STATES, reached=len(order) + 1)
                    t = ids[nxt] = len(order)
                    order.append(nxt)
                if row and row[-1][2] == t and row[-1][1] == c - 1:
                    row[-1] = (row[-1][0], c, t)
                else:
                    row.append((c, c, t))
        trans.append(tuple(row))
    return order, trans


def multiples_expr(k: int, lo: int | None = None, hi: int | None = None) -> Expr:
    """Canonical decimal integers in ``[lo, hi]`` (see :func:`int_range_expr`) that are
    multiples of ``k``, exactly (no float).

    Built directly as an automaton, the product of the range's DFA with the remainder
    automaton (reading digit ``d`` takes remainder ``r`` to ``(10 r + d) mod k``): at most
    (range states) x k states, linear in k. A regular expression of the same language can be
    exponentially larger (state elimination took minutes for k = 997).

    Raises:
        ValueError: ``k`` outside 1..MAX_MODULUS.
        AutomatonSizeError: the product needs more than MAX_MULTIPLE_STATES states (raised
            while it grows).
    """
    if isinstance(k, bool) or not isinstance(k, int) or not 0 < k <= MAX_MODULUS:
        raise ValueError(f"modulus {k!r} outside 1..{MAX_MODULUS}")
    rng = int_range_expr(lo, hi)
    if k == 1 or rng == NOTHING:
        return rng
    # minimal first: the digit loops after "-" and after a leading digit are one state when
    # both sides are unbounded, which halves the product
    r_trans, r_final = _minimise(*_dfa(rng))

    def step(key: tuple[int, ...], c: int, q2: int) -> tuple[int, ...]:
        # a canonical integer holds "-" and digits only; "-" keeps the remainder 0
        return (q2, (10 * key[1] + c - 0x30) % k if 0x30 <= c <= 0x39 else key[1])

    order, trans = _product(r_trans, (0, 0), step, f"multipleOf {k}")
    final = tuple(bool(r_final[q]) and r == 0 for q, r in order)
    return Dfa(f"multiples of {k} in [{lo}, {hi}]", tuple(trans), final)


# --------------------------------------------------------------------------- decimal divisors
#
# A decimal divisor d = M / 10**s has decimal multiples with at most s fraction digits (beyond
# trailing zeros), so "multiple of d" is regular: the text's digits, read as an integer scaled
# to s fraction digits, must be 0 mod M. The difficulty is the validator: jsonschema divides
# floats (``instance / d``, then "is the quotient integral"), which disagrees with decimal
# arithmetic (``0.0003 / 0.0001`` is 2.9999999999999996 there). A generated value must satisfy
# both, so decimal divisors are enforced only where the float division provably agrees:
# integers under a divisor whose float is close enough to its decimal value, and numbers under
# a divisor that is exact in binary (1.5, 0.25), within the magnitude where floats are exact.

MAX_FLOAT_EXACT_BITS = 53


def _decimal_parts(d: float) -> tuple[int, int]:
    """``d`` as its shortest decimal text reads, ``M / 10**s`` with ``M`` and ``s`` >= 0 integers."""
    sign, digits, exponent = Decimal(repr(d)).normalize().as_tuple()
    m = int("".join(map(str, digits)))
    return (m * 10 ** exponent, 0) if exponent >= 0 else (m, -exponent)


def integer_multiples_of_decimal(d: float, lo: int | None, hi: int | None) -> Expr:
    """Canonical integers in ``[lo, hi]`` that are multiples of the decimal ``d`` (a float that is
    not an integer), and that jsonschema's float division also finds multiples of.

    n is a multiple of M / 10**s exactly when it is one of M / gcd(M, 10**s). jsonschema computes
    ``fl(n) / fl(d)`` rounded: with ``|fl(d) - d| / d`` at most 2**-54 and ``|n|`` at most 2**53
    the rounded quotient is the exact integer n / d; beyond 2**53 every float quotient is
    integral (for d <= 1). Integers whose quotient would overflow a float are left out.

    Raises:
        ValueError: the float division can disagree (divisor too far from its float, or > 1
            with integers beyond 2**53 possible), or the modulus exceeds MAX_MODULUS.
        AutomatonSizeError: see :func:`multiples_expr`.
    """
    m, s = _decimal_parts(d)
    exact, binary = Fraction(m, 10 ** s), Fraction(d)
    error = abs(binary - exact) / exact
    if error / (1 - error) > Fraction(1, 2 ** 54):
        raise ValueError(f"the float nearest {d!r} is too far from it for jsonschema's division to be exact")
    k = m // gcd(m, 10 ** s)
    if k > MAX_MODULUS:
        raise ValueError(f"its integer multiples are those of {k}, above the {MAX_MODULUS} limit")
    # |n| / d below the largest float: the quotient never overflows (jsonschema would then
    # divide exactly in binary, where d is not what the schema wrote). Written as a digit
    # count, whose automaton is a chain, not as the number itself (hundreds of alternatives)
    cap = 10 ** (len(str(int(Fraction(2 ** 1023) * min(binary, Fraction(1))))) - 1) - 1
    if d > 1:
        cap = min(cap, 2 ** MAX_FLOAT_EXACT_BITS)  # beyond, fl(n) / d can be non-integral
    lo = -cap if lo is None else max(lo, -cap)
    hi = cap if hi is None else min(hi, cap)
    return multiples_expr(k, lo, hi)


def number_multiples_of_decimal(d: float, lo: Decimal | None, lo_strict: bool, hi: Decimal | None,
                                hi_strict: bool) -> Expr:
    """JSON numbers without exponent and with at most ``s`` fraction digits (``d = M / 10**s``) in
    the range whose value is a multiple of ``d``, for ``d`` exact in binary (``M / 10**s`` equal
    to the float), below ``2**(53 - j)`` in magnitude where ``d = odd / 2**j``.

    There a multiple ``k d`` and the quotient ``k`` are floats exactly (``|k odd| < 2**53``), so
    jsonschema's division is exact; larger multiples are left out.

    Raises:
        ValueError: ``d`` is not exact in binary.
        AutomatonSizeError: more than MAX_MULTIPLE_STATES states.
    """
    m, s = _decimal_parts(d)
    if Fraction(d) != Fraction(m, 10 ** s):
        raise ValueError(f"{d!r} is not exact in binary: jsonschema's float division disagrees with decimal "
                         "arithmetic on some of its multiples")
    if m > MAX_MODULUS:
        raise ValueError(f"{d!r} is {m} / 10**{s}, above the {MAX_MODULUS} limit")
    j = Fraction(d).denominator.bit_length() - 1
    cap = Decimal(2 ** (MAX_FLOAT_EXACT_BITS - j))
    if lo is None or lo <= -cap:
        lo, lo_strict = -cap, True
    if hi is None or hi >= cap:
        hi, hi_strict = cap, True
    rng = number_range_expr(lo, lo_strict, hi, hi_strict)
    if rng == NOTHING:
        return NOTHING
    r_trans, r_final = _minimise(*_dfa(rng))
    # state: (range state, remainder of the digits read mod m, fraction digits read or -1)
    start = (0, 0, -1)

    def step(key: tuple[int, ...], c: int, q2: int) -> tuple[int, ...] | None:
        _, r, f = key
        if 0x30 <= c <= 0x39:
            if f >= s:
                return None  # more fraction digits than a multiple needs (as written here)
            return (q2, (10 * r + c - 0x30) % m, f if f < 0 else f + 1)
        if c == 0x2E:
            return (q2, r, 0)
        return (q2, r, f)  # "-"

    order, trans = _product(r_trans, start, step, f"multipleOf {d!r}")
    final = tuple(bool(r_final[q]) and r * 10 ** (s - max(f, 0)) % m == 0 for q, r, f in order)
    return Dfa(f"multiples of {d!r} in [{lo}, {hi}]", tuple(trans), final)
