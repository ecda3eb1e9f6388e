"""Member names are distinct within an object wherever the grammar leaves them free.

A context-free grammar cannot say "each name once"; the matcher tracks the decoded names
of each open object (structgen/runtime/names.py). Regression tests for each way a duplicate got
out: through the budget's shortest completion, through accept_token, through the mask,
through an escaped spelling of the same name, through forced bytes.
"""
from __future__ import annotations

import json

import jsonschema
import numpy as np
import pytest

from structgen import GrammarCompiler, GrammarMatcher, allocate_token_bitmask, schema_to_grammar
from structgen.runtime.budget import TokenBudget
from structgen.runtime.names import INITIAL, decode_name

from .conftest import toy_info
from .walks import budget_walk, random_walk

SPECIAL = [b'"a"', b'a"', b'b"', b'":', b',"', b'"a":1,"a"', b'"a":1,"b"', b'u0061"', b'\\u0061"', b'{"a":1,"a":']


@pytest.fixture(scope="module")
def info():
    return toy_info(SPECIAL)


@pytest.fixture(scope="module")
def compiler(info):
    return GrammarCompiler(info)


def _tok(info, data: bytes) -> int:
    return info.token_bytes.index(data)


def _pairs(text: str) -> list[list[str]]:
    """Member names of every object of a JSON text, in order (duplicates kept)."""
    out: list[list[str]] = []
    json.loads(text, object_pairs_hook=lambda kv: out.append([k for k, _ in kv]) or dict(kv))
    return out


def _distinct(text: str) -> bool:
    return all(len(set(names)) == len(names) for names in _pairs(text))


def test_duplicate_keys_min_properties_budget_close(compiler, info):
    """The budget closed {"type":"object","minProperties":3} with {"":0,"":0,"":0}: one
    member once parsed, invalid. The plan now uses distinct names."""
    schema = {"type": "object", "minProperties": 3}
    compiled = compiler.compile_json_schema(schema)
    budget = TokenBudget(compiled, 64)
    text = b"".join(info.token_bytes[t] for t in budget.plan).decode()
    assert _distinct(text), text
    jsonschema.validate(json.loads(text), schema)
    rng = np.random.default_rng(7)
    for extra in (0, 0, 1, 2, 3, 5):
        out, done, _, m = budget_walk(compiled, info, rng, len(budget.plan) + extra)
        assert m.is_completed()
        assert _distinct(out.decode()), out
        jsonschema.validate(json.loads(out), schema)


def test_duplicate_keys_budget_close_inside_a_name(compiler, info):
    """A budget ending while a used name is being written must not close it as is."""
    schema = {"type": "object", "minProperties": 2}
    compiled = compiler.compile_json_schema(schema)
    m = GrammarMatcher(compiled)
    budget = TokenBudget(compiled, 40)
    for t in (b"{", b'"a"', b":", b"1", b",", b'"', b"a"):
        bm = allocate_token_bitmask(1, info.vocab_size, backend="numpy")
        m.fill_next_token_bitmask(bm)
        budget.restrict(m.state, bm, names=m.name_state)
        tok = _tok(info, t)
        assert (bm[0, tok >> 5] >> (tok & 31)) & 1, t
        assert m.accept_token(tok)
        budget.advance(tok, m.state, m.is_terminated(), names=m.name_state)
    text = '{"a":1,"a' + b"".join(info.token_bytes[t] for t in budget.plan).decode()
    assert _distinct(text), text
    jsonschema.validate(json.loads(text), schema)


def test_duplicate_key_rejected_by_accept_token(compiler, info):
    compiled = compiler.compile_json_schema({"type": "object", "minProperties": 2})
    m = GrammarMatcher(compiled)
    assert m.accept_string('{"a":1,')
    state, names = m.state, m.name_state
    assert not m.accept_token(_tok(info, b'"a"'))
    assert (m.state, m.name_state) == (state, names)  # unchanged
    assert not m.accept_string('"a"')
    assert m.accept_token(_tok(info, b'"'))
    assert not m.accept_token(_tok(info, b'a"'))
    assert m.accept_token(_tok(info, b'b"'))
    assert m.accept_string(":2}")
    assert m.is_completed()


