"""Counted repetition: ``item{lo,hi}`` with a large bound as a counter, not unrolled states.

``maxLength: 100000`` unrolled is 100,000 copies of the string-character automaton; as a
counter it is one small rule. Before the automaton is built, every large bounded repeat whose
item cannot match the empty string is lifted out of its rule: the item becomes a rule of its
own (a DFA) and the repeat a :class:`CounterRule`, a rule with *virtual* states: state ``k``
means "``k`` items matched", it reads no byte itself, calls the item and returns to ``k + 1``,
and may end once ``k >= lo``. The counter is therefore a frame of the matcher's stack, like any
return state, and costs nothing until the output gets there.

Masks stay shared: a token of at most ``L`` bytes completes at most ``L / m`` items (``m`` the
item's shortest match), so two counter values that are both that far from ``lo`` and ``hi``
allow exactly the same tokens. The token index (natively, src/core/config_index.cpp) maps each
counter to a representative of its class and memoises masks by the canonical configuration,
so a string of 100,000 characters needs a few hundred distinct masks at most, not 100,000.

A counted repeat that can restart while an earlier run is still counting keeps one stack per
run; the index drops every stack another one subsumes (two stacks that differ only in the
value of one unbounded counter frame: the larger count accepts every continuation the
smaller does), so runs of ``b{5000,}`` started at each of 5,000 positions stay one stack.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from ..grammar import Alt, CharSet, Dfa, Expr, Lit, Ref, Regex, Repeat, Seq
from ..errors import LimitError
from ..regex.expr_arrays import serializer
from ..regex.parser import parse_regex

__all__ = ["COUNT_THRESHOLD", "MAX_CONFIG_STACKS", "CounterRule", "check_config_stacks", "lift_counters"]

COUNT_THRESHOLD = 64
"""Repeats whose bound (``max``, or ``min`` when unbounded) exceeds this become counters.
Smaller ones are unrolled: their states are finite and can be precomputed."""

_NO_BYTES = np.full(256, -1, np.int32)
_NO_BYTES.setflags(write=False)


@dataclass(frozen=True, slots=True)
class CounterRule:
    """Rule ``body`` matched ``lo`` to ``hi`` times (``hi=None``: unbounded), counted.

    Virtual states ``0 .. top`` (``top = hi``, or ``lo`` when unbounded: the count saturates
    there). The same attribute names as :class:`~structgen.index.automaton.RuleDFA` are provided as
    read-only views over the virtual states.
    """

    name: str
    body: int
    lo: int
    hi: int | None

    @property
    def top(self) -> int:
        return self.lo if self.hi is None else self.hi

    @property
    def num_states(self) -> int:
        return self.top + 1

    def is_final(self, k: int) -> bool:
        return k >= self.lo

    def calls_at(self, k: int) -> tuple[tuple[int, int], ...]:
        if self.hi is None:
            return ((self.body, min(k + 1, self.lo)),)
        return ((self.body, k + 1),) if k < self.hi else ()

    @property
    def trans(self) -> "_Rows":
        return _Rows(self.num_states)

    @property
    def final(self) -> "_View":
        return _View(self.is_final, self.num_states)

    @property
    def calls(self) -> "_View":
        return _View(self.calls_at, self.num_states)


class _View:
    """A read-only sequence computed per index (the virtual states of a counter)."""

    __slots__ = ("_get", "_n")

    def __init__(self, get, n: int) -> None:
        self._get, self._n = get, n

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, k: int):
        if not 0 <= k < self._n:
            raise IndexError(k)
        return self._get(k)


class _Rows(_View):
    """Every virtual state's byte row: all -1 (a counter reads no byte itself)."""

    def __init__(self, n: int) -> None:
        super().__init__(lambda k: _NO_BYTES, n)


MAX_CONFIG_STACKS = 512
"""Stacks one parser configuration may hold. A counted repeat that can start again while an
earlier run of it is still counting (``b{5000}$`` after an unanchored start: a run may begin
at every ``b``) keeps one stack per run, and each byte then costs time in their number; past
this limit the token index raises :class:`~structgen.errors.LimitError` (reaching it costs
about a second: each step walks every stack)."""

