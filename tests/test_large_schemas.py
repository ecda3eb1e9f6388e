"""Large schemas of many once-used parts: each large part is its own automaton rule, so
no single NFA or subset construction holds the whole schema, and ``max_states`` still
bounds every rule's NFA and the DFAs of all."""
from __future__ import annotations

import json

import jsonschema
import pytest

from structgen import AutomatonSizeError, GrammarCompiler
from structgen.index.automaton import SPLIT_LIMIT, RulePlan, build_automaton
from structgen.index.counters import lift_counters
from structgen.schema.to_grammar import schema_to_grammar
from tests.conftest import toy_info


def _protocol(n_defs: int, n_props: int) -> dict:
    """A root that names each of ``n_defs`` definitions once, each an object of ``n_props``
    optional string/integer/boolean members with long names (the shape of protocol schemas)."""
    defs = {f"D{i}": {"type": "object", "additionalProperties": False,
                      "properties": {f"member_{i}_{j}_with_a_long_name": {"type": ["string", "integer", "boolean"][j % 3]}
                                     for j in range(n_props)}}
            for i in range(n_defs)}
    return {"type": "object", "$defs": defs, "additionalProperties": False, "required": ["D0"],
            "properties": {f"D{i}": {"$ref": f"#/$defs/D{i}"} for i in range(n_defs)}}


def _accepts(compiled, text: str) -> bool:
    m = compiled.matcher()
    return m.accept_string(text) and m.is_completed()


def test_large_once_used_parts_are_called_not_inlined():
    grammar = schema_to_grammar(_protocol(60, 6))
    rules, _ = lift_counters(grammar.rules)
    plan = RulePlan(rules)
    plan.plan()
    assert plan.shared, "a schema past SPLIT_LIMIT must be split into called rules"
    pda = build_automaton(grammar)
    assert len(pda.rules) > 1 and pda.num_states <= 50_000


def test_large_protocol_schema_compiles_and_matches_exactly():
    schema = _protocol(60, 6)
    compiled = GrammarCompiler(toy_info([]), cache_size=0).compile_json_schema(schema)
    good = {"D0": {"member_0_0_with_a_long_name": "x", "member_0_1_with_a_long_name": 3},
            "D59": {"member_59_5_with_a_long_name": True}}
    bad = [{"D0": {"member_0_0_with_a_long_name": 3}}, {"D1": {}}, {"D0": {"member_1_0_with_a_long_name": "x"}},
           {"D0": {}, "D60": {}}]
    assert _accepts(compiled, json.dumps(good, separators=(",", ":")))
    for value in bad:
        assert not jsonschema.Draft202012Validator(schema).is_valid(value)
        assert not _accepts(compiled, json.dumps(value, separators=(",", ":")))


def test_split_rules_still_bounded_by_max_states():
    # the limit now bounds each rule's NFA and all DFAs together: a small limit still refuses
    with pytest.raises(AutomatonSizeError):
        GrammarCompiler(toy_info([]), cache_size=0, max_states=2_000).compile_json_schema(_protocol(60, 6))


def test_split_limit_leaves_small_schemas_inlined():
    grammar = schema_to_grammar(_protocol(2, 3))
    rules, _ = lift_counters(grammar.rules)
    plan = RulePlan(rules)
    plan.plan()
    assert SPLIT_LIMIT > 0 and plan.shared == set()
