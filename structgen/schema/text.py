"""Schema JSON text → Python value, with located errors and a bound on number length.

``json.loads`` alone accepts ``NaN`` and ``Infinity`` (not JSON), and ends a 5,000-digit
integer in a bare ``ValueError`` from Python's integer-string conversion limit; decimal
arithmetic on such numbers later costs time that grows with their length. Here both are
refused up front with the line and column of the offending number.
"""
from __future__ import annotations

import json
import re
from typing import Any

from .. import _core
from ..errors import LimitError, SchemaError
from .pointer import from_path

__all__ = ["MAX_NUMBER_LENGTH", "MAX_SCHEMA_DEPTH", "check_schema_depth", "loads_schema"]

MAX_NUMBER_LENGTH = 400
"""Characters in one number of schema text (sign, digits, fraction and exponent together).
Far above any meaningful bound (an IEEE double needs at most 24) and far below Python's
4,300-digit integer conversion limit."""

MAX_SCHEMA_DEPTH = 4_000
"""JSON nesting depth of a schema document: objects and arrays, so each nested ``items``
schema adds one level and each nested ``anyOf`` two (its list and its member). Every stage
walks the schema recursively, so past this depth it is refused before any of them runs."""

# strings first, so that a ``NaN`` or a long digit run inside a string is skipped
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|(-?Infinity|NaN)|(-?[0-9][0-9.eE+\-]*)', re.S)


class _Refused(Exception):
    def __init__(self, kind: str) -> None:
        self.kind = kind


def _check_number(text: str, convert):
    if len(text) > MAX_NUMBER_LENGTH:
        raise _Refused("long")
    return convert(text)


def _refuse_constant(text: str) -> Any:
    raise _Refused("constant")


def _position(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def loads_schema(text: str | bytes | bytearray) -> Any:
    """Parse schema text as strict JSON.

    Raises:
        SchemaError: not JSON, or ``NaN`` / ``Infinity`` (JavaScript, not JSON), with the
            line and column.
        LimitError: a number longer than :data:`MAX_NUMBER_LENGTH` characters, with the
            line and column.
    """
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise SchemaError(f"the schema text is not UTF-8: byte {exc.start} cannot be decoded", pointer="") from None
    try:
        value = json.loads(text, parse_constant=_refuse_constant,
                           parse_int=lambda s: _check_number(s, int),
                           parse_float=lambda s: _check_number(s, float))
    except RecursionError:  # the decoder recurses per level: find where the text got too deep
        value = None
    except json.JSONDecodeError as exc:
        raise SchemaError(f"the schema text is not JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}",
                          pointer="") from None
    except _Refused as exc:
        # the decoder does not say where; find the first such token outside strings
        for m in _TOKENS.finditer(text):
            if exc.kind == "constant" and m.group(1):
                line, col = _position(text, m.start())
                raise SchemaError(f"the schema text is not JSON: {m.group(1)} is not a JSON number "
                                  f"at line {line}, column {col}", pointer="") from None
            if exc.kind == "long" and m.group(2) and len(m.group(2)) > MAX_NUMBER_LENGTH:
                line, col = _position(text, m.start())
                raise LimitError(f"the schema text has a number of {len(m.group(2))} characters at line {line}, "
                                 f"column {col}", limit_name="MAX_NUMBER_LENGTH", limit=MAX_NUMBER_LENGTH,
                                 reached=len(m.group(2)), pointer="") from None
        raise SchemaError("the schema text is not JSON", pointer="") from None
    if value is None or not isinstance(value, (dict, list)):
        offset = _too_deep(text)
        if offset is not None:
            line, col = _position(text, offset)
            raise LimitError(f"the schema text nests deeper than {MAX_SCHEMA_DEPTH} levels at line {line}, column {col}",
                             limit_name="MAX_SCHEMA_DEPTH", limit=MAX_SCHEMA_DEPTH, reached=MAX_SCHEMA_DEPTH + 1)
        if value is None and text.strip() != "null":
            raise SchemaError("the schema text nests too deeply to parse", pointer="")
    return value


def _too_deep(text: str) -> int | None:
    """The offset of the first bracket past :data:`MAX_SCHEMA_DEPTH` (strings skipped), or None."""
    depth, limit = 0, MAX_SCHEMA_DEPTH
    for m in re.finditer(r'"(?:[^"\\]|\\.)*"|[\[{]|[\]}]', text, re.S):
        c = m.group()
        if c in "[{":
            depth += 1
            if depth > limit:
                return m.start()
        elif c in "]}":
            depth -= 1
    return None


def check_schema_depth(schema: Any, limit: int | None = None) -> None:
    """Refuse a schema nested deeper than ``limit`` (a native walk with an explicit stack:
    the check itself must not recurse).

    Raises:
        LimitError: with the JSON pointer of the first value past the limit.
    """
    limit = MAX_SCHEMA_DEPTH if limit is None else limit
    found = _core.first_too_deep(schema, limit)
    if found is not None:
        path, reached = found
        raise LimitError(f"the schema nests deeper than {limit} levels", limit_name="MAX_SCHEMA_DEPTH",
                         limit=limit, reached=reached, pointer=from_path(path))