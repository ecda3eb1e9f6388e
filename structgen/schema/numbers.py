"""JSON Schema → grammar: ``type: integer``/``number`` with ``minimum``, ``maximum``,
``exclusiveMinimum``, ``exclusiveMaximum`` and ``multipleOf``."""
from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

from ..errors import AutomatonSizeError
from ..grammar import NOTHING, Expr, Regex
from ..regex.parser import parse_regex
from ..regex.regular import intersect_automaton
from .base import _FRACTION_TEXT, _INTEGER, _NUMBER, FRACTION, ConverterBase, _ptr
from .numeric import (
    MAX_MODULUS,
    int_range_expr,
    integer_multiples_of_decimal,
    multiples_expr,
    number_multiples_of_decimal,
    number_range_expr,
)


def _decimal_divisor(k: Any) -> bool:
    """Whether a multipleOf value is a (finite, positive) float that is not an integer."""
    return isinstance(k, float) and math.isfinite(k) and k > 0 and not k.is_integer()


def _decimal_bounds(schema: dict):
    """(lo, lo_strict, hi, hi_strict) as exact decimals, the tightest of all bound keywords."""
    def dec(v) -> Decimal:
        return Decimal(repr(v)) if isinstance(v, float) else Decimal(v)

    lo = hi = None
    lo_strict = hi_strict = False
    ex_lo, ex_hi = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    cands_lo = []
    cands_hi = []
    if "minimum" in schema:
        cands_lo.append((dec(schema["minimum"]), ex_lo is True))
    if "maximum" in schema:
        cands_hi.append((dec(schema["maximum"]), ex_hi is True))
    if isinstance(ex_lo, (int, float)) and not isinstance(ex_lo, bool):
        cands_lo.append((dec(ex_lo), True))
    if isinstance(ex_hi, (int, float)) and not isinstance(ex_hi, bool):
        cands_hi.append((dec(ex_hi), True))
    for v, strict in cands_lo:
        if lo is None or v > lo or (v == lo and strict):
            lo, lo_strict = v, strict
    for v, strict in cands_hi:
        if hi is None or v < hi or (v == hi and strict):
            hi, hi_strict = v, strict
    return lo, lo_strict, hi, hi_strict


def _int_bounds(schema: dict, ptr: str) -> tuple[int | None, int | None]:
    lo = hi = None

    def tighten_lo(v: float, exclusive: bool) -> None:
        nonlocal lo
        c = math.floor(v) + 1 if exclusive else math.ceil(v)
        lo = c if lo is None else max(lo, c)

    def tighten_hi(v: float, exclusive: bool) -> None:
        nonlocal hi
        c = math.ceil(v) - 1 if exclusive else math.floor(v)
        hi = c if hi is None else min(hi, c)

    ex_lo, ex_hi = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    if "minimum" in schema:
        tighten_lo(schema["minimum"], ex_lo is True)  # draft-04 boolean form
    if "maximum" in schema:
        tighten_hi(schema["maximum"], ex_hi is True)
    if isinstance(ex_lo, (int, float)) and not isinstance(ex_lo, bool):
        tighten_lo(ex_lo, True)
    if isinstance(ex_hi, (int, float)) and not isinstance(ex_hi, bool):
        tighten_hi(ex_hi, True)
    return lo, hi


class NumbersMixin(ConverterBase):
    """The converter's integers and numbers."""

    def integer(self, schema: dict, ptr: str) -> Expr:
        if schema.get(FRACTION):
            return NOTHING  # an integer never has a fraction
        lo, hi = _int_bounds(schema, ptr)
        if lo is not None and hi is not None and lo > hi:
            return self.empty(f"no integer lies between the bounds ({lo} > {hi})", ptr, "minimum")
        if _decimal_divisor(schema.get("multipleOf")):
            try:
                return integer_multiples_of_decimal(schema["multipleOf"], lo, hi)
            except (ValueError, AutomatonSizeError) as exc:
                self.unsupported("multipleOf", _ptr(ptr, "multipleOf"), str(exc))
                return _INTEGER if lo is None and hi is None else int_range_expr(lo, hi)
        k = self.modulus(schema, ptr)
        if k is not None:
            # integers written without fraction or exponent, so jsonschema checks them exactly
            try:
                return multiples_expr(k, lo, hi)
            except AutomatonSizeError as exc:
                self.unsupported("multipleOf", _ptr(ptr, "multipleOf"), str(exc))
        if lo is None and hi is None:
            return _INTEGER
        return int_range_expr(lo, hi)

    def modulus(self, schema: dict, ptr: str) -> int | None:
        """The integer ``multipleOf`` to enforce, or None (absent or refused).

        Only integers: a decimal divisor is compiled by integer()/number() where jsonschema's
        float division provably agrees with decimal arithmetic (``0.07 / 0.01`` is not integral
        there), see :mod:`.numeric`; refused otherwise in strict mode."""
        k = schema.get("multipleOf")
        if k is None or (_decimal_divisor(k) and not schema.get(FRACTION)):
            return None  # absent, or a decimal divisor (number() enforced or recorded it)
        if isinstance(k, float) and k.is_integer():
            k = int(k)  # n / 2.0 is integral exactly when n is even, at any size
        if isinstance(k, bool) or not isinstance(k, int) or not 0 < k <= MAX_MODULUS:
            self.unsupported("multipleOf", _ptr(ptr, "multipleOf"),
                             f"only integer divisors 1..{MAX_MODULUS} are enforced (jsonschema divides floats inexactly)")
            return None
        return k

    def number(self, schema: dict, ptr: str) -> Expr:
        if _decimal_divisor(schema.get("multipleOf")) and not schema.get(FRACTION):
            try:
                return number_multiples_of_decimal(schema["multipleOf"], *_decimal_bounds(schema))
            except (ValueError, AutomatonSizeError) as exc:
                self.unsupported("multipleOf", _ptr(ptr, "multipleOf"), str(exc))
        if "multipleOf" in schema:
            if self.modulus(schema, ptr) is not None:
                # a multiple of an integer is an integer: write it as one (exact, see modulus)
                return self.integer(schema, ptr)
        lo, lo_strict, hi, hi_strict = _decimal_bounds(schema)
        if schema.get(FRACTION):  # from a negated integer type: numbers with a fraction only
            if lo is None and hi is None:
                return Regex(_FRACTION_TEXT)
            return intersect_automaton(number_range_expr(lo, lo_strict, hi, hi_strict), parse_regex(_FRACTION_TEXT),
                                       f"non-integral numbers of at most 15 digits in {lo}{'<' if lo_strict else '<='}"
                                       f"x{'<' if hi_strict else '<='}{hi}")
        if lo is None and hi is None:
            return _NUMBER
        if lo is not None and hi is not None and (lo > hi or (lo == hi and (lo_strict or hi_strict))):
            return self.empty(f"no number lies between the bounds ({lo}, {hi})", ptr, "minimum")
        # bounded numbers are written without exponent: exact digit-level comparison
        return number_range_expr(lo, lo_strict, hi, hi_strict)
