"""JSON Schema → grammar: ``type: array`` with ``items``, ``prefixItems``, ``additionalItems``,
``minItems``, ``maxItems``, ``contains``/``minContains``/``maxContains`` and ``uniqueItems``."""
from __future__ import annotations

import itertools
import math
from typing import Any

from ..errors import LimitError
from ..grammar import EMPTY, NOTHING, Expr, Lit, Ref, Repeat, alt, opt, seq
from .base import ConverterBase, _ptr
from .combinators import _negate  # contains: its negation counts the items that do not match
from .json_values import dumps_compact, json_equal
from .merge import CONTAINS_ALL

MAX_TUPLE_ITEMS = 1_000
"""Positional item schemas (``prefixItems``, draft-07 ``items`` arrays) of one array."""
MAX_UNIQUE_VALUES = 8


def _ordered_partitions(xs: list) -> list[list[list]]:
    """Every ordered partition of ``xs`` into non-empty parts (3 items: 13 of them)."""
    if not xs:
        return [[]]
    out = []
    for mask in range(1, 1 << len(xs)):
        first = [x for i, x in enumerate(xs) if mask >> i & 1]
        rest = [x for i, x in enumerate(xs) if not mask >> i & 1]
        out += [[first, *tail] for tail in _ordered_partitions(rest)]
    return out


MAX_CONTAINS_ALL = 3
"""Different ``contains`` schemas combined in one array schema (13 orders of witnesses for 3)."""


