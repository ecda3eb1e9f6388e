"""How an object's first member is laid out in the grammar, and that the layout keeps the language.

An undeclared member where no member came before is an alternative of the declared names'
literals: it is written out in the same rule rather than called, so a first member name's
start is one stack in one rule automaton, the literals and the undeclared name determinised
together. (Called, the start was two stacks walked in step, and its first-visit fill made a
configuration per prefix of each.) The language checks compare the matcher with
``jsonschema`` on every subset of the declared members, written in declared order (the order
structgen writes), with and without undeclared members after them, on both layouts of an
object body (a chain of rules per position when more than two optional members lead, else
alternatives written out).
"""
from __future__ import annotations

import itertools
import json

import jsonschema
import pytest

from structgen import GrammarCompiler, GrammarMatcher

from .conftest import toy_info

NAMES = ["alpha", "alps", "beta", "bet", "gamma", "delta"]


@pytest.fixture(scope="module")
def compiler() -> GrammarCompiler:
    return GrammarCompiler(toy_info([]), cache_size=0)


def _schema(required: list[str], additional) -> dict:
    return {"type": "object", "properties": {n: {"type": "integer"} for n in NAMES},
            "required": required, "additionalProperties": additional}


def _instances() -> list[str]:
    out = []
    for r in range(len(NAMES) + 1):
        for members in itertools.combinations(NAMES, r):
            body = [f'"{n}":{i}' for i, n in enumerate(members)]
            out.append("{" + ",".join(body) + "}")
            # undeclared members after the declared ones (a prefix of a declared name, a name
            # with a declared prefix, a fresh one)
            out.append("{" + ",".join(body + ['"alp":"x"', '"betas":2', '"z":null']) + "}")
    return out


def _accepts(compiled, text: str) -> bool:
    m = GrammarMatcher(compiled)
    return m.accept_string(text) and m.is_completed()


@pytest.mark.parametrize("additional", [True, False, {"type": "string"}])
@pytest.mark.parametrize("required", [[], ["gamma"], ["delta"], ["beta"], ["alpha", "delta"], ["alps", "bet", "gamma"], NAMES])
def test_members_in_declared_order_match_jsonschema(compiler, required, additional):
    schema = _schema(required, additional)
    compiled = compiler.compile_json_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for text in _instances():
        assert _accepts(compiled, text) == validator.is_valid(json.loads(text)), text


def _stacks_at(compiled, prefix: str) -> int:
    m = GrammarMatcher(compiled)
    assert m.accept_string(prefix)
    return len(compiled.index.config_stacks(m.state))


# [] and ["gamma"]: a chain of rules (an undeclared member may come first with []);
# ["beta"]: alternatives written out
@pytest.mark.parametrize("required", [[], ["gamma"], ["beta"]])
# (values large enough that the undeclared member's rule is called where it is shared)
@pytest.mark.parametrize("additional", [{"type": "string", "format": "date-time"},
                                        {"type": "array", "items": {"type": "string", "format": "uri"}}])
def test_a_first_member_name_start_is_one_stack(compiler, required, additional):
    compiled = compiler.compile_json_schema(_schema(required, additional))
    assert _stacks_at(compiled, '{"') == 1
    assert _stacks_at(compiled, '{"alp') == 1
    if not required:  # (an undeclared member may come first)
        assert _stacks_at(compiled, '{"zeta') == 1

