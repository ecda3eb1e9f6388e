"""Intersection of JSON Schemas: ``allOf``, ``$ref`` with siblings, ``anyOf`` with siblings.

:func:`merge` returns one schema accepting exactly the instances both inputs accept, or
raises :class:`MergeConflict` when it cannot say so exactly (two different ``pattern``s, say):
the caller then reports the keyword as unsupported. Nothing is approximated here.

The subtle case is ``additionalProperties``: it only covers names *its own* schema does not
declare, so a property declared on one side only must also satisfy the other side's
``additionalProperties``.
"""
from __future__ import annotations

import json
import math
from contextvars import ContextVar
from typing import Any, Callable

from .json_values import json_equal
from ..errors import LimitError

__all__ = ["merge", "merge_lenient", "MergeConflict", "MAX_MERGE_STEPS", "CONTAINS_ALL"]

CONTAINS_ALL = "x-structgen-contains-all"
"""Internal keyword: more ``contains`` schemas, each to be matched by some item (two sides'
different ``contains`` merged, without minContains/maxContains)."""

MAX_DEPTH = 12
MAX_MERGE_STEPS = 20_000
"""Pairwise schema merges one top-level :func:`merge` may make. Distributing ``allOf`` over
``anyOf`` multiplies the alternatives, so ``allOf`` of n ``anyOf``s of k grows as k**n; this
stops it while it grows (the caller locates the error)."""
_STEPS: ContextVar[list[int] | None] = ContextVar("structgen_merge_steps", default=None)
# draft-07 and older: keywords beside "$ref" are ignored (set by the outermost merge call)
_REF_ALONE: ContextVar[bool] = ContextVar("structgen_merge_ref_alone", default=False)
_UNEVALUATED = ("unevaluatedProperties", "unevaluatedItems")
_LOWER = ("minimum", "exclusiveMinimum", "minItems", "minLength", "minProperties")
_UPPER = ("maximum", "exclusiveMaximum", "maxItems", "maxLength", "maxProperties")
_ANNOTATIONS = {"title", "description", "examples", "default", "$comment", "$schema", "$id", "id", "deprecated",
                "readOnly", "writeOnly", "$defs", "definitions"}


# In lenient mode conflicts are collected here and the first schema's value is kept.
_LENIENT: ContextVar[list | None] = ContextVar("structgen_merge_lenient", default=None)


def _conflict(keyword: str, why: str) -> None:
    sink = _LENIENT.get()
    if sink is None:
        raise MergeConflict(keyword, why)
    sink.append((keyword, why))


class MergeConflict(Exception):
    """Two keywords cannot be combined exactly; ``keyword`` names the one at fault."""

    def __init__(self, keyword: str, why: str) -> None:
        super().__init__(why)
        self.keyword = keyword
        self.why = why


def _types(s: dict) -> set[str] | None:
    t = s.get("type")
    if t is None:
        return None
    return {t} if isinstance(t, str) else set(t)


def merge_lenient(a: Any, b: Any, resolve: Callable[[str], Any], *,
                  ref_alone: bool = False) -> tuple[Any, list[tuple[str, str]]]:
    """Like :func:`merge`, but a conflicting keyword keeps ``a``'s value; returns the conflicts."""
    sink: list[tuple[str, str]] = []
    token = _LENIENT.set(sink)
    try:
        return merge(a, b, resolve, ref_alone=ref_alone), sink
    finally:
        _LENIENT.reset(token)


def merge(a: Any, b: Any, resolve: Callable[[str], Any], depth: int = 0, *, ref_alone: bool = False) -> Any:
    """The intersection of schemas ``a`` and ``b`` (``resolve`` maps a ``$ref`` to its target;
    ``ref_alone``: a schema with ``$ref`` is its target alone, as in draft-07 and older).

    Raises:
        MergeConflict: not combinable exactly.
        LimitError: more than :data:`MAX_MERGE_STEPS` merges (pointer "": the caller knows where).
    """
    steps = _STEPS.get()
    if steps is None:  # the outermost call owns the count
        token, alone = _STEPS.set([0]), _REF_ALONE.set(ref_alone)
        try:
            return _merge(a, b, resolve, depth)
        finally:
            _STEPS.reset(token)
            _REF_ALONE.reset(alone)
    steps[0] += 1
    if steps[0] > MAX_MERGE_STEPS:
        raise LimitError(f"combining these schemas takes more than {MAX_MERGE_STEPS} merges "
                         "(allOf over anyOf multiplies the alternatives)", limit_name="MAX_MERGE_STEPS",
                         limit=MAX_MERGE_STEPS, reached=steps[0], pointer=None)
    return _merge(a, b, resolve, depth)


