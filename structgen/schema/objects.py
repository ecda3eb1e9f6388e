"""JSON Schema → grammar: ``type: object`` with ``properties``, ``required``,
``additionalProperties``, ``patternProperties``, ``propertyNames``, ``minProperties`` and
``maxProperties``."""
from __future__ import annotations

import re
from typing import Any

from ..errors import AutomatonSizeError
from ..grammar import EMPTY, NOTHING, CharSet, Expr, Lit, Ref, Repeat, alt, opt, seq
from ..regex.format_automata import format_language
from ..regex.formats import FORMAT_PATTERNS
from ..regex.parser import ANY_CHAR, agreeing_chars
from ..regex.regular import difference, intersect, json_text_expr, star_minus_literals
from .base import ANNOTATION_KEYWORDS, SUPPORTED_KEYWORDS, VALIDATION_KEYWORDS, ConverterBase, _ptr
from .json_values import dumps_compact
from .merge import CONTAINS_ALL

# propertyNames: keywords that string_language enforces on a name...
_NAME_KEYWORDS = frozenset({"type", "pattern", "minLength", "maxLength", "format", "enum", "const", "$ref",
                            "allOf", "anyOf", "oneOf", "not"})
# ...and those that constrain other types only, so every name satisfies them
_NON_STRING_KEYWORDS = frozenset({
    "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum", "maxItems", "minItems",
    "uniqueItems", "maxContains", "minContains", "contains", CONTAINS_ALL, "items", "prefixItems", "additionalItems",
    "unevaluatedItems", "maxProperties", "minProperties", "required", "dependentRequired", "dependencies",
    "properties", "patternProperties", "additionalProperties", "propertyNames", "dependentSchemas",
    "unevaluatedProperties", "$anchor", "$dynamicAnchor"})


MAX_NAME_PATTERNS = 16
"""patternProperties patterns per object (names are split into classes by the patterns they match)."""
MAX_NAME_REGIONS = 32
"""Non-empty classes of names those patterns may split names into."""