def test_duplicate_key_masked(compiler, info):
    compiled = compiler.compile_json_schema({"type": "object", "minProperties": 2})
    m = GrammarMatcher(compiled)
    assert m.accept_string('{"a":1,"')
    allowed = set(m.allowed_token_ids().tolist())
    assert _tok(info, b'a"') not in allowed
    assert _tok(info, b'b"') in allowed
    assert _tok(info, b'u0061"') in allowed  # the name "u0061"
    bm = allocate_token_bitmask(1, info.vocab_size, backend="numpy")
    m.fill_next_token_bitmask(bm)
    bits = np.unpackbits(bm[0].view(np.uint8), bitorder="little")[: info.vocab_size]
    assert set(np.flatnonzero(bits).tolist()) == allowed
    # every allowed token is accepted, every cleared one the grammar allows is a duplicate
    grammar = set(np.flatnonzero(compiled.index.allowed_tokens(m.state)).tolist())
    for t in grammar:
        assert m.fork().accept_token(t) == (t in allowed), info.token_bytes[t]


def test_duplicate_key_masked_in_multi_name_token(compiler, info):
    """One token holding two names of one object ({"a":1,"a":) is masked from the start."""
    compiled = compiler.compile_json_schema({"type": "object"})
    m = GrammarMatcher(compiled)
    assert _tok(info, b'{"a":1,"a":') not in set(m.allowed_token_ids().tolist())
    assert not m.accept_token(_tok(info, b'{"a":1,"a":'))
    assert m.accept_string("{")
    allowed = set(m.allowed_token_ids().tolist())
    assert _tok(info, b'"a":1,"a"') not in allowed
    assert _tok(info, b'"a":1,"b"') in allowed


def test_escaped_duplicate_name_rejected(compiler, info):
    """Names are compared decoded. Schema grammars write one encoding per character, JSON
    mode (the builtin grammar) any escape."""
    compiled = compiler.compile_builtin_json()
    for first, second in [('a', '\\u0061'), ('\\u0061', 'a'), ('\\ud83d\\ude00', '\U0001F600'),
                          ('\U0001F600', '\\ud83d\\ude00'), ('\\n', '\\u000a'), ('\\/', '/')]:
        m = GrammarMatcher(compiled)
        assert m.accept_string('{"%s":1,' % first)
        assert not m.accept_string('"%s"' % second), (first, second)
        assert m.accept_string('"%sx":2}' % second)
    m = GrammarMatcher(compiled)
    assert m.accept_string('{"a":1,"\\')
    allowed = set(m.allowed_token_ids().tolist())
    assert _tok(info, b'u0061"') not in allowed
    assert _tok(info, b'"a"') in allowed  # the name '"a'


def test_decode_name():
    assert decode_name(b"a\\u0062\\n") == b"ab\n"
    assert decode_name(b"\\ud83d\\ude00") == "\U0001F600".encode()
    assert decode_name(b"\\ud83d") is None  # its low half may follow
    assert decode_name(b"\\ud83dx") == "\ud83dx".encode("utf-8", "surrogatepass")
    assert decode_name(b"\\u00") is None
    assert decode_name(b"x\\") is None