def _merge(a: Any, b: Any, resolve: Callable[[str], Any], depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise MergeConflict("allOf", "schemas nest too deeply to combine (recursive $ref inside allOf?)")
    if a is True or a == {}:
        return b
    if b is True or b == {}:
        return a
    if a is False or b is False:
        return False
    a, b = _expand_ref(a, resolve, depth), _expand_ref(b, resolve, depth)
    if isinstance(a, bool) or isinstance(b, bool):  # a $ref may lead to a boolean schema
        return merge(a, b, resolve, depth + 1)
    # true-valued additionalProperties / items assert nothing (the unevaluated* expansion
    # writes them as annotations); dropped so that they do not block patternProperties
    a, b = (_without_true(s, ("additionalProperties", "items")) for s in (a, b))
    # an if without then/else, or then/else without if, asserts nothing: dropped before
    # merging, which could otherwise pair one part's if with another part's then
    a, b = _without_lonely_conditionals(a), _without_lonely_conditionals(b)
    for s in (a, b):
        unevaluated = [k for k in _UNEVALUATED if isinstance(s, dict) and k in s]
        if unevaluated:
            # it must not see the other schema's annotations; the converter makes these
            # keywords plain before merging at the top, not inside nested merges
            _conflict(unevaluated[0], f"{unevaluated[0]} combined with another schema at the same location "
                      "(inside properties or items of an allOf)")
    if "anyOf" in a or "anyOf" in b:
        return _distribute(a, b, resolve, depth)
    if "allOf" in a:
        a = _fold(a, resolve, depth)
    if "allOf" in b:
        b = _fold(b, resolve, depth)
    if not isinstance(a, dict) or not isinstance(b, dict):
        return merge(a, b, resolve, depth + 1)
    out: dict[str, Any] = {}
    for key in dict.fromkeys([*a, *b]):  # (a's keys, then b's: a set's order made the keyword an error names vary by run)
        if key in _ANNOTATIONS:
            out[key] = a.get(key, b.get(key))
            continue
        if key in ("properties", "additionalProperties", "items", "prefixItems", "required", "type", "enum", "const",
                   "patternProperties", CONTAINS_ALL):
            continue  # combined below
        if key not in a or key not in b:
            out[key] = a.get(key, b.get(key))
        elif json_equal(a[key], b[key]):
            out[key] = a[key]
        elif isinstance(a[key], bool) or isinstance(b[key], bool):  # draft-04 exclusive flags
            _conflict(key, f"two different {key!r} values cannot be combined exactly")
            out[key] = a[key]
        elif key == "not":  # not A and not B: not (A or B)
            out[key] = {"anyOf": [a[key], b[key]]}
        elif key in ("x-structgen-not-strings", "x-structgen-not-patterns"):  # excluded by either side
            out[key] = sorted(set(a[key]) | set(b[key]))
        elif key == "multipleOf" and all(isinstance(x, int) for x in (a[key], b[key])):
            out[key] = math.lcm(a[key], b[key])  # multiples of both: multiples of the lcm
        elif key == "contains" and not any(k in s for s in (a, b) for k in ("minContains", "maxContains")):
            # an item matching each: the other side's goes to the list array() also requires
            out[key] = a[key]
            out[CONTAINS_ALL] = [b[key]]
        elif key in _LOWER:
            out[key] = max(a[key], b[key])
        elif key in _UPPER:
            out[key] = min(a[key], b[key])
        else:
            _conflict(key, f"two different {key!r} values cannot be combined exactly")
            out[key] = a[key]
    ta, tb = _types(a), _types(b)
    if ta is not None or tb is not None:
        types = _intersect_types(ta, tb)
        if not types:
            return False
        out["type"] = sorted(types) if len(types) > 1 else next(iter(types))
    required = list(dict.fromkeys(a.get("required", []) + b.get("required", [])))
    if required:
        out["required"] = required
    wanted = [*out.get(CONTAINS_ALL, []), *a.get(CONTAINS_ALL, []), *b.get(CONTAINS_ALL, [])]
    if wanted:
        unique: list[Any] = []
        for c in wanted:
            if not any(json_equal(c, u) for u in [out.get("contains"), *unique]):
                unique.append(c)
        if "contains" not in out:
            out["contains"], unique = unique[0], unique[1:]
        if unique and ("minContains" in out or "maxContains" in out):
            _conflict("contains", "two different 'contains' values cannot be combined exactly beside minContains/maxContains")
        if unique:
            out[CONTAINS_ALL] = unique
        else:
            out.pop(CONTAINS_ALL, None)
    _merge_literals(a, b, out)
    _merge_object(a, b, out, resolve, depth)
    _merge_array(a, b, out, resolve, depth)
    return out


def _without_lonely_conditionals(s: Any) -> Any:
    if not isinstance(s, dict):
        return s
    if "if" in s and "then" not in s and "else" not in s:
        return {k: v for k, v in s.items() if k != "if"}
    if "if" not in s and ("then" in s or "else" in s):
        return {k: v for k, v in s.items() if k not in ("then", "else")}
    return s


def _without_true(s: Any, keys: tuple[str, ...]) -> Any:
    if isinstance(s, dict) and any(s.get(k) is True for k in keys):
        return {k: v for k, v in s.items() if not (k in keys and v is True)}
    return s


def _expand_ref(s: Any, resolve, depth: int) -> Any:
    while isinstance(s, dict) and "$ref" in s:
        target = resolve(s["$ref"])
        rest = {} if _REF_ALONE.get() else {k: v for k, v in s.items() if k != "$ref"}
        s = merge(target, rest, resolve, depth + 1) if rest else target
        depth += 1
        if depth > MAX_DEPTH:
            raise MergeConflict("$ref", "reference chain too deep to combine")
    return s


def _fold(s: dict, resolve, depth: int) -> Any:
    rest = {k: v for k, v in s.items() if k != "allOf"}
    for sub in s["allOf"]:
        rest = merge(rest, sub, resolve, depth + 1)
    return rest


def _distribute(a: Any, b: Any, resolve, depth: int) -> Any:
    # allOf[x, anyOf[y1..yn]] = anyOf[x ∧ y1, ..., x ∧ yn]
    if isinstance(a, dict) and "anyOf" in a:
        a, b = b, a
    options = b["anyOf"]
    if len(options) > 64:
        raise MergeConflict("anyOf", "too many alternatives to combine")
    rest_b = {k: v for k, v in b.items() if k != "anyOf"}
    base = merge(a, rest_b, resolve, depth + 1) if rest_b else a
    merged: dict[str, Any] = {}  # identical alternatives once: repeated merges would multiply them
    for opt in options:
        m = merge(base, opt, resolve, depth + 1)
        if m is not False:
            merged.setdefault(_key(m), m)
    return {"anyOf": list(merged.values())} if merged else False


def _key(schema: Any) -> str:
    return json.dumps(schema, sort_keys=True, default=repr)


def _intersect_types(ta: set[str] | None, tb: set[str] | None) -> set[str]:
    if ta is None:
        return set(tb)
    if tb is None:
        return set(ta)
    out = ta & tb
    if "number" in ta and "integer" in tb or "integer" in ta and "number" in tb:
        out.add("integer")
    return out


def _merge_literals(a: dict, b: dict, out: dict) -> None:
    lits = []
    for s in (a, b):
        if "const" in s:
            lits.append([s["const"]])
        if "enum" in s:  # beside a const too: both apply
            lits.append(list(s["enum"]))
    if not lits:
        return
    values = lits[0]
    for other in lits[1:]:
        values = [v for v in values if any(json_equal(v, w) for w in other)]
    out["enum"] = values  # siblings filter them further when the grammar is built


def _merge_object(a: dict, b: dict, out: dict, resolve, depth: int) -> None:
    xa, xb = a.get("patternProperties", {}), b.get("patternProperties", {})
    if xa or xb:
        # every matching pattern of either side applies: the union, one schema per pattern
        out["patternProperties"] = {p: merge(xa.get(p, True), xb.get(p, True), resolve, depth + 1)
                                    for p in list(xa) + [p for p in xb if p not in xa]}
    pa, pb = a.get("properties", {}), b.get("properties", {})
    if not pa and not pb and "additionalProperties" not in a and "additionalProperties" not in b:
        return
    for mine, other in ((a, b), (b, a)):
        # one side's additionalProperties covers names its own patterns miss: exact when the
        # other side's patterns are among its own (those names reach neither additionalProperties)
        if mine.get("patternProperties") and "additionalProperties" in other and (
                "additionalProperties" in mine or not set(mine["patternProperties"]) <= set(other.get("patternProperties", {}))):
            raise MergeConflict("patternProperties", "patternProperties beside another side's additionalProperties")
    aa, ab = a.get("additionalProperties", True), b.get("additionalProperties", True)
    props = {}
    for name in list(pa) + [n for n in pb if n not in pa]:
        props[name] = merge(pa.get(name, aa), pb.get(name, ab), resolve, depth + 1)
    if props:
        out["properties"] = props
    extra = merge(aa, ab, resolve, depth + 1)
    if extra is not True:
        out["additionalProperties"] = extra


def _merge_array(a: dict, b: dict, out: dict, resolve, depth: int) -> None:
    if any(isinstance(s.get("items"), list) for s in (a, b)):
        raise MergeConflict("items", "draft-07 tuple items inside allOf are not combined")
    xa, xb = a.get("prefixItems", []), b.get("prefixItems", [])
    if not isinstance(xa, list) or not isinstance(xb, list):
        # (the metaschema check lets any value through where prefixItems is not a keyword of
        # the schema's draft; outside a merge such a schema is refused by the array itself)
        raise MergeConflict("prefixItems", "prefixItems is not an array of schemas (not a keyword of this draft)")
    ia, ib = a.get("items", True), b.get("items", True)
    if "items" in a or "items" in b:
        items = merge(ia, ib, resolve, depth + 1)
        out["items"] = items
    n = max(len(xa), len(xb))
    if n:
        out["prefixItems"] = [
            merge(xa[i] if i < len(xa) else ia, xb[i] if i < len(xb) else ib, resolve, depth + 1) for i in range(n)]
