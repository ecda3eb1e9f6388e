"""Property-based tests (hypothesis): try hard to break the schema compiler and the matcher.

Schemas come from ``tests/strategies.py`` (the supported keyword set, nested, with tricky
strings, patterns, integer bounds, anyOf, recursive ``$defs``). Properties, on SmolLM2's
real 49K vocabulary, Phi-3's 32K SentencePiece vocabulary (byte fallback), a toy vocabulary
of the 256 single bytes, and Llama-3's 128K vocabulary when ../shared/data is present:

1. soundness — seeded random walks over allowed tokens, once terminated, decode as UTF-8,
   parse as JSON and validate with ``jsonschema`` (the schema's own draft);
2. no dead ends — every state a walk visits has a non-empty mask unless terminated;
3. fast mask == slow reference (per token: ``step_token != DEAD``; stop tokens iff
   ``is_accepting``) on sampled visited states;
4. completeness — values drawn from the schema that ``jsonschema`` accepts, written by
   ``canonical_json``, are accepted token by token (each token also in the fast mask) and
   complete;
5. rollback/fork — after random accept/rollback/fork sequences the state equals a replay of
   the kept prefix, and forks are independent;
6. refused schemas raise a ``StructgenError`` subclass, never anything else; a
   ``SchemaError``'s ``pointer`` names an existing location of the schema;
7. ``whitespace="flexible"`` outputs validate and keep whitespace runs bounded;
8. termination — every visited state has a finite shortest completion that completes it,
   and budget-aware walks always end on a complete, valid value within the budget.

Profiles (registered in conftest.py): ``ci`` (default, derandomized, whole file < 90 s on two
cores) and ``soak`` (``--hypothesis-profile=soak``). Each test's example budget is a share of
the profile's ``max_examples``. Set ``STRUCTGEN_PROPERTY_STATS=path.json`` to record figures
(schemas tried/compiled/refused, walks, steps, reference masks, instances). Open bugs have
regression tests at the end of this file (see tests/README.md).
"""
from __future__ import annotations

import json
import os
import warnings
from collections import Counter

import jsonschema
import numpy as np
import pytest

pytest.importorskip("hypothesis", reason="the property tests need hypothesis (in the test extra: pip install -e '.[test]')")

from hypothesis import HealthCheck, assume, given, note, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from structgen import GrammarCompiler, GrammarMatcher, TokenizerInfo
from structgen.schema.canonical import canonical_json
from structgen.errors import MatcherError, RegexError, SchemaError, StructgenError, StructgenWarning
from structgen.schema.base import _existing_prefix
from structgen.index.token_index import DEAD

from . import strategies as S
from .conftest import DATA, SHARED, toy_info
from .walks import budget_walk, random_walk, structural_tokens

STATS: Counter = Counter()


def budget(share: float) -> settings:
    """This test's example budget: a share of the active profile's max_examples."""
    base = settings.default.max_examples
    return settings(max_examples=max(1, round(base * share)),
                    suppress_health_check=list(HealthCheck))


@pytest.fixture(scope="module", autouse=True)
def _report_stats():
    yield
    path = os.environ.get("STRUCTGEN_PROPERTY_STATS")
    if path:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(dict(sorted(STATS.items())), f, indent=1)


# -- vocabularies -----------------------------------------------------------------------


def _toy_bytes_info() -> TokenizerInfo:
    toks: list[bytes | None] = [bytes([b]) for b in range(256)] + [None]
    return TokenizerInfo.from_token_bytes(toks, stop_token_ids=[256])


def _hf_info(name: str) -> TokenizerInfo:
    folder = DATA / "tokenizers" / name
    if not (folder / "tokenizer.json").exists():
        folder = SHARED / "tokenizers" / name
    if not (folder / "tokenizer.json").exists():
        pytest.skip(f"{folder} not present")
    AutoTokenizer = pytest.importorskip("transformers", reason="real tokenizers need transformers (the hf extra)").AutoTokenizer

    return TokenizerInfo.from_huggingface(AutoTokenizer.from_pretrained(str(folder), local_files_only=True))


class Vocab:
    """A vocabulary with its own compiler (cache on: it is keyed with property order)."""

    def __init__(self, name: str, info: TokenizerInfo) -> None:
        self.name = name
        self.info = info
        self.compiler = GrammarCompiler(info)
        self.preferred = structural_tokens(info)
        self.producible = set().union(*(set(b) for b in info.token_bytes if b))


