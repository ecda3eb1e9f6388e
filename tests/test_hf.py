"""The transformers logits processor on the real SmolLM2-135M-Instruct model (CPU)."""
from __future__ import annotations

import json

import jsonschema
import pytest

torch = pytest.importorskip("torch")

from structgen import MatcherError  # noqa: E402
from structgen.integrations.hf_generate import chat_inputs, generate_json  # noqa: E402
from structgen.integrations.hf import GrammarLogitsProcessor, JSONSchemaLogitsProcessor, compiler_for  # noqa: E402

from .model_schemas import SCHEMAS  # shared with the vLLM test

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def model_and_tokenizer():
    from structgen.models import load_default

    return load_default()


@pytest.mark.parametrize("prompt,schema", SCHEMAS, ids=[f"schema{i}" for i in range(len(SCHEMAS))])
def test_greedy_generate_validates(model_and_tokenizer, prompt, schema):
    model, tok = model_and_tokenizer
    result = generate_json(model, tok, prompt, schema, max_new_tokens=64)
    assert result.complete, f"truncated: {result.text!r}"
    jsonschema.validate(json.loads(result.text), schema)


def test_batch_sampling_with_one_grammar_per_row(model_and_tokenizer):
    model, tok = model_and_tokenizer
    compiler = compiler_for(tok)
    grammars = [compiler.compile_json_schema(s) for _, s in SCHEMAS[:2]]
    tok.padding_side = "left"
    msgs = [[{"role": "user", "content": p}] for p, _ in SCHEMAS[:2]]
    inputs = tok.apply_chat_template(msgs, add_generation_prompt=True, return_tensors="pt", return_dict=True, padding=True)
    proc = GrammarLogitsProcessor(grammars)
    torch.manual_seed(0)
    out = model.generate(**inputs, logits_processor=[proc], max_new_tokens=48, do_sample=True, temperature=1.3,
                         pad_token_id=tok.eos_token_id)
    for row, (_, schema) in enumerate(SCHEMAS[:2]):
        new = out[row, inputs["input_ids"].shape[1]:].tolist()
        m = grammars[row].matcher()
        body = []
        for t in new:
            if m.is_terminated():
                break
            assert m.accept_token(t)
            if not m.is_terminated():
                body.append(t)
        if m.is_completed():
            jsonschema.validate(json.loads(tok.decode(body)), schema)


def test_processor_errors_are_clear(model_and_tokenizer):
    _, tok = model_and_tokenizer
    proc = JSONSchemaLogitsProcessor({"type": "integer"}, tok)
    ids = torch.zeros((2, 3), dtype=torch.long)
    with pytest.raises(MatcherError, match="logits have 100 columns"):
        proc(ids, torch.zeros((2, 100)))
    proc.reset()
    scores = torch.zeros((2, len(tok) + 64))  # a padded vocabulary is fine
    out = proc(ids, scores.clone())
    assert torch.isinf(out[:, len(tok):]).all()
    allowed = (~torch.isinf(out[0])).nonzero().flatten().tolist()
    assert allowed and all(tok.decode([t])[:1] in "-0123456789" for t in allowed)
    digit = next(t for t in allowed if tok.decode([t]) == "7")
    with pytest.raises(MatcherError, match="batch changed from 2 to 3"):
        proc(torch.full((3, 4), digit), torch.zeros((3, len(tok) + 64)))


def test_chat_inputs_uses_template(model_and_tokenizer):
    _, tok = model_and_tokenizer
    ids = chat_inputs(tok, "hi")["input_ids"][0].tolist()
    assert "<|im_start|>" in tok.decode(ids)


@pytest.mark.parametrize("prompt,schema", SCHEMAS[:4], ids=[f"schema{i}" for i in range(4)])
def test_budget_mode_completes_under_tight_budgets(model_and_tokenizer, prompt, schema):
    """With budget=True the value is complete and valid however tight the budget;
    without it, the same limit leaves it truncated and says so."""
    model, tok = model_and_tokenizer
    index = compiler_for(tok).compile_json_schema(schema).index
    shortest = len(index.completion_tokens(index.initial))
    torch.manual_seed(0)
    for budget in (shortest, shortest + 3):
        result = generate_json(model, tok, prompt, schema, max_new_tokens=budget, budget=True,
                               do_sample=True, temperature=1.5)
        assert result.complete and result.new_tokens <= budget, result
        jsonschema.validate(json.loads(result.text), schema)
    cut = generate_json(model, tok, prompt, schema, max_new_tokens=max(1, shortest // 2))
    assert cut.truncated and not cut.complete, cut
