"""A schema document: its dialect, its resources and anchors, and where each reference leads.

A JSON Schema is one document made of *resources*: the root, and every subschema declaring
``$id`` (``id`` before draft-06). Each has a base URI; a ``$ref`` is resolved against the base
URI in force where it is written, then names a resource and, in its fragment, a JSON pointer
or an anchor (``$anchor``, ``$dynamicAnchor``, a draft-07 ``"$id": "#name"``).
:class:`SchemaDocument` indexes all of that once and answers with JSON pointers into the
document, so that the compiler and the canonical serialiser agree on what every reference
means. Nothing is ever fetched: other documents are embedded first
(:func:`structgen.schema.resources.embed_resources`).

It also answers what ``$dynamicRef`` needs (draft 2020-12): which resources declare each
``$dynamicAnchor`` name. A name declared by more than one resource is *dynamic*: the
``$dynamicRef`` to it means the anchor of the outermost resource entered on the way to it
(its dynamic scope), which the compiler follows by building a reference once per scope.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable
from urllib.parse import unquote, urldefrag, urljoin

import jsonschema

from ..errors import SchemaError, StructgenError, UnsupportedSchemaError
from .pointer import child, unescape

__all__ = ["SchemaDocument", "ANNOTATION_KEYWORDS", "DEFAULT_BASE", "LEGACY_DIALECTS", "MISSING", "legacy_dialect", "existing_prefix", "child_at",
           "subschemas", "dialect_of", "foreign_keywords"]

DEFAULT_BASE = "https://structgen.invalid/root.json"
"""Base URI of a document whose root declares no ``$id``."""

LEGACY_DIALECTS = ("draft-07", "draft-06", "draft-04", "draft-03")
"""The drafts where ``$ref`` hides its sibling keywords."""

# (sets: every key of every subschema is looked up in them)
SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})
SCHEMA_VALUES = frozenset({"items", "additionalItems", "additionalProperties", "not", "if", "then", "else",
                           "contains", "propertyNames", "unevaluatedItems", "unevaluatedProperties"})
SCHEMA_LISTS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems", "items"})

_IDENTITY_KEYWORDS = frozenset({"$id", "id", "$anchor", "$dynamicAnchor"})
"""What makes a subschema a resource or an anchor: one without them only passes its base on."""

MISSING = object()
"""What :func:`child_at` returns for a segment that names nothing."""


ANNOTATION_KEYWORDS = frozenset({
    "title", "description", "examples", "default", "$comment", "$schema", "$id", "id",
    "deprecated", "readOnly", "writeOnly", "$defs", "definitions",
    "contentEncoding", "contentMediaType", "contentSchema",  # annotations only since 2019-09
})
"""Keywords that never reject an instance (a ``$ref`` beside only these is a plain reference)."""


_DRAFTS: tuple[tuple[type, str], ...] = (
    (jsonschema.Draft3Validator, "draft-03"), (jsonschema.Draft4Validator, "draft-04"),
    (jsonschema.Draft6Validator, "draft-06"), (jsonschema.Draft7Validator, "draft-07"),
    (jsonschema.Draft201909Validator, "2019-09"), (jsonschema.Draft202012Validator, "2020-12"),
)
# every keyword some draft's validator checks (minContains and maxContains are read by
# "contains" from 2019-09 on; exclusiveMaximum and exclusiveMinimum are draft-04's flags read
# by maximum and minimum, kept for every draft: the converter reads both forms)
_ALL_CHECKED = frozenset().union(*(cls.VALIDATORS for cls, _ in _DRAFTS)) | {"minContains", "maxContains"}


def dialect_of(root: Any) -> tuple[type, str]:
    """The jsonschema validator class of a document (by its root's ``$schema``; 2020-12 without
    one or for a URI it does not know, as jsonschema) and the draft's name."""
    uri = root.get("$schema") if isinstance(root, dict) else None
    if type(uri) is not str:  # (none, or not a URI: the metaschema check refuses it, located)
        return _LATEST
    hit = _DIALECT_OF.get(uri)
    if hit is None:  # (asked several times per compile: once per URI)
        cls = jsonschema.validators.validator_for({"$schema": uri}, default=jsonschema.Draft202012Validator)
        hit = cls, next((name for c, name in _DRAFTS if c is cls), "2020-12")
        if len(_DIALECT_OF) < 256:
            _DIALECT_OF[uri] = hit
    return hit


