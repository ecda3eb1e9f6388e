"""structgen.tools: definitions from four sources, exact call grammars, tool_choice modes, parse and dispatch."""
from __future__ import annotations

import copy
import dataclasses
import enum
import itertools
import json
import random
import subprocess
import sys
import warnings
from typing import Annotated, Any, Literal, Optional, TypedDict

import jsonschema
import pytest

from structgen import Grammar, GrammarCompiler, SchemaError, StructgenWarning
from structgen.integrations.hf import ToolCallLogitsProcessor
from structgen.integrations.hf_generate import generate_tool_calls
from structgen.schema.canonical import canonical_json
from structgen.tools import (
    HERMES,
    JSON,
    SMOLLM2,
    Tool,
    ToolCall,
    ToolCallError,
    ToolCallFormat,
    ToolDefinitionError,
    ToolError,
    ToolSchemaError,
    ToolSet,
    load_catalogue,
    parse_docstring,
    shortest_completion,
    text_without,
)

from .conftest import toy_info

# --------------------------------------------------------------------------- helpers

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}},
        "required": ["city"], "additionalProperties": False}}}
SEARCH = {"type": "function", "function": {
    "name": "web_search", "description": "Search the web.",
    "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}, "max_results": {"type": "integer", "minimum": 1, "maximum": 20}},
        "required": ["query"], "additionalProperties": False}}}


def accepts(compiled, text: str, *, complete: bool = True) -> bool:
    m = compiled.matcher()
    return m.accept_string(text) and (m.is_completed() if complete else True)


@pytest.fixture(scope="module")
def two_tools():
    return ToolSet.from_openai([WEATHER, SEARCH])


@pytest.fixture(scope="module")
def byte_compiler():
    return GrammarCompiler(toy_info([]))


# --------------------------------------------------------------------------- definition sources


def test_from_json_schema_and_openai_give_the_same_call_schema():
    params = WEATHER["function"]["parameters"]
    a = ToolSet([Tool.from_json_schema("get_weather", params, description="Weather for a city.")])
    b = ToolSet.from_openai([WEATHER])
    assert a.json_schema() == b.json_schema()
    assert a.to_openai() == [WEATHER] == b.to_openai()


@pytest.mark.parametrize("shape", ["chat", "responses", "bare", "no_parameters", "strict"])
def test_openai_round_trip(shape):
    fn = copy.deepcopy(WEATHER["function"])
    tool = {"chat": WEATHER, "responses": {"type": "function", **fn}, "bare": fn,
            "no_parameters": {"type": "function", "function": {"name": "ping"}},
            "strict": {"type": "function", "function": {**fn, "strict": True}}}[shape]
    ts = ToolSet.from_openai([tool])
    assert ts.to_openai() == [tool]
    assert ToolSet.from_openai(ts.to_openai()).json_schema() == ts.json_schema()


def test_catalogue_round_trips_and_compiles_strictly(smollm2_compiler):
    cat = load_catalogue()
    assert {"get_weather", "web_search", "create_calendar_event", "run_sql_query", "convert_units"} <= set(cat)
    ts = ToolSet.from_catalogue()
    assert ts.to_openai() == list(cat.values())
    for tool in ts:
        jsonschema.Draft202012Validator.check_schema(tool.parameters)
        assert not tool.relaxations
    compiled = ts.compile(smollm2_compiler)
    assert compiled.matcher() is not None


CATALOGUE_CALLS = [
    ("get_weather", {"city": "Paris, France", "unit": "celsius", "days": 3}, True),
    ("get_weather", {"city": "Oslo", "days": 15}, False),
    ("web_search", {"query": "structured decoding", "max_results": 5, "site": "arxiv.org"}, True),
    ("web_search", {"query": "x", "site": "not a domain"}, False),
    ("create_calendar_event", {"title": "Standup", "start": "2025-03-04T09:30", "attendees": ["a@b.io"]}, True),
    ("create_calendar_event", {"title": "Standup", "start": "2025-13-04T09:30"}, False),
    ("run_sql_query", {"query": "SELECT * FROM t WHERE id = ?", "parameters": [3]}, True),
    ("run_sql_query", {"query": "DROP TABLE t"}, False),
    ("convert_units", {"value": 3.5, "from_unit": "km", "to_unit": "mi"}, True),
    ("convert_units", {"value": 3.5, "from_unit": "km", "to_unit": "parsec"}, False),
    ("send_email", {"to": ["x@y.org"], "subject": "Hi", "body": "Hello"}, True),
    ("get_stock_quote", {"symbol": "AAPL", "exchange": "NASDAQ"}, True),
    ("get_stock_quote", {"symbol": "aapl"}, False),
]


