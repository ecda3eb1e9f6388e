"""The string formats' shipped automata (structgen/data/formats): current with the patterns,
the same languages as the parsed patterns, and never served stale."""
from __future__ import annotations

import json

import pytest

from structgen import GrammarCompiler, GrammarMatcher
from structgen.grammar import NOTHING, Dfa, expr_to_lark
from structgen.regex import format_automata as fa
from structgen.regex.formats import FORMAT_PATTERNS
from structgen.regex.regular import difference
from .conftest import toy_info

def accepts(compiled, text: str) -> bool:
    m = GrammarMatcher(compiled)
    return m.accept_string(text) and m.is_completed()


SHIPPED = sorted(p.stem for p in fa.DATA_DIR.glob("*.json"))


def test_shipped_files_are_rebuilt_exactly(tmp_path):
    """The files equal what write_tables builds from FORMAT_PATTERNS now (after editing a
    pattern, run ``structgen.regex.format_automata.write_tables()``)."""
    written = fa.write_tables(tmp_path)
    assert sorted(p.name for p in written) == sorted(p.name for p in fa.DATA_DIR.glob("*.json"))
    for p in written:
        assert p.read_bytes() == (fa.DATA_DIR / p.name).read_bytes(), p.name
    # the long patterns are among them: the reason the files exist
    assert {"uri", "uri-reference", "iri", "iri-reference", "ipv6", "date-time"} <= set(SHIPPED)


@pytest.mark.parametrize("fmt", SHIPPED)
def test_shipped_automata_have_the_patterns_languages(fmt):
    """Each shipped automaton (decoded and JSON text) matches exactly the strings of the
    parsed pattern: both differences are empty."""
    automata = fa.format_language(fmt)
    expressions = fa.format_expressions(fmt)
    for auto, expr in zip(automata, expressions):
        assert isinstance(auto, Dfa)
        assert difference(auto, expr) == NOTHING
        assert difference(expr, auto) == NOTHING
    # printed as Lark through the expression (an automaton has no notation)
    assert expr_to_lark(automata[1]) == expr_to_lark(expressions[1])


def test_short_patterns_stay_expressions():
    for fmt in sorted(set(FORMAT_PATTERNS) - set(SHIPPED)):
        assert fa.format_language(fmt) == fa.format_expressions(fmt), fmt


def test_a_stale_file_is_not_used(tmp_path, monkeypatch):
    """A file built from another pattern is ignored: the automaton is built from the pattern."""
    data = json.loads((fa.DATA_DIR / "uri.json").read_text())
    # a wrong automaton under a wrong digest: one that accepts the empty string only
    data["pattern_sha256"] = "0" * 64
    for part in ("decoded", "json_text"):
        data[part] = {"final": [1], "rows": [[]]}
    (tmp_path / "uri.json").write_text(json.dumps(data))
    monkeypatch.setattr(fa, "DATA_DIR", tmp_path)
    fa.format_language.cache_clear()
    try:
        built = fa.format_language("uri")
        assert difference(built[0], fa.format_expressions("uri")[0]) == NOTHING
        assert built[0].trans != ((),)
    finally:
        fa.format_language.cache_clear()


@pytest.mark.parametrize("schema, good, bad", [
    ({"type": "string", "format": "uri"}, ["https://example.com/a?b#c", "urn:x"], ["example.com", "a b"]),
    # with a pattern: the intersection of the two languages
    ({"type": "string", "format": "uri", "pattern": "^https:"}, ["https://example.com"], ["http://example.com"]),
    # with length bounds: the expression form takes them
    ({"type": "string", "format": "date-time", "maxLength": 20}, ["2024-01-02T03:04:05Z"], ["2024-01-02T03:04:05.5Z"]),
    # a negated const: the format's strings less that one
    ({"type": "string", "format": "date", "not": {"const": "2024-01-02"}}, ["2024-01-03"], ["2024-01-02"]),
    ({"type": "object", "propertyNames": {"format": "ipv6"}}, ['{"::1":0}'], ['{"x":0}']),
])
def test_schemas_with_shipped_formats(schema, good, bad):
    compiled = GrammarCompiler(toy_info([])).compile_json_schema(schema)
    for text in good:
        assert accepts(compiled, text if text.startswith("{") else json.dumps(text)), text
    for text in bad:
        assert not accepts(compiled, text if text.startswith("{") else json.dumps(text)), text