class ArraysMixin(ConverterBase):
    """The converter's arrays."""

    def finite_items(self, schema: dict, ptr: str) -> list | None:
        """The distinct values an array's items can take, when few and the array has no prefix."""
        if "prefixItems" in schema or isinstance(schema.get("items"), list) or "contains" in schema:
            return None
        items = self.resolve_shallow(schema.get("items", True), ptr)
        if not isinstance(items, dict) or "$ref" in items:
            return None
        if "enum" in items or "const" in items:
            values = [items["const"]] if "const" in items else list(items["enum"])
            if "const" in items and "enum" in items:
                values = [v for v in values if any(json_equal(v, e) for e in items["enum"])]
        elif items.get("type") in ("boolean", "null") or (isinstance(items.get("type"), list) and set(items["type"]) <= {"boolean", "null"}):
            types = {items["type"]} if isinstance(items["type"], str) else set(items["type"])
            values = ([True, False] if "boolean" in types else []) + ([None] if "null" in types else [])
        else:
            return None
        check = self.validator({k: v for k, v in items.items() if k not in ("enum", "const")})
        distinct: list = []
        for v in values:
            if check.is_valid(v) and not any(json_equal(v, d) for d in distinct):
                distinct.append(v)
        return distinct if len(distinct) <= MAX_UNIQUE_VALUES else None

    def finite_arrays(self, schema: dict, ptr: str, limit: int = 256) -> list | None:
        """Every array ``schema`` accepts, when it only accepts a tuple prefix (no further
        items) of finitely many values per position and there are at most ``limit``; else None."""
        if self.legacy_ref:
            prefix, tail = schema.get("items"), schema.get("additionalItems", True)
            if not isinstance(prefix, list):
                return None
        else:
            prefix, tail = schema.get("prefixItems"), schema.get("items", True)
        if not isinstance(prefix, list) or "contains" in schema:
            return None
        hi = len(prefix) if tail is False else schema.get("maxItems")
        if not isinstance(hi, int) or hi > len(prefix):
            return None
        lo = schema.get("minItems", 0)
        choices = []
        for i in range(hi):
            values = self.finite_items({"items": prefix[i]}, _ptr(ptr, "prefixItems", i))
            if values is None:
                return None
            choices.append(values)
        total = sum(math.prod(len(c) for c in choices[:n]) for n in range(lo, hi + 1))
        if total > limit:
            return None
        check = self.validator(schema)
        return [list(arr) for n in range(lo, hi + 1) for arr in itertools.product(*choices[:n])
                if check.is_valid(list(arr))]

    def unique_array(self, schema: dict, ptr: str) -> Expr:
        """uniqueItems over finitely many item values: one rule per set of values used so far.

        ``k`` values need up to ``2**k`` rules (capped by maxItems), each offering the values
        not used yet: exact, and refused above MAX_UNIQUE_VALUES values."""
        values = self.finite_items(schema, ptr)
        lits = [Lit(dumps_compact(v)) for v in values]
        lo, hi = schema.get("minItems", 0), schema.get("maxItems")
        hi = len(lits) if hi is None else min(hi, len(lits))
        if lo > hi:
            return NOTHING
        self._objects += 1
        base = f"uniq{self._objects}"
        sep = self.sep
        memo: dict[int, Expr] = {}

        def after(used: int, count: int) -> Expr:  # elements after `count` distinct ones
            if used not in memo:
                options: list[Expr] = [EMPTY] if count >= lo else []
                if count < hi:
                    options += [seq(sep, lit, after(used | 1 << i, count + 1)) for i, lit in enumerate(lits) if not used >> i & 1]
                self.rules[f"{base}_{used}"] = alt(*options)
                memo[used] = Ref(f"{base}_{used}")
            return memo[used]

        first = alt(*(seq(lit, after(1 << i, 1)) for i, lit in enumerate(lits))) if hi >= 1 else NOTHING
        del after  # (a recursive closure is a reference cycle, through `self`: see has_unevaluated)
        return self.container("[", first, lo == 0, "]")

    def array(self, schema: dict, ptr: str) -> Expr:
        ws = self.ws
        if schema.get("uniqueItems") is True:
            return self.unique_array(schema, ptr)
        prefix = schema.get("prefixItems")  # (before 2020-12 not a keyword: left out by _normalise)
        items = schema.get("items", True)
        rest_ptr = _ptr(ptr, "items")
        if isinstance(items, list):  # draft-07 tuple form
            prefix, items, rest_ptr = items, schema.get("additionalItems", True), _ptr(ptr, "additionalItems")
            prefix_ptr = _ptr(ptr, "items")
        else:
            prefix_ptr = _ptr(ptr, "prefixItems")
        prefix = prefix or []
        if len(prefix) > MAX_TUPLE_ITEMS:  # each position nests the expression one level deeper
            raise LimitError(f"{len(prefix)} positional item schemas", limit_name="MAX_TUPLE_ITEMS",
                             limit=MAX_TUPLE_ITEMS, reached=len(prefix), pointer=prefix_ptr)
        if CONTAINS_ALL in schema:
            return self.array_contains_all(schema, prefix, items, ptr)
        if "contains" in schema:
            return self.array_contains(schema, prefix, items, ptr)
        lo = schema.get("minItems", 0)
        hi = schema.get("maxItems")
        if hi is not None and lo > hi:
            return self.empty(f"minItems {lo} > maxItems {hi}", _ptr(ptr, "minItems"), "minItems")
        elems = [self.share(self.node(s, _ptr(prefix_ptr, i))) for i, s in enumerate(prefix)]
        rest = self.share(self.node(items, rest_ptr))
        if rest == NOTHING:
            hi = len(prefix) if hi is None else min(hi, len(prefix))
        if hi is not None and hi < lo:
            return NOTHING
        sep = seq(ws, Lit(","), ws)

        def at(i: int) -> Expr:
            return elems[i] if i < len(elems) else rest

        def body(i: int) -> Expr:
            # the elements from position i on; element i carries its comma when i > 0
            if hi is not None and i >= hi:
                return EMPTY
            if i >= len(elems):  # only `rest` elements remain: one counted repeat, not i..hi
                # nested expressions (minItems/maxItems of 10**12 once recursed and looped that
                # often before the automaton's size limit could refuse them)
                if rest == NOTHING:
                    return EMPTY if i >= lo else NOTHING
                if i > 0:
                    return Repeat(seq(sep, rest), max(lo - i, 0), None if hi is None else hi - i)
                first = seq(rest, Repeat(seq(sep, rest), max(lo - 1, 0), None if hi is None else hi - 1))
                return first if lo > 0 else opt(first)
            item = at(i) if i == 0 else seq(sep, at(i))
            following = seq(item, body(i + 1))
            return following if i < lo else opt(following)

        body_expr = body(0)
        del body  # (a recursive closure is a reference cycle: see has_unevaluated)
        if body_expr == NOTHING:
            return NOTHING
        if body_expr == EMPTY:
            return self.container("[", NOTHING, True, "]")
        if isinstance(body_expr, Repeat) and (body_expr.min, body_expr.max) == (0, 1):
            return self.container("[", body_expr.item, True, "]")
        return self.container("[", body_expr, False, "]")

    def prefix_contains(self, schema: dict, prefix: list, items: Any, ptr: str) -> Expr:
        """``prefixItems`` with one ``contains`` (at least one match): from each position, the
        rest of the array with a match still needed or not; a positional item may be the
        match (its schema merged with the contains schema), or else one of the later items.
        Exact as a language (ambiguous as a grammar where several items match)."""
        at = _ptr(ptr, "contains")
        sep = self.sep
        item = self.share(self.node(items, _ptr(ptr, "items")))
        match = self.share(self.node(self.merged(items, schema["contains"], at), at))
        p = len(prefix)
        # positions from p on: any items (need met), or some item matching (need open)
        met = Repeat(seq(sep, item), 0, None)
        needed = seq(sep, Repeat(seq(item, sep), 0, None), match, met) if match != NOTHING else NOTHING
        for i in range(p - 1, -1, -1):
            lead = (lambda e: e) if i == 0 else (lambda e: seq(sep, e))
            plain = self.share(self.node(prefix[i], _ptr(ptr, "prefixItems", i)))
            hit = self.share(self.node(self.merged(prefix[i], schema["contains"], at), at))
            met, needed = (self.share(alt(EMPTY, lead(seq(plain, met)))),
                           self.share(alt(lead(seq(hit, met)), lead(seq(plain, needed)))))
        return self.container("[", needed, False, "]")

    def array_contains_all(self, schema: dict, prefix: list, items: Any, ptr: str) -> Expr:
        """Several ``contains`` (of an ``allOf``), each to be matched by some item: per ordered
        partition of them, the first witness items in that order, each matching its part's
        schemas together, with any items around. Exact as a language (ambiguous as a grammar)."""
        found = [schema["contains"], *schema[CONTAINS_ALL]]
        at = _ptr(ptr, "contains")
        if prefix:
            self.unsupported("contains", at, "together with prefixItems")
        if len(found) > MAX_CONTAINS_ALL:
            self.unsupported("contains", at, f"more than {MAX_CONTAINS_ALL} different contains in one array schema")
            found = found[:MAX_CONTAINS_ALL]
        for kw in ("minItems", "maxItems"):
            if kw in schema and not (kw == "minItems" and schema[kw] <= 1):
                self.unsupported(kw, _ptr(ptr, kw), "together with contains")
        item = self.share(self.node(items, _ptr(ptr, "items")))
        before = Repeat(seq(item, self.sep), 0, None)
        options = []
        for parts in _ordered_partitions(list(range(len(found)))):
            witnesses = []
            for part in parts:
                w: Any = items
                for j in part:
                    w = self.merged(w, found[j], at)
                witnesses.append(self.share(self.node(w, at)))
            if NOTHING in witnesses:
                continue
            body = seq(before, witnesses[0], *(seq(self.sep, before, w) for w in witnesses[1:]),
                       Repeat(seq(self.sep, item), 0, None))
            options.append(body)
        return self.container("[", alt(*options), False, "]") if options else NOTHING

    def array_contains(self, schema: dict, prefix: list, items: Any, ptr: str) -> Expr:
        """``contains`` with ``minContains`` m and ``maxContains`` M.

        When ``contains`` has a decidable negation, every item is either C = items ∧ contains
        or N = items ∧ not contains (disjoint), and the language is exact and unambiguous:
        ``(N,)* C ((,N)* ,C){m-1..M-1} (,N)*``. Otherwise (no maxContains allowed then)
        ``I* C (I* C){m-1} I*``: ambiguous as a grammar but exact as a language.
        Refused with prefixItems, or with item counts the match count does not imply."""
        m, big_m = schema.get("minContains", 1), schema.get("maxContains")
        for kw in ("minItems", "maxItems"):
            if kw in schema and not (kw == "minItems" and schema[kw] <= m):  # m matches imply m items
                self.unsupported(kw, _ptr(ptr, kw), "together with contains")
        if prefix and (m, big_m) == (1, None):
            return self.prefix_contains(schema, prefix, items, ptr)
        if prefix:
            self.unsupported("contains", _ptr(ptr, "contains"), "together with prefixItems (exact only with "
                             "minContains 1 and no maxContains)")
        if big_m is not None and big_m < m:
            return NOTHING  # no array can match (other types still can)
        item = self.node(items, _ptr(ptr, "items"))
        if m == 0 and big_m is None:  # nothing to find
            return self.container("[", seq(item, Repeat(seq(self.sep, item), 0, None)), True, "]")
        contains = self.resolve_shallow(schema["contains"], _ptr(ptr, "contains"))
        negated = _negate(contains)
        sep = self.sep
        if negated is None:
            if big_m is not None:
                self.unsupported("maxContains", _ptr(ptr, "maxContains"), "the contains schema has no decidable "
                                 "negation (needed to count the items that do not match)")
            match = self.node(self.merged(items, schema["contains"], _ptr(ptr, "contains")), _ptr(ptr, "contains"))
            if match == NOTHING:
                return NOTHING
            before = Repeat(seq(item, sep), 0, None)
            more = Repeat(seq(sep, before, match), m - 1, m - 1) if m > 1 else EMPTY
            body = seq(before, match, more, Repeat(seq(sep, item), 0, None))
            return self.container("[", body, False, "]")
        match = self.share(self.node(self.merged(items, schema["contains"], _ptr(ptr, "contains")), _ptr(ptr, "contains")))
        other = self.share(self.node(self.merged(items, negated, _ptr(ptr, "contains")), _ptr(ptr, "contains")))
        others_only = seq(other, Repeat(seq(sep, other), 0, None)) if other != NOTHING else NOTHING
        if big_m == 0 or match == NOTHING:
            return self.container("[", others_only, True, "]") if m == 0 else NOTHING
        lo = max(m, 1)
        hi = None if big_m is None else big_m
        body = seq(Repeat(seq(other, sep), 0, None), match,
                   Repeat(seq(Repeat(seq(sep, other), 0, None), sep, match), lo - 1, None if hi is None else hi - 1),
                   Repeat(seq(sep, other), 0, None))
        if m == 0:
            body = alt(others_only, body)
        return self.container("[", body, m == 0, "]")