@pytest.fixture(scope="module")
def vocabs(smollm2_info):
    made: dict[str, Vocab] = {}

    def get(name: str) -> Vocab:
        if name not in made:
            info = smollm2_info if name == "smollm2" else _toy_bytes_info() if name == "bytes" else _hf_info(name)
            made[name] = Vocab(name, info)
        return made[name]

    return get


# -- helpers ----------------------------------------------------------------------------


def _validator(schema):
    cls = jsonschema.validators.validator_for(schema) if isinstance(schema, dict) else jsonschema.Draft202012Validator
    return cls(schema)


def _pointer_exists(schema, pointer: str) -> bool:
    return pointer == "" or (pointer.startswith("/") and _existing_prefix(schema, pointer) == pointer)


def _compile(vocab: Vocab, schema, **kw):
    """Compile, or check the refusal is a located StructgenError and return None."""
    STATS["schemas tried"] += 1
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", StructgenWarning)
            compiled = vocab.compiler.compile_json_schema(schema, **kw)
    except StructgenError as exc:
        STATS["schemas refused"] += 1
        STATS[f"refused: {type(exc).__name__}"] += 1
        if isinstance(exc, SchemaError):
            assert _pointer_exists(schema, exc.pointer), f"pointer {exc.pointer!r} not in schema: {exc}"
        note(f"refused: {exc}")
        return None
    STATS["schemas compiled"] += 1
    return compiled


def _reference_mask(index, info, state: int) -> np.ndarray:
    """The slow mask: every token's bytes stepped one by one from ``state``."""
    stops = set(info.stop_token_ids)
    ref = np.zeros(info.vocab_size, dtype=bool)
    for t in range(len(info.token_bytes)):
        ref[t] = index.is_accepting(state) if t in stops else index.step_token(state, t) != DEAD
    return ref


def _walk(matcher: GrammarMatcher, vocab: Vocab, rng: np.random.Generator, max_steps: int):
    """A seeded walk over allowed tokens (tests/walks.py, with its checks), counted in STATS."""
    def count() -> None:
        STATS["steps walked"] += 1

    return random_walk(matcher, vocab.info, rng, max_steps=max_steps, preferred=vocab.preferred,
                       stop_p=0.3, prefer_p=0.8, on_step=count)


def _check_output(compiled, schema, out: bytes, validator) -> str:
    text = out.decode("utf-8")  # must be valid UTF-8
    value = json.loads(text)
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(value)]
    assert not errors, f"walk produced invalid {out!r}: {errors[:3]}"
    # the bytes, fed in one piece, reach an accepting state too
    m = GrammarMatcher(compiled)
    assert m.accept_string(out) and m.is_completed(), f"{out!r} not accepted by accept_string"
    return text


def _soundness(vocab: Vocab, schema, seed: int, *, walks: int, max_steps: int, ref_states: int, **kw):
    compiled = _compile(vocab, schema, **kw)
    if compiled is None:
        return []
    validator = _validator(schema)
    rng = np.random.default_rng(seed)
    visited: list[int] = []
    texts = []
    for _ in range(walks):
        STATS["walks"] += 1
        out, done, states = _walk(GrammarMatcher(compiled), vocab, rng, max_steps)
        visited += states
        if done:
            STATS["walks terminated"] += 1
            texts.append(_check_output(compiled, schema, out, validator))
    index = compiled.index
    for state in set(visited):  # termination: a finite shortest completion from every visited state
        text = index.shortest_completion(state)
        assert text is not None and len(text) == index.completion_length(state), f"no completion from {state}"
        assert index.is_accepting(index.step_bytes(state, text)), f"{text!r} does not complete state {state}"
        STATS["shortest completions checked"] += 1
    for state in rng.choice(visited, size=min(ref_states, len(visited)), replace=False).tolist():
        STATS["reference masks"] += 1
        fast = index.allowed_tokens(state)
        ref = _reference_mask(index, vocab.info, state)
        diff = np.flatnonzero(fast != ref)
        assert len(diff) == 0, f"fast mask != reference on tokens {diff[:10].tolist()} " \
            f"({[vocab.info.token_bytes[t] for t in diff[:5]]}), fast={fast[diff[:5]].tolist()}"
    return texts


# -- 1-3: soundness, no dead ends, fast == reference mask -------------------------------