@pytest.mark.parametrize("name,args,valid", CATALOGUE_CALLS, ids=[f"{c[0]}-{c[2]}" for c in CATALOGUE_CALLS])
def test_catalogue_calls(smollm2_compiler, name, args, valid):
    ts = ToolSet.from_catalogue()
    compiled = ts.compile(smollm2_compiler)
    schema = ts.json_schema()
    call = {"name": name, "arguments": args}
    assert jsonschema.Draft202012Validator(schema).is_valid(call) is valid
    if valid:
        assert accepts(compiled, canonical_json(call, schema))
        assert ts.parse(json.dumps(call)) == [ToolCall(name, args)]
    else:
        assert not accepts(compiled, json.dumps(call, separators=(",", ":"), ensure_ascii=False))
        with pytest.raises(ToolCallError):
            ts.parse(json.dumps(call))


class Unit(enum.Enum):
    CELSIUS = "celsius"
    FAHRENHEIT = "fahrenheit"


@dataclasses.dataclass
class Point:
    """A point on the map."""

    lat: float
    lon: float = 0.0


class Options(TypedDict, total=False):
    verbose: bool


@pytest.mark.parametrize("annotation,schema", [
    (int, {"type": "integer"}),
    (float, {"type": "number"}),
    (bool, {"type": "boolean"}),
    (str, {"type": "string"}),
    (None, {"type": "null"}),
    (Optional[int], {"type": ["integer", "null"]}),  # noqa: UP045 - the typing spelling is what is tested
    (int | str, {"type": ["integer", "string"]}),
    (Literal["a", 1], {"enum": ["a", 1]}),
    (Unit, {"enum": ["celsius", "fahrenheit"]}),
    (list[int], {"type": "array", "items": {"type": "integer"}}),
    (dict[str, float], {"type": "object", "additionalProperties": {"type": "number"}}),
    (tuple[int, str], {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "items": False,
                       "minItems": 2}),
    (tuple[int, ...], {"type": "array", "items": {"type": "integer"}}),
    (Point, {"type": "object", "properties": {"lat": {"type": "number"}, "lon": {"type": "number", "default": 0.0}},
             "required": ["lat"], "additionalProperties": False, "description": "A point on the map."}),
    (Options, {"type": "object", "properties": {"verbose": {"type": "boolean"}}, "required": [],
               "additionalProperties": False}),
    (Optional[Point], {"anyOf": [{"type": "object", "properties": {"lat": {"type": "number"}, "lon": {  # noqa: UP045
        "type": "number", "default": 0.0}}, "required": ["lat"], "additionalProperties": False,
        "description": "A point on the map."}, {"type": "null"}]}),
    (Annotated[int, "how many"], {"type": "integer", "description": "how many"}),
    (Any, {}),
])
def test_python_annotations(annotation, schema):
    def f(x): ...
    f.__annotations__ = {"x": annotation}
    tool = Tool.from_function(f)
    assert tool.parameters["properties"]["x"] == schema
    assert tool.parameters["required"] == ["x"]
    ToolSet([tool])  # compiles strictly


def test_defaults_make_parameters_optional_and_are_recorded():
    def f(a: int, b: str = "x", unit: Unit = Unit.CELSIUS, p: Point | None = None, when: object = object()) -> None: ...
    f.__annotations__["when"] = Any
    p = Tool.from_function(f).parameters
    assert p["required"] == ["a"]
    assert p["properties"]["b"]["default"] == "x"
    assert p["properties"]["unit"]["default"] == "celsius"
    assert p["properties"]["p"]["default"] is None
    assert "default" not in p["properties"]["when"]  # not JSON: not recorded


GOOGLE = '''Book a table.

    Longer text.

    Args:
        city (str): Where to eat,
            with the country.
        size: How many people.

    Returns:
        A booking id.
    '''
REST = '''Book a table.

    :param city: Where to eat,
        with the country.
    :param int size: How many people.
    :returns: A booking id.
    '''
NUMPY = '''Book a table.

    Parameters
    ----------
    city : str
        Where to eat,
        with the country.
    size : int
        How many people.

    Returns
    -------
    str
    '''


@pytest.mark.parametrize("doc", [GOOGLE, REST, NUMPY], ids=["google", "rest", "numpy"])
def test_docstring_styles(doc):
    summary, params = parse_docstring(doc)
    assert summary == "Book a table."
    assert params == {"city": "Where to eat, with the country.", "size": "How many people."}

    def book(city: str, size: int = 2) -> str: ...
    book.__doc__ = doc
    tool = Tool.from_function(book)
    assert tool.description == "Book a table."
    assert tool.parameters["properties"]["city"]["description"] == "Where to eat, with the country."


# BFCL v4 definitions (ShishirPatil/gorilla, Apache-2.0, tests/data/LICENSES), trimmed.
BFCL_FUNCTIONS = [
    {"name": "math.hypot", "description": "Euclidean norm.", "parameters": {"type": "dict", "properties": {
        "x": {"type": "integer"}, "y": {"type": "integer"}, "z": {"type": "integer", "description": "Default is 0."}},
        "required": ["x", "y"]}},
    {"name": "restaurant.search", "description": "Find a restaurant.", "parameters": {"type": "dict", "properties": {
        "location": {"type": "string"}, "rating": {"type": "float", "optional": True}, "pos": {"type": "tuple", "items": {
            "type": "float"}}, "tags": {"type": "ArrayList", "items": {"type": "String"}}, "meta": {"type": "HashMap"},
        "ctx": {"type": "any"}, "n": {"type": "long"}, "w": {"type": "double"}, "ok": {"type": "Boolean"}, "raw": {"type": ""},
        "metrics": {"type": "array", "items": {"type": "string"}, "enum": ["temperature", "co2"]}},
        "required": ["location"], "optional": ["rating"]}},
]