def test_declared_name_not_repeated_through_free_branch(compiler):
    compiled = compiler.compile_json_schema(
        {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": True})
    for text in ('{"a":1,"a":2}', '{"a":1,"\\u0061":2}', '{"b":1,"a":2,"b":3}'):
        m = GrammarMatcher(compiled)
        assert not (m.accept_string(text) and m.is_completed()), text
    assert GrammarMatcher(compiled).accept_string('{"a":1,"b":{"a":2,"b":3}}')  # nested: other objects


def test_duplicate_key_rejected_in_json_mode(info):
    compiled = GrammarCompiler(info).compile_builtin_json()
    m = GrammarMatcher(compiled)
    assert m.accept_string('[{"a":1, "b" : [{"a":2}],')
    assert not m.accept_string(' "b"')
    assert m.accept_string(' "c" : 3}, {"a":4}]')
    assert m.is_completed()


def test_duplicate_key_not_forced(compiler):
    """Forced bytes stop before a name the object already has."""
    compiled = compiler.compile_json_schema(
        {"type": "object", "propertyNames": {"const": "ab"}, "additionalProperties": {"const": 1}})
    m = GrammarMatcher(compiled)
    assert m.accept_string('{"ab":1,')
    assert compiled.index.forced_bytes(m.state)[0] == b'"ab":1'
    assert m.find_forced_bytes() == b'"ab'
    assert not m.accept_string(m.find_forced_bytes() + b'"')


def test_rollback_and_fork_keep_names(compiler, info):
    compiled = compiler.compile_json_schema({"type": "object"})
    m = GrammarMatcher(compiled, max_rollback_tokens=8)
    for t in (b"{", b'"a"', b":", b"1", b",", b'"', b"b", b'"', b":"):
        assert m.accept_token(_tok(info, t))
    f = m.fork()
    m.rollback(4)  # back to {"a":1,
    assert not m.accept_string('"a"')
    assert m.accept_string('"b"')  # "b" was rolled back
    assert not f.accept_string('2,"a"')  # the fork kept its own names ({"a","b"})
    assert f.accept_string('2,"c":3}')
    assert not f.accept_token(_tok(info, b'"a"'))  # terminated object: only EOS now
    m.reset()
    assert m.name_state is INITIAL and m.accept_string('{"a":1}')


def test_fixed_names_not_tracked(compiler):
    """Objects whose names the grammar fixes need no tracking: no work at all per token."""
    compiled = compiler.compile_json_schema(
        {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": False})
    assert not compiled.free_names
    assert GrammarMatcher(compiled).name_state is None
    lark = compiler.compile_grammar('start: "{" "}"')
    assert not lark.free_names


@pytest.mark.parametrize("schema", [
    {"type": "object", "minProperties": 2},
    {"type": "object", "minProperties": 3, "maxProperties": 3, "propertyNames": {"maxLength": 1}},
    {"type": "object", "patternProperties": {"^x": {"type": "integer"}}, "minProperties": 2},
    {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"], "minProperties": 3},
    {"type": "array", "items": {"type": "object", "minProperties": 2}, "minItems": 2},
])
def test_duplicate_key_walks_distinct(compiler, info, schema):
    compiled = compiler.compile_json_schema(schema)
    rng = np.random.default_rng(11)
    plan = TokenBudget(compiled, 1 << 20).plan
    outs = []
    for _ in range(6):
        out, done, _ = random_walk(GrammarMatcher(compiled), info, rng, max_steps=200, stop_p=0.6)
        if done:
            outs.append(out)
    for extra in (0, 2, 5):
        out, _, _, _ = budget_walk(compiled, info, rng, len(plan) + extra)
        outs.append(out)
    for out in outs:
        assert _distinct(out.decode()), out
        jsonschema.validate(json.loads(out), schema)


def test_name_state_initial_is_outside():
    assert INITIAL.feed(b'{"a":1}').stack == ()
    assert INITIAL.feed(b'{"a":1,"a"') is None
    assert INITIAL.feed(b'{"a":{"a":1},"b":"a\\"}') is not None


def test_duplicate_keys_processor_budget_mode():
    """The HF logits processor (budget mode) goes through the matcher's name tracking:
    rows driven by random logits under minProperties end with distinct names."""
    torch = pytest.importorskip("torch")
    from structgen.integrations.hf import GrammarLogitsProcessor

    from .test_processor import _texts, fake_generate

    info = toy_info([b'{"', b'":', b'"}', b'",', b'":0,"', b'a', b'b'], vocab_size=300)
    schema = {"type": "object", "minProperties": 3, "additionalProperties": {"type": "integer"}}
    compiled = GrammarCompiler(info).compile_json_schema(schema)
    plan = TokenBudget(compiled, 1 << 20).plan
    for seed, extra in ((0, 0), (1, 2), (2, 6)):
        proc = GrammarLogitsProcessor(compiled, max_new_tokens=len(plan) + extra)
        ids = fake_generate(proc, info, batch=4, max_new_tokens=len(plan) + extra, seed=seed)
        proc.finish(ids)
        assert all(proc.completed)  # budget mode: every row complete
        for text in _texts(ids, info):
            assert _distinct(text), text
            jsonschema.validate(json.loads(text), schema)
    del torch


def test_duplicate_key_trap_masked():
    """Tokens after which a name can only end as a repeat are masked (no dead end). With
    names of at most one character: `":1,"a` after `{"a` ends "a" and starts "a" again;
    `,"a` after `{"a":1` starts "a" again; `a` after `{"a":1,"` too."""
    info = toy_info([b'":1,"a', b',"a', b'a'])
    compiled = GrammarCompiler(info).compile_json_schema(
        {"type": "object", "minProperties": 3, "propertyNames": {"maxLength": 1}})
    m = GrammarMatcher(compiled)
    assert m.accept_string('{"a')
    assert _tok(info, b'":1,"a') not in set(m.allowed_token_ids().tolist())
    assert m.accept_string('":1')
    allowed = set(m.allowed_token_ids().tolist())
    assert _tok(info, b',"a') not in allowed
    assert _tok(info, b",") in allowed
    assert m.accept_string(',"')
    assert _tok(info, b"a") not in set(m.allowed_token_ids().tolist())
    assert _tok(info, b"b") in set(m.allowed_token_ids().tolist())


def test_duplicate_key_trap_masked_through_a_longer_token():
    """A token that starts a written name again is found through the written name's prefixes
    even where no token ends on a shorter one: `,"ab` after `{"ab":1` (no token spells `"a`
    after its last quote) with names of at most two characters, and `b` after `,"a`."""
    info = toy_info([b',"ab', b',"cd'])
    compiled = GrammarCompiler(info).compile_json_schema(
        {"type": "object", "minProperties": 3, "propertyNames": {"maxLength": 2}})
    m = GrammarMatcher(compiled)
    assert m.accept_string('{"ab":1')
    allowed = set(m.allowed_token_ids().tolist())
    assert _tok(info, b',"ab') not in allowed
    assert _tok(info, b',"cd') in allowed and _tok(info, b",") in allowed
    assert m.accept_string(',"a')
    allowed = set(m.allowed_token_ids().tolist())
    assert _tok(info, b"b") not in allowed and _tok(info, b"c") in allowed


def test_duplicate_key_trap_masked_where_no_token_closes_the_name():
    """Inside a name whose mask holds no quote token (names of exactly three characters,
    `,"ab` written after `{"abc":1`), a plain token that can only end the name as a repeat is
    still cleared: `c`, while `d` stays."""
    info = toy_info([b',"ab'])
    compiled = GrammarCompiler(info).compile_json_schema(
        {"type": "object", "minProperties": 3, "propertyNames": {"minLength": 3, "maxLength": 3}})
    m = GrammarMatcher(compiled)
    assert m.accept_string('{"abc":1,"ab')
    allowed = set(m.allowed_token_ids().tolist())
    assert not any(b'"' in info.token_bytes[t] for t in allowed)
    assert _tok(info, b"c") not in allowed and _tok(info, b"d") in allowed


def test_no_dead_end_after_a_comma_when_only_written_names_are_left(compiler, info):
    """MaskBench Handwritten---dep4: members come in schema order, undeclared ones after the
    names the dependencies track; with "c", "d" and then "e" written, the grammar's next
    name can only be "e", a repeat. The comma must be cleared (the object can close), or
    the walk after it meets an empty mask. (``dependencies`` is a draft-07 keyword: named.)"""
    schema = {"$schema": "http://json-schema.org/draft-07/schema#",
              "type": "object", "patternProperties": {"^[a-e]$": True}, "additionalProperties": False,
              "allOf": [{"dependencies": {"a": {"anyOf": [{"required": ["b"]}, {"required": ["c"]}]},
                                          "b": {"not": {"required": ["a"]}}, "c": {"not": {"required": ["a"]}}}},
                        {"required": ["d"]}], "minProperties": 2}
    compiled = compiler.compile_json_schema(schema)
    assert compiled.free_names
    m = GrammarMatcher(compiled)
    assert m.accept_string('{"c":1,"d":1,"e":1')
    allowed = set(m.allowed_token_ids().tolist())
    assert _tok(info, b",") not in allowed and _tok(info, b'"') not in allowed
    assert _tok(info, b"}") in allowed
    m = GrammarMatcher(compiled)
    assert m.accept_string('{"c":1,"d":1')
    assert _tok(info, b",") in set(m.allowed_token_ids().tolist())  # "e" is still free here
    rng = np.random.default_rng(3)
    for _ in range(30):
        out, done, _ = random_walk(GrammarMatcher(compiled), info, rng, max_steps=200, stop_p=0.5)
        if done:
            assert _distinct(out.decode("utf-8")), out


@pytest.mark.parametrize("schema, traps", [
    ({"type": "object", "properties": {"a": {}}}, False),  # declared in order, any other name after
    ({"type": "array", "items": {"type": "object", "additionalProperties": {"type": "string"}}}, False),
    ({"type": "object", "patternProperties": {"^\\d+$": {"type": "integer"}}}, False),  # every class kept
    ({}, False),  # any JSON value: objects take any names
    ({"type": "object", "propertyNames": {"maxLength": 2}}, True),
    ({"type": "object", "patternProperties": {"^x": {}}, "additionalProperties": False}, True),  # the rest dropped
    ({"type": "object", "properties": {"o": {"type": "object", "propertyNames": {"enum": ["a", "b"]}}}}, True),
])
def test_names_can_trap_only_where_an_object_limits_its_other_names(schema, traps):
    """Without a limit on the undeclared names (or without undeclared names), no name half
    written runs out of fresh endings: the matchers clear only repeats. (The reference
    comparison in test_names_reference runs its dead-end clears on such grammars too, and
    they take nothing there.)"""
    grammar = schema_to_grammar(schema)
    assert grammar.free_names and grammar.names_can_trap is traps
