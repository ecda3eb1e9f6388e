"""Fast metaschema check: the draft metaschemas compiled into Python predicates.

jsonschema validates a schema against its metaschema in about half of a typical schema's
conversion time (``$dynamicRef`` resolution through ``referencing`` on every subschema).
The metaschemas themselves use a dozen simple keywords, so they are compiled once into
closures that answer only "valid or not". The answer is trusted only when it is *valid*;
anything else (an invalid schema, a keyword or value this module does not model) goes to
jsonschema, which finds and words the error. So this can only make the check faster, never
let through a schema jsonschema rejects, provided ``True`` is never returned wrongly: that
is what ``tests/test_metaschema.py`` checks against jsonschema on the test corpora and on
mutated schemas.
"""
from __future__ import annotations

import json
import re
import threading
from importlib import resources
from typing import Any, Callable
from urllib.parse import urldefrag, urljoin

from .pointer import unescape

__all__ = ["fast_check"]

Check = Callable[[Any], bool]

_IGNORED = frozenset({
    "$schema", "$id", "id", "$vocabulary", "$dynamicAnchor", "$recursiveAnchor", "$anchor", "$comment",
    "title", "description", "default", "deprecated", "format", "$defs", "definitions", "examples",
})
"""Metaschema keywords that assert nothing about an instance (``format`` is an annotation
for jsonschema's metaschema validators: no format checker is attached)."""


class _Unsupported(Exception):
    """A metaschema construct this compiler does not model (that draft falls back to jsonschema)."""


def _documents() -> dict[str, Any]:
    """The metaschemas and vocabulary metaschemas jsonschema ships, by ``$id`` (no fragment)."""
    docs: dict[str, Any] = {}
    root = resources.files("jsonschema_specifications") / "schemas"
    for draft in root.iterdir():
        if not draft.is_dir():
            continue
        files = [draft / "metaschema.json"]
        vocab = draft / "vocabularies"
        if vocab.is_dir():
            files.extend(f for f in vocab.iterdir() if f.is_file())
        for f in files:
            if f.is_file():
                doc = json.loads(f.read_text(encoding="utf-8"))
                uri = doc.get("$id", doc.get("id"))
                if isinstance(uri, str):
                    docs[urldefrag(uri)[0]] = doc
    return docs


def _pointer(doc: Any, fragment: str) -> Any:
    if not fragment:
        return doc
    if not fragment.startswith("/"):
        raise _Unsupported(f"anchor fragment {fragment!r}")
    for part in fragment[1:].split("/"):
        part = unescape(part)
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    return doc


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


# The combinators are plain loops: they run once per keyword of every subschema of every
# schema compiled, and ``all(c(x) for c in checks)`` paid a generator per call (a fifth of
# this check's time).

def _all_of(checks: list[Check]) -> Check:
    if len(checks) == 1:
        return checks[0]
    if len(checks) == 2:
        a, b = checks
        return lambda x: a(x) and b(x)

    def check(x: Any) -> bool:
        for c in checks:
            if not c(x):
                return False
        return True
    return check


def _any_of(checks: list[Check]) -> Check:
    if len(checks) == 1:
        return checks[0]

    def check(x: Any) -> bool:
        for c in checks:
            if c(x):
                return True
        return False
    return check


def _properties(checks: dict[str, Check]) -> Check:
    """The ``properties`` keyword: each member named in ``checks`` passes its check."""
    get = checks.get

    def properties(x: Any) -> bool:
        if isinstance(x, dict):
            for k, val in x.items():
                c = get(k)
                if c is not None and not c(val):
                    return False
        return True
    return properties