_LATEST: tuple[type, str] = (jsonschema.Draft202012Validator, "2020-12")
_DIALECT_OF: dict[str, tuple[type, str]] = {}


@lru_cache(maxsize=4096)
def _joined(ref: str, base: str) -> tuple[str, str]:
    """``ref`` read against ``base``, as (URI without fragment, fragment). Cached: combining
    schemas makes their references absolute, and each is then located and rewritten several
    times; urljoin with urldefrag was about 25 us a time (o359: 2 of 37 ms converting)."""
    # urljoin leaves a fragment alone under schemes it does not know (urn:, tag:)
    joined = urldefrag(urljoin(base, ref))
    return joined[0], joined[1]


@lru_cache(maxsize=None)
def _foreign(cls: type) -> frozenset[str]:
    known = set(cls.VALIDATORS) | {"exclusiveMaximum", "exclusiveMinimum"}
    if "dependentRequired" in known:  # 2019-09 and later: "contains" counts
        known |= {"minContains", "maxContains"}
    return frozenset(_ALL_CHECKED - known)


def foreign_keywords(root: Any) -> frozenset[str]:
    """The keywords of other drafts that the document's own draft does not have: its validators
    ignore them (``unevaluatedProperties`` in a draft-07 schema, ``dependencies`` in a 2020-12
    one, ``const`` in a draft-04 one), and so must the grammar, or it refuses valid instances."""
    return _foreign(dialect_of(root)[0])


def legacy_dialect(schema: Any) -> bool:
    """Whether ``schema`` (a root) is draft-07 or older by its ``$schema``: there ``$ref``
    overrides every keyword beside it, ``$id`` included. The draft is the one jsonschema
    validates with (:func:`dialect_of`): a URI it does not know, such as draft-07's spelled
    with https, means 2020-12 there, and so here (its keywords beside a ``$ref`` hold)."""
    return isinstance(schema, dict) and "$schema" in schema and dialect_of(schema)[1] in LEGACY_DIALECTS


def child_at(node: Any, raw: str) -> Any:
    """The member a JSON-pointer segment (escaped) names in ``node``, or ``MISSING``."""
    part = unescape(raw)
    if isinstance(node, dict) and part in node:
        return node[part]
    if isinstance(node, list) and part.isdigit() and int(part) < len(node):
        return node[int(part)]
    return MISSING


def existing_prefix(root: Any, pointer: str) -> str:
    """The longest prefix of ``pointer`` (whole segments) that names a location in ``root``."""
    node, good = root, ""
    for raw in pointer.split("/")[1:]:
        node = child_at(node, raw)
        if node is MISSING:
            break
        good += "/" + raw
    return good


def subschemas(node: dict, ptr: str) -> list[tuple[Any, str]]:
    """The subschemas of ``node`` in schema positions (never enum/const data), with pointers."""
    out: list[tuple[Any, str]] = []
    for key, value in node.items():
        if key in SCHEMA_MAPS or key == "dependencies":
            if isinstance(value, dict):
                out.extend((sub, child(ptr, key, name)) for name, sub in value.items())
        elif key in SCHEMA_VALUES and isinstance(value, dict):
            out.append((value, child(ptr, key)))
        elif key in SCHEMA_LISTS and isinstance(value, list):
            out.extend((sub, child(ptr, key, i)) for i, sub in enumerate(value))
    return out


