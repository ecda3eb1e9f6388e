"""Hypothesis strategies for the property tests: JSON Schemas and their valid instances.

``schemas()`` draws JSON Schemas from structgen's supported keyword set (README coverage
table): nested objects with optional/required mixes and every ``additionalProperties`` form,
arrays (``items``, ``prefixItems``, draft-07 tuples, ``minItems``/``maxItems``), strings
(lengths or a pattern from :data:`PATTERNS`), integers with inclusive/exclusive, negative and
fractional bounds, ``enum``/``const`` with tricky strings and mixed types, ``anyOf``, boolean
subschemas, annotations, and ``$defs`` with (possibly recursive) local ``$ref``. Sizes stay
small so that one example compiles in well under a second on SmolLM2's vocabulary.

``broken_schemas()`` draws inputs the compiler must refuse (or may accept) — it never may
raise anything but a ``StructgenError``.

``instances(schema)`` draws values meant to be valid for a schema (a small generator guided
by the schema; callers keep only those ``jsonschema`` accepts: hypothesis-jsonschema is not
available offline).
"""
from __future__ import annotations

import math
import re
from typing import Any

from hypothesis import strategies as st

DRAFT7 = "http://json-schema.org/draft-07/schema#"

# Strings that stress escaping and UTF-8: quotes, backslashes, control characters (JSON
# escapes), DEL, line/paragraph separators, BOM, 2/3/4-byte UTF-8, the edges of the
# surrogate gap, the last code point, a JSON-looking string, and the empty string.
TRICKY_STRINGS = [
    "", " ", "a", "A b", '"', '\\', '\\"', 'q"uote', "back\\slash", "\\u0041", "/",
    "\x00", "\x01", "\x1f", "\t", "\n", "\r\n", "\x7f", "\x85", "\u2028", "\u2029", "\ufeff",
    "é", "Zoë", "ünï", "日本語", "😀", "a😀b", "👩‍👩‍👧", "\ud7ff", "\ue000", "\U0010ffff",
    '{"a":1}', "null", "true", "0", "-1", "1e5", "<|endoftext|>", "</s>",
]

# Property names: tricky ones plus keyword look-alikes.
NAMES = ["a", "b", "c", "id", "name", "x y", 'q"', "b\\s", "é", "😀", "", "$ref", "type", "\n", "a/b", "~0"]

# Patterns: the common ECMA/Python subset structgen claims. Each compiles; for the
# completeness property instances are drawn with hypothesis' from_regex over ASCII.
PATTERNS = [
    "^[a-z]+$", "^[A-Z][a-z]{0,3}$", "^[0-9]{3}-[0-9]{2}$", "abc", "^(foo|bar|baz)$", "^(ab)*$",
    "^[^\"\\\\]*$", "^x?y+z*$", "^.{0,3}$", "^[a-f0-9]{2,4}$", "^\\d+$", "^\\w{1,3}$",
    "^[\\s]?a$", "^-?(0|[1-9][0-9]*)$", "^\\u00e9+$", "^[é😀]+$", "^(\\.|\\\\)+$",
    "^a|b$", "z", "^[\\[\\]{}]+$", "^[^a-z]{1,2}$", "^(?:x|yy){1,2}$", "^\\x41\\t?$",
    "^[\\u0000-\\u001f]$", "^\"$", "^(a(b(c)?)?)$", "^[^\\x00-\\x7f]$",
]
# Patterns whose class escapes differ between Python's re (jsonschema) and ECMA-262 (the
# grammar once took their Python reading): only the pattern soundness walks use them
# (instances would differ by engine).
DIVERGENT_PATTERNS = ["^\\W$", "^\\D$", "^\\S$", "^\\s$", "^[^\\w]$"]

FLOATS = st.floats(allow_nan=False, allow_infinity=False, width=64).filter(lambda f: abs(f) < 1e15)
SMALL_INTS = st.integers(-1000, 1000)
BIG_INTS = st.sampled_from([-(10**12), -(2**53), 2**53, 10**12, 2**63, -(2**63), 10**20])


def tricky_strings(max_size: int = 6) -> st.SearchStrategy[str]:
    chars = st.characters(exclude_categories=("Cs",))  # no lone surrogates (see report)
    return st.one_of(st.sampled_from(TRICKY_STRINGS), st.text(chars, max_size=max_size))