class _Compiler:
    """Compiles one metaschema (and what it references) into predicates."""

    def __init__(self, docs: dict[str, Any], root_uri: str, floats_are_integers: bool) -> None:
        self.docs = docs
        self.root_uri = root_uri
        self.floats_are_integers = floats_are_integers
        self.compiled: dict[tuple[str, str], Check] = {}

    @staticmethod
    def _target(base: str, ref: str) -> tuple[str, str]:
        """The document URI and fragment a ``$ref`` names, relative to ``base``."""
        uri, fragment = urldefrag(urljoin(base, ref))
        return uri or base, fragment

    def ref(self, base: str, ref: str) -> Check:
        uri, fragment = self._target(base, ref)
        key = (uri, fragment)
        if key not in self.compiled:
            if uri not in self.docs:
                raise _Unsupported(f"unknown metaschema {uri}")
            cell: list[Check] = []
            self.compiled[key] = lambda x: cell[0](x)  # a cycle reaches this before it is built
            cell.append(self.schema(_pointer(self.docs[uri], fragment), uri))
            self.compiled[key] = cell[0]
        return self.compiled[key]

    def type_check(self, name: str) -> Check:
        if name == "integer":
            if self.floats_are_integers:
                return lambda x: (isinstance(x, int) and not isinstance(x, bool)) or (
                    isinstance(x, float) and x.is_integer())
            return lambda x: isinstance(x, int) and not isinstance(x, bool)
        return {
            "object": lambda x: isinstance(x, dict),
            "array": lambda x: isinstance(x, list),
            "string": lambda x: isinstance(x, str),
            "boolean": lambda x: isinstance(x, bool),
            "null": lambda x: x is None,
            "number": _is_number,
        }[name]

    def schema(self, s: Any, base: str) -> Check:
        if s is True or s == {}:
            return lambda x: True
        if not isinstance(s, dict):
            raise _Unsupported(f"metaschema node {s!r}")
        base = urljoin(base, s["$id"]) if isinstance(s.get("$id"), str) else base
        checks: list[Check] = []
        # The 2019-09 and 2020-12 metaschemas are an allOf of one $ref per vocabulary, each a
        # "type" and a "properties" map: checked as written, every schema node went through
        # eight type checks and eight passes over its keys. Such parts are merged into this
        # node's own "type" and "properties": one type check per distinct type list, one pass
        # over the keys, each key's checks from every part together (the same conjunction).
        props: dict[str, list[Check]] = {}
        types: set[tuple[str, ...]] = set()
        parts = [(s, base)]
        if isinstance(s.get("allOf"), list):
            merged = [self._mergeable(sub, base) for sub in s["allOf"]]
            if all(m is not None for m in merged):
                parts += merged  # type: ignore[arg-type]
        for part, part_base in parts:
            for kw, v in part.items():
                if kw in _IGNORED or (kw == "allOf" and len(parts) > 1):
                    continue
                if kw == "type":
                    names = (v,) if isinstance(v, str) else tuple(v)
                    if names not in types:
                        types.add(names)
                        checks.append(self.keyword(kw, v, part, part_base))
                elif kw == "properties":
                    for name, sub in v.items():
                        props.setdefault(name, []).append(self.schema(sub, part_base))
                else:
                    checks.append(self.keyword(kw, v, part, part_base))
        if props:
            checks.append(_properties({name: _all_of(cs) for name, cs in props.items()}))
        return _all_of(checks)

    def _mergeable(self, sub: Any, base: str) -> tuple[dict, str] | None:
        """``sub``'s target and its base URI when ``sub`` is a lone ``$ref`` to a schema made
        of nothing but ``type`` and ``properties`` (and keywords that assert nothing)."""
        if not isinstance(sub, dict) or not isinstance(sub.get("$ref"), str):
            return None
        if any(k not in _IGNORED and k != "$ref" for k in sub):
            return None
        uri, fragment = self._target(base, sub["$ref"])
        if uri not in self.docs:
            return None
        target = _pointer(self.docs[uri], fragment)
        if not isinstance(target, dict) or any(k not in _IGNORED and k not in ("type", "properties") for k in target):
            return None
        if isinstance(target.get("$id"), str):
            uri = urljoin(uri, target["$id"])
        return target, uri

    def keyword(self, kw: str, v: Any, s: dict, base: str) -> Check:  # noqa: C901 - one branch per keyword
        if kw == "$ref":
            return self.ref(base, v)
        if kw in ("$dynamicRef", "$recursiveRef"):
            # validating against a draft's own metaschema, the dynamic scope's outermost
            # "meta" anchor (or recursive root) is that metaschema's root
            return self.ref(self.root_uri, "")
        if kw == "type":
            names = [v] if isinstance(v, str) else list(v)
            return _any_of([self.type_check(n) for n in names])
        if kw in ("allOf", "anyOf"):
            subs = [self.schema(sub, base) for sub in v]
            return _all_of(subs) if kw == "allOf" else _any_of(subs)
        if kw == "enum":
            if not all(isinstance(e, str) for e in v):
                raise _Unsupported("non-string enum")
            values = frozenset(v)
            return lambda x: isinstance(x, str) and x in values
        if kw == "pattern":
            rx = re.compile(v)
            return lambda x: not isinstance(x, str) or rx.search(x) is not None
        if kw == "minimum":
            strict = s.get("exclusiveMinimum") is True  # draft-04 spelling
            return (lambda x: not _is_number(x) or x > v) if strict else (lambda x: not _is_number(x) or x >= v)
        if kw == "exclusiveMinimum":
            if isinstance(v, bool):
                if "minimum" not in s:
                    raise _Unsupported("exclusiveMinimum without minimum")
                return lambda x: True  # applied by "minimum"
            return lambda x: not _is_number(x) or x > v
        if kw == "minItems":
            return lambda x: not isinstance(x, list) or len(x) >= v
        if kw == "uniqueItems":
            if not v:
                return lambda x: True
            # strings only: other items would need jsonschema's equality (1 vs True vs 1.0)
            return lambda x: not isinstance(x, list) or (
                all(isinstance(i, str) for i in x) and len(set(x)) == len(x))
        if kw == "items":
            if isinstance(v, list):
                raise _Unsupported("tuple items in a metaschema")
            item = self.schema(v, base)

            def items(x: Any) -> bool:
                if isinstance(x, list):
                    for i in x:
                        if not item(i):
                            return False
                return True
            return items
        if kw == "properties":
            return _properties({k: self.schema(sub, base) for k, sub in v.items()})
        if kw == "additionalProperties":
            if s.get("patternProperties"):
                raise _Unsupported("patternProperties beside additionalProperties")
            declared = frozenset(s.get("properties", {}))
            extra = self.schema(v, base)

            def additional(x: Any) -> bool:
                if isinstance(x, dict):
                    for k, val in x.items():
                        if k not in declared and not extra(val):
                            return False
                return True
            return additional
        if kw == "propertyNames":
            name = self.schema(v, base)
            return lambda x: not isinstance(x, dict) or all(name(k) for k in x)
        if kw == "dependencies":
            if not all(isinstance(d, list) for d in v.values()):
                raise _Unsupported("schema dependencies in a metaschema")
            deps = {k: tuple(d) for k, d in v.items()}
            return lambda x: not isinstance(x, dict) or all(
                all(r in x for r in deps[k]) for k in x if k in deps)
        raise _Unsupported(f"metaschema keyword {kw!r}")


