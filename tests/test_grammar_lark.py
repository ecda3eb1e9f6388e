"""Grammar data model ↔ Lark text: printing, reading back, located syntax errors."""
from __future__ import annotations

import pytest

from structgen import Grammar, GrammarCompiler, GrammarError, GrammarMatcher, GrammarSyntaxError, RegexError
from structgen.grammar.builtin import grammar_text, load_grammar
from structgen.schema.to_grammar import schema_to_grammar

from .conftest import toy_info


def accepts(grammar: Grammar, text: str) -> bool:
    m = GrammarMatcher(GrammarCompiler(toy_info([])).compile_grammar(grammar))
    return m.accept_string(text) and m.is_completed()


@pytest.mark.parametrize("name", ["json", "json_compact"])
def test_builtin_grammars_round_trip(name):
    g = load_grammar(name)
    again = Grammar.from_lark(str(g))
    assert str(again) == str(g)


JSON_SAMPLES = [
    ('{"a": [1, -2.5e3, true, false, null, "x\\u00e9\\n"], "b": {}}', True),
    ("[]", True),
    ('"\\ud83d\\ude00"', True),
    ("  7  ", True),
    ("{'a': 1}", False),
    ('{"a": 01}', False),
    ('{"a": 1,}', False),
    ('"tab\there"', False),
    ("[" + " " * 9 + "]", False),  # whitespace is bounded (8)
]


@pytest.mark.parametrize("text,ok", JSON_SAMPLES)
def test_json_grammar_language(text, ok):
    assert accepts(load_grammar("json"), text) is ok


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"a/b": {"type": "string", "pattern": "^x/y$"}, "n": {"enum": [1, "two", None]}},
     "required": ["a/b"]},
    {"type": "array", "prefixItems": [{"type": "integer", "minimum": -5, "maximum": 300}], "items": {"type": "boolean"},
     "maxItems": 3},
    {"$defs": {"t": {"type": "object", "properties": {"c": {"type": "array", "items": {"$ref": "#/$defs/t"}}}}},
     "$ref": "#/$defs/t"},
    {"type": "string", "minLength": 2, "maxLength": 4},
])
def test_schema_grammars_print_as_lark_and_read_back(schema):
    g = schema_to_grammar(schema)
    text = str(g)
    again = Grammar.from_lark(text)
    # Lark reads escapes in regexes, so the second print may spell characters differently;
    # from then on printing is a fixpoint, and both grammars accept the same texts
    assert str(Grammar.from_lark(str(again))) == str(again)
    c = GrammarCompiler(toy_info([]))
    a, b = c.compile_grammar(g).matcher(), c.compile_grammar(again).matcher()
    for sample in ['{"a/b":"x/y"}', '{"a/b":"x/y","n":"two","zz":[]}', '[7,true,false]', '[300]', '[-6]',
                   '{"c":[{"c":[]},{}]}', '"ab"', '"abcd"', '"a"', '"ab\\n"', '{"c":[{"d":1}]}']:
        a.reset()
        b.reset()
        assert (a.accept_string(sample) and a.is_completed()) == (b.accept_string(sample) and b.is_completed()), sample
    # and lark itself accepts the text as a grammar
    import lark

    lark.Lark(text, parser="earley", lexer="dynamic")


def test_syntax_error_has_line_column_and_caret():
    text = 'start: "a" b\nb: "x" | | )\n'
    with pytest.raises(GrammarSyntaxError) as exc:
        Grammar.from_lark(text)
    e = exc.value
    assert (e.line, e.column) == (2, 12)
    assert e.excerpt == 'b: "x" | | )\n           ^'
    assert "line 2, column 12" in str(e)


@pytest.mark.parametrize("text,match,line", [
    ('start: "a"\n%ignore " "\n', "%ignore is not supported", 2),
    ('start: "a"\nstart: "b"\n', "defined twice", 2),
    ('start: x{y}\n', "templates", 1),
])
def test_unsupported_lark_features_are_located(text, match, line):
    with pytest.raises(GrammarSyntaxError, match=match) as exc:
        Grammar.from_lark(text)
    assert exc.value.line == line


def test_undefined_symbol_and_missing_start():
    with pytest.raises(GrammarError, match="undefined symbol 'b'"):
        Grammar.from_lark('start: b\n')
    with pytest.raises(GrammarError, match="no start rule"):
        Grammar.from_lark('value: "a"\n')


def test_import_from_lark_common():
    g = Grammar.from_lark('start: SIGNED_NUMBER "," WORD\n%import common.SIGNED_NUMBER\n%import common.WORD\n')
    assert accepts(g, "-1.5e3,abc")
    assert not accepts(g, "1,")


@pytest.mark.parametrize("regex", ["(?=a)b", "(a)\\1", "a(?<!b)"])
def test_regex_lookaround_and_backreferences_refused(regex):
    g = Grammar.from_lark(f"start: /{regex}/\n")
    with pytest.raises(RegexError):
        GrammarCompiler(toy_info([])).compile_grammar(g)


def test_repetition_ranges_and_case_insensitive_literals():
    g = Grammar.from_lark('start: "ab"i ~ 2..3\n')
    assert accepts(g, "abAB") and accepts(g, "aBabAb") and not accepts(g, "ab")


def test_grammar_text_is_shipped():
    assert "value" in grammar_text("json")