def json_literals(depth: int = 1) -> st.SearchStrategy[Any]:
    """Mixed-type JSON values for enum/const: scalars, small arrays and objects."""
    scalars = st.one_of(
        st.none(), st.booleans(), SMALL_INTS, BIG_INTS, FLOATS, st.sampled_from([0.5, -0.0, 1.0, 1e-7, 2.5e10]),
        tricky_strings(),
    )
    if depth <= 0:
        return scalars
    inner = json_literals(depth - 1)
    return st.one_of(
        scalars,
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(NAMES), inner, max_size=3),
    )


def _annotate(draw, schema: dict) -> dict:
    if draw(st.integers(0, 9)) == 0:
        key = draw(st.sampled_from(["title", "description", "$comment", "default", "examples", "deprecated"]))
        schema[key] = {"title": "T", "description": "d\u00e9scr", "$comment": "c", "default": None,
                       "examples": [1, "x"], "deprecated": False}[key]
    return schema


class _Ctx:
    def __init__(self, defs: list[str], defs_key: str, draft7: bool) -> None:
        self.defs = defs
        self.defs_key = defs_key
        self.draft7 = draft7


@st.composite
def _integer(draw) -> dict:
    s: dict[str, Any] = {"type": "integer"}
    bound = st.one_of(SMALL_INTS, st.integers(-5, 5), st.sampled_from([-0.5, 0.5, 2.5, -7.25, 1e3]), BIG_INTS)
    for kw in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        if draw(st.integers(0, 2)) == 0:
            s[kw] = draw(bound)
    lo = max([v for k, v in s.items() if k in ("minimum", "exclusiveMinimum")], default=None)
    hi = min([v for k, v in s.items() if k in ("maximum", "exclusiveMaximum")], default=None)
    if lo is not None and hi is not None and lo > hi and draw(st.integers(0, 3)):
        # mostly keep the schema satisfiable: swap the conflicting bounds
        for k in list(s):
            if k != "type":
                del s[k]
        s["minimum"], s["maximum"] = hi, lo
    return s


@st.composite
def _string(draw) -> dict:
    s: dict[str, Any] = {"type": "string"}
    choice = draw(st.integers(0, 3))
    if choice == 0:
        s["pattern"] = draw(st.sampled_from(PATTERNS))
    elif choice >= 2:
        lo = draw(st.integers(0, 4))
        if draw(st.booleans()):
            s["minLength"] = lo
        if draw(st.booleans()):
            s["maxLength"] = lo + draw(st.integers(0, 4))
    return s


@st.composite
def _leaf(draw, ctx: _Ctx) -> Any:
    kind = draw(st.sampled_from(
        ["null", "boolean", "integer", "integer", "number", "string", "string", "enum", "const",
         "true", "any", "types", "false", "ref"]))
    if kind == "ref" and ctx.defs:
        return {"$ref": f"#/{ctx.defs_key}/{draw(st.sampled_from(ctx.defs))}"}
    if kind in ("null", "boolean", "number"):
        return {"type": kind}
    if kind == "integer":
        return draw(_integer())
    if kind == "string" or kind == "ref":
        return draw(_string())
    if kind == "enum":
        values = draw(st.lists(json_literals(), min_size=1, max_size=4))
        s = {"enum": values}
        if draw(st.integers(0, 3)) == 0:  # values failing the sibling type are dropped
            s["type"] = draw(st.sampled_from(["string", "integer", ["string", "null"], "number"]))
        return s
    if kind == "const":
        return {"const": draw(json_literals())}
    if kind == "true":
        return True
    if kind == "false":
        return False
    if kind == "any":
        return {}
    types = draw(st.lists(st.sampled_from(["null", "boolean", "integer", "string", "array", "object"]),
                          min_size=1, max_size=3, unique=True))
    s = {"type": types}
    if "string" in types and draw(st.booleans()):
        s["maxLength"] = draw(st.integers(0, 3))
    if "integer" in types and draw(st.booleans()):
        s["minimum"] = draw(st.integers(-3, 3))
    return s