@budget(1.0)
@given(schema=S.schemas(), seed=st.integers(0, 2**32 - 1))
def test_walks_smollm2(vocabs, schema, seed):
    _soundness(vocabs("smollm2"), schema, seed, walks=3, max_steps=120, ref_states=1)


@budget(0.5)
@given(schema=S.schemas(), seed=st.integers(0, 2**32 - 1))
def test_walks_phi3_sentencepiece(vocabs, schema, seed):
    _soundness(vocabs("phi3"), schema, seed, walks=3, max_steps=120, ref_states=1)


@budget(1.0)
@given(schema=S.schemas(), seed=st.integers(0, 2**32 - 1))
def test_walks_byte_vocabulary(vocabs, schema, seed):
    # single bytes: every multi-byte UTF-8 character is spelled out byte by byte
    _soundness(vocabs("bytes"), schema, seed, walks=4, max_steps=300, ref_states=3)


@budget(0.2)
@given(schema=S.schemas(max_depth=2), seed=st.integers(0, 2**32 - 1))
def test_walks_llama3(vocabs, schema, seed):
    _soundness(vocabs("llama3"), schema, seed, walks=2, max_steps=80, ref_states=0)


@budget(0.5)
@given(pattern=st.sampled_from(S.PATTERNS + S.DIVERGENT_PATTERNS), seed=st.integers(0, 2**32 - 1), key=st.booleans())
def test_pattern_walks_validate(vocabs, pattern, seed, key):
    """Every supported pattern, as a string value and inside an object, on the byte vocabulary."""
    schema = {"type": "string", "pattern": pattern}
    if key:
        schema = {"type": "object", "properties": {"p": schema}, "required": ["p"], "additionalProperties": False}
    _soundness(vocabs("bytes"), schema, seed, walks=6, max_steps=60, ref_states=1)


# -- 8: budget-aware decoding -------------------------------------------------------------


@budget(0.6)
@given(schema=S.schemas(max_depth=3), seed=st.integers(0, 2**32 - 1), extra=st.integers(0, 12),
       vocab=st.sampled_from(["smollm2", "smollm2", "bytes"]), ws=st.sampled_from(["compact", "flexible"]))
def test_budget_walks_complete(vocabs, schema, seed, extra, vocab, ws):
    """Under a budget of (shortest output's tokens + extra), uniform walks always end on a
    complete value that validates, within the budget, and the budgeted mask is never empty."""
    v = vocabs(vocab)
    compiled = _compile(v, schema, whitespace=ws)
    if compiled is None:
        return
    plan = compiled.index.completion_tokens(compiled.index.initial)
    assert plan is not None
    validator = _validator(schema)
    rng = np.random.default_rng(seed)
    for _ in range(2):
        STATS["budget walks"] += 1

        def count() -> None:
            STATS["budget steps"] += 1

        out, terminated, used, matcher = budget_walk(compiled, v.info, rng, len(plan) + extra, on_step=count)
        STATS["budget walks ended by the limit"] += not terminated
        assert matcher.is_completed(), f"budget {len(plan) + extra}: incomplete {out!r}"
        _check_output(compiled, schema, out, validator)


# -- 7: flexible whitespace -------------------------------------------------------------


def _max_ws_ok(text: str, max_ws: int) -> bool:
    return S.outside_string_whitespace_runs(text) <= max_ws


@budget(0.6)
@given(schema=S.schemas(max_depth=2), seed=st.integers(0, 2**32 - 1), max_ws=st.integers(0, 3),
       vocab=st.sampled_from(["smollm2", "bytes"]))
def test_flexible_whitespace(vocabs, schema, seed, max_ws, vocab):
    v = vocabs(vocab)
    texts = _soundness(v, schema, seed, walks=3, max_steps=150, ref_states=0, whitespace="flexible", max_whitespace=max_ws)
    for text in texts:
        STATS["flexible outputs"] += 1
        assert _max_ws_ok(text, max_ws), f"whitespace run > {max_ws} in {text!r}"


# -- 4: completeness --------------------------------------------------------------------


