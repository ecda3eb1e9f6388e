"""Termination: shortest completions from compile time, budget-aware decoding, truncation flags."""
from __future__ import annotations

import json

import jsonschema
import numpy as np
import pytest

from structgen import GrammarCompiler, GrammarMatcher, MatcherError
from structgen.runtime.budget import TokenBudget
from structgen.index.token_index import DEAD, UNREACHABLE

from .conftest import toy_info
from .walks import budget_walk, random_walk, structural_tokens

# Schemas whose values can run long: free strings, nesting, recursion, arrays without bounds.
BUDGET_SCHEMAS = [
    {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                                      "tags": {"type": "array", "items": {"type": "string"}}},
     "required": ["name", "age", "tags"], "additionalProperties": False},
    {"type": "array", "items": {"type": "number"}, "minItems": 2},
    {"$defs": {"node": {"type": "object", "properties": {"v": {"type": "string"},
                                                        "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
                        "required": ["v", "kids"], "additionalProperties": False}}, "$ref": "#/$defs/node"},
    {"anyOf": [{"type": "string", "pattern": "^[a-z]+@[a-z]+\\.com$"}, {"enum": ["none", 1, None]}]},
    {"type": "object"},  # any members, any JSON values: recursive
    {"type": "string", "format": "date-time"},
]


@pytest.mark.parametrize("schema", BUDGET_SCHEMAS, ids=range(len(BUDGET_SCHEMAS)))
def test_budget_walks_always_complete_and_validate(smollm2_compiler, smollm2_info, schema):
    """Tight budgets on SmolLM2's vocabulary: from the shortest output's size up, every walk
    ends complete within max_new_tokens and validates; uniform sampling over allowed tokens
    (which picks long multi-byte tokens, opens strings and containers) never strands a walk."""
    compiled = smollm2_compiler.compile_json_schema(schema)
    index = compiled.index
    shortest = len(index.completion_tokens(index.initial))
    validator = jsonschema.validators.validator_for(schema)(schema)
    rng = np.random.default_rng(7)
    ended_by_budget = 0
    for extra in [0, 1, 2, 3, 5, 8, 13, 21]:
        for _ in range(3):
            out, terminated, used, matcher = budget_walk(compiled, smollm2_info, rng, shortest + extra)
            assert used <= shortest + extra
            assert matcher.is_completed(), f"budget {shortest + extra}: incomplete {out!r}"
            assert validator.is_valid(json.loads(out.decode("utf-8"))), out
            ended_by_budget += not terminated
    assert ended_by_budget, "no walk used its whole budget: the test did not exercise the limit"


def test_budget_too_small_for_the_grammar_is_refused(smollm2_compiler):
    compiled = smollm2_compiler.compile_json_schema(
        {"type": "object", "properties": {"a_long_property_name": {"type": "integer"}},
         "required": ["a_long_property_name"]})
    need = len(compiled.index.completion_tokens(compiled.index.initial))
    assert need > 1
    with pytest.raises(MatcherError, match=f"cannot hold .* raise max_new_tokens to at least {need}"):
        TokenBudget(compiled, need - 1)
    TokenBudget(compiled, need)
    for bad in (0, -3, 2.5, True):
        with pytest.raises(MatcherError, match="positive integer"):
            TokenBudget(compiled, bad)


