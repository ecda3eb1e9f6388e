"""GrammarLogitsProcessor without a model: a generate()-like loop over random logits.

Truncation flags, budget-aware mode, bad shapes and batches, and a batch of 64 rows sharing
one compiled grammar (same masks as one matcher at a time).
"""
from __future__ import annotations

import json

import jsonschema
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from structgen import GrammarCompiler, GrammarMatcher, MatcherError  # noqa: E402
from structgen.integrations.hf import GrammarLogitsProcessor  # noqa: E402

from .conftest import toy_info  # noqa: E402

SCHEMA = {"type": "object", "properties": {"s": {"type": "string"}, "n": {"type": "array", "items": {"type": "integer"}}},
          "required": ["s", "n"], "additionalProperties": False}


@pytest.fixture(scope="module")
def info():
    return toy_info([b'{"', b'":', b'"}', b'",', b"[1", b"23", b", ", b"abc", b'"s', b'"n'], vocab_size=300)


@pytest.fixture(scope="module")
def compiled(info):
    return GrammarCompiler(info).compile_json_schema(SCHEMA)


def fake_generate(proc, info, *, batch: int, max_new_tokens: int, seed: int, prompt_len: int = 3, width: int = 300):
    """What generate() does with a logits processor: the processor never sees the last token;
    rows that emitted EOS are padded with EOS; stops when every row has ended."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.zeros((batch, prompt_len), dtype=torch.long)
    eos = info.stop_token_ids[0]
    done = torch.zeros(batch, dtype=torch.bool)
    for _ in range(max_new_tokens):
        scores = torch.randn((batch, width), generator=g) * 3
        scores[:, eos] -= 4  # make rows run long: the limit, not EOS, should end many of them
        scores = proc(ids, scores)
        nxt = torch.multinomial(torch.softmax(scores, dim=-1), 1).squeeze(1)
        nxt = torch.where(done, torch.full_like(nxt, eos), nxt)
        ids = torch.cat([ids, nxt[:, None]], dim=1)
        done |= nxt == eos
        if done.all():
            break
    return ids


def _texts(ids, info, prompt_len=3):
    out = []
    for row in ids[:, prompt_len:].tolist():
        body = []
        for t in row:
            if t in info.stop_token_ids:
                break
            body.append(info.token_bytes[t])
        out.append(b"".join(body).decode("utf-8", "replace"))
    return out


def test_truncated_rows_are_flagged_never_complete(compiled, info):
    proc = GrammarLogitsProcessor(compiled)
    ids = fake_generate(proc, info, batch=8, max_new_tokens=6, seed=0)
    with pytest.raises(MatcherError, match="finish"):
        _ = proc.truncated
    truncated = proc.finish(ids)
    assert truncated == proc.truncated and any(truncated)
    for row, text in enumerate(_texts(ids, info)):
        m = GrammarMatcher(compiled)
        assert m.accept_string(text)
        assert proc.completed[row] == m.is_completed()
        assert proc.terminated[row] == (not truncated[row])
        if not truncated[row]:
            jsonschema.validate(json.loads(text), SCHEMA)
    assert not all(proc.completed), "6 tokens cannot hold most values: some rows must be incomplete"
    assert all(t for t, c in zip(proc.truncated, proc.completed) if not c), "an incomplete row not flagged truncated"


@pytest.mark.parametrize("max_new_tokens", [10, 11, 13, 16, 24])
def test_budget_mode_every_row_complete_and_valid(compiled, info, max_new_tokens):
    proc = GrammarLogitsProcessor(compiled, max_new_tokens=max_new_tokens)
    ids = fake_generate(proc, info, batch=16, max_new_tokens=max_new_tokens, seed=max_new_tokens)
    proc.finish(ids)
    assert all(proc.completed), [t for t, c in zip(_texts(ids, info), proc.completed) if not c]
    for text in _texts(ids, info):
        jsonschema.validate(json.loads(text), SCHEMA)
    proc.reset()
    again = fake_generate(proc, info, batch=2, max_new_tokens=max_new_tokens, seed=1)
    proc.finish(again)
    assert all(proc.completed)


def test_budget_smaller_than_the_shortest_value_is_refused_at_construction(compiled):
    with pytest.raises(MatcherError, match="raise max_new_tokens to at least"):
        GrammarLogitsProcessor(compiled, max_new_tokens=9)


def test_logits_narrower_than_the_vocabulary(compiled):
    proc = GrammarLogitsProcessor(compiled)
    with pytest.raises(MatcherError, match="logits have 200 columns but the tokenizer has 267 tokens"):
        proc(torch.zeros((1, 3), dtype=torch.long), torch.zeros((1, 200)))


def test_logits_wider_than_the_vocabulary_are_masked(compiled, info):
    proc = GrammarLogitsProcessor(compiled)
    out = proc(torch.zeros((2, 3), dtype=torch.long), torch.zeros((2, 320)))
    assert torch.isinf(out[:, len(info.token_bytes):]).all()
    assert (~torch.isinf(out[0])).sum() > 0


def test_batch_size_change_between_calls(compiled, info):
    proc = GrammarLogitsProcessor(compiled)
    proc(torch.zeros((2, 3), dtype=torch.long), torch.zeros((2, 300)))
    brace = info.token_bytes.index(b"{")
    with pytest.raises(MatcherError, match="batch changed from 2 to 3"):
        proc(torch.full((3, 4), brace), torch.zeros((3, 300)))
    with pytest.raises(MatcherError, match="finish\\(\\) got 3 rows for a batch of 2"):
        proc.finish(torch.full((3, 4), brace))


def test_forbidden_token_is_reported(compiled, info):
    proc = GrammarLogitsProcessor(compiled)
    proc(torch.zeros((1, 3), dtype=torch.long), torch.zeros((1, 300)))
    with pytest.raises(MatcherError, match="row 0: token .* forbids"):
        proc(torch.tensor([[0, 0, 0, info.token_bytes.index(b"}")]]), torch.zeros((1, 300)))


def test_batch_of_64_shares_one_grammar(info):
    """64 rows on one (fresh, lazily filled) compiled grammar give the masks one matcher
    gets alone on the same tokens."""
    shared = GrammarCompiler(info).compile_json_schema(SCHEMA)
    proc = GrammarLogitsProcessor(shared)
    g = torch.Generator().manual_seed(5)
    ids = torch.zeros((64, 3), dtype=torch.long)
    masks = []
    for _ in range(12):
        scores = proc(ids, torch.randn((64, 300), generator=g))
        masks.append(~torch.isinf(scores))
        nxt = torch.multinomial(torch.softmax(scores, dim=-1), 1)
        ids = torch.cat([ids, nxt], dim=1)
    alone = GrammarCompiler(info).compile_json_schema(SCHEMA)  # its own memo tables
    for row in range(64):
        m = GrammarMatcher(alone)
        for step, mask in enumerate(masks):
            expect = np.zeros(300, dtype=bool)
            expect[m.allowed_token_ids()] = True
            assert np.array_equal(mask[row].numpy(), expect), (row, step)
            tok = int(ids[row, 3 + step])
            if m.is_terminated():
                continue
            assert m.accept_token(tok)