@budget(1.0)
@given(schema=S.schemas(), data=st.data())
def test_valid_instances_accepted(vocabs, smollm2_tokenizer, schema, data):
    v = vocabs("smollm2")
    compiled = _compile(v, schema)
    if compiled is None:
        return
    validator = _validator(schema)
    index = compiled.index
    stop = v.info.stop_token_ids[0]
    found = 0
    for _ in range(4):
        value = data.draw(S.instances(schema))
        if not validator.is_valid(value):
            continue
        if set(canonical_json(value, schema).encode()) - v.producible:
            # SmolLM2 has no token with some bytes (0xF1, 0xF2: U+40000..U+BFFFF); the
            # tokenizer silently drops them, so such text cannot be written (a compiled grammar
            # drops the bytes no token holds: test_tokenizers.py)
            STATS["instances with unproducible bytes"] += 1
            continue
        found += 1
        STATS["valid instances checked"] += 1
        text = canonical_json(value, schema)
        note(f"instance text: {text!r}")
        m = GrammarMatcher(compiled)
        # special tokens' texts ("<|endoftext|>" in a string) split into ordinary tokens: that
        # is how a model writes them as text; the special token itself has no bytes
        for i, t in enumerate(smollm2_tokenizer.encode(text, add_special_tokens=False, split_special_tokens=True)):
            assert index.allowed_tokens(m.state)[t], f"token {i} {v.info.token_bytes[t]!r} of {text!r} masked out"
            assert m.accept_token(t), f"token {i} {v.info.token_bytes[t]!r} of {text!r} rejected"
        assert m.is_completed(), f"{text!r} accepted but not complete"
        assert m.accept_token(stop) and m.is_terminated()
        # the same text in flexible mode, and byte by byte
        flex = _compile(v, schema, whitespace="flexible")
        fm = GrammarMatcher(flex)
        assert fm.accept_string(text) and fm.is_completed(), f"{text!r} rejected in flexible mode"
    assume(found)


# -- 5: rollback and fork ---------------------------------------------------------------

_OPS = st.lists(st.one_of(
    st.tuples(st.just("accept"), st.integers(1, 6)),
    st.tuples(st.just("rollback"), st.integers(0, 8)),
    st.tuples(st.just("fork"), st.integers(0, 3)),
    st.tuples(st.just("stop"), st.just(0)),
    st.tuples(st.just("reject"), st.just(0)),
), min_size=1, max_size=25)


@budget(1.0)
@given(schema=S.schemas(max_depth=2), ops=_OPS, seed=st.integers(0, 2**32 - 1),
       vocab=st.sampled_from(["smollm2", "bytes"]), limit=st.sampled_from([None, None, 3]))
def test_rollback_and_fork_replay(vocabs, schema, ops, seed, vocab, limit):
    v = vocabs(vocab)
    compiled = _compile(v, schema)
    if compiled is None:
        return
    rng = np.random.default_rng(seed)
    m = GrammarMatcher(compiled, max_rollback_tokens=limit)
    kept: list[int] = []
    undoable = 0
    stop = v.info.stop_token_ids[0]

    def replay(tokens):
        r = GrammarMatcher(compiled)
        for t in tokens:
            assert r.accept_token(t)
        return r

    for op, n in ops:
        STATS["matcher ops"] += 1
        if op == "accept":
            for _ in range(n):
                allowed = m.allowed_token_ids()
                if m.is_terminated() or not len(allowed):
                    break
                tok = int(rng.choice(allowed))
                assert m.accept_token(tok)
                kept.append(tok)
                undoable += 1
        elif op == "stop":
            if m.accept_token(stop):
                kept.append(stop)
                undoable += 1
        elif op == "reject":
            before = (m.state, m.is_terminated())
            banned = np.flatnonzero(~compiled.index.allowed_tokens(m.state)) if not m.is_terminated() else np.array([0])
            if len(banned):
                assert not m.accept_token(int(rng.choice(banned)))
            assert (m.state, m.is_terminated()) == before
        elif op == "rollback":
            k = n
            if limit is not None and k > min(undoable, limit) or k > undoable:
                with pytest.raises(MatcherError):
                    m.rollback(k)
                continue
            m.rollback(k)
            if k:
                del kept[-k:]
            undoable -= k
        else:  # fork: the fork continues, the original must not move
            f = m.fork()
            before = (m.state, m.is_terminated())
            for _ in range(n):
                allowed = f.allowed_token_ids()
                if f.is_terminated() or not len(allowed):
                    break
                f.accept_token(int(rng.choice(allowed)))
            assert (m.state, m.is_terminated()) == before, "fork moved the original"
        if limit is not None:
            undoable = min(undoable, limit)
        r = replay(kept)
        assert m.state == r.state and m.is_terminated() == r.is_terminated(), f"state differs from replay of {kept}"
        assert np.array_equal(m.allowed_token_ids(), r.allowed_token_ids())