_CACHE: dict[str, Check | None] = {}
_LOCK = threading.Lock()
_DOCS: dict[str, Any] | None = None


def _checker(meta_schema: dict) -> Check | None:
    """The compiled predicate of one metaschema (None when a construct is not modelled)."""
    global _DOCS
    uri = urldefrag(meta_schema.get("$id", meta_schema.get("id", "")))[0]
    with _LOCK:
        if uri in _CACHE:
            return _CACHE[uri]
        if _DOCS is None:
            _DOCS = _documents()
        check: Check | None
        try:
            # draft-04 and draft-03 count 1.0 as a number but not an integer
            floats = uri not in ("http://json-schema.org/draft-04/schema", "http://json-schema.org/draft-03/schema")
            check = _Compiler(_DOCS, uri, floats).ref(uri, "") if uri in _DOCS else None
        except Exception:  # noqa: BLE001 - _Unsupported or a shape not modelled (draft-03): use jsonschema
            check = None
        _CACHE[uri] = check
        return check


def fast_check(node: Any, meta_schema: dict) -> bool:
    """True if ``node`` certainly validates against ``meta_schema``; False means "ask jsonschema"."""
    check = _checker(meta_schema)
    try:
        return check is not None and bool(check(node))
    except RecursionError:
        raise
    except Exception:  # noqa: BLE001 - an unmodelled value shape: let jsonschema decide
        return False
