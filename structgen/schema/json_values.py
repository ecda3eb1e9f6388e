"""JSON values as JSON Schema sees them: equality (``1 == 1.0``, ``true != 1``) and the compact
text the grammars write."""
from __future__ import annotations

import json
import re
from json.encoder import encode_basestring
from typing import Any

__all__ = ["dumps_compact", "json_equal"]

_SURROGATE = re.compile("[\ud800-\udfff]")
# json.dumps with these arguments builds an encoder per call: one, kept, and a string (every
# property name of every object the converter writes) straight through the C string encoder
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def dumps_compact(value: Any) -> str:
    """Compact JSON, non-ASCII written raw except lone surrogates (no UTF-8 form): ``\\uXXXX``."""
    text = encode_basestring(value) if type(value) is str else _ENCODER.encode(value)
    if _SURROGATE.search(text) is None:
        return text
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def json_equal(a: Any, b: Any) -> bool:
    """JSON Schema equality: 1 == 1.0, but true != 1; objects by members, arrays in order."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    return type(a) in (int, float) and type(b) in (int, float) and a == b or a == b