class ObjectsMixin(ConverterBase):
    """The converter's objects and their property names."""

    def object(self, schema: dict, ptr: str) -> Expr:
        ws = self.ws
        props: dict[str, Any] = dict(schema.get("properties", {}))
        required = list(dict.fromkeys(schema.get("required", [])))
        additional = schema.get("additionalProperties", True)
        patterns: dict[str, Any] = dict(schema.get("patternProperties", {}))
        names_schema = schema.get("propertyNames", True)
        if len(patterns) > MAX_NAME_PATTERNS:
            self.unsupported("patternProperties", _ptr(ptr, "patternProperties"),
                             f"more than {MAX_NAME_PATTERNS} patterns")
            patterns = {}
        for pat in patterns:  # before re.search meets them: refused with their location
            self.pattern_expr(pat, _ptr(ptr, "patternProperties", pat))
        name_ok = self.checker(names_schema, _ptr(ptr, "propertyNames")) if names_schema is not True else (lambda _: True)

        def value_schema(name: str) -> Any:
            # properties, then every matching patternProperties; additionalProperties only if neither
            matching = [pat for pat in patterns if re.search(pat, name)]
            sub = props.get(name, True if matching else additional)
            for pat in matching:
                sub = self.merged(sub, patterns[pat], _ptr(ptr, "patternProperties", pat))
            return sub if name_ok(name) else False

        entries: list[tuple[str, Expr, bool]] = []
        declared = list(dict.fromkeys([*props, *required]))
        for name in declared:
            where = (_ptr(ptr, "properties", name) if name in props
                     else next((_ptr(ptr, "patternProperties", pat) for pat in patterns if re.search(pat, name)), None)
                     or (_ptr(ptr, "additionalProperties") if "additionalProperties" in schema else _ptr(ptr, "required")))
            value = self.share(self.node(value_schema(name), where))
            if value == NOTHING:
                if name in required:
                    return NOTHING
                continue
            entries.append((name, value, name in required))

        def member(name: str, value: Expr) -> Expr:
            return seq(Lit(dumps_compact(name)), ws, Lit(":"), ws, value)

        sep = seq(ws, Lit(","), ws)
        # each declared member once, and once preceded by its comma (opt if not required):
        # the alternatives below start at each leading optional member and share these
        members = [member(name, value) for name, value, _ in entries]
        extra_member = self.extra_members(ptr, declared, additional, patterns, names_schema)
        # An undeclared member where no member came before is an alternative of the declared
        # names' literals: written out there, not as a reference to the shared rule, its
        # name automaton becomes part of the surrounding rule's, determinised with those
        # literals. Called, each name start walked the literals and the undeclared name in
        # step as two stacks: 30-45 configurations made by one first-visit fill.
        first_extra = None
        if extra_member is not None:
            extra_member = alt(*(seq(k, ws, Lit(":"), ws, v) for k, v in extra_member)) or None
            if extra_member == NOTHING:
                extra_member = None
            else:  # it recurs after every declared member: one rule, not a copy per gap
                first_extra = extra_member
                extra_member = self.share(extra_member)

        tails: list[Expr] | None = None

        def tail_after(i: int) -> Expr:
            # members i.. each preceded by a comma, then additional members
            nonlocal tails
            if tails is None:
                tails = [seq(sep, m) if req else opt(seq(sep, m)) for m, (_, _, req) in zip(members, entries)]
                if extra_member is not None:
                    tails.append(Repeat(seq(sep, extra_member), 0, None))
            return seq(*tails[i:])

        leading_optional = next((k for k, e in enumerate(entries) if e[2]), len(entries))
        min_props, max_props = schema.get("minProperties", 0), schema.get("maxProperties")
        if max_props is not None and max_props < min_props:
            return NOTHING
        counted = min_props > sum(e[2] for e in entries) or (max_props is not None and (
            extra_member is not None or max_props < len(entries)))
        # no required member (and no minimum): "{}" is valid
        nullable = leading_optional == len(entries) and min_props == 0
        if counted:
            body = self._object_body_rules(entries, members, sep, extra_member, first_extra, (min_props, max_props))
            return self.container("{", body, nullable, "}")
        if leading_optional > 2:
            body = self._object_body_rules(entries, members, sep, extra_member, first_extra)
            return self.container("{", body, nullable, "}")
        options: list[Expr] = []
        for k, (name, value, req) in enumerate(entries):
            options.append(seq(members[k], tail_after(k + 1)))
            if req:
                break
        else:  # every declared member optional: they may all be absent
            if extra_member is not None:
                options.append(seq(first_extra, Repeat(seq(sep, extra_member), 0, None)))
        return self.container("{", alt(*options) if options else NOTHING, nullable, "}")

    def extra_members(self, ptr: str, declared: list[str], additional: Any, patterns: dict, names_schema: Any):
        """(key Expr, value Expr) pairs for members whose names are not declared.

        Names are split by which patternProperties they match (each class gets the merged
        schema of its patterns, the class matching none gets additionalProperties), minus the
        declared names, within propertyNames. With patterns, names are limited to printable
        ASCII and the other code points where ECMA-262 and Python regexes agree on what
        matches (a name the grammar sends to additionalProperties must match no pattern in
        the validator either).
        """
        any_name: Expr = Repeat(ANY_CHAR, 0, None)
        if patterns:
            any_name = Repeat(agreeing_chars(list(patterns)), 0, None)
        if names_schema is not True:
            lang = self.string_language(names_schema, _ptr(ptr, "propertyNames"))
            if lang is None:
                return None
            any_name = intersect(any_name, lang)
        # Without patterns the names are needed only if the value schema of the undeclared
        # members is satisfiable: with additionalProperties false (most tool schemas) the
        # difference, the costliest step of converting such an object, was built for nothing.
        # Deferred only where it cannot fail (the star minus literals case of difference);
        # it has no effect on the converter, so the order of the two steps is not observable.
        deferred = (declared and not patterns and isinstance(any_name, Repeat)
                    and isinstance(any_name.item, CharSet) and any_name.min == 0 and any_name.max is None)
        if declared and not deferred:
            any_name = difference(any_name, alt(*(Lit(n) for n in declared)))
        pats = list(patterns)
        langs = {p: self.pattern_expr(p, _ptr(ptr, "patternProperties", p)) for p in pats}
        # the names matching exactly the chosen patterns, split one pattern at a time; empty
        # regions are dropped as they appear (patterns with distinct literal names leave
        # one region per pattern, not 2**k)
        regions: list[tuple[Expr, list[str]]] = [(any_name, [])]
        try:
            for p in pats:
                split: list[tuple[Expr, list[str]]] = []
                for names, chosen in regions:
                    inside, outside = intersect(names, langs[p]), difference(names, langs[p])
                    split += [(inside, [*chosen, p])] if inside != NOTHING else []
                    split += [(outside, chosen)] if outside != NOTHING else []
                if len(split) > MAX_NAME_REGIONS:
                    self.unsupported("patternProperties", _ptr(ptr, "patternProperties"),
                                     f"the patterns split names into more than {MAX_NAME_REGIONS} classes")
                    return None
                regions = split
        except AutomatonSizeError as exc:
            self.unsupported("patternProperties", _ptr(ptr, "patternProperties"), str(exc))
            return None
        out = []
        # any name but the declared ones has fresh endings whatever was written; names limited
        # further (propertyNames, a class dropped below) may not: Grammar.names_can_trap
        limited = names_schema is not True
        for names, chosen in regions:
            value: Any = additional if not chosen else True
            for p in chosen:
                value = self.merged(value, patterns[p], _ptr(ptr, "patternProperties", p))
            v = self.node(value, _ptr(ptr, "patternProperties", chosen[0]) if chosen else _ptr(ptr, "additionalProperties"))
            if v == NOTHING:
                limited = True
                continue
            if deferred:  # names is chars*: the difference, built JSON-encoded at once
                assert isinstance(names, Repeat) and isinstance(names.item, CharSet)
                encoded = star_minus_literals(names.item, declared, json_text=True)
            else:
                encoded = json_text_expr(names)
            out.append((seq(Lit('"'), encoded, Lit('"')), v))
        if out:
            self.free_names = True
            self.names_can_trap = self.names_can_trap or limited
        return out or None

    def string_language(self, schema: Any, ptr: str) -> Expr | None:
        """The decoded strings that ``schema`` accepts as a string instance (propertyNames
        applies its subschema to each name), or None (unsupported, recorded as such).

        A schema that cannot match a string (a ``type`` without "string", ``false``, an enum
        without strings) gives NOTHING: no property may exist. Keywords of other types
        (``minimum``, ``items``, ``required``...) hold for every string.
        """
        if schema is False:
            return NOTHING
        if schema is True:
            return Repeat(ANY_CHAR, 0, None)
        schema = self.resolve_shallow(schema, ptr)
        if not isinstance(schema, dict):
            return NOTHING if schema is False else Repeat(ANY_CHAR, 0, None)
        keys = {k for k in schema if k in VALIDATION_KEYWORDS or k in SUPPORTED_KEYWORDS} - ANNOTATION_KEYWORDS
        unhandled = keys - _NAME_KEYWORDS - _NON_STRING_KEYWORDS
        if unhandled:
            kw = sorted(unhandled)[0]
            self.unsupported(kw, _ptr(ptr, kw), "this keyword is not supported in propertyNames")
            return None
        types = schema.get("type", "string")
        if "string" not in ([types] if isinstance(types, str) else types):
            return NOTHING
        if "enum" in schema or "const" in schema:
            values = [schema["const"]] if "const" in schema else schema["enum"]
            check = self.validator(schema)
            return alt(*(Lit(v) for v in values if isinstance(v, str) and check.is_valid(v)))
        lang: Expr = Repeat(ANY_CHAR, schema.get("minLength", 0), schema.get("maxLength"))
        parts: list[Expr] = []
        if "format" in schema:
            if schema["format"] not in FORMAT_PATTERNS:
                self.unsupported("format", _ptr(ptr, "format"), f"format {schema['format']!r} is not enforced")
                return None
            parts.append(format_language(schema["format"])[0])
        if "pattern" in schema:
            parts.append(self.pattern_expr(schema["pattern"], _ptr(ptr, "pattern")))
        if "$ref" in schema:
            target = self.to_pointer(schema["$ref"], _ptr(ptr, "$ref"))
            parts.append(self.string_language(self.resolve_pointer(target, _ptr(ptr, "$ref")), target))
        for i, sub in enumerate(schema.get("allOf", [])):
            parts.append(self.string_language(sub, _ptr(ptr, "allOf", i)))
        if "anyOf" in schema:
            options = [self.string_language(sub, _ptr(ptr, "anyOf", i)) for i, sub in enumerate(schema["anyOf"])]
            parts.append(None if any(o is None for o in options) else alt(*options))
        if any(p is None for p in parts):
            return None
        try:
            if "oneOf" in schema:  # exactly one branch: each branch minus all the others
                options = [self.string_language(sub, _ptr(ptr, "oneOf", i)) for i, sub in enumerate(schema["oneOf"])]
                if any(o is None for o in options):
                    return None
                parts.append(alt(*(difference(o, alt(*(p for j, p in enumerate(options) if j != i)))
                                   for i, o in enumerate(options))))
            if "not" in schema:
                negated = self.string_language(schema["not"], _ptr(ptr, "not"))
                if negated is None:
                    return None
                parts.append(difference(Repeat(ANY_CHAR, 0, None), negated))
            for p in parts:
                lang = intersect(lang, p)
        except AutomatonSizeError as exc:
            self.unsupported("propertyNames", ptr, f"the language of these names is too large: {exc}")
            return None
        return lang

    def _object_body_rules(self, entries, members, sep, extra_member, first_extra,
                           counts: tuple[int, int | None] | None = None) -> Expr:
        """Members in order, optional ones skippable, commas only between present ones.

        Written with one helper rule per position so that its size stays linear in the
        number of properties: ``rest_k`` follows an emitted member, ``first_k`` is where
        nothing has been emitted yet. (Inlined alternatives would copy every suffix.)
        ``extra_member`` is the shared rule of an undeclared member, ``first_extra`` its
        expression, written out where it may be the first member.

        With ``counts`` (minProperties, maxProperties), ``rest_k_c`` also knows that ``c``
        members were emitted (counted up to the maximum, or up to the minimum when there is
        no maximum: past it the count no longer matters), and undeclared members fill the
        remaining minimum or stop at the maximum: rules grow with properties x counts.
        """
        self._objects += 1
        base = f"obj{self._objects}"
        n = len(entries)
        lo, hi = counts if counts is not None else (0, None)
        cap = hi if hi is not None else lo

        def c_of(c: int) -> int:
            return c if hi is not None else min(c, cap)

        def extras_from(c: int) -> Expr:  # undeclared members after c counted ones
            need, room = max(0, lo - c), (None if hi is None else hi - c)
            if room is not None and room < need:
                return NOTHING
            if extra_member is None:
                return EMPTY if need == 0 else NOTHING
            return Repeat(seq(sep, extra_member), need, room)

        def rest(k: int, c: int) -> Expr:
            return Ref(f"{base}_rest{k}_{c_of(c)}") if hi is None or c <= hi else NOTHING

        # after k declared positions at most k members were emitted: the counts beyond are
        # only ever met by undeclared members, which a counted repeat covers (extras_from),
        # so the rules grow with properties x min(properties, bound), never with the bound
        for c in range(min(n, cap) + 1):
            self.rules[f"{base}_rest{n}_{c}"] = extras_from(c)
        if extra_member is not None and (hi is None or hi >= 1):
            self.rules[f"{base}_first{n}"] = seq(first_extra, extras_from(1))
        else:  # non-empty bodies only: the empty object is the container's own alternative
            self.rules[f"{base}_first{n}"] = NOTHING
        for k in reversed(range(n)):
            req, m = entries[k][2], members[k]
            for c in range(min(k, cap) + 1):
                emitted = seq(sep, m, rest(k + 1, c + 1))
                self.rules[f"{base}_rest{k}_{c}"] = emitted if req else alt(emitted, rest(k + 1, c))
            first = seq(m, rest(k + 1, 1))
            self.rules[f"{base}_first{k}"] = first if req else alt(first, Ref(f"{base}_first{k + 1}"))
        return Ref(f"{base}_first0")