def check_config_stacks(n: int) -> None:
    """Raise :class:`~structgen.errors.LimitError` for a configuration of ``n`` stacks past
    :data:`MAX_CONFIG_STACKS` (read at each call, so the module attribute can be changed)."""
    if n <= MAX_CONFIG_STACKS:
        return
    raise LimitError(f"a parser configuration needs {n} stacks: a counted repeat restarts while earlier runs of "
                     "it are still counting (e.g. an unanchored pattern ending in a large exact repeat, "
                     "'b{5000}$'); anchor the pattern with '^' or lower the count",
                     limit_name="MAX_CONFIG_STACKS", limit=MAX_CONFIG_STACKS, reached=n)


# --------------------------------------------------------------------------- lifting


def nullable(e: Expr, null_rules: set[str]) -> bool:
    """Whether ``e`` matches the empty string, given the rules known to (``null_rules``)."""
    if isinstance(e, Lit):
        return not e.text
    if isinstance(e, CharSet):
        return False
    if isinstance(e, Seq):
        return all(nullable(x, null_rules) for x in e.items)
    if isinstance(e, Alt):
        return any(nullable(x, null_rules) for x in e.options)
    if isinstance(e, Repeat):
        return e.min == 0 or nullable(e.item, null_rules)
    if isinstance(e, Ref):
        return e.name in null_rules
    if isinstance(e, Regex):
        return nullable(parse_regex(e.pattern, e.flags), null_rules)
    if isinstance(e, Dfa):
        return e.final[0]
    raise TypeError(f"not a grammar expression: {e!r}")


def lift_counters(
    rules: Mapping[str, Expr], threshold: int | None = None, *, bounds: Mapping[str, int] | None = None,
    nullables: Mapping[str, bool] | None = None,
) -> tuple[dict[str, Expr], dict[str, tuple[str, int, int | None]]]:
    """Replace large bounded repeats of non-nullable items by references to counter rules.

    Returns the rewritten rules (the items added as rules of their own) and, per counter
    rule name, ``(item rule name, lo, hi)``. Repeats inside regex terminals are lifted too.
    Identical repeats share one counter. ``bounds``: per rule, the largest repeat bound in
    its body (``ExprSerializer.rule_bounds``, serialized by the caller already); only the
    rules past ``threshold`` are rewritten. ``nullables``: per rule, whether it matches the
    empty string (``ExprSerializer.rule_nullables``); read only when some rule is rewritten.
    """
    threshold = COUNT_THRESHOLD if threshold is None else threshold
    counters: dict[str, tuple[str, int, int | None]] = {}
    out: dict[str, Expr] = {}
    by_repeat: dict[Repeat, str] = {}

    def countable(e: Repeat) -> bool:
        bound = e.max if e.max is not None else e.min
        return bound > threshold and not nullable(e.item, null)

    def rewrite(e: Expr) -> Expr:
        if isinstance(e, Seq):
            items = tuple(rewrite(x) for x in e.items)
            return e if items == e.items else Seq(items)
        if isinstance(e, Alt):
            options = tuple(rewrite(x) for x in e.options)
            return e if options == e.options else Alt(options)
        if isinstance(e, Regex):
            parsed = parse_regex(e.pattern, e.flags)
            lifted = rewrite(parsed)
            return e if lifted == parsed else lifted
        if isinstance(e, Repeat):
            item = rewrite(e.item)
            if not countable(e):
                return e if item is e.item else Repeat(item, e.min, e.max)
            key = Repeat(item, e.min, e.max)
            name = by_repeat.get(key)
            if name is None:
                name = by_repeat[key] = _fresh(f"__count{len(counters)}", rules, out)
                item_name = _fresh(f"{name}_item", rules, out)
                out[item_name] = item
                counters[name] = (item_name, e.min, e.max)
            return Ref(name)
        return e

    ser = None
    if bounds is None:
        ser = serializer({n: i for i, n in enumerate(rules)})
        ser.add_rules(rules.values())
        bounds = dict(zip(rules, ser.rule_bounds()))
    large = {name for name in rules if bounds[name] > threshold}
    if not large:  # the common case: nothing to lift, no nullability analysis needed
        return dict(rules), counters
    if nullables is None:
        if ser is None:
            ser = serializer({n: i for i, n in enumerate(rules)})
            ser.add_rules(rules.values())
        nullables = dict(zip(rules, ser.rule_nullables()))
    null = {name for name in rules if nullables[name]}
    for name, body in rules.items():
        out[name] = rewrite(body) if name in large else body
    del rewrite
    return out, counters


def _fresh(name: str, *taken: Mapping[str, Expr]) -> str:
    base, n = name, 0
    while any(name in t for t in taken):
        n += 1
        name = f"{base}_{n}"
    return name