def test_bfcl_mapping():
    ts = ToolSet.from_bfcl(BFCL_FUNCTIONS)
    assert ts.names == ["math.hypot", "restaurant.search"]
    props = ts["restaurant.search"].parameters["properties"]
    assert ts["restaurant.search"].parameters["type"] == "object"
    assert props["rating"] == {"type": "number"}
    assert props["pos"] == {"type": "array", "items": {"type": "number"}}
    assert props["tags"] == {"type": "array", "items": {"type": "string"}}
    assert props["meta"] == {"type": "object"}
    assert props["ctx"] == {} and props["raw"] == {}
    assert (props["n"], props["w"], props["ok"]) == ({"type": "integer"}, {"type": "number"}, {"type": "boolean"})
    assert props["metrics"] == {"type": "array", "items": {"type": "string", "enum": ["temperature", "co2"]}}
    notes = " | ".join(ts["restaurant.search"].notes)
    assert "/properties/rating/optional: dropped BFCL's non-standard 'optional'" in notes
    assert "/optional: dropped" in notes and "'tuple' -> 'array'" in notes and "moved to its items" in notes
    for tool in ts:  # the export is standard JSON Schema
        jsonschema.Draft202012Validator.check_schema(tool.to_openai()["function"]["parameters"])
    call = ts.parse('{"name": "math.hypot", "arguments": {"x": 4, "y": 5}}')
    assert call == [ToolCall("math.hypot", {"x": 4, "y": 5})]


def test_bfcl_unknown_type_and_enum_type_conflict():
    with pytest.raises(ToolSchemaError) as exc:
        ToolSet.from_bfcl([{"name": "f", "parameters": {"type": "dict", "properties": {"a": {"type": "Widget"}}}}])
    assert (exc.value.tool, exc.value.pointer, exc.value.keyword) == ("f", "/properties/a/type", "type")
    conflict = [{"name": "Hotels_2_SearchHouse", "parameters": {"type": "dict", "properties": {
        "adults": {"type": "integer", "enum": ["1", "2", "dontcare"]}}}}]
    with pytest.raises(ToolSchemaError, match="lenient=True") as exc:
        ToolSet.from_bfcl(conflict)
    assert exc.value.pointer == "/properties/adults/enum"
    with pytest.warns(StructgenWarning, match="type 'integer' contradicts every enum value"):
        ts = ToolSet.from_bfcl(conflict, lenient=True)
    assert ts["Hotels_2_SearchHouse"].parameters["properties"]["adults"] == {"enum": ["1", "2", "dontcare"]}
    assert ts.relaxations == [("Hotels_2_SearchHouse: /properties/adults: type 'integer' contradicts every enum value; "
                              "type dropped, enum kept")]


# --------------------------------------------------------------------------- bad definitions


def test_definition_errors():
    with pytest.raises(ToolDefinitionError, match="duplicate tool name") as exc:
        ToolSet.from_openai([WEATHER, WEATHER])
    assert exc.value.tool == "get_weather"
    with pytest.raises(ToolDefinitionError, match="invalid tool name 'math.hypot'"):
        ToolSet.from_openai([{"type": "function", "function": {"name": "math.hypot"}}])
    for bad in ("", "a b", "x" * 65, "naïve"):
        with pytest.raises(ToolDefinitionError, match="invalid tool name"):
            Tool.from_json_schema(bad)
    with pytest.raises(ToolDefinitionError, match="type 'function'"):
        Tool.from_openai({"type": "retrieval", "function": {"name": "x"}})
    with pytest.raises(ToolDefinitionError, match="needs a 'name'"):
        Tool.from_openai({"type": "function", "function": {}})
    with pytest.raises(ToolSchemaError, match="must be an object") as exc:
        Tool.from_json_schema("f", {"type": "array"})
    assert exc.value.pointer == "/type"


class Color:  # not a supported annotation
    pass


@dataclasses.dataclass
class Node:
    children: list[Node]


def _no_hint(x): ...
def _args(*xs: int): ...
def _kwargs(**kw: int): ...
def _set(x: set[int]): ...
def _int_keys(x: dict[int, str]): ...
def _class(x: Color): ...
def _recursive(x: Node): ...


@pytest.mark.parametrize("fn,match", [
    (_no_hint, "parameter 'x' has no type annotation"),
    (_args, "parameter 'xs': \\*args and \\*\\*kwargs"),
    (_kwargs, "parameter 'kw': \\*args and \\*\\*kwargs"),
    (_set, "parameter 'x': annotation set\\[int\\] has no JSON Schema counterpart"),
    (_int_keys, "parameter 'x': dict keys must be str"),
    (_class, "parameter 'x': annotation Color has no JSON Schema counterpart"),
    (_recursive, "recursive type Node"),
])
def test_unsupported_annotations_fail_at_definition(fn, match):
    with pytest.raises(ToolDefinitionError, match=match) as exc:
        ToolSet.from_functions(fn)
    assert exc.value.tool == fn.__name__