class SchemaDocument:
    """One schema document, indexed: resources by base URI, anchors, dynamic anchors.

    Pointers are JSON pointers into ``root`` as given (``""`` is the root). Errors name the
    pointer of the reference at fault.
    """

    def __init__(self, root: Any) -> None:
        self.root = root
        self.legacy_ref = legacy_dialect(root)
        self.root_declares_id = isinstance(root, dict) and self.declares_id(root)
        self.root_base = self.own_base(root, DEFAULT_BASE) if isinstance(root, dict) else DEFAULT_BASE
        self.resources: dict[str, str] = {self.root_base: ""}  # base URI -> pointer of the resource
        self.resource_uris: dict[str, str] = {"": self.root_base}  # pointer -> base URI
        self.anchors: dict[tuple[str, str], str] = {}  # (base URI, name) -> pointer
        # pointer of a resource -> {$dynamicAnchor name declared in it (not in a nested one) -> pointer}
        self.resource_dynamic: dict[str, dict[str, str]] = {}
        self.dynamic_anchors: dict[str, list[str]] = {}  # name -> pointers of every declaration
        self.refs: list[tuple[str, dict]] = []  # the subschemas holding a reference, with their pointers
        self._walk(root, "", self.root_base, "")
        # names several resources declare as $dynamicAnchor: only they depend on the dynamic scope
        self.dynamic_names = frozenset(n for n in self.dynamic_anchors if self.is_dynamic(n))

    # -- index ----------------------------------------------------------------------

    def _walk(self, node: Any, ptr: str, base: str, resource: str) -> None:
        if not isinstance(node, dict):
            return
        if not _IDENTITY_KEYWORDS.isdisjoint(node):
            base, resource = self._index_identity(node, ptr, base, resource)
        if "$ref" in node or "$dynamicRef" in node or "$recursiveRef" in node:
            self.refs.append((ptr, node))
        for sub, at in subschemas(node, ptr):
            self._walk(sub, at, base, resource)

    def _index_identity(self, node: dict, ptr: str, base: str, resource: str) -> tuple[str, str]:
        """Record what ``node`` declares (a resource, anchors); its base URI and resource."""
        base = self.own_base(node, base)
        if ptr and self.declares_id(node) and base not in self.resources:
            self.resources[base] = ptr
            self.resource_uris[ptr] = base
            resource = ptr
        ident = node.get("$id") if "$id" in node else node.get("id")
        if isinstance(ident, str) and self.declares_id(node, fragments=True):
            frag = urldefrag(urljoin(base, ident))[1]
            if frag and not frag.startswith("/"):  # draft-07 plain-name fragment "$id": "#foo"
                self.anchors.setdefault((base, frag), ptr)
        for key in ("$anchor", "$dynamicAnchor"):
            if isinstance(node.get(key), str):
                self.anchors.setdefault((base, node[key]), ptr)
        name = node.get("$dynamicAnchor")
        if isinstance(name, str) and not self.legacy_ref:
            self.dynamic_anchors.setdefault(name, []).append(ptr)
            self.resource_dynamic.setdefault(resource, {}).setdefault(name, ptr)
        return base, resource

    def declares_id(self, node: dict, fragments: bool = False) -> bool:
        """Whether ``node`` declares a base URI (``fragments``: or a plain-name ``"$id": "#x"``)."""
        ident = node.get("$id") if "$id" in node else node.get("id")
        if not isinstance(ident, str) or (self.legacy_ref and "$ref" in node):
            return False
        return fragments or not ident.startswith("#")

    def own_base(self, node: dict, base: str) -> str:
        """The base URI inside ``node``, given the one around it."""
        if not self.declares_id(node):
            return base
        ident = node["$id"] if "$id" in node else node["id"]
        return urldefrag(urljoin(base, ident))[0] if ":" in ident.split("/")[0] or not base.startswith(("urn:", "tag:")) \
            else base  # a relative $id under a scheme urljoin cannot resolve: keep the base

    # -- queries --------------------------------------------------------------------

    def in_place_cycle(self) -> str | None:
        """The pointer of a reference through which a subschema applies to the value it is
        applied to, again (``{"anyOf": [{"$ref": "#"}], "const": 1}``), or None.

        Following such a cycle never moves into a member or an item, so a validator that
        meets it recurses without end: jsonschema, which checks literals and names for the
        converter, exhausted the C stack under the raised recursion limit and the process
        died. Edges are the in-place applicators (allOf, anyOf, oneOf, not, if, then, else,
        dependentSchemas and draft-07 dependencies, $ref, $recursiveRef, $dynamicRef to any
        declaration of its anchor's name); a cycle holds a reference, so only subschemas with
        one start a walk."""
        # keyed by node identity (a node named by two pointers is one); references resolved
        # once per target, by the node that holds them kept from the index walk
        state: dict[int, int] = {}  # 1: on the walk's path, 2: done (no cycle through it)
        targets: dict[str, Any] = {}
        for start_ptr, start in self.refs:
            if id(start) in state:
                continue
            state[id(start)] = 1
            # (subschema, its edges left, the reference the walk came in by or None)
            path: list[tuple[Any, Any, str | None]] = [(start, iter(self._in_place(start, start_ptr, targets)), None)]
            while path:
                node, ptr, via = next(path[-1][1], (None, None, None))
                if ptr is None:
                    state[id(path.pop()[0])] = 2
                elif id(node) not in state:
                    state[id(node)] = 1
                    path.append((node, iter(self._in_place(node, ptr, targets)), via))
                elif state[id(node)] == 1:
                    # the cycle: the path from node on, closed by this edge; its last reference
                    if via is not None:
                        return via
                    at = next(k for k in range(len(path)) if path[k][0] is node)
                    return next(p[2] for p in reversed(path[at + 1:]) if p[2] is not None)
        return None

    def _in_place(self, node: Any, ptr: str, targets: dict[str, Any]) -> list[tuple[Any, str, str | None]]:
        """(subschema, its pointer, the reference leading there or None) applied to the value
        ``node`` (at ``ptr``) is applied to (see :meth:`in_place_cycle`). References this
        document cannot resolve lead nowhere here (the converter refuses them, located)."""
        if not isinstance(node, dict):
            return []
        out: list[tuple[Any, str, str | None]] = []
        for key in ("$ref", "$dynamicRef", "$recursiveRef"):
            if key not in node:
                continue
            ref, via = node[key], child(ptr, key)
            pointers: list[str] = []
            if self.single_resource and isinstance(ref, str) and ref.startswith("#/"):
                pointers.append(ref[1:])  # (what locate() answers, without the base URI's walk)
            else:
                try:
                    pointers.append(self.locate(ref, ptr)[1])
                except StructgenError:
                    pass
            if key == "$dynamicRef" and isinstance(ref, str) and not ref.startswith("#/"):
                pointers.extend(self.dynamic_anchors.get(ref.rsplit("#", 1)[-1], ()))
            for p in pointers:
                if p not in targets:
                    try:
                        targets[p] = self.resolve_pointer(p, ptr)
                    except StructgenError:
                        targets[p] = None
                if targets[p] is not None:
                    out.append((targets[p], p, via))
        if self.legacy_ref and "$ref" in node:
            return out  # (draft-07 and older: the keywords beside it are not applied)
        for key in ("allOf", "anyOf", "oneOf"):
            subs = node.get(key)
            if isinstance(subs, list):
                out.extend((sub, child(ptr, key, i), None) for i, sub in enumerate(subs))
        for key in ("not", "if", "then", "else"):
            if key in node:
                out.append((node[key], child(ptr, key), None))
        for key in ("dependentSchemas", "dependencies"):
            subs = node.get(key)
            if isinstance(subs, dict):
                out.extend((sub, child(ptr, key, name), None) for name, sub in subs.items() if not isinstance(sub, list))
        return out

    @property
    def single_resource(self) -> bool:
        """No embedded resource: a subschema means the same wherever it is copied."""
        return len(self.resources) <= 1

    def base_at(self, ptr: str) -> str:
        """The base URI in force at a pointer (the $id of every schema on the way down); a
        pointer made by combining schemas keeps the base of its longest real prefix."""
        node, base = self.root, self.root_base
        for raw in (ptr[1:].split("/") if ptr else []):
            node = child_at(node, raw)
            if node is MISSING:
                break
            if isinstance(node, dict):
                base = self.own_base(node, base)
        return base

    def resource_at(self, ptr: str) -> str:
        """The pointer of the innermost resource whose root is ``ptr`` or above it."""
        return self.resources.get(self.base_at(ptr), "")

    def locate(self, ref: Any, ptr: str) -> tuple[str, str]:
        """``(resource, target)``: the pointers of the resource a reference written at ``ptr``
        names by its URI, and of the schema it leads to.

        Raises:
            SchemaError: ``ref`` is not a string, or names an anchor the resource lacks.
            UnsupportedSchemaError: the URI names no resource of this document.
        """
        if not isinstance(ref, str):
            raise SchemaError(f"$ref must be a string, not {type(ref).__name__}", pointer=ptr, keyword="$ref")
        return self.locate_from(ref, self.base_at(ptr), ptr)

    def locate_from(self, ref: str, base: str, ptr: str) -> tuple[str, str]:
        """:meth:`locate` for a reference read against base URI ``base`` (a copy of a schema
        knows its base, not always its pointer); errors located at ``ptr``."""
        uri, frag = self.split_from(ref, base)
        resource = self.resources.get(uri)
        if resource is None:
            raise UnsupportedSchemaError(
                f"only references into this document are supported, not {ref!r} (it resolves to {uri!r}, which no "
                f"$id here declares; nothing is fetched)", pointer=ptr, keyword="$ref")
        if not frag:
            return resource, resource
        if frag.startswith("/"):
            return resource, resource + frag
        anchor = self.anchors.get((uri, frag))
        if anchor is None:
            raise SchemaError(f"unresolvable $ref {ref!r}: no anchor {frag!r} in {uri!r}", pointer=ptr, keyword="$ref")
        return resource, anchor

    def split(self, ref: str, ptr: str) -> tuple[str, str]:
        """A reference written at ``ptr`` as (absolute URI without fragment, fragment)."""
        return self.split_from(ref, self.base_at(ptr))

    @staticmethod
    def split_from(ref: str, base: str) -> tuple[str, str]:
        """A reference read against base URI ``base``, as (URI without fragment, fragment)."""
        return (base, ref[1:]) if ref.startswith("#") else _joined(ref, base)

    def to_pointer(self, ref: Any, ptr: str) -> str:
        """The JSON pointer (in this document) a ``$ref`` written at ``ptr`` leads to."""
        return self.locate(ref, ptr)[1]

    def absolute_ref(self, ref: str, ptr: str) -> str:
        """A reference written at ``ptr`` as one that means the same anywhere in the document:
        the named resource's URI with the fragment kept (an anchor stays an anchor)."""
        uri, frag = self.split(ref, ptr)
        return f"{uri}#{frag}"

    def resolve_pointer(self, pointer: str, ptr: str) -> Any:
        """The schema at ``pointer`` (from :meth:`to_pointer`); errors located at ``ptr``."""
        node = self.root
        if pointer in ("", "/"):
            return node
        if not pointer.startswith("/"):
            raise UnsupportedSchemaError(f"anchors ({'#' + pointer!r}) are not supported yet", pointer=ptr, keyword="$ref")
        for raw in pointer[1:].split("/"):
            part = unquote(unescape(raw))
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                raise SchemaError(f"unresolvable $ref '#{pointer}': no {part!r}", pointer=ptr, keyword="$ref")
        return node

    def resolve(self, ref: Any, ptr: str) -> Any:
        """The schema a ``$ref`` written at ``ptr`` leads to."""
        return self.resolve_pointer(self.to_pointer(ref, ptr), ptr)

    def follow(self, node: Any, ptr: str, *, to_pointer: Callable[[str, str], str] | None = None,
               limit: int = 32) -> tuple[Any, str]:
        """Follow plain references from ``node`` (at ``ptr``): a ``$ref`` with only annotations
        beside it, or any ``$ref`` in the dialects where it hides its siblings. Returns the
        first schema that is not one, and its pointer (each hop is read against its own
        place, so relative references resolve against the right base). Stops after
        ``limit`` hops (a cycle) or at a reference it cannot place (``to_pointer`` raising
        ``UnsupportedSchemaError``: the caller decides)."""
        locate = to_pointer or self.to_pointer
        for _ in range(limit):
            if not (isinstance(node, dict) and isinstance(node.get("$ref"), str)
                    and (self.legacy_ref or set(node) - ANNOTATION_KEYWORDS == {"$ref"})):
                break
            try:
                target = locate(node["$ref"], ptr)
            except UnsupportedSchemaError:
                break
            node, ptr = self.resolve_pointer(target, ptr), target
        return node, ptr

    def entered(self, resource: str, target: str) -> list[str]:
        """The resources a reference into ``resource`` leading to ``target`` enters, outermost
        first: that resource, then every one its pointer crosses on the way to the target."""
        out = [resource]
        if target.startswith(resource + "/"):
            node: Any = self.resolve_pointer(resource, "") if resource else self.root
            at = resource
            for raw in target[len(resource) + 1:].split("/"):
                node = child_at(node, raw)
                at += "/" + raw
                if node is MISSING:
                    break
                if at in self.resource_uris:
                    out.append(at)
        return out

    def dynamic_target(self, ref: str, ptr: str) -> tuple[str, str] | None:
        """``(name, anchor pointer)`` when a ``$dynamicRef`` written at ``ptr`` starts from a
        ``$dynamicAnchor`` (by a plain-name fragment): only then does the dynamic scope
        decide; otherwise (a pointer fragment, an ``$anchor``) it is a plain ``$ref``."""
        return self.dynamic_target_from(ref, self.base_at(ptr), ptr)

    def dynamic_target_from(self, ref: str, base: str, ptr: str) -> tuple[str, str] | None:
        """:meth:`dynamic_target` for a reference read against base URI ``base``."""
        _, target = self.locate_from(ref, base, ptr)
        frag = self.split_from(ref, base)[1]
        if not frag or frag.startswith("/"):
            return None
        node = self.resolve_pointer(target, ptr)
        if isinstance(node, dict) and node.get("$dynamicAnchor") == frag:
            return frag, target
        return None

    def is_dynamic(self, name: str) -> bool:
        """Whether more than one resource declares ``$dynamicAnchor`` ``name`` (only then can
        the dynamic scope change what a ``$dynamicRef`` to it means)."""
        return sum(name in names for names in self.resource_dynamic.values()) > 1

    def rebased(self, schema: Any, at: str) -> Any:
        """:meth:`absolutised` when the document declares ``$id``s below its root (only then can
        copying a schema elsewhere change what its references mean)."""
        return schema if self.single_resource else self.absolutised(schema, at)

    def absolutised(self, schema: Any, at: str) -> Any:
        """``schema`` (found at pointer ``at``) with every ``$ref``, ``$dynamicRef`` and ``$id``
        in it made absolute, so that it means the same wherever combining copies it (a
        ``$ref`` inside an embedded resource is relative to that resource's ``$id``)."""
        if not isinstance(schema, dict):
            return schema
        out = dict(schema)
        if isinstance(out.get("$dynamicRef"), str):
            out["$dynamicRef"] = self.absolute_ref(out["$dynamicRef"], at)
        if isinstance(out.get("$ref"), str):
            try:
                self.locate(out["$ref"], at)
                out["$ref"] = self.absolute_ref(out["$ref"], at)
            except SchemaError:
                pass  # left as written: using it reports the error where it is used
        if self.declares_id(schema) and at in self.resource_uris:
            out["$id" if "$id" in schema else "id"] = self.resource_uris[at]
        for key, value in schema.items():
            if key in ("$defs", "definitions"):
                continue  # not evaluated in place, and references resolve in the document, not in a copy
            if key in SCHEMA_MAPS or key == "dependencies":
                if isinstance(value, dict):
                    out[key] = {n: self.absolutised(v, child(at, key, n)) for n, v in value.items()}
            elif key in SCHEMA_VALUES and isinstance(value, dict):
                out[key] = self.absolutised(value, child(at, key))
            elif key in SCHEMA_LISTS and isinstance(value, list):
                out[key] = [self.absolutised(v, child(at, key, i)) for i, v in enumerate(value)]
        return out