@st.composite
def _node(draw, ctx: _Ctx, depth: int) -> Any:
    if depth <= 0 or draw(st.integers(0, 2)) == 0:
        return draw(_leaf(ctx))
    kind = draw(st.sampled_from(["object", "object", "array", "array", "anyOf"]))
    child = _node(ctx, depth - 1)
    if kind == "anyOf":
        return _annotate(draw, {"anyOf": draw(st.lists(child, min_size=1, max_size=3))})
    if kind == "array":
        s: dict[str, Any] = {"type": "array"}
        form = draw(st.integers(0, 3))
        if form == 0:
            pass  # any items
        elif form == 1:
            s["items"] = draw(child)
        elif ctx.draft7:  # draft-07 tuple form
            s["items"] = draw(st.lists(child, min_size=1, max_size=3))
            if draw(st.booleans()):
                s["additionalItems"] = draw(st.one_of(st.booleans(), child))
        else:
            s["prefixItems"] = draw(st.lists(child, min_size=1, max_size=3))
            if draw(st.booleans()):
                s["items"] = draw(st.one_of(st.just(False), child))
        if draw(st.booleans()):
            s["minItems"] = draw(st.integers(0, 2))
        if draw(st.booleans()):
            s["maxItems"] = s.get("minItems", 0) + draw(st.integers(0, 3))
        return _annotate(draw, s)
    s = {"type": "object"} if draw(st.integers(0, 4)) else {}
    names = draw(st.lists(st.sampled_from(NAMES), max_size=5, unique=True))
    s["properties"] = {n: draw(child) for n in names}
    req = [n for n in names if draw(st.booleans())]
    if draw(st.integers(0, 4)) == 0:
        req.append(draw(st.sampled_from(["zz", "a", "q\""])))
    if req:
        s["required"] = list(dict.fromkeys(req))
    ap = draw(st.integers(0, 4))
    if ap == 1:
        s["additionalProperties"] = False
    elif ap == 2:
        s["additionalProperties"] = True
    elif ap == 3:
        s["additionalProperties"] = draw(child)
    return _annotate(draw, s)


@st.composite
def schemas(draw, *, max_depth: int = 3) -> Any:
    """A JSON Schema from the supported keyword set (mostly satisfiable)."""
    draft7 = draw(st.integers(0, 5)) == 0
    defs_key = "definitions" if draft7 and draw(st.booleans()) else "$defs"
    names = draw(st.lists(st.sampled_from(["node", "leaf", "item", "x~y", "a/b"]), max_size=2, unique=True))
    ctx = _Ctx([n.replace("~", "~0").replace("/", "~1") for n in names], defs_key, draft7)
    defs = {}
    for n in names:
        # a definition may refer to any definition (itself included): recursion; refs at
        # required positions with no base case are refused with a SchemaError (property 6).
        defs[n] = draw(_node(ctx, max_depth - 1))
    body = draw(_node(ctx, max_depth))
    if not defs and not draft7:
        return body
    root: dict[str, Any] = {"anyOf": [body]} if isinstance(body, bool) else dict(body)
    if draft7:
        root["$schema"] = DRAFT7
    if defs:
        root[defs_key] = defs
        if names and draw(st.integers(0, 3)) == 0 and "$ref" not in root and "anyOf" not in root:
            root = {"$schema": DRAFT7, defs_key: defs, "$ref": f"#/{defs_key}/{ctx.defs[0]}"} if draft7 else \
                {defs_key: defs, "$ref": f"#/{defs_key}/{ctx.defs[0]}"}
    return root


# -- inputs the compiler must refuse cleanly ---------------------------------------------

_JUNK = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.just(-1), st.just(1.5), st.text(max_size=3),
    st.lists(st.integers(0, 2), max_size=2), st.just({}), st.just({"type": 5}), st.just([{}]),
)
_BAD_KEYWORDS = ["type", "properties", "required", "additionalProperties", "enum", "const", "items",
                 "prefixItems", "minItems", "maxItems", "minLength", "maxLength", "pattern", "anyOf",
                 "$ref", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "$defs",
                 "allOf", "oneOf", "not", "if", "uniqueItems", "format", "patternProperties",
                 "multipleOf", "contains", "$anchor", "$dynamicRef", "unevaluatedProperties"]
_BAD_PATTERNS = ["(?=a)", "(?<=a)b", "(a)\\1", "\\bword", "[", "a{2,1}", "(?i)x", "a**", "\\p{L}",
                 "\\cA", "a{,3}", "(?P<n>a)", "\\Z", ""]


def _pointers(node: Any, base: str = "") -> list[tuple[str, Any]]:
    out = [(base, node)]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _pointers(v, base + "/" + str(k).replace("~", "~0").replace("/", "~1"))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _pointers(v, f"{base}/{i}")
    return out