# -- 6: refused schemas -----------------------------------------------------------------


@budget(1.5)
@given(schema=S.broken_schemas(), strict=st.booleans())
def test_refusals_are_located_structgen_errors(vocabs, schema, strict):
    v = vocabs("bytes")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            v.compiler.compile_json_schema(schema, strict=strict)
        STATS["broken schemas compiled"] += 1
    except StructgenError as exc:
        STATS[f"broken refused: {type(exc).__name__}"] += 1
        if isinstance(exc, SchemaError):
            assert isinstance(exc.pointer, str)
            assert _pointer_exists(schema, exc.pointer), f"pointer {exc.pointer!r} not in {schema!r}"
    # any other exception type propagates and fails the test


# -- regressions for bugs found by these properties (all fixed) ----------

@pytest.fixture(scope="module")
def byte_compiler():
    return GrammarCompiler(_toy_bytes_info())


def _accepts(compiled, text: str) -> bool:
    m = GrammarMatcher(compiled)
    return m.accept_string(text) and m.is_completed()


# Found by these properties (all fixed); kept as plain regressions.


def test_regression_prefix_items_of_another_draft_beside_any_of_is_an_annotation(byte_compiler):
    # the soak drew prefixItems: null in a draft-07 schema beside anyOf: combining the branch
    # with its siblings read it as an array (TypeError). prefixItems is no keyword of
    # draft-07: its validators ignore it, and the compiler now leaves it out, noted.
    schema = {"anyOf": [{"type": "null"}], "$schema": "http://json-schema.org/draft-07/schema#", "prefixItems": None}
    compiled = byte_compiler.compile_json_schema(schema)
    assert _accepts(compiled, "null") and not _accepts(compiled, "1")
    assert any(w.startswith("/prefixItems: 'prefixItems' is not a keyword of draft-07") for w in compiled.warnings)


def test_regression_unevaluated_properties_of_another_draft_is_an_annotation(byte_compiler):
    # the soak drew unevaluatedProperties: null under items of a draft-07 schema: the
    # compiler expanded it (a 2019-09 keyword) into additionalProperties and refused the
    # null at a pointer the schema does not have
    schema = {"anyOf": [{"type": "array", "items": [{"type": "null"}, {"unevaluatedProperties": None}]}],
              "$schema": "http://json-schema.org/draft-07/schema#", "$defs": {"node": {"type": "null"}}}
    compiled = byte_compiler.compile_json_schema(schema)
    assert _accepts(compiled, '[null,{"a":1}]') and not _accepts(compiled, "[1]")
    assert "/anyOf/0/items/1/unevaluatedProperties: 'unevaluatedProperties' is not a keyword of draft-07 (its " \
           "$schema); treated as an annotation, as validators of that draft do" in compiled.warnings


def test_regression_unresolvable_dynamic_ref_beside_enum_is_a_located_schema_error(byte_compiler):
    # the soak drew $dynamicRef "0" beside an enum: checking the enum's values with jsonschema
    # met the reference first, and referencing's Unresolvable escaped
    for schema, at in (({"type": "array", "items": {"enum": [1, 2], "$dynamicRef": "0"}}, "/items/$dynamicRef"),
                       ({"const": 1, "$dynamicRef": "#/x"}, "/$dynamicRef")):
        with pytest.raises(SchemaError) as info:
            byte_compiler.compile_json_schema(schema)
        assert info.value.pointer == at


def test_regression_cache_key_keeps_property_order(byte_compiler):
    s1 = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}
    s2 = {"type": "object", "properties": {"b": {"type": "integer"}, "a": {"type": "integer"}}, "required": ["a", "b"]}
    byte_compiler.compile_json_schema(s1)
    text = canonical_json({"a": 1, "b": 2}, s2)
    assert text == '{"b":2,"a":1}'
    assert _accepts(byte_compiler.compile_json_schema(s2), text)


@pytest.mark.parametrize("schema,text", [({"type": "object"}, "{    }"), ({"type": "array"}, "[    ]"),
                                         ({"type": "object", "properties": {"a": {}}}, "{    }"),
                                         ({"type": "array", "items": {"type": "integer"}}, "[ \n\t ]")])
