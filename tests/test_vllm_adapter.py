"""structgen.integrations.vllm's bookkeeping, driven by a stand-in of vLLM's persistent batch (no vLLM needed).

tests/vllm_standin.py reproduces how vLLM's V1 InputBatch reports rows removed, added and
moved (condense, swap) to logits processors; tests/test_vllm.py runs the real engine.
"""
from __future__ import annotations

import threading
import zlib

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from structgen import GrammarCompiler, GrammarMatcher, SchemaError, StructgenError
from structgen.runtime.bitmask import apply_token_bitmask_inplace, bitmask_words
from structgen.integrations.vllm import GrammarSpec, StructgenArgsError, StructgenLogitsProcessor

from .conftest import toy_info
from .vllm_standin import BatchUpdate, MoveDirectionality, PersistentBatch, Request, SamplingParams

TOKENS = [b'{"', b'":', b'true', b'false', b'null', b'"}', b', "', b'abc', b'123', b'[1', b']']
SCHEMA_A = {"type": "object", "properties": {"ok": {"type": "boolean"}, "n": {"type": "integer"}},
            "required": ["ok", "n"], "additionalProperties": False}
SCHEMA_B = {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 99}, "maxItems": 3}
GRAMMAR = 'start: "yes" | "no" | "maybe " NUM\nNUM: /[0-9]{1,3}/\n'
TOOLS = [{"type": "function", "function": {"name": "get_time", "parameters": {
    "type": "object", "properties": {"city": {"type": "string", "maxLength": 5}}, "required": ["city"]}}}]
SPECS = [{"json_schema": SCHEMA_A}, {"json_schema": SCHEMA_B}, {"grammar": GRAMMAR}, {"tools": TOOLS}]


@pytest.fixture(scope="module")
def info():
    return toy_info(TOKENS)


def make(info, *, max_num_seqs=8, compiler=None):
    return StructgenLogitsProcessor.from_compiler(compiler or GrammarCompiler(info), max_num_seqs=max_num_seqs)


def params(spec=None, **extra):
    if spec is not None:
        extra["structgen"] = spec
    return SamplingParams(extra_args=extra or None)


class Reference:
    """Plain GrammarMatchers per request id, fed the same tokens: what every mask must equal."""

    def __init__(self, info) -> None:
        self.compiler = GrammarCompiler(info)
        self.info = info

    def matcher(self, req: Request) -> GrammarMatcher | None:
        spec = GrammarSpec.from_extra_args(req.params.extra_args)
        if spec is None:
            return None
        m = GrammarMatcher(spec.compile(self.compiler))
        for tok in req.output:
            if m.is_terminated():  # a finished row keeps being offered stop tokens only
                break
            assert m.accept_token(tok), (req.req_id, req.output)
        return m

    def check(self, req: Request, raw, processed) -> None:
        m = self.matcher(req)
        if m is None:  # free rows: untouched, bit for bit
            assert torch.equal(raw, processed), req.req_id
            return
        bitmask = torch.zeros((1, bitmask_words(len(raw))), dtype=torch.int32)
        m.fill_next_token_bitmask(bitmask, 0)
        expected = raw.clone().unsqueeze(0)
        apply_token_bitmask_inplace(expected, bitmask)
        assert torch.equal(expected[0], processed), req.req_id


def noise(req: Request):
    # a deterministic "model": logits depend only on the request and its length so far
    gen = torch.Generator().manual_seed(zlib.crc32(f"{req.req_id}/{len(req.output)}".encode()))
    return torch.randn(len(TOKENS) + 257, generator=gen)