@st.composite
def broken_schemas(draw) -> Any:
    """A schema mutated at one place: wrong types, unsupported keywords, bad refs/regexes,
    unsatisfiable bounds, or plain non-schema values."""
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return draw(st.one_of(_JUNK, st.lists(_JUNK, max_size=2)))
    base = draw(schemas(max_depth=2))
    if not isinstance(base, dict):
        base = {"anyOf": [base]}
    targets = [(p, n) for p, n in _pointers(base) if isinstance(n, dict)]
    _, node = draw(st.sampled_from(targets))
    mutation = draw(st.integers(0, 8))
    if mutation <= 2:
        node[draw(st.sampled_from(_BAD_KEYWORDS))] = draw(_JUNK)
    elif mutation == 3:
        node["$ref"] = draw(st.sampled_from(["#/nope", "#/$defs/missing", "other.json#/a", "#anchor", "#/properties/~2",
                                             "#/$defs", "#/$defs/a%25b", "#", "#/anyOf/7"]))
    elif mutation == 4:
        node["pattern"] = draw(st.sampled_from(_BAD_PATTERNS))
        node["type"] = "string"
    elif mutation == 5:
        node.update({"type": "integer", "minimum": 5, "maximum": draw(st.sampled_from([4, 4.5, -5]))})
    elif mutation == 6:
        node.update(draw(st.sampled_from([{"enum": []}, {"minLength": 3, "maxLength": 2, "type": "string"},
                                          {"minItems": 3, "maxItems": 1, "type": "array"},
                                          {"type": "integer", "exclusiveMinimum": 1, "exclusiveMaximum": 2},
                                          {"type": []}, {"required": ["a", "a"]}, {"type": "integer", "enum": ["x"]}])))
    elif mutation == 7:  # a sub-schema replaced by false (often unsatisfiable)
        for k in ("items", "additionalProperties", "anyOf"):
            if k in node:
                node[k] = False if k != "anyOf" else [False]
                break
        else:
            node["properties"] = {"a": False}
            node["required"] = ["a"]
    else:  # a number bound on `number` (unsupported) or a huge unrolled repetition
        node.update(draw(st.sampled_from([{"type": "number", "minimum": 0.5}, {"type": "string", "maxLength": 3000},
                                          {"type": "array", "items": {"type": "string", "maxLength": 30}, "maxItems": 200}])))
    return base


# -- valid instances, drawn by following the schema -------------------------------------

# printable ASCII plus a few characters every pattern of the list may need (a tab, control
# characters, non-ASCII): hypothesis' from_regex cannot draw a pattern whose characters are
# all outside its alphabet (IncompatibleWithAlphabet, or an internal assertion for
# ^[^\x00-\x7f]$), which the soak runs hit
ASCII_ALPHABET = st.characters(min_codepoint=0x20, max_codepoint=0x7E, include_characters="\t\x00\x1fé😀")
# for a pattern with a class escape (\d \w \s or a negation) neither a non-ASCII character
# nor U+001C..U+001F: Python's classes take é (\w) and the separators (\s) where ECMA-262's
# do not, and structgen keeps the characters both agree on (docs/json-schema.md), so such an
# instance is valid to jsonschema only
ASCII_ONLY = st.characters(min_codepoint=0x20, max_codepoint=0x7E, include_characters="\t\x00")

INSTANCE_CHARS = st.one_of(ASCII_ALPHABET, st.sampled_from(["é", "😀", "\n", "\t", '"', "\\", "\x00", "\u2028", "日"]))


def _class_escapes(pattern: str) -> bool:
    r"""Whether ``pattern`` holds ``\d \w \s`` or a negation (escaped backslashes skipped)."""
    i = 0
    while i < len(pattern) - 1:
        if pattern[i] == "\\":
            if pattern[i + 1] in "dwsDWS":
                return True
            i += 2
        else:
            i += 1
    return False


def _resolve(schema: Any, root: Any) -> Any:
    seen = 0
    while isinstance(schema, dict) and "$ref" in schema and seen < 20:
        node = root
        for raw in schema["$ref"][1:].split("/")[1:]:
            part = raw.replace("~1", "/").replace("~0", "~")
            node = node[int(part)] if isinstance(node, list) else node[part]
        schema, seen = node, seen + 1
    return schema


def _json_any(draw, depth: int) -> Any:
    if depth <= 0:
        return draw(st.one_of(st.none(), st.booleans(), SMALL_INTS, FLOATS, st.text(INSTANCE_CHARS, max_size=4)))
    return draw(st.one_of(st.none(), st.booleans(), SMALL_INTS, FLOATS, st.text(INSTANCE_CHARS, max_size=4),
                          st.lists(st.deferred(lambda: st.integers()), max_size=2),
                          st.dictionaries(st.text(INSTANCE_CHARS, max_size=3), st.none() | SMALL_INTS, max_size=2)))


