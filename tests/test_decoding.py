"""Fast-forward decoding: forced bytes, canonical boundary-safe forced tokens, the decoding
loop (``structgen.generate``) on SmolLM2, batches, streaming, and speculative decoding."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from structgen import GrammarCompiler
from structgen.runtime.fast_forward import ForcedTokenPlanner, hf_encoder

from .conftest import toy_info

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "schemas"

INT_OBJECT = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"],
              "additionalProperties": False}


# --------------------------------------------------------------------------- the API


def test_generate_is_the_decoding_function_and_imports_without_torch():
    code = (
        "import sys, types, structgen\n"
        "from structgen.integrations.hf_generate import generate_json, chat_inputs, generate_tool_calls\n"
        "from structgen.integrations import decoding\n"
        "assert structgen.generate is decoding.generate and isinstance(structgen.generate, types.FunctionType)\n"
        "sys.exit(1 if 'torch' in sys.modules else 0)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True,
                          cwd=Path(__file__).resolve().parents[1])
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_generate_wants_exactly_one_grammar():
    pytest.importorskip("torch")
    import structgen
    from structgen.integrations.decoding import DecodingError

    with pytest.raises(DecodingError, match="exactly one"):
        structgen.generate(None, None, "hi", schema={}, grammar="start: \"a\"")
    with pytest.raises(DecodingError, match="exactly one"):
        structgen.generate(None, None, "hi")


# --------------------------------------------------------------------------- forced bytes


def test_forced_bytes_stop_at_a_choice_and_at_a_complete_value():
    compiled = GrammarCompiler(toy_info([])).compile_json_schema(INT_OBJECT)
    m = compiled.matcher()
    assert m.find_forced_bytes() == b'{"n":'
    assert m.accept_string(b'{"n":')
    assert m.find_forced_bytes() == b""  # a digit or "-": the model chooses
    assert m.accept_string(b"12")
    assert m.find_forced_bytes() == b""  # more digits or "}"
    assert m.accept_string(b"}")
    assert m.is_completed() and m.find_forced_bytes() == b""  # complete: EOS is a choice


def test_forced_bytes_are_memoised_and_forced_string_cuts_partial_characters():
    compiled = GrammarCompiler(toy_info([])).compile_json_schema({"const": "é!"})
    m = compiled.matcher()
    assert m.find_forced_bytes() == '"é!"'.encode()
    assert compiled.index.forced_bytes(m.state) is compiled.index.forced_bytes(m.state)
    assert m.accept_string(b'"\xc3')
    assert m.find_forced_bytes() == b'\xa9!"'
    assert m.forced_string() == ""  # starts inside a character
    m.rollback(1)
    assert m.accept_string(b'"')
    assert m.forced_string() == 'é!"'
    assert m.accept_string('é!"') and m.is_completed()


# --------------------------------------------------------------------------- toy planner


def _greedy_encoder(info):
    """Longest-match encoding over a toy vocabulary (a stand-in for a real tokenizer)."""
    vocab = {b: i for i, b in enumerate(info.token_bytes) if b and i not in info.stop_token_ids}

    def encode(texts):
        out = []
        for text in texts:
            data, ids, i = text.encode(), [], 0
            while i < len(data):
                j = max(j for j in range(i + 1, len(data) + 1) if data[i:j] in vocab)
                ids.append(vocab[data[i:j]])
                i = j
            out.append(ids)
        return out

    return encode


@pytest.mark.parametrize("extra,planned", [
    ([], [b'{"', b"n", b'":']),  # nothing can merge with what follows: everything is forced
    ([b'":1'], [b'{"', b"n"]),  # '":' + a digit is one token: the model picks that boundary
])
def test_toy_planner_holds_back_tokens_that_could_merge(extra, planned):
    info = toy_info([b'{"', b"n", b'":'] + extra)
    compiled = GrammarCompiler(info).compile_json_schema(INT_OBJECT)
    planner = ForcedTokenPlanner(compiled, _greedy_encoder(info))
    m = compiled.matcher()
    plan = planner.plan(m)
    assert [info.token_bytes[t] for t in plan] == planned
    for t in plan:
        assert m.accept_token(t)
    assert planner.plan(m) == ()  # what is left ('":' or nothing) is the model's choice
    assert planner.plan(compiled.matcher()) is plan  # memoised per configuration


def test_planner_refuses_an_encoder_that_rewrites_text():
    info = toy_info([b'{"', b"n", b'":', b" {"])
    compiled = GrammarCompiler(info).compile_json_schema(INT_OBJECT)
    vocab = {b: i for i, b in enumerate(info.token_bytes) if b}
    # a SentencePiece-like dummy prefix: the tokens spell " {..." not "{..."
    planner = ForcedTokenPlanner(compiled, lambda texts: [[vocab[b" {"], vocab[b'"']] for _ in texts])
    assert planner.plan(compiled.matcher()) == ()


# --------------------------------------------------------------------------- SmolLM2 tokenizer

# Valid documents whose every position is visited: wherever the grammar forces text, the
# planned tokens must be how the tokenizer encodes the rest of the document (whatever it is).
DOCUMENTS = [
    ("weather_call.json", [
        {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius", "days": 3}},
        {"name": "get_weather", "arguments": {"city": ".Rio's", "unit": "fahrenheit"}},
        {"name": "get_weather", "arguments": {"city": "  São Paulo 2", "unit": "celsius", "days": 7}},
    ]),
    ("person.json", [
        {"name": "Zoë", "age": 41, "email": "z.o@ex.fr", "languages": ["French", "English"]},
        {"name": "\"Al\"", "age": 0, "languages": []},
        {"name": "東京 x", "age": 130, "email": "a_b@c.io"},
    ]),
    ("todo_list.json", [
        {"title": "", "items": [{"task": "buy milk", "done": False, "priority": "high"}]},
        {"title": "'re", "items": [{"task": ",", "done": True}, {"task": "1", "done": False, "priority": "low"}]},
    ]),
]


@pytest.mark.parametrize("name,documents", DOCUMENTS, ids=[n for n, _ in DOCUMENTS])
def test_smollm2_plans_are_canonical_and_boundary_safe(smollm2_tokenizer, smollm2_compiler, name, documents):
    schema = json.loads((EXAMPLES / name).read_text())
    compiled = smollm2_compiler.compile_json_schema(schema)
    encode = hf_encoder(smollm2_tokenizer)
    planner = ForcedTokenPlanner(compiled, encode)
    planned = held_back = 0
    for doc in documents:
        jsonschema.validate(doc, schema)
        text = json.dumps(doc, separators=(",", ":"), ensure_ascii=False)
        data = text.encode()
        for i in range(len(data)):
            m = compiled.matcher()
            assert m.accept_string(data[:i])
            plan = planner.plan(m)
            if not plan:
                continue
            rest = data[i:].decode("utf-8")
            canonical = encode([rest])[0]
            assert list(plan) == canonical[: len(plan)], (doc, data[:i])
            planned += 1
            forced = m.find_forced_bytes().decode("utf-8", "ignore")
            held_back += len(encode([forced])[0]) > len(plan)
            for t in plan:
                assert m.accept_token(t)
    assert planned and held_back  # both rules were exercised


# --------------------------------------------------------------------------- the model


@pytest.fixture(scope="module")
def model_and_tokenizer():
    pytest.importorskip("torch")
    from structgen.models import load_default

    return load_default()


def _schema(name):
    return json.loads((EXAMPLES / name).read_text())


CASES = [
    ("What's the weather in Paris in celsius for 3 days? Answer with a get_weather call.", "weather_call.json"),
    ("Describe a French engineer called Ana, 34 years old, as JSON.", "person.json"),
]


def _check_accounting(r, passes=None):
    assert r.sampled_tokens + r.forced_tokens == r.total_tokens == len(r.token_ids)
    # one pass per choice (the prompt pass makes the first), none for forced tokens
    assert r.forward_passes == (r.sampled_tokens if passes is None else passes)


@pytest.mark.model
@pytest.mark.parametrize("prompt,name", CASES, ids=[n for _, n in CASES])
def test_fast_forward_outputs_validate_with_fewer_passes(model_and_tokenizer, prompt, name):
    import structgen

    model, tok = model_and_tokenizer
    schema = _schema(name)
    r = structgen.generate(model, tok, prompt, schema=schema, max_new_tokens=60)
    assert r.status == "complete", r.text
    jsonschema.validate(r.value, schema)
    assert r.value == json.loads(r.text)
    _check_accounting(r)
    assert r.forced_tokens > 0 and r.forward_passes < r.total_tokens
    assert r.ttft > 0 and r.tpot > 0


@pytest.mark.model
def test_token_by_token_loop_matches_model_generate(model_and_tokenizer):
    import structgen
    from structgen.integrations.hf_generate import generate_json

    model, tok = model_and_tokenizer
    prompt, name = CASES[0]
    r = structgen.generate(model, tok, prompt, schema=_schema(name), max_new_tokens=60, fast_forward=False)
    ref = generate_json(model, tok, prompt, _schema(name), max_new_tokens=60)
    assert r.forced_tokens == 0 and r.forward_passes == r.sampled_tokens
    assert r.text == ref.text  # same greedy choices: our loop and its KV cache are sound


@pytest.mark.model
def test_budget_hit_is_truncated_never_complete(model_and_tokenizer):
    import structgen

    model, tok = model_and_tokenizer
    prompt, name = CASES[0]
    r = structgen.generate(model, tok, prompt, schema=_schema(name), max_new_tokens=14)
    assert r.status == "truncated" and r.value is None
    assert len(r.token_ids) == 14
    m = GrammarCompiler(structgen.TokenizerInfo.from_huggingface(tok)).compile_json_schema(_schema(name)).matcher()
    assert all(m.accept_token(t) for t in r.token_ids) and not m.is_completed()


@pytest.mark.model
def test_batch_rows_match_single_runs_and_stream_yields_the_same_text(model_and_tokenizer):
    import structgen

    model, tok = model_and_tokenizer
    schema = _schema("weather_call.json")
    prompts = ["Weather in Rome, in fahrenheit?", CASES[0][0]]
    batch = structgen.generate(model, tok, prompts, schema=schema, max_new_tokens=40)
    stream = structgen.generate(model, tok, prompts, schema=schema, max_new_tokens=40, stream=True)
    pieces = {0: "", 1: ""}
    for row, piece in stream:
        pieces[row] += piece
    for row, prompt in enumerate(prompts):
        single = structgen.generate(model, tok, prompt, schema=schema, max_new_tokens=40)
        assert batch[row].token_ids == single.token_ids  # padding never leaks into a row
        assert pieces[row] == batch[row].text == stream.results[row].text
        jsonschema.validate(batch[row].value, schema)
        _check_accounting(batch[row], passes=max(b.sampled_tokens for b in batch))


@pytest.mark.model
def test_tools_value_is_the_parsed_calls(model_and_tokenizer):
    import structgen
    from structgen.tools import ToolSet

    model, tok = model_and_tokenizer
    tools = ToolSet.from_catalogue("get_weather", "web_search")
    r = structgen.generate(model, tok, "What is the weather in Oslo?", tools=tools, max_new_tokens=60)
    assert r.status == "complete", r.text
    assert r.value and r.value[0].name in tools
    assert r.forced_tokens > 0


# --------------------------------------------------------------------------- speculative


def _masked_argmax(logits, matcher):
    import torch

    from structgen import allocate_token_bitmask, apply_token_bitmask_inplace

    mask = allocate_token_bitmask(1, logits.shape[-1])
    matcher.fill_next_token_bitmask(mask, 0)
    logits = logits[None].clone()
    apply_token_bitmask_inplace(logits, mask)
    return logits, int(torch.argmax(logits))


def _speculate(model, prompt_ids, compiled, *, k, max_new_tokens, temperature, seed):
    """Draft: the model sampling hot under the grammar; target: the same model, greedy.

    Returns the output tokens and how many drafts were accepted and rejected.
    """
    import torch

    gen = torch.Generator().manual_seed(seed)
    matcher = compiled.matcher()  # the committed output
    draft = compiled.matcher()  # runs ahead, rolled back to the committed output every round
    out, accepted, rejected = [], 0, 0

    def logits_of(ids, keep):  # no KV cache: simple, and a few dozen short passes
        with torch.no_grad():
            return model(input_ids=torch.tensor([prompt_ids + ids]), logits_to_keep=keep).logits[0]

    while not matcher.is_terminated() and len(out) < max_new_tokens:
        proposal = []
        while len(proposal) < k and not draft.is_terminated():
            masked, _ = _masked_argmax(logits_of(out + proposal, 1)[-1], draft)
            t = int(torch.multinomial((masked[0] / temperature).softmax(-1), 1, generator=gen))
            assert draft.accept_token(t)
            proposal.append(t)
        verify = logits_of(out + proposal, len(proposal) + 1)  # one pass: each draft's position, and one more
        n_ok = 0
        for i, t in enumerate(proposal):
            if _masked_argmax(verify[i], matcher)[1] != t:
                break
            assert matcher.accept_token(t)
            n_ok += 1
        out += proposal[:n_ok]
        accepted += n_ok
        rejected += len(proposal) - n_ok
        draft.rollback(len(proposal) - n_ok)
        assert draft.state == matcher.state and draft.is_terminated() == matcher.is_terminated()
        if matcher.is_terminated():
            break
        t = _masked_argmax(verify[n_ok], matcher)[1]  # the target's token: a correction or a bonus
        assert matcher.accept_token(t) and draft.accept_token(t)
        out.append(t)
        # every committed prefix is a valid prefix: replaying it on a fresh matcher succeeds
        replay = compiled.matcher()
        assert all(replay.accept_token(x) for x in out)
    return out, matcher, accepted, rejected


@pytest.mark.model
def test_speculative_decoding_with_rollback_keeps_output_valid(model_and_tokenizer):
    from structgen.integrations.decoding import _prompt_ids
    from structgen.integrations.hf import compiler_for

    model, tok = model_and_tokenizer
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 8},
                                               "age": {"type": "integer", "minimum": 0, "maximum": 120}},
              "required": ["name", "age"], "additionalProperties": False}
    compiled = compiler_for(tok).compile_json_schema(schema)
    prompt_ids = _prompt_ids(tok, "Give a person as JSON.", None, None)
    greedy, _, _, _ = _speculate(model, prompt_ids, compiled, k=0, max_new_tokens=30, temperature=1.0, seed=0)
    out, matcher, accepted, rejected = _speculate(model, prompt_ids, compiled, k=3, max_new_tokens=30,
                                                  temperature=1.5, seed=0)
    assert matcher.is_terminated()
    assert accepted > 0 and rejected > 0  # both paths, rollback included, were exercised
    stop = set(compiled.tokenizer_info.stop_token_ids)
    text = tok.decode([t for t in out if t not in stop])
    jsonschema.validate(json.loads(text), schema)
    assert out == greedy  # greedy verification: speculation never changes the target's output