def test_regression_empty_container_whitespace_bounded(byte_compiler, schema, text):
    compiled = byte_compiler.compile_json_schema(schema, whitespace="flexible", max_whitespace=2)
    assert not _accepts(compiled, text), f"{text!r} has 4 whitespace characters in a row, max_whitespace=2"
    assert _accepts(compiled, text[0] + "  " + text[-1])


@pytest.mark.parametrize("schema", [{"enum": ["\ud800"]}, {"const": "a\udc00"},
                                    {"type": "object", "properties": {"\ud800": {"type": "null"}}}],
                         ids=["enum", "const", "property-name"])
def test_regression_lone_surrogate_literal(byte_compiler, schema):
    # json.loads('{"enum": ["\\ud800"]}') yields exactly this schema: a StructgenError or a
    # grammar whose walks validate, never UnicodeEncodeError
    try:
        byte_compiler.compile_json_schema(schema)
    except StructgenError:
        return
    _soundness(Vocab("bytes", byte_compiler.tokenizer_info), schema, 0, walks=5, max_steps=40, ref_states=1)


@pytest.mark.parametrize("pattern,value", [("^\\W$", "é"), ("^\\D$", "\u0663"), ("^\\S$", "\x1c"),
                                           ("^\\s$", "\ufeff"), ("^[^\\w]$", "é")])
def test_regression_class_escapes_sound_for_python_re(byte_compiler, pattern, value):
    schema = {"type": "string", "pattern": pattern}
    text = json.dumps(value, ensure_ascii=False)
    assert not _validator(schema).is_valid(value)
    try:
        compiled = byte_compiler.compile_json_schema(schema)
    except StructgenError:
        return
    assert not _accepts(compiled, text), f"{text!r} accepted, jsonschema rejects it"