def _int_in(draw, s: dict) -> int:
    lo, hi = -(10**6), 10**6
    for k, v in s.items():
        if k == "minimum":
            lo = max(lo, math.ceil(v))
        elif k == "exclusiveMinimum" and not isinstance(v, bool):
            lo = max(lo, math.floor(v) + 1)
        elif k == "maximum":
            hi = min(hi, math.floor(v))
        elif k == "exclusiveMaximum" and not isinstance(v, bool):
            hi = min(hi, math.ceil(v) - 1)
    if lo > hi:
        return lo
    edge = [lo, hi, min(max(0, lo), hi)]
    return draw(st.one_of(st.sampled_from(edge), st.integers(lo, hi)))


def _draw_instance(draw, schema: Any, root: Any, depth: int) -> Any:
    schema = _resolve(schema, root)
    if schema is True or schema == {} or depth <= 0 and not isinstance(schema, dict):
        return _json_any(draw, 1)
    if schema is False:
        return None  # invalid: filtered out by the caller
    if "anyOf" in schema:
        return _draw_instance(draw, draw(st.sampled_from(schema["anyOf"])), root, depth - 1)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return draw(st.sampled_from(schema["enum"]))
    types = schema.get("type", ["null", "boolean", "integer", "number", "string", "array", "object"])
    t = draw(st.sampled_from([types] if isinstance(types, str) else types))
    if t == "null":
        return None
    if t == "boolean":
        return draw(st.booleans())
    if t == "integer":
        return _int_in(draw, schema)
    if t == "number":
        return draw(st.one_of(FLOATS, SMALL_INTS))
    if t == "string":
        if "pattern" in schema:
            alphabet = ASCII_ONLY if _class_escapes(schema["pattern"]) else ASCII_ALPHABET
            text = draw(st.from_regex(schema["pattern"], alphabet=alphabet))
            # Python's `$` also matches before a final newline (jsonschema accepts "a\n" for
            # ^[a-z]+$); structgen reads `$` the ECMA way, on the safe side: drop that case.
            return text[:-1] if text.endswith("\n") else text
        lo = schema.get("minLength", 0)
        hi = schema.get("maxLength", lo + 5)
        return draw(st.one_of(st.text(INSTANCE_CHARS, min_size=lo, max_size=hi),
                              st.sampled_from([s for s in TRICKY_STRINGS if lo <= len(s) <= hi] or ["x" * lo])))
    if t == "array":
        if depth <= 0:
            return []
        prefix = schema.get("prefixItems", [])
        items = schema.get("items", True)
        if isinstance(items, list):
            prefix, items = items, schema.get("additionalItems", True)
        lo = schema.get("minItems", 0)
        hi = schema.get("maxItems", max(lo, len(prefix)) + 2)
        if items is False:
            hi = min(hi, len(prefix))
        n = draw(st.integers(lo, max(lo, hi)))
        return [_draw_instance(draw, prefix[i] if i < len(prefix) else items, root, depth - 1) for i in range(n)]
    # object
    if depth <= 0:
        return {}
    props = schema.get("properties", {})
    req = schema.get("required", [])
    out = {}
    for name in list(props) + [r for r in req if r not in props]:
        if name in req or draw(st.booleans()):
            out[name] = _draw_instance(draw, props.get(name, schema.get("additionalProperties", True)), root, depth - 1)
    extra = schema.get("additionalProperties", True)
    if extra is not False and draw(st.integers(0, 2)) == 0:
        # additional member names are written without escapes (README): no ", \\ or controls
        for key in draw(st.lists(st.text(st.one_of(ASCII_ALPHABET.filter(lambda c: c not in '"\\'),
                                                   st.sampled_from(["é", "😀"])), max_size=3), max_size=2)):
            if key not in props and key not in req:
                out[key] = _draw_instance(draw, extra, root, depth - 1)
    return out


@st.composite
def instances(draw, schema: Any, *, max_depth: int = 4) -> Any:
    """A value drawn by following ``schema`` (usually, not always, valid: filter with jsonschema)."""
    return _draw_instance(draw, schema, schema, max_depth)


def outside_string_whitespace_runs(text: str) -> int:
    """Longest run of JSON whitespace outside string literals."""
    best = run = 0
    in_str = esc = False
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
            continue
        if ch in " \t\n\r":
            run += 1
            best = max(best, run)
        else:
            run = 0
            in_str = ch == '"'
    return best


def pattern_ok(pattern: str) -> bool:
    try:
        re.compile(pattern)
        return True
    except re.error:
        return False
