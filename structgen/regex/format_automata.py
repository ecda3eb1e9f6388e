"""Each string ``format``'s language, as an expression or as a ready automaton shipped with
the package.

Some formats' patterns (:data:`~structgen.regex.formats.FORMAT_PATTERNS`) are long: ``uri``
is 2,036 characters of regular expression, ``iri-reference`` 5,087, because RFC 3986 spells
out IPv6 literals and every character class. Parsing such a pattern in Python cost 6 to 20 ms
the first time a process met the format, and the expression was thousands of nodes that every
rule holding it took apart again by subset construction (2 to 4 ms per schema with
``format: uri``). Their minimal automata are small (179 states for ``uri``), so for each format
with a long pattern whose minimal code-point DFA has fewer transitions than the pattern has
characters (:data:`SHIP_PATTERN_CHARS`), the package ships that DFA, over the decoded string
and over its JSON-string text, in ``structgen/data/formats/<format>.json``, and the converter
uses them as :class:`~structgen.grammar.Dfa` nodes. The other formats (``hostname``, ``email``: short
patterns with counted repeats, hundreds of states) load faster as the expression.

Each file records the SHA-256 of the pattern it was built from: a file that does not match the
pattern in ``FORMAT_PATTERNS`` is not used, and the automaton is built from the pattern
instead, so an edited pattern is never served a stale automaton. After editing a pattern,
rewrite the files with :func:`write_tables` (``tests/test_format_automata.py`` fails until
they match).
"""
from __future__ import annotations

import hashlib
import json
from functools import lru_cache, partial
from pathlib import Path

from ..grammar import Dfa, Expr
from .formats import FORMAT_PATTERNS
from .parser import parse_regex
from .regular import automaton_tables, json_text_expr

__all__ = ["DATA_DIR", "build_tables", "format_expressions", "format_language", "write_tables"]

DATA_DIR = Path(__file__).resolve().parent.parent / "data" / "formats"
"""Where the shipped tables are (one JSON file per format)."""

_PARTS = ("decoded", "json_text")


def _digest(pattern: str) -> str:
    return hashlib.sha256(pattern.encode()).hexdigest()


def build_tables(fmt: str) -> dict:
    """The file content for ``fmt``, built from its pattern: per part, ``final`` (0/1 per state)
    and ``rows`` (per state its ``lo, hi, target`` triples, flattened). ``decoded``: the
    strings of the format; ``json_text``: the same strings as written between the quotes of
    a JSON string (:func:`~structgen.regex.regular.json_text_expr`)."""
    out: dict = {"format": fmt, "pattern_sha256": _digest(FORMAT_PATTERNS[fmt])}
    for part, e in zip(_PARTS, format_expressions(fmt)):
        tables = automaton_tables(e)
        if tables is None:  # (every format has strings; a pattern edited into the empty language)
            raise ValueError(f"format {fmt!r}: the pattern matches nothing")
        trans, final = tables
        out[part] = {"final": [int(f) for f in final], "rows": [[x for t in row for x in t] for row in trans]}
    return out


def _read(path: Path, fmt: str) -> dict | None:
    """The tables of ``fmt`` in ``path``, or None when unreadable or built from another pattern."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("pattern_sha256") != _digest(FORMAT_PATTERNS[fmt]):
        return None
    return data


@lru_cache(maxsize=64)  # formats recur across schemas: parsed and encoded once per process
def format_expressions(fmt: str) -> tuple[Expr, Expr]:
    """``fmt``'s strings as an expression parsed from its pattern, and the same strings as
    JSON-string text. Length bounds want this form: an expression's repeat can take them
    (``[A-Za-z0-9 _]*`` with ``maxLength: 10000`` stays one counted repeat) where an automaton
    would need a state per length."""
    decoded = parse_regex(FORMAT_PATTERNS[fmt])
    return decoded, json_text_expr(decoded)


def _expression(fmt: str, k: int) -> Expr:
    return format_expressions(fmt)[k]


@lru_cache(maxsize=None)
def format_language(fmt: str) -> tuple[Expr, Expr]:
    """``fmt``'s strings, and the same strings as JSON-string text: the shipped automata
    (:class:`~structgen.grammar.Dfa` nodes) where the package has them, else
    :func:`format_expressions` (``KeyError`` for a format not in ``FORMAT_PATTERNS``)."""
    path = DATA_DIR / f"{fmt}.json"
    if not path.exists():
        return format_expressions(fmt)
    data = _read(path, fmt) or build_tables(fmt)
    out = []
    for k, part in enumerate(_PARTS):
        rows, final = data[part]["rows"], data[part]["final"]
        trans = tuple(tuple(zip(r[0::3], r[1::3], r[2::3])) for r in rows)
        label = f"format {fmt}" if part == "decoded" else f"JSON text of format {fmt}"
        # printed as Lark through the parsed expression (an automaton has no notation)
        source = partial(_expression, fmt, k)
        out.append(Dfa(label, trans, tuple(map(bool, final)), source))
    return out[0], out[1]


SHIP_PATTERN_CHARS = 200
"""A format's automaton is shipped when its pattern is at least this long (shorter ones parse
in well under a millisecond) and the automaton has fewer transitions than the pattern has
characters (loading a table costs about as much per transition as parsing per character)."""


def _shipped(tables: dict, fmt: str) -> bool:
    pattern = FORMAT_PATTERNS[fmt]
    return len(pattern) >= SHIP_PATTERN_CHARS and sum(len(r) for r in tables["decoded"]["rows"]) // 3 < len(pattern)


def write_tables(folder: Path = DATA_DIR) -> list[Path]:
    """Rebuild the shipped files from ``FORMAT_PATTERNS`` (the maintainers' step after editing a
    pattern): one per format whose automaton is smaller than its pattern; others removed."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for fmt in FORMAT_PATTERNS:
        path = folder / f"{fmt}.json"
        tables = build_tables(fmt)
        if _shipped(tables, fmt):
            path.write_text(json.dumps(tables, separators=(",", ":")) + "\n", encoding="utf-8")
            written.append(path)
        elif path.exists():
            path.unlink()
    return written