def test_unenforceable_schema_strict_and_lenient():
    params = {"type": "object", "properties": {"ids": {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}}}
    with pytest.raises(ToolSchemaError) as exc:
        ToolSet([Tool.from_json_schema("dedupe", params)])
    err = exc.value
    assert isinstance(err, SchemaError)
    assert (err.tool, err.pointer, err.keyword) == ("dedupe", "/properties/ids/uniqueItems", "uniqueItems")
    assert "tool 'dedupe'" in str(err) and "lenient=True" in str(err)
    with pytest.warns(StructgenWarning, match="tool 'dedupe'.*uniqueItems"):
        ts = ToolSet([Tool.from_json_schema("dedupe", params)], lenient=True)
    assert ts["dedupe"].relaxations and "uniqueItems" in ts.relaxations[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # recorded once, not warned again at compile time
        ts.compile(toy_info([]))


def test_unsatisfiable_tool_schema():
    with pytest.raises(ToolSchemaError, match="no arguments object|unsatisfiable|no const") as exc:
        ToolSet([Tool.from_json_schema("f", {"type": "object", "properties": {"a": False}, "required": ["a"]})])
    assert exc.value.tool == "f"


# --------------------------------------------------------------------------- call schema and grammar


def test_name_fixes_the_arguments_token_by_token(two_tools, smollm2_compiler, smollm2_tokenizer, smollm2_info):
    compiled = two_tools.compile(smollm2_compiler)
    good = '{"name":"web_search","arguments":{"query":"cats","max_results":3}}'
    ids = smollm2_tokenizer.encode(good, add_special_tokens=False)
    m = compiled.matcher()
    assert all(m.accept_token(t) for t in ids) and m.accept_token(smollm2_info.stop_token_ids[0])

    bad = '{"name":"get_weather","arguments":{"query":"cats"}}'  # A's name, B's arguments
    ids = smollm2_tokenizer.encode(bad, add_special_tokens=False)
    m, pos = compiled.matcher(), 0
    for t in ids:
        if not m.accept_token(t):
            break
        pos += len(smollm2_info.token_bytes[t])
    else:
        pytest.fail("tool A's name with tool B's arguments was accepted")
    assert pos <= bad.index("query") < pos + len(smollm2_info.token_bytes[t])  # refused exactly at B's argument
    # where the argument name starts, only get_weather's names are possible
    m = compiled.matcher()
    assert m.accept_string('{"name":"get_weather","arguments":{"')
    allowed = {smollm2_info.token_bytes[i] for i in m.allowed_token_ids()}
    assert b"city" in allowed and b"query" not in allowed and b"max" not in allowed
    # and the union of the arguments is not enough: jsonschema agrees
    assert not jsonschema.Draft202012Validator(two_tools.json_schema()).is_valid(json.loads(bad))


def test_names_sharing_a_prefix(byte_compiler):
    ts = ToolSet([Tool.from_json_schema("get", {"type": "object", "properties": {"a": {"type": "integer"}}}),
                  Tool.from_json_schema("get_all", {"type": "object", "properties": {"b": {"type": "boolean"}}})])
    c = ts.compile(byte_compiler)
    assert accepts(c, '{"name":"get","arguments":{"a":1}}')
    assert accepts(c, '{"name":"get_all","arguments":{"b":true}}')
    assert not accepts(c, '{"name":"get","arguments":{"b":true}}')
    assert not accepts(c, '{"name":"get_all","arguments":{"a":1}}')


def test_refs_inside_parameters_are_rebased(byte_compiler):
    params = {"type": "object", "$defs": {"pt": {"type": "object", "properties": {"x": {"type": "integer"}},
                                                 "required": ["x"], "additionalProperties": False}},
              "properties": {"a": {"$ref": "#/$defs/pt"}, "b": {"type": "array", "items": {"$ref": "#/$defs/pt"}}},
              "required": ["a"]}
    ts = ToolSet([Tool.from_json_schema("f", params), Tool.from_openai(WEATHER)])
    call = {"name": "f", "arguments": {"a": {"x": 1}, "b": [{"x": 2}]}}
    for parallel in (False, True):
        schema = ts.json_schema(parallel=parallel)
        value = [call] if parallel else call
        jsonschema.Draft202012Validator(schema).validate(value)
        assert not jsonschema.Draft202012Validator(schema).is_valid(
            [{"name": "f", "arguments": {"a": {"x": "1"}}}] if parallel else {"name": "f", "arguments": {"a": {"x": "1"}}})
        c = ts.compile(byte_compiler, parallel=parallel)
        assert accepts(c, json.dumps(value, separators=(",", ":")))
        assert not accepts(c, json.dumps(value, separators=(",", ":")).replace('"x":1', '"x":"1"'))


def test_required_and_named_choice(two_tools, byte_compiler):
    w = '{"name":"get_weather","arguments":{"city":"Oslo"}}'
    s = '{"name":"web_search","arguments":{"query":"q"}}'
    assert accepts(two_tools.compile(byte_compiler, "required"), w)
    assert accepts(two_tools.compile(byte_compiler, "required"), s)
    for choice in ("web_search", {"type": "function", "function": {"name": "web_search"}}, two_tools["web_search"]):
        c = two_tools.compile(byte_compiler, choice)
        assert accepts(c, s) and not accepts(c, w)
    assert two_tools.json_schema("web_search") == two_tools["web_search"].call_schema()
    for bad in ("nope", {"type": "function", "function": {"name": "nope"}}, 3, {"name": 3, "type": "retrieval"}):
        with pytest.raises(ToolError):
            two_tools.json_schema(bad)
    for mode in ("auto", "none"):
        with pytest.raises(ToolError, match="tool_choice must be"):
            two_tools.json_schema(mode)


def test_parallel_calls_with_bounds(two_tools, byte_compiler):
    w = '{"name":"get_weather","arguments":{"city":"Oslo"}}'
    s = '{"name":"web_search","arguments":{"query":"q"}}'
    c = two_tools.compile(byte_compiler, parallel=True, min_calls=2, max_calls=3)
    assert not accepts(c, f"[{w}]")
    assert accepts(c, f"[{w},{s}]") and accepts(c, f"[{w},{s},{w}]")
    assert not accepts(c, f"[{w},{s},{w},{s}]")
    schema = two_tools.json_schema(parallel=True, min_calls=2, max_calls=3)
    assert (schema["type"], schema["minItems"], schema["maxItems"]) == ("array", 2, 3)
    with pytest.raises(ToolError, match="max_calls"):
        two_tools.json_schema(parallel=True, min_calls=3, max_calls=2)
    with pytest.raises(ToolError, match="min_calls"):
        two_tools.json_schema(parallel=True, min_calls=0)


W = '{"name":"get_weather","arguments":{"city":"Oslo"}}'


@pytest.mark.parametrize("fmt,parallel,text,ok", [
    (SMOLLM2, False, f"<tool_call>[{W}]</tool_call>", True),
    (SMOLLM2, False, f"<tool_call>{W}</tool_call>", False),
    (SMOLLM2, False, f"<tool_call>[{W},{W}]</tool_call>", False),
    (SMOLLM2, True, f"<tool_call>[{W},{W}]</tool_call>", True),
    (HERMES, False, f"<tool_call>\n{W}\n</tool_call>", True),
    (HERMES, True, f"<tool_call>\n{W}\n</tool_call>\n<tool_call>\n{W}\n</tool_call>", True),
    (HERMES, False, f"<tool_call>\n{W}\n</tool_call>\n<tool_call>\n{W}\n</tool_call>", False),
    (JSON, False, W, True),
    (JSON, True, f"[{W}]", True),
    (JSON, False, f"[{W}]", False),
])
def test_required_in_each_format(two_tools, byte_compiler, fmt, parallel, text, ok):
    assert accepts(two_tools.compile(byte_compiler, format=fmt, parallel=parallel), text) is ok
    if ok:
        assert two_tools.parse(text) == [ToolCall("get_weather", {"city": "Oslo"})] * (2 if parallel and "},{" in text
                                                                                          or text.count("<tool_call>") == 2
                                                                                          else 1)


FREE_ARGS = {"type": "function", "function": {
    "name": "tag", "parameters": {"type": "object", "properties": {"meta": {"type": "object"}}}}}


@pytest.mark.parametrize("fmt,parallel", [(HERMES, False), (HERMES, True), (SMOLLM2, False), (JSON, True)])
def test_calls_keep_free_member_names_distinct(byte_compiler, fmt, parallel):
    """Arguments that take free names never repeat one in an object, in every format whose
    wrapping text the name lexer reads as nothing: the calls' grammar is flagged free_names."""
    tools = ToolSet.from_openai([FREE_ARGS])
    c = tools.compile(byte_compiler, format=fmt, parallel=parallel)
    assert c.free_names

    def text(meta: str) -> str:
        call = '{"name":"tag","arguments":{"meta":' + meta + "}}"
        return _wrap(fmt, call, parallel)

    assert accepts(c, text('{"a":1,"b":{"a":2}}'))
    assert not accepts(c, text('{"a":1,"a":2}'))
    assert not accepts(c, text('{"a":1,"\\u0061":2}'))  # the same name, escaped


def _wrap(fmt, call: str, parallel: bool) -> str:
    body = f"[{call}]" if fmt.always_array or (parallel and not fmt.each_call) else call
    return f"{fmt.open}{body}{fmt.close}"


def test_free_names_not_tracked_through_prose_or_json_like_wrappers(byte_compiler):
    """Free text (tool_choice="auto") and a wrapper holding a brace or a quote would feed the
    name lexer text that is not the call's JSON: such grammars are left unflagged."""
    tools = ToolSet.from_openai([FREE_ARGS])
    assert not tools.grammar("auto", format=HERMES).free_names
    braced = ToolCallFormat("braced", "{call: ", "}", each_call=True)
    assert not tools.grammar(format=braced).free_names
    assert tools.grammar(format=HERMES).free_names  # the same tool, a neutral wrapper


@pytest.mark.parametrize("fmt,text,ok", [
    (SMOLLM2, "The weather is nice.", True),
    (SMOLLM2, "", True),
    (SMOLLM2, "Let me check. <tool_", True),
    (SMOLLM2, f"Let me check. <tool_call>[{W}]</tool_call>", True),
    (SMOLLM2, f"<tool_call>[{W}]</tool_call>", True),
    (SMOLLM2, f"<tool<tool_call>[{W}]</tool_call>", True),
    (SMOLLM2, f"<tool_call>[{W}]</tool_call> and more", False),
    (SMOLLM2, "<tool_call>", False),  # an opened call must be closed
    (SMOLLM2, '<tool_call>[{"name":"get_weather","arguments":{"query":"x"}}]</tool_call>', False),
    (SMOLLM2, "I will not say <tool_call> here", False),
    (HERMES, f"Sure.\n<tool_call>\n{W}\n</tool_call>", True),
    (HERMES, "Just text, no <tool_call", True),
    (JSON, W, True),
    (JSON, "Plain answer {not json}", True),
    (JSON, "{not json", False),
    (JSON, "[1, 2]", False),
])
def test_auto_free_text_or_call(two_tools, byte_compiler, fmt, text, ok):
    c = two_tools.compile(byte_compiler, "auto", format=fmt)
    assert accepts(c, text) is ok


def test_auto_grammar_round_trips_through_lark_text(two_tools, byte_compiler):
    g = two_tools.grammar("auto", format=SMOLLM2, parallel=True)
    again = Grammar.from_lark(str(g))
    c1, c2 = byte_compiler.compile_grammar(g), byte_compiler.compile_grammar(again)
    for text in ["hi", f"a <tool_call>[{W},{W}]</tool_call>", "x <tool_call> y", f"<tool_call>[{W}]"]:
        assert accepts(c1, text) == accepts(c2, text)


def test_none_choice_is_text_without_the_trigger(two_tools, byte_compiler):
    c = two_tools.compile(byte_compiler, "none", format=HERMES)
    assert accepts(c, "Plain text.") and not accepts(c, f"<tool_call>\n{W}\n</tool_call>")
    assert accepts(two_tools.compile(byte_compiler, "none", format=JSON), W)  # no trigger: any text


@pytest.mark.parametrize("trigger", ["<tool_call>", "abab", "aaa", "aab", "abcabd", "[TOOL_CALLS]", "a", "ananas"])
def test_text_without_trigger_is_exact(trigger, byte_compiler):
    """Every string over the trigger's letters (+ one other, + a 2-byte character): accepted iff trigger-free."""
    c = byte_compiler.compile_grammar(Grammar({"start": text_without(trigger)}))
    alphabet = list(dict.fromkeys(trigger))[:3] + ["x", "é"]
    n = 0
    for length in range(len(trigger) + 3):
        for tup in itertools.product(alphabet, repeat=min(length, 6)):
            s = "".join(tup)
            assert accepts(c, s) is (trigger not in s), s
            n += 1
    rng = random.Random(0)
    letters = list(dict.fromkeys(trigger)) + ["x", "é"]
    for _ in range(300):  # longer strings that use every letter of the trigger
        s = "".join(rng.choice(letters) for _ in range(rng.randrange(30)))
        assert accepts(c, s) is (trigger not in s), s
    assert n > 30


# --------------------------------------------------------------------------- formats and prompts


def test_format_detection(smollm2_tokenizer):
    assert ToolCallFormat.detect(smollm2_tokenizer) == SMOLLM2  # its template renders no tools; the family's format
    qwen = "{%- if tools %}<tools>{{ tools }}</tools> <tool_call>\\n{...}\\n</tool_call>{%- endif %}"
    assert ToolCallFormat.detect(qwen) == HERMES
    assert ToolCallFormat.detect("{{ messages }}") == JSON
    assert ToolCallFormat.named("qwen") == HERMES
    with pytest.raises(ValueError, match="unknown tool-call format"):
        ToolCallFormat.named("xml")


def test_chat_prompt(two_tools, smollm2_tokenizer):
    text = two_tools.chat_prompt(smollm2_tokenizer, [{"role": "system", "content": "Be brief."},
                                                      {"role": "user", "content": "Weather in Oslo?"}])
    assert text.startswith("<|im_start|>system\n") and "<tools>" in text and '"get_weather"' in text
    assert "Be brief." in text and text.endswith("<|im_start|>assistant\n")
    assert text.count("<|im_start|>system") == 1

    class ToolTemplate:  # a template that renders tools itself gets them as `tools=`
        chat_template = "{% for t in tools %}...{% endfor %}"

        def apply_chat_template(self, messages, **kw):
            return json.dumps({"messages": messages, **kw})

    out = json.loads(two_tools.chat_prompt(ToolTemplate(), "hi"))
    assert out["tools"] == two_tools.to_openai() and out["messages"] == [{"role": "user", "content": "hi"}]


def test_logits_processor_reads_the_format_from_the_tokenizer(two_tools, smollm2_tokenizer):
    proc = ToolCallLogitsProcessor(two_tools, smollm2_tokenizer, "get_weather", parallel=True, max_calls=2)
    assert proc.format == SMOLLM2
    assert accepts(proc.compiled, f"<tool_call>[{W},{W}]</tool_call>")
    assert not accepts(proc.compiled, f"<tool_call>[{W},{W},{W}]</tool_call>")
    assert not accepts(proc.compiled, '<tool_call>[{"name":"web_search","arguments":{"query":"q"}}]</tool_call>')
    hermes = ToolCallLogitsProcessor(two_tools, smollm2_tokenizer, "auto", format="hermes")
    assert hermes.format == HERMES and accepts(hermes.compiled, "No call needed.")


def test_format_render_parses_back(two_tools):
    calls = [{"name": "get_weather", "arguments": {"city": "Oslo"}}, {"name": "web_search", "arguments": {"query": "q"}}]
    for fmt in (SMOLLM2, HERMES, JSON):
        assert [c.to_dict() for c in two_tools.parse(fmt.render(calls), format=fmt)] == calls


# --------------------------------------------------------------------------- parse


@pytest.mark.parametrize("text,tool,argument,pointer,match", [
    ('{"name":"get_weather","arguments":{"city":3}}', "get_weather", "city", "/city", "3 is not of type 'string'"),
    ('{"name":"get_weather","arguments":{"city":"x","unit":"kelvin"}}', "get_weather", "unit", "/unit", "is not one of"),
    ('{"name":"get_weather","arguments":{}}', "get_weather", "city", "/city", "'city' is a required property"),
    ('{"name":"get_weather","arguments":{"city":"x","zip":1}}', "get_weather", "zip", "/zip", "Additional properties"),
    ('{"name":"web_search","arguments":{"query":"q","max_results":99}}', "web_search", "max_results", "/max_results",
     "99 is greater than the maximum of 20"),
    ('{"name":"send_fax","arguments":{}}', "send_fax", None, "", "unknown tool"),
    ('{"name":"get_weather"}', "get_weather", None, "", "'arguments' must be an object"),
    ('{"name":"get_weather","arguments":{"city":"x"},"id":1}', "get_weather", None, "", "unexpected key 'id'"),
    ('{"arguments":{}}', None, None, "", "no tool name"),
    ('{"name":"get_weather","arguments":{"city":', None, None, "", "invalid JSON"),
])
def test_parse_errors_name_tool_argument_pointer(two_tools, text, tool, argument, pointer, match):
    with pytest.raises(ToolCallError, match=match) as exc:
        two_tools.parse(text)
    e = exc.value
    assert (e.tool, e.argument, e.pointer) == (tool, argument, pointer)
    if argument:
        assert f"argument {argument!r} at {pointer}" in str(e) and f"tool {tool!r}" in str(e)


def test_parse_nested_pointer_and_text():
    ts = ToolSet.from_functions(_place_points)
    with pytest.raises(ToolCallError) as exc:
        ts.parse('{"name":"_place_points","arguments":{"points":[{"lat":1},{"lat":"north"}]}}')
    assert (exc.value.argument, exc.value.pointer) == ("points", "/points/1/lat")
    assert ts.parse("Sorry, I cannot help with that.") == []
    calls = ts.parse('Sure! <tool_call>[{"name":"_place_points","arguments":{"points":[]}}]</tool_call>')
    assert calls == [ToolCall("_place_points", {"points": []})]


def _place_points(points: list[Point]) -> int:
    return len(points)


@pytest.mark.parametrize("parameters,good,bad,pointer", [
    ({"type": "object", "properties": {"who": {"type": "string", "pattern": "^\\p{Letter}+$"}}, "required": ["who"]},
     {"who": "Zoë"}, {"who": "Zoë1"}, "/who"),
    ({"type": "object", "patternProperties": {"^\\p{Lu}": {"type": "integer"}}},
     {"Émile": 1, "x": "free"}, {"Émile": "one"}, "/Émile"),
])
def test_validate_patterns_python_re_cannot_compile(parameters, good, bad, pointer):
    """Calls under a \\p{...} pattern (enforced by the grammar; Python's re, which jsonschema
    searches with, has no \\p) are validated as structgen reads the pattern: a valid call
    passes, an invalid one is a located ToolCallError, not re.error."""
    ts = ToolSet([Tool.from_openai({"type": "function", "function": {"name": "t", "parameters": parameters}})])
    assert ts.parse(json.dumps({"name": "t", "arguments": good})) == [ToolCall("t", good)]
    with pytest.raises(ToolCallError) as exc:
        ts.parse(json.dumps({"name": "t", "arguments": bad}))
    assert exc.value.pointer == pointer


# --------------------------------------------------------------------------- dispatch


@dataclasses.dataclass
class Event:
    title: str
    at: tuple[int, int]
    where: Point | None = None


def plan(events: list[Event], unit: Unit, ratio: float, groups: dict[str, list[tuple[int, str]]],
         mode: Literal["fast", "slow"] = "fast", opts: Options | None = None, /) -> dict:
    """Plan a day.

    Args:
        events: Things to do.
        unit: Temperature unit.
    """
    return {"events": events, "unit": unit, "ratio": ratio, "groups": groups, "mode": mode, "opts": opts}


def test_dispatch_converts_to_python_types():
    ts = ToolSet.from_functions(plan)
    out = ts.dispatch({"name": "plan", "arguments": {
        "events": [{"title": "lunch", "at": [12, 30], "where": {"lat": 48.8, "lon": 2}}, {"title": "nap", "at": [14, 0]}],
        "unit": "fahrenheit", "ratio": 2, "groups": {"a": [[1, "x"], [2, "y"]]}, "opts": {"verbose": True}}})
    assert out["events"] == [Event("lunch", (12, 30), Point(48.8, 2.0)), Event("nap", (14, 0))]
    assert out["unit"] is Unit.FAHRENHEIT
    assert out["ratio"] == 2.0 and isinstance(out["ratio"], float)
    assert out["groups"] == {"a": [(1, "x"), (2, "y")]}
    assert out["mode"] == "fast" and out["opts"] == {"verbose": True}
    assert isinstance(out["events"][0].where.lon, float)
    assert ts["plan"].parameters["properties"]["events"]["description"] == "Things to do."


def test_dispatch_errors():
    ts = ToolSet.from_functions(plan)
    with pytest.raises(ToolCallError) as exc:  # validated first: the schema names the place
        ts.dispatch(ToolCall("plan", {"events": [{"title": "x", "at": [1]}], "unit": "celsius", "ratio": 1, "groups": {}}))
    assert (exc.value.tool, exc.value.argument, exc.value.pointer) == ("plan", "events", "/events/0/at")
    with pytest.raises(ToolError, match="no Python function"):
        ToolSet.from_openai([WEATHER]).dispatch({"name": "get_weather", "arguments": {"city": "x"}})
    raw = ToolSet([Tool.from_json_schema("echo", {"type": "object", "properties": {"v": {}}}, function=lambda **kw: kw)])
    assert raw.dispatch({"name": "echo", "arguments": {"v": [1, {"a": None}]}}) == {"v": [1, {"a": None}]}


# --------------------------------------------------------------------------- completion and imports


def test_shortest_completion_closes_a_truncated_call(two_tools, smollm2_compiler):
    c = two_tools.compile(smollm2_compiler, format=SMOLLM2, parallel=True)
    m = c.matcher()
    assert m.accept_string('<tool_call>[{"name":"web_search","arguments":{"query":"ca')
    tail = shortest_completion(m)
    assert tail == b'"}}]</tool_call>'
    text = '<tool_call>[{"name":"web_search","arguments":{"query":"ca' + tail.decode()
    assert two_tools.parse(text) == [ToolCall("web_search", {"query": "ca"})]
    assert shortest_completion(c.matcher()) is not None


def test_shortest_completion_in_a_recursive_grammar(byte_compiler):
    """Untyped arguments are any JSON value (a recursive rule): deep nesting closes in one pass."""
    ts = ToolSet([Tool.from_json_schema("f", {"type": "object", "properties": {"v": {}, "n": {"type": "integer"}},
                                              "required": ["v", "n"]})])
    c = ts.compile(byte_compiler, format=SMOLLM2)
    head = '<tool_call>[{"name":"f","arguments":{"v":' + '{"k":[' * 30 + '"abc'
    m = c.matcher()
    assert m.accept_string(head)
    tail = shortest_completion(m)
    assert tail == b'"' + b"]}" * 30 + b',"n":0}}]</tool_call>'
    assert ts.parse((head.encode() + tail).decode())[0].arguments["n"] == 0


def test_import_tools_stays_light():
    code = "import sys, structgen.tools; print([m for m in ('torch', 'transformers') if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --------------------------------------------------------------------------- the real model


@pytest.mark.model
def test_smollm2_calls_and_dispatches():
    pytest.importorskip("torch")
    from structgen.models import load_default

    model, tok = load_default()

    def get_weather(city: str, unit: Unit = Unit.CELSIUS) -> str:
        """Current weather for a city.

        Args:
            city: City name.
            unit: Temperature unit.
        """
        return f"{city}: 21 {unit.value}"

    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    import torch

    ts = ToolSet.from_functions(get_weather, add)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # one thread is faster for a 135M model on a shared CPU
    try:
        result = generate_tool_calls(ts, model, tok, "What is 12 plus 30? Use the add tool.", max_new_tokens=40)
    finally:
        torch.set_num_threads(threads)
    assert result.text.startswith("<tool_call>[") and result.text.endswith("]</tool_call>")
    assert result.calls and (result.complete or result.closed)
    value = ts.dispatch(result.calls[0])
    assert isinstance(value, (int, str))
