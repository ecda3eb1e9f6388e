"""``unevaluatedProperties`` / ``unevaluatedItems`` as plain keywords, by expanding in-place applicators.

What these keywords cover depends on which subschemas *succeeded* on the instance: the
names (or indices) annotated by ``properties``, ``patternProperties``,
``additionalProperties`` (``prefixItems``, ``items``...) of the schema itself and of every
in-place subschema that applied (``allOf``, ``$ref``, the matching ``anyOf``/``oneOf``
branches, ``if`` when it held and the ``then``/``else`` taken, ``dependentSchemas`` whose
trigger is present). A grammar has no annotations, so :func:`expand_unevaluated` rewrites the
schema into a disjunction of alternatives, each a list of conjuncts free of in-place
applicators: inside one alternative the evaluated set is known statically, and the keyword
becomes one more conjunct, ``{"properties": {evaluated: true}, "patternProperties":
{pattern: true}, "additionalProperties": U}``, which the ordinary ``allOf`` merge enforces.

Why this never accepts an invalid instance: an alternative only counts the annotations of
the subschemas it requires to hold, a subset of what the validator collects, so it applies
``U`` to at least the names the validator applies it to. An ``anyOf`` of a few branches
gives one alternative per set of branches holding together, and the items a ``contains``
matches count as evaluated (2020-12), so what the validator collects is reached too; the
price left is false rejections where a valid instance needs the annotations of several
branches of a larger ``anyOf`` (``MAX_ANYOF_SETS``).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["expand_unevaluated", "IN_PLACE", "MAX_ALTERNATIVES", "MAX_ANYOF_SETS"]

MAX_ALTERNATIVES = 64
MAX_ANYOF_SETS = 4  # anyOf branches whose every combination is an alternative (2**4 - 1 sets)
MAX_REF_DEPTH = 16
IN_PLACE = frozenset({"allOf", "anyOf", "oneOf", "if", "then", "else", "dependentSchemas", "$ref",
                      "unevaluatedProperties", "unevaluatedItems"})

# one conjunct: (schema, whether its property/item annotations count)
Conjunct = tuple[Any, bool]
Alternative = list[Conjunct]


class _Expander:
    def __init__(self, resolve_ref: Callable[[str, str], tuple[Any, str]],
                 oneof_overlap: Callable[[list[Any], str], tuple[int, int] | None],
                 negations: Callable[[list[Any], str], list[Any] | None],
                 unsupported: Callable[[str, str, str], None], rebase: Callable[[Any, str], Any],
                 legacy_items: bool, contains_annotates: bool = True) -> None:
        self.resolve_ref = resolve_ref
        self.oneof_overlap = oneof_overlap
        self.negations = negations
        self.unsupported = unsupported
        self.rebase = rebase
        self.legacy_items = legacy_items
        self.contains_annotates = contains_annotates

    def product(self, left: list[Alternative], right: list[Alternative], ptr: str) -> list[Alternative]:
        out = [a + b for a in left for b in right]
        if len(out) > MAX_ALTERNATIVES:
            self.unsupported("unevaluatedProperties", ptr, f"the in-place applicators beside it expand into more "
                             f"than {MAX_ALTERNATIVES} alternatives")
            return out[:MAX_ALTERNATIVES]  # lenient: recorded above
        return out

    def union(self, parts: list[list[Alternative]], ptr: str) -> list[Alternative]:
        return self.product([[]], [alt for p in parts for alt in p], ptr)

    def any_of(self, branches: list[list[Alternative]], outer: int, ptr: str) -> list[Alternative]:
        """The alternatives of an ``anyOf``: every non-empty set of branches that hold together
        (the validator collects the annotations of all matching branches, so one branch at a
        time would refuse a valid instance that needs two branches' names). When the sets
        would not fit beside the ``outer`` alternatives, single branches only: fewer
        annotations, stricter, never wrong."""
        singles = self.union(branches, ptr)
        live = [b for b in branches if b]
        if len(live) < 2 or len(live) > MAX_ANYOF_SETS:
            return singles
        sets: list[Alternative] = []
        for mask in range(1, 1 << len(live)):
            if mask & (mask - 1) == 0:
                continue  # one branch: in singles
            combined: list[Alternative] = [[]]
            for k, branch in enumerate(live):
                if mask >> k & 1:
                    combined = [a + b for a in combined for b in branch]
            sets.extend(combined)
            if outer * (len(singles) + len(sets)) > MAX_ALTERNATIVES:
                return singles
        return singles + sets

    def expand(self, schema: Any, ptr: str, depth: int = 0) -> list[Alternative]:
        if schema is True or schema == {}:
            return [[]]
        if schema is False:
            return []
        if not isinstance(schema, dict):
            return [[(schema, True)]]  # not a schema: node() reports it where it is
        own = {k: v for k, v in schema.items() if k not in IN_PLACE}
        own.pop("then", None), own.pop("else", None)
        alts: list[Alternative] = [[(self.rebase(own, ptr), True)]] if own else [[]]
        if isinstance(schema.get("$ref"), str):
            if depth >= MAX_REF_DEPTH:
                self.unsupported("$ref", f"{ptr}/$ref", "in-place references nested too deep (recursion?) beside "
                                 "unevaluatedProperties/unevaluatedItems")
                return alts
            target, at = self.resolve_ref(schema["$ref"], f"{ptr}/$ref")
            alts = self.product(alts, self.expand(target, at, depth + 1), ptr)
        for i, sub in enumerate(schema.get("allOf", ())):
            alts = self.product(alts, self.expand(sub, f"{ptr}/allOf/{i}", depth), ptr)
        if "anyOf" in schema:
            alts = self.product(alts, self.any_of([self.expand(b, f"{ptr}/anyOf/{i}", depth)
                                                   for i, b in enumerate(schema["anyOf"])], len(alts), ptr), ptr)
        if "oneOf" in schema:
            branches = schema["oneOf"]
            overlap = self.oneof_overlap(branches, ptr)
            negated = self.negations(branches, ptr) if overlap is not None else None
            if overlap is not None and negated is None:
                self.unsupported("oneOf", f"{ptr}/oneOf", f"branches {overlap[0]} and {overlap[1]} may both match "
                                 "(exact only when branches are provably disjoint or negatable); treated as anyOf")
            options = []
            for i, b in enumerate(branches):
                taken = self.expand(b, f"{ptr}/oneOf/{i}", depth)
                if negated is not None:  # branch i and no other: the others' negations annotate nothing
                    taken = self.product(taken, [[(n, False) for j, n in enumerate(negated) if j != i]], ptr)
                options.append(taken)
            alts = self.product(alts, self.union(options, ptr), ptr)
        if "if" in schema:
            cond = schema["if"]
            held = self.expand(cond, f"{ptr}/if", depth)
            then_, else_ = schema.get("then", True), schema.get("else", True)
            if then_ is True and else_ is True:
                # the condition asserts nothing but annotates when it holds: either it held
                # (its annotations count) or nothing is assumed (fewer annotations, stricter)
                branch = self.union([held, [[]]], ptr)
            else:
                failed = [[({"not": self.rebase(cond, f"{ptr}/if")}, False)]]
                branch = self.union([self.product(held, self.expand(then_, f"{ptr}/then", depth), ptr),
                                     self.product(failed, self.expand(else_, f"{ptr}/else", depth), ptr)], ptr)
            alts = self.product(alts, branch, ptr)
        for name, sub in (schema.get("dependentSchemas") or {}).items():
            absent: list[Alternative] = [[({"properties": {name: False}}, True)]]
            present = self.product([[({"required": [name]}, True)]],
                                   self.expand(sub, f"{ptr}/dependentSchemas/{name}", depth), ptr)
            alts = self.product(alts, self.union([absent, present], ptr), ptr)
        if "unevaluatedProperties" in schema:
            u = self.rebase(schema["unevaluatedProperties"], f"{ptr}/unevaluatedProperties")
            alts = [alt + ([(c, True)] if (c := _property_closure(alt, u)) is not None else []) for alt in alts]
        if "unevaluatedItems" in schema:
            u = self.rebase(schema["unevaluatedItems"], f"{ptr}/unevaluatedItems")
            alts = [alt + ([(c, True)] if (c := self.item_closure(alt, u)) is not None else []) for alt in alts]
        return alts

    def item_closure(self, alt: Alternative, u: Any) -> dict | None:
        """The conjunct that applies ``u`` to the items no annotating conjunct evaluated (``u =
        true``: ``{"items": true}``, which evaluates every item, as for properties)."""
        if u is True or u == {}:
            return {"items": True}
        prefix = 0
        found: list[Any] = []  # contains schemas: the items matching one are evaluated
        for s, annotates in alt:
            if not annotates or not isinstance(s, dict):
                continue
            if "contains" in s and self.contains_annotates:
                found.append(s["contains"])
            items = s.get("items")
            if isinstance(items, list):  # draft 2019-09 and older: a tuple, then additionalItems
                if "additionalItems" in s:
                    return None
                prefix = max(prefix, len(items))
            elif "items" in s:
                return None
            if isinstance(s.get("prefixItems"), list):
                prefix = max(prefix, len(s["prefixItems"]))
        if found:
            # exact: the conjunct holds in this alternative, so its contains annotated just
            # the items matching its subschema
            u = {"anyOf": [*found, u]}
        if self.legacy_items:
            return {"items": [True] * prefix, "additionalItems": u} if prefix else {"items": u}
        return {"prefixItems": [True] * prefix, "items": u} if prefix else {"items": u}


def _property_closure(alt: Alternative, u: Any) -> dict | None:
    """The conjunct that applies ``u`` to the names no annotating conjunct evaluated.

    ``u = true`` asserts nothing but still evaluates every name (an enclosing
    unevaluatedProperties sees them): ``{"additionalProperties": true}`` says so.
    """
    if u is True or u == {}:
        return {"additionalProperties": True}
    names: dict[str, bool] = {}
    patterns: dict[str, bool] = {}
    for s, annotates in alt:
        if not annotates or not isinstance(s, dict):
            continue
        if "additionalProperties" in s:
            return None  # every name of the instance is evaluated by that conjunct
        names.update(dict.fromkeys(s.get("properties") or {}, True))
        patterns.update(dict.fromkeys(s.get("patternProperties") or {}, True))
    closure: dict[str, Any] = {"additionalProperties": u}
    if names:
        closure["properties"] = names
    if patterns:
        closure["patternProperties"] = patterns
    return closure


def expand_unevaluated(schema: dict, ptr: str, *, resolve_ref: Callable[[str, str], tuple[Any, str]],
                       oneof_overlap: Callable[[list[Any], str], tuple[int, int] | None],
                       negations: Callable[[list[Any], str], list[Any] | None] = lambda branches, at: None,
                       unsupported: Callable[[str, str, str], None], rebase: Callable[[Any, str], Any],
                       legacy_items: bool = False, contains_annotates: bool = True) -> Any:
    """An equivalent schema (see the module docstring) without in-place applicators at the top.

    Args:
        schema: a schema with ``unevaluatedProperties`` or ``unevaluatedItems``.
        ptr: its location (for errors).
        resolve_ref: ``(ref, at) -> (target schema, its pointer)``.
        oneof_overlap: ``(branches, at) -> (i, j)`` of two branches that may both match, or None.
        negations: ``(branches, at) ->`` a schema for "not branch" per branch, or None (then an
            overlapping oneOf is unsupported).
        unsupported: report a keyword that cannot be exact (raises in strict mode).
        rebase: make a schema found at a location keep its references' meaning elsewhere.
        legacy_items: write the item closure with ``items`` arrays and ``additionalItems``.
        contains_annotates: whether the items ``contains`` matches count as evaluated (from
            draft 2020-12 on).

    Returns:
        ``{"anyOf": [{"allOf": conjuncts}, ...]}``, one member per alternative, or ``False``
        when no alternative can hold.
    """
    exp = _Expander(resolve_ref, oneof_overlap, negations, unsupported, rebase, legacy_items, contains_annotates)
    alts = exp.expand(schema, ptr)
    if not alts:
        return False
    members = [{"allOf": [s for s, _ in alt]} if len(alt) != 1 else alt[0][0] for alt in alts]
    members = [m if m != {"allOf": []} else True for m in members]
    return members[0] if len(members) == 1 else {"anyOf": members}
