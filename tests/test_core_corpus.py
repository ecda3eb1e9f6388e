"""The core JSON Schema subset on SmolLM2's real 49K vocabulary, case by case.

For each schema of tests/data/core_schemas.json (real-world schemas from JSONSchemaBench's
MaskBench and BFCL, plus handwritten edge cases):
(a) completeness: every valid instance, written canonically, is accepted token by token
    (with SmolLM2's own tokenization) and then accepts EOS;
(b) soundness: seeded random walks over allowed tokens end in JSON that jsonschema accepts;
(c) invalid instances are rejected;
(d) the fast mask equals a per-token reference on states the walks visited.
"""
from __future__ import annotations

import json
import zlib

import jsonschema
import numpy as np
import pytest

from structgen import GrammarMatcher
from structgen.schema.canonical import canonical_json
from structgen.index.token_index import DEAD

from .conftest import DATA
from .walks import random_walk, structural_tokens

CASES = json.loads((DATA / "core_schemas.json").read_text(encoding="utf-8"))
SUPPORTED = CASES  # every case compiles in strict mode (refusals are tested in test_schema_errors.py)


def _validator(schema):
    return jsonschema.validators.validator_for(schema)(schema)


@pytest.mark.parametrize("case", SUPPORTED, ids=[c["name"] for c in SUPPORTED])
def test_valid_instances_accepted(case, smollm2_compiler, smollm2_tokenizer, smollm2_info):
    compiled = smollm2_compiler.compile_json_schema(case["schema"])
    m = GrammarMatcher(compiled)
    for value in case["valid"]:
        text = canonical_json(value, case["schema"])
        m.reset()
        ids = smollm2_tokenizer.encode(text, add_special_tokens=False)
        for i, t in enumerate(ids):
            assert m.accept_token(t), f"token {i} ({smollm2_tokenizer.decode([t])!r}) of {text!r} rejected"
        assert m.is_completed(), f"{text!r} not complete"
        assert m.accept_token(smollm2_info.stop_token_ids[0])
        assert m.is_terminated()


@pytest.mark.parametrize("case", SUPPORTED, ids=[c["name"] for c in SUPPORTED])
def test_invalid_instances_rejected(case, smollm2_compiler):
    compiled = smollm2_compiler.compile_json_schema(case["schema"])
    m = GrammarMatcher(compiled)
    for value in case["invalid"]:
        for text in {canonical_json(value, case["schema"]), json.dumps(value, ensure_ascii=False, separators=(",", ":"))}:
            m.reset()
            assert not (m.accept_string(text) and m.is_completed()), f"invalid {text!r} accepted"


@pytest.mark.parametrize("case", SUPPORTED, ids=[c["name"] for c in SUPPORTED])
def test_random_walks_validate(case, smollm2_compiler, smollm2_info):
    compiled = smollm2_compiler.compile_json_schema(case["schema"])
    validator = _validator(case["schema"])
    rng = np.random.default_rng(zlib.crc32(case["name"].encode()))
    preferred = structural_tokens(smollm2_info)
    finished = 0
    for _ in range(12):
        out, done, _ = random_walk(GrammarMatcher(compiled), smollm2_info, rng, preferred=preferred)
        if done:
            finished += 1
            value = json.loads(out.decode("utf-8"))
            errors = [e.message for e in validator.iter_errors(value)]
            assert not errors, f"walk produced invalid {out!r}: {errors[:3]}"
    assert finished >= 3, "walks rarely terminate: the test lost its power"


@pytest.mark.parametrize("case", SUPPORTED[::5], ids=[c["name"] for c in SUPPORTED[::5]])
def test_fast_mask_equals_reference(case, smollm2_compiler, smollm2_info):
    compiled = smollm2_compiler.compile_json_schema(case["schema"])
    index = compiled.index
    rng = np.random.default_rng(7)
    _, _, states = random_walk(GrammarMatcher(compiled), smollm2_info, rng, preferred=structural_tokens(smollm2_info))
    stops = set(smollm2_info.stop_token_ids)
    for state in rng.choice(states, size=min(3, len(states)), replace=False).tolist():
        fast = index.allowed_tokens(state)
        ref = np.zeros_like(fast)
        for t in range(len(smollm2_info.token_bytes)):
            if t in stops:
                ref[t] = index.is_accepting(state)
            else:
                ref[t] = index.step_token(state, t) != DEAD
        diff = np.flatnonzero(fast != ref)
        assert len(diff) == 0, f"mask differs on tokens {diff[:10].tolist()}"
