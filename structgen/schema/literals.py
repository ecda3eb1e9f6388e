"""JSON Schema → grammar: ``enum`` and ``const`` (a finite set of literal values)."""
from __future__ import annotations

from ..grammar import Expr, Lit, alt
from .base import ConverterBase, _ptr
from .json_values import dumps_compact, json_equal


class LiteralsMixin(ConverterBase):
    """The converter's enum/const: every other keyword is decided on each value by jsonschema."""

    def literals(self, schema: dict, ptr: str) -> Expr:
        if "const" in schema:
            values = [schema["const"]]
            if "enum" in schema:
                values = [v for v in values if any(json_equal(v, e) for e in schema["enum"])]
        else:
            values = list(schema["enum"])
            if not values:
                return self.empty("enum is empty: no value can be valid", _ptr(ptr, "enum"), "enum")
        rest = {k: v for k, v in schema.items() if k not in ("enum", "const")}
        check = self.checker(rest, ptr)
        kept = [v for v in values if check(v)]
        if not kept:
            kw = "const" if "const" in schema else "enum"
            return self.empty(f"no {kw} value satisfies the other keywords of this schema", _ptr(ptr, kw), kw)
        return alt(*(Lit(dumps_compact(v)) for v in kept))