def test_restrict_keeps_the_plan_when_the_bound_says_otherwise(monkeypatch):
    """The segmentation bound need not fall by one along its own plan (several stacks, ties):
    the plan's first token stays allowed whatever the bound says, and its rest still fits."""
    info = toy_info([b"xa", b"bc"])
    compiled = GrammarCompiler(info).compile_grammar('start: "xabc" | "xabd"')
    budget = TokenBudget(compiled, 2)
    assert [info.token_bytes[t] for t in budget.plan] == [b"xa", b"bc"]
    every = np.arange(len(info.token_bytes) - 1, dtype=np.int64)
    monkeypatch.setattr(compiled.index, "tokens_exceeding", lambda state, limit: every)
    m = GrammarMatcher(compiled)
    bitmask = np.full((1, 1 + len(info.token_bytes) // 32), -1, dtype=np.int32)
    m.fill_next_token_bitmask(bitmask)
    budget.restrict(m.state, bitmask)
    bits = np.unpackbits(bitmask[0].view(np.uint8), bitorder="little")
    assert np.flatnonzero(bits).tolist() == [budget.plan[0]]
    tok = budget.plan[0]
    assert m.accept_token(tok)
    monkeypatch.undo()
    budget.advance(tok, m.state, m.is_terminated())
    assert len(budget.plan) == 1 and budget.remaining == 1


def test_advance_refuses_a_token_outside_the_budget(smollm2_compiler, smollm2_info):
    compiled = smollm2_compiler.compile_json_schema({"type": "string"})
    budget = TokenBudget(compiled, 1)  # '""' is one token
    m = GrammarMatcher(compiled)
    quote = smollm2_info.token_bytes.index(b'"')
    assert m.accept_token(quote)  # allowed by the grammar, but the closing quote needs one more token
    with pytest.raises(MatcherError, match="no completion within the 0 tokens left"):
        budget.advance(quote, m.state, m.is_terminated())


# -- shortest completions: finite from every reachable state ------------------------------


@pytest.mark.parametrize("grammar", ["json", "json_compact"])
def test_every_rule_state_has_a_finite_completion(grammar, smollm2_compiler):
    compiled = smollm2_compiler.compile_builtin_json(whitespace="flexible" if grammar == "json" else "compact")
    for rule, dist in zip(compiled.automaton.rules, compiled.index.rule_distances()):
        assert (dist < UNREACHABLE).all(), f"rule {rule.name}: a state cannot reach the rule's end"


def test_shortest_completion_completes_from_walk_states(smollm2_compiler, smollm2_info):
    compiled = smollm2_compiler.compile_builtin_json()
    index = compiled.index
    rng = np.random.default_rng(3)
    checked = 0
    for _ in range(8):
        _, _, states = random_walk(GrammarMatcher(compiled), smollm2_info, rng, max_steps=60,
                                   preferred=structural_tokens(smollm2_info), stop_p=0.05)
        for s in states:
            text = index.shortest_completion(s)
            assert text is not None and len(text) == index.completion_length(s)
            assert index.is_accepting(index.step_bytes(s, text))
            checked += 1
    assert checked > 30
    assert index.completion_length(DEAD) is None and index.shortest_completion(DEAD) is None


def test_deep_nesting_completion_without_recursion(smollm2_compiler):
    """1,000 open containers (instance depth): the completion is computed iteratively."""
    compiled = smollm2_compiler.compile_builtin_json()
    m = GrammarMatcher(compiled)
    assert m.accept_string('{"a":[' * 500 + "[")
    text = compiled.index.shortest_completion(m.state)
    assert text == b"]" + b"]}" * 500
    assert len(compiled.index.completion_tokens(m.state)) <= len(text)


def test_budget_mask_counts_renames_of_repeated_names(smollm2_compiler, smollm2_info):
    """Over free member names, the grammar closes {"type":"object","minProperties":8} as
    {"":0,"":0,...}, and the distinct completion renames seven names, a token or more each:
    more than any fixed slack. The mask must measure each token whose grammar completion
    repeats a name by its distinct completion, or it allows a token (a lone ``{``) after
    which accept finds no completion within the budget."""
    compiled = smollm2_compiler.compile_json_schema({"type": "object", "minProperties": 8})
    assert compiled.free_names
    plan = TokenBudget(compiled, 1 << 20).plan
    grammar_plan = compiled.index.completion_tokens(compiled.index.initial)
    assert len(plan) > len(grammar_plan) + 3  # the renames cost more than a few tokens
    rng = np.random.default_rng(0)
    for extra in (0, 0, 1):
        out, _, used, matcher = budget_walk(compiled, smollm2_info, rng, len(plan) + extra)
        assert matcher.is_completed() and used <= len(plan) + extra, out
        value = json.loads(out.decode("utf-8"))
        assert len(value) >= 8 and out.count(b'":') == len(value), out