def test_mixed_batch_with_adds_removes_condense_swap_and_preemption(info):
    proc = make(info)
    ref = Reference(info)
    batch = PersistentBatch(proc, 8)
    reqs = {f"c{i}": Request(f"c{i}", params(s)) for i, s in enumerate(SPECS)}
    reqs.update({f"f{i}": Request(f"f{i}", params(None, other="x" if i else None)) for i in range(3)})
    order = ["c0", "f0", "c1", "f1", "c2"]
    for rid in order:
        batch.add(reqs[rid])
    batch.refresh()

    def step():
        batch.step(noise, ref.check)
        # the processor's rows are exactly the constrained requests, at their current indices
        want = {i: r.req_id for i, r in enumerate(batch.slots) if r.params.extra_args
                and r.params.extra_args.get("structgen")}
        assert sorted(proc.constrained_rows) == sorted(want)

    step()
    step()
    # finish a free row and a constrained row; a new constrained request reuses the lowest hole
    batch.remove("f0")
    batch.remove("c1")
    assert batch.add(reqs["c3"]) == 1  # slot 1 reused: never reported as removed
    batch.condense()  # hole 2 filled by a one-way move of the last row (c2, index 4 -> 2)
    batch.refresh()
    update = batch.updates[-1]
    assert 1 not in update.removed and (4, 2, MoveDirectionality.UNIDIRECTIONAL) in update.moved
    step()
    # preemption: c0 leaves the batch with its output so far and comes back later
    preempted = batch.remove("c0")
    batch.add(reqs["f2"])  # takes slot 0
    batch.refresh()
    step()
    batch.add(preempted)  # resumed: its matcher is rebuilt and replays the tokens it had
    batch.swap(0, 3)  # the attention backend's reorder
    batch.refresh()
    assert batch.updates[-1].moved == [(0, 3, MoveDirectionality.SWAP)]
    for _ in range(3):
        step()
    assert len(reqs["c0"].output) == 6 and len(reqs["c2"].output) == 7
    # finish everything: all matchers released
    for r in list(batch.slots):
        batch.remove(r.req_id)
    batch.condense()
    batch.refresh()
    assert proc.constrained_rows == {}


def test_a_slot_refilled_by_a_free_request_is_no_longer_constrained(info):
    proc = make(info)
    proc.update_state(BatchUpdate(1, [], [(0, params({"json_schema": SCHEMA_A}), [], [])], []))
    assert list(proc.constrained_rows) == [0]
    # the constrained request finished and a free one took its slot in the same step:
    # vLLM reports only the add
    proc.update_state(BatchUpdate(1, [], [(0, params(None), [], [])], []))
    assert proc.constrained_rows == {}
    logits = torch.randn(1, len(TOKENS) + 257)
    assert torch.equal(proc.apply(logits.clone()), logits)


def test_one_way_move_drops_the_stale_target_and_swap_keeps_both(info):
    proc = make(info)
    added = [(i, params({"json_schema": SCHEMA_A} if i != 1 else {"grammar": GRAMMAR}), [], []) for i in range(3)]
    proc.update_state(BatchUpdate(3, [], added, []))
    grammar_of = {i: m for i, m in proc._rows.items()}
    proc.update_state(BatchUpdate(3, [], [], [(0, 2, MoveDirectionality.SWAP)]))
    assert proc._rows[0] is grammar_of[2] and proc._rows[2] is grammar_of[0]
    proc.update_state(BatchUpdate(2, [], [], [(2, 1, MoveDirectionality.UNIDIRECTIONAL)]))
    assert proc._rows == {0: grammar_of[2], 1: grammar_of[0]}
    proc.update_state(BatchUpdate(1, [1], [], []))
    assert proc._rows == {0: grammar_of[2]}


def test_masks_equal_a_plain_matcher_and_free_rows_are_untouched(info):
    proc = make(info)
    outputs: list[list[int]] = [[], [], []]
    proc.update_state(BatchUpdate(3, [], [(0, params({"json_schema": SCHEMA_A}), [], outputs[0]),
                                          (1, params(None), [], outputs[1]),
                                          (2, params({"json_schema": SCHEMA_B}), [], outputs[2])], []))
    ref = GrammarCompiler(info)
    text_a, text_b = [b'{"', b'o', b'k', b'":', b'true'], [b'[1', b',', b'2']
    ids = {t: i for i, t in enumerate(info.token_bytes) if t is not None}
    for step in range(max(len(text_a), len(text_b)) + 1):
        logits = torch.zeros(3, len(TOKENS) + 257)
        out = proc.apply(logits.clone())
        for row, (schema, text) in enumerate([(SCHEMA_A, text_a), (None, None), (SCHEMA_B, text_b)]):
            if schema is None:
                assert torch.equal(out[row], logits[row])
                continue
            m = GrammarMatcher(ref.compile_json_schema(schema))
            for tok in outputs[row]:
                assert m.accept_token(tok)
            allowed = np.isfinite(out[row].numpy())
            assert np.array_equal(np.flatnonzero(allowed), m.allowed_token_ids())
        for row, text in ((0, text_a), (2, text_b)):
            if step < len(text):
                outputs[row].append(ids[text[step]])


def test_async_placeholder_is_not_consumed_until_repaired(info):
    proc = make(info)
    out: list[int] = []
    proc.update_state(BatchUpdate(1, [], [(0, params({"grammar": GRAMMAR}), [], out)], []))
    logits = torch.zeros(1, len(TOKENS) + 257)
    proc.apply(logits.clone())
    y = info.token_bytes.index(b"y")
    out.append(-1)  # async scheduling: vLLM's placeholder for a token still being copied back
    proc.apply(logits.clone())
    assert proc._rows[0].consumed == 0
    out[-1] = y
    masked = proc.apply(logits.clone())
    assert proc._rows[0].consumed == 1
    assert np.flatnonzero(np.isfinite(masked[0].numpy())).tolist() == [info.token_bytes.index(b"e")]