def test_regression_prefix_items_under_draft07(byte_compiler):
    schema = {"$schema": S.DRAFT7, "type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "integer"}}
    assert not _validator(schema).is_valid(["x"])
    try:
        compiled = byte_compiler.compile_json_schema(schema)
    except StructgenError:
        return
    assert not _accepts(compiled, '["x"]')


@pytest.mark.parametrize("schema", [{"const": "\U00040000"}, {"type": "string", "pattern": "^\U00080000$"},
                                    {"type": "object", "properties": {"\U00040000": {"type": "null"}},
                                     "required": ["\U00040000"]}], ids=["const", "pattern", "property-name"])
def test_bug_dead_end_on_bytes_missing_from_vocabulary(vocabs, schema):
    v = vocabs("smollm2")
    assert not ({0xF1, 0xF2} & v.producible)
    try:
        compiled = v.compiler.compile_json_schema(schema)
    except SchemaError:
        return  # refusing the schema for this vocabulary would be a fix too
    m = GrammarMatcher(compiled)
    for _ in range(20):  # follow the only way forward
        allowed = m.allowed_token_ids()
        assert len(allowed), "dead end: empty mask before the value is complete"
        if m.is_completed():
            return
        assert m.accept_token(int(allowed[0]))


def test_bug_nested_arrays_grow_exponentially(byte_compiler):
    schema = {"type": "integer"}
    for _ in range(14):
        schema = {"type": "array", "items": schema}
    compiled = byte_compiler.compile_json_schema(schema)  # AutomatonSizeError today
    assert compiled.stats.automaton_states < 1000


def test_bug_deep_nesting_recursion_error(byte_compiler):
    schema = {"type": "integer"}
    for _ in range(100):
        schema = {"type": "object", "properties": {"a": schema}, "required": ["a"]}
    try:
        byte_compiler.compile_json_schema(schema)
    except StructgenError:
        pass


# -- found by soak runs of the refusal property (all fixed) ------------------------------

_D7 = "http://json-schema.org/draft-07/schema#"


@pytest.mark.parametrize("schema,pointer", [
    # schema text that is not JSON escaped as json.JSONDecodeError
    ("", ""),
    # draft-07 has no $defs keyword, so its metaschema never looked inside; reached by
    # $ref, {"enum": null} crashed the converter with TypeError
    ({"$schema": _D7, "$defs": {"node": {"type": "array", "items": {"const": None, "enum": None}}},
      "$ref": "#/$defs/node"}, "/$defs/node/items/enum"),
    ({"$schema": _D7, "$defs": {"node": {"type": "array", "items": {"const": [None], "items": None}}},
      "$ref": "#/$defs/node"}, "/$defs/node/items/items"),
    # keywords beside anyOf were reported at /anyOf/anyOf/0/... (no such location)
    ({"anyOf": [True], "minItems": 3, "maxItems": 1, "type": "array"}, "/minItems"),
    ({"anyOf": [True], "type": "integer", "minimum": 5, "maximum": 4}, "/minimum"),
    # a required name without a declared property takes additionalProperties, but its
    # errors pointed at /required/...
    ({"type": "array", "minItems": 1, "items": {"type": "object", "properties": {"a": {"type": "null"}},
                                                "required": ["zz"], "additionalProperties": {"type": "null",
                                                                                             "const": False}}},
     "/items/additionalProperties/const"),
    # a pattern Python's re cannot compile, beside enum/const (decided by jsonschema),
    # escaped as re.error
    ({"enum": [""], "type": "string", "pattern": "a**"}, "/pattern"),
    ({"enum": [""], "type": "string", "pattern": "a{2,1}"}, "/pattern"),
    ({"type": "object", "propertyNames": {"pattern": "[", "maxLength": 3}, "properties": {"ab": {}}},
     "/propertyNames/pattern"),
], ids=["not-json", "draft07-defs-enum", "draft07-defs-items", "anyof-sibling-items", "anyof-sibling-minimum",
        "required-additional", "enum-bad-pattern", "enum-bad-repeat", "property-names-bad-pattern"])
def test_regression_soak_refusals_located(byte_compiler, schema, pointer):
    """Each refused with a StructgenError at an existing location (they escaped as other
    exceptions, or pointed at locations the schema does not have)."""
    for strict in (True, False):
        with pytest.raises((SchemaError, RegexError)) as exc:
            byte_compiler.compile_json_schema(schema, strict=strict)
        assert exc.value.pointer == pointer, str(exc.value)
        if isinstance(schema, dict):
            assert _pointer_exists(schema, exc.value.pointer)


# -- found by bench/masks.py (fixed) ------------------------------------------------------


@pytest.mark.parametrize("deps", [
    {"dependencies": {"b": {"not": {"required": ["c"]}}}},
    {"dependentSchemas": {"b": {"maxProperties": 2}}},
    {"dependentRequired": {"b": ["d"]}},
])
def test_canonical_order_follows_dependency_expansion(deps):
    """A dependency's trigger name becomes required in the "present" alternative, so the
    grammar writes it with the required names; canonical_json expands dependencies the same
    way (it wrote {"a":...,"b":...} where the grammar writes "b" first: a valid MaskBench
    instance counted as rejected)."""
    from structgen.schema.canonical import canonical_json

    schema = {"type": "object", "patternProperties": {"^[a-e]$": True}, "additionalProperties": False, **deps}
    value = {"a": True, "b": True, "d": 1} if "dependentRequired" in deps else {"a": True, "b": True}
    compiled = GrammarCompiler(toy_info([])).compile_json_schema(schema)
    m = compiled.matcher()
    text = canonical_json(value, schema)
    assert m.accept_string(text) and m.is_completed(), text
    assert json.loads(text) == value


# -- found by the soak run of test_valid_instances_accepted ---------------------------------


def test_special_token_text_is_written_by_ordinary_tokens(vocabs, smollm2_tokenizer):
    """A string holding a special token's text ('<|endoftext|>') is written by ordinary
    tokens, every one allowed; the special token (no bytes) is masked inside the string. The
    soak run encoded the instance with the special token and reported it masked out."""
    v = vocabs("smollm2")
    compiled = _compile(v, {"type": "string", "enum": ["<|endoftext|>"]})
    special = smollm2_tokenizer.convert_tokens_to_ids("<|endoftext|>")
    assert v.info.token_bytes[special] is None
    m = GrammarMatcher(compiled)
    ids = smollm2_tokenizer.encode('"<|endoftext|>"', add_special_tokens=False, split_special_tokens=True)
    assert special not in ids and len(ids) > 3
    for k, t in enumerate(ids):
        allowed = compiled.index.allowed_tokens(m.state)
        assert allowed[t], f"token {k} masked out"
        if k > 0:
            assert not allowed[special], f"the special token allowed inside the string at token {k}"
        assert m.accept_token(t)
    assert m.is_completed()