def test_requests_with_one_spec_share_one_compile_run_in_a_thread(info):
    seen: list[str] = []

    class Recording(GrammarCompiler):
        def compile_json_schema(self, *a, **k):
            seen.append(threading.current_thread().name)
            return super().compile_json_schema(*a, **k)

    proc = make(info, compiler=Recording(info))
    spec = {"json_schema": SCHEMA_A}
    proc.update_state(BatchUpdate(2, [], [(0, params(spec), [], []), (1, params(dict(spec)), [], [])], []))
    assert proc._rows[0].future is proc._rows[1].future
    proc.apply(torch.zeros(2, len(TOKENS) + 257))
    assert len(seen) == 1 and seen[0].startswith("structgen-compile")


def test_a_grammar_that_fails_to_compile_ends_its_request(info):
    proc = make(info, compiler=GrammarCompiler(info, max_states=2))
    proc.update_state(BatchUpdate(2, [], [(0, params({"json_schema": SCHEMA_A}), [], []),
                                          (1, params(None), [], [])], []))
    logits = torch.zeros(2, len(TOKENS) + 257)
    out = proc.apply(logits.clone())
    assert np.flatnonzero(np.isfinite(out[0].numpy())).tolist() == sorted(info.stop_token_ids)
    assert torch.equal(out[1], logits[1])


def test_a_rejected_token_releases_the_row(info, caplog):
    proc = make(info)
    out: list[int] = []
    proc.update_state(BatchUpdate(1, [], [(0, params({"grammar": GRAMMAR}), [], out)], []))
    proc.apply(torch.zeros(1, len(TOKENS) + 257))
    out.append(info.token_bytes.index(b"z"))  # something else chose a forbidden token
    logits = torch.zeros(1, len(TOKENS) + 257)
    assert torch.equal(proc.apply(logits.clone()), logits)
    assert proc.constrained_rows == {} and "grammar forbids it" in caplog.text


@pytest.mark.parametrize("extra, message", [
    ({"structgen": 3}, "must be a dict"),
    ({"structgen": "{not json"}, "not valid JSON text"),
    ({"structgen": {}}, "exactly one of"),
    ({"structgen": {"json_schema": {}, "grammar": "start: 'a'"}}, "exactly one of"),
    ({"structgen": {"json_schema": {}, "colour": "red"}}, "unknown option"),
    ({"structgen": {"grammar": 5}}, "Lark grammar text"),
    ({"structgen": {"tools": {"name": "x"}}}, "list of OpenAI tool definitions"),
    ({"structgen": {"json": 1}}, "json must be true"),
    ({"structgen": {"json_schema": {}, "whitespace": "lots"}}, "whitespace must be"),
])
def test_malformed_specs_are_rejected_at_admission(extra, message):
    with pytest.raises(StructgenArgsError, match=message) as err:
        StructgenLogitsProcessor.validate_params(SamplingParams(extra_args=extra))
    assert isinstance(err.value, ValueError)


def test_bad_schema_and_grammar_are_rejected_at_admission():
    with pytest.raises(SchemaError):
        StructgenLogitsProcessor.validate_params(params({"json_schema": {"type": "integer", "minimum": 5, "maximum": 1}}))
    with pytest.raises(StructgenError):
        StructgenLogitsProcessor.validate_params(params({"grammar": "start: missing_rule"}))
    with pytest.raises(StructgenError):
        StructgenLogitsProcessor.validate_params(params({"tools": TOOLS, "tool_choice": "no_such_tool"}))
    # valid ones pass, JSON text as the server's vllm_xargs sends it included
    import json

    for spec in SPECS:
        StructgenLogitsProcessor.validate_params(params(json.dumps(spec)))
    StructgenLogitsProcessor.validate_params(params(None))
    assert GrammarSpec.from_extra_args({"structgen": json.dumps(SPECS[0])}).key == \
        GrammarSpec.from_extra_args({"structgen": SPECS[0]}).key


def test_hf_folder_passes_a_model_folder_through_and_refuses_other_files(tmp_path):
    from structgen.models import hf_folder

    (tmp_path / "config.json").write_text("{}", encoding="utf-8")
    assert hf_folder(tmp_path) == tmp_path
    (tmp_path / "weights.bin").write_bytes(b"")
    with pytest.raises(StructgenError, match="not a .gguf"):
        hf_folder(tmp_path / "weights.bin")
