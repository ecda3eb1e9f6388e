"""The native configuration index (structgen._core.ConfigIndex behind TokenIndex) against the
pure-Python reference engine (tests/reference_index.py), bit for bit.

Both indexes are built from the same compiled automaton and trie; they intern configurations
in different orders, so configurations are compared by content (``TokenIndex.describe``: the
frames of every stack, and whether the configuration is complete). At every state visited,
token by token along valid outputs and seeded random walks: the mask, the successor
configuration of every byte, and the configuration after every allowed token.

The core corpus (tests/data/core_schemas.json) runs on SmolLM2; schemas with strings,
recursion and counters also on Phi-3 (tests/data) and Llama-3, Qwen2 and GPT-2 where
../shared/data/tokenizers has them.
"""
from __future__ import annotations

import itertools
import json
import threading

import numpy as np
import pytest

from structgen import GrammarCompiler, GrammarMatcher, LimitError, TokenizerInfo
from structgen.schema.canonical import canonical_json
from structgen.index.token_index import DEAD

from .conftest import DATA, tokenizer_folder, toy_info
from .reference_index import ReferenceIndex
from .reference_masks import STRING_AND_RECURSION_SCHEMAS, reference_mask
from .walks import random_walk, structural_tokens

CASES = json.loads((DATA / "core_schemas.json").read_text(encoding="utf-8"))

SCHEMAS = STRING_AND_RECURSION_SCHEMAS + [
    # counters: a long string, a bounded one near its bound, a counted pattern
    {"type": "object", "properties": {"s": {"type": "string", "maxLength": 100000},
                                      "t": {"type": "string", "minLength": 70, "maxLength": 90},
                                      "p": {"type": "string", "pattern": "^(ab){100,}$"}}},
]
TEXTS = ['{"name":"naïve 東京 \\"q\\" ok","age":-42,"tags":["a b","ñ"],"extra":[1,{"x":null}]}',
         '{"v":"ab é","kids":[{"v":"x","kids":[]},{"kids":[{"v":"zz"}]}]}',
         '{"s":"' + "lorem ipsum " * 12 + '","t":"' + "x" * 80 + '","p":"' + "ab" * 101 + '"}']

REAL = ["phi3", "llama3", "qwen2", "gpt2"]


def _ref_describe(ref: ReferenceIndex, cid: int):
    stacks, accepting = ref._configs[cid]

    def frames(sid: int):
        out = []
        while sid >= 0:
            r, s, sid = ref._stacks[sid]
            out.append((r, s))
        return tuple(out)

    return tuple(sorted(frames(s) for s in stacks)), accepting


class Pair:
    """A compiled grammar's native index beside a reference index over the same automaton."""

    def __init__(self, compiled, *, successors: bool = True) -> None:
        self.index = compiled.index
        self.ref = ReferenceIndex(self.index._pda, self.index.info, self.index.trie)
        self.successors = successors
        self.states = 0
        assert self.index.describe(self.index.initial) == _ref_describe(self.ref, self.ref.initial)

    def same(self, cid: int, rid: int) -> None:
        """Configurations ``cid`` (native) and ``rid`` (reference) agree: content, mask, the
        successor of every byte and of every allowed token."""
        ix, ref = self.index, self.ref
        self.states += 1
        assert ix.describe(cid) == _ref_describe(ref, rid)
        assert np.array_equal(ix.mask(cid), ref.mask(rid)), ix.describe(cid)
        row, rrow = ix.next_configs(cid), ref._row(rid)
        assert np.array_equal(row == DEAD, rrow == DEAD)
        pairs = {(int(a), int(b)) for a, b in zip(row.tolist(), rrow.tolist()) if a != DEAD}
        for a, b in pairs:
            assert ix.describe(a) == _ref_describe(ref, b)
        if self.successors:
            toks, after = ix.token_successors(cid)
            rtoks, rafter = ref._walk(rid, ref.trie, collect=True)
            assert sorted(toks.tolist()) == sorted(rtoks.tolist())
            got = dict(zip(toks.tolist(), after.tolist()))
            seen: dict[int, int] = {}
            for t, b in zip(rtoks.tolist(), rafter.tolist()):
                a = got[t]
                if seen.setdefault(a, b) != b:  # one native configuration, one reference one
                    assert ix.describe(a) == _ref_describe(ref, b)
            for a, b in seen.items():
                assert ix.describe(a) == _ref_describe(ref, b)

    def walk_text(self, data: bytes, *, every: int = 1) -> None:
        """Step ``data`` byte by byte in both, comparing every ``every``-th state."""
        cid, rid = self.index.initial, self.ref.initial
        for k, b in enumerate(data):
            if k % every == 0:
                self.same(cid, rid)
            cid, rid = self.index.step_bytes(cid, bytes([b])), self.ref.step_bytes(rid, bytes([b]))
            assert (cid == DEAD) == (rid == DEAD), data[:k + 1]
            if cid == DEAD:
                return
        self.same(cid, rid)

    def walk_tokens(self, compiled, info, rng, *, walks: int = 2, max_steps: int = 30) -> None:
        """Seeded random walks of allowed non-stop tokens (short structural ones preferred);
        the reference steps the same token bytes."""
        ix, stops, preferred = self.index, list(info.stop_token_ids), structural_tokens(info)
        for _ in range(walks):
            cid, rid = ix.initial, self.ref.initial
            for _ in range(max_steps):
                self.same(cid, rid)
                allowed = np.setdiff1d(np.flatnonzero(ix.allowed_tokens(cid)), stops)
                if not len(allowed):
                    break
                cand = np.intersect1d(allowed, preferred)
                tok = int(rng.choice(cand if len(cand) and rng.random() < 0.7 else allowed))
                cid, rid = ix.step_token(cid, tok), self.ref.step_bytes(rid, info.token_bytes[tok])
                assert cid != DEAD and rid != DEAD, info.token_bytes[tok]


@pytest.fixture(scope="module", params=REAL)
def real_info(request):
    folder = tokenizer_folder(request.param)
    if not (folder / "tokenizer.json").exists():
        pytest.skip(f"{folder} not present")
    from transformers import AutoTokenizer

    return TokenizerInfo.from_huggingface(AutoTokenizer.from_pretrained(str(folder), local_files_only=True))


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_core_corpus_equals_reference(case, smollm2_compiler, smollm2_info):
    compiled = smollm2_compiler.compile_json_schema(case["schema"])
    pair = Pair(compiled, successors=False)
    for value in case["valid"][:2]:
        pair.walk_text(canonical_json(value, case["schema"]).encode())
    for value in case["invalid"][:1]:  # up to where it dies
        pair.walk_text(json.dumps(value, separators=(",", ":")).encode(), every=3)
    pair.walk_tokens(compiled, smollm2_info, np.random.default_rng(len(case["name"])), walks=1, max_steps=20)
    assert pair.states > 3


@pytest.mark.parametrize("case", range(len(SCHEMAS)))
def test_schemas_equal_reference_on_smollm2(case, smollm2_info):
    compiled = GrammarCompiler(smollm2_info, cache_size=0).compile_json_schema(SCHEMAS[case])
    pair = Pair(compiled)
    pair.walk_text(TEXTS[case].encode(), every=1 if case < 2 else 5)
    pair.walk_tokens(compiled, smollm2_info, np.random.default_rng(case))
    assert pair.states > 20


@pytest.mark.parametrize("case", range(len(SCHEMAS)))
def test_schemas_equal_reference_on_real_vocabularies(case, real_info):
    compiled = GrammarCompiler(real_info, cache_size=0).compile_json_schema(SCHEMAS[case])
    pair = Pair(compiled, successors=case == 0)
    pair.walk_text(TEXTS[case].encode(), every=1 if case < 2 else 7)
    pair.walk_tokens(compiled, real_info, np.random.default_rng(case), walks=1)
    assert pair.states > 10


# A property name's first character, where some first bytes lead into a free name and others
# do not: the tokens of Plain.other_tail are kept per first byte (" x\"" must not close a name
# that cannot start with a space; a declared name's first byte is walked through in full).
NAME_START_SCHEMAS = [{"type": "object", "propertyNames": {"pattern": "^[a-z]"}},
                      {"type": "object", "properties": {" a": {}, "(b": {}},
                       "propertyNames": {"pattern": "^([a-z].*| a|\\(b)$"}}]


@pytest.mark.parametrize("case", range(len(NAME_START_SCHEMAS)))
def test_name_starts_equal_reference_on_real_vocabularies(case, real_info):
    compiled = GrammarCompiler(real_info, cache_size=0).compile_json_schema(NAME_START_SCHEMAS[case])
    pair = Pair(compiled, successors=True)
    pair.walk_text(b'{"abc":1,"bc":2,' + (b'" a":3}' if case else b'"x":[]}'))
    pair.walk_tokens(compiled, real_info, np.random.default_rng(case), walks=2, max_steps=12)
    assert pair.states > 10


# Below a name's first byte that also starts a declared name, the walk skips a subtree whose
# configuration stays alive on any plain bytes (a free name's states). Here "a" starts the
# declared "abc" and names a.{0,2}: "a", "ab" and "abc" take every plain byte, yet "abcd" is
# no name's prefix (the other first bytes, c-z, lead into free names).
BOUNDED_NAME_SCHEMA = {"type": "object", "properties": {"abc": {"type": "integer"}},
                       "propertyNames": {"pattern": "^([c-z].*|a.{0,2})$"}}


def test_bounded_name_start_equals_reference(smollm2_info, real_info):
    for info in (smollm2_info, real_info):
        compiled, pair = _walked_pair(info, BOUNDED_NAME_SCHEMA, b'{"abc":1,"a#":2,"cq":3}', 3, walks=2,
                                      max_steps=10)
        assert pair.states > 10
    # a token spelled twice ("abcd": the tries hold one of the two) goes with its twin
    info = toy_info([b"abcd", b"abcd", b"ab", b"abc", b"cat", b"cats"])
    ix = GrammarCompiler(info, cache_size=0).compile_json_schema(BOUNDED_NAME_SCHEMA).index
    cid = ix.step_bytes(ix.initial, b'{"')
    got = ix.mask(cid)
    assert np.array_equal(got, reference_mask(ix, cid))
    assert not (got.view(np.uint32)[0] & 3) and got.view(np.uint32)[0] >> 4 & 3 == 3  # no abcd; cat, cats


# Patterns whose character class loops: below a trie node with only looping byte classes under
# it the walk takes the whole subtree. [a-e] and [0-8] take part of a class (a-f, digits): no
# subtree with an f or a 9 below may be taken.
CLASS_LOOP_SCHEMA = {"type": "object", "properties": {
    "p": {"type": "string", "pattern": "^[a-e0-8_]+$"}, "q": {"type": "string", "pattern": "^[a-z0-9.-]+$"},
    "r": {"type": "string", "pattern": "^\\S+$"}, "s": {"type": "string", "pattern": "^[A-Za-z ]{2,}$"}}}
CLASS_LOOP_TEXT = b'{"p":"abc_dead_0812","q":"www.example-9.org","r":"x=1;y=[2]","s":"Hello World"}'


# The name-start walk asks whether a name's states stay alive on every plain byte, from each
# state's plain targets (kept per state when they are few, else read from its row). After "a"
# in the first, the declared names' second letters and a.{0,3} lead to six states; in the
# second, a space leads to a[^z].* (alive on any bytes) and "z" to az.? (it ends): "a" is not.
MANY_TARGET_NAME_SCHEMAS = [
    ({"type": "object", "properties": {k: {"type": "integer"} for k in ("ab", "ac", "ad", "ae", "af")},
      "propertyNames": {"pattern": "^([g-z].*|a.{0,3})$"}}, b'{"ab":1,"a#":2,"ae":3,"gq":4}'),
    ({"type": "object", "properties": {"abc": {}}, "propertyNames": {"pattern": "^(a[^z].*|az.?|[b-y].*)$"}},
     b'{"abc":1,"az":2,"azq":3,"ab":4}'),
]


@pytest.mark.parametrize("case", range(len(MANY_TARGET_NAME_SCHEMAS)))
def test_name_state_targets_equal_reference(case, smollm2_info, real_info):
    pairs = [_walked_pair(info, *MANY_TARGET_NAME_SCHEMAS[case], case, walks=3, max_steps=10)[1]
             for info in (smollm2_info, real_info)]
    assert min(p.states for p in pairs) > 10


def _walked_pair(info, schema, text: bytes, seed: int | None = None, *, walks: int = 2, max_steps: int = 15) -> tuple:
    """A fresh compile of ``schema`` paired with the reference, ``text`` walked in both, then
    (with a ``seed``) seeded random walks of allowed tokens."""
    compiled = GrammarCompiler(info, cache_size=0).compile_json_schema(schema)
    pair = Pair(compiled, successors=False)
    pair.walk_text(text)
    if seed is not None:
        pair.walk_tokens(compiled, info, np.random.default_rng(seed), walks=walks, max_steps=max_steps)
    return compiled, pair


# Strings whose length is bounded beside a pattern that does not bound it: each character is
# a state of its own, and before the pattern is met its bytes lead apart (a hex digit and any
# other character). The mask takes the plain and text tokens every string of whose length
# stays inside the string from tables by length, steps the few lengths past that one by one,
# and walks the rest (ConfigIndex::level_walk); elsewhere a subtree is taken whole where every
# string of its bytes and height stays inside the string (ConfigIndex::bounded_classes). An
# escape, a quote, a character from U+0080 up or a token longer than the room left is walked
# or stepped. "[0-9\u00e9]" takes one such character and no other: text tokens are walked there.
BOUNDED_STRING_CASES = [
    ({"type": "string", "pattern": "[0-9a-fA-F]+", "minLength": 12, "maxLength": 12}, b'"0123456789ab"'),
    ({"type": "string", "pattern": "[a-z]", "maxLength": 20}, b'"x\\n\\"y \xc3\xa9 \\u00e9z"'),
    ({"type": "object", "properties": {"id": {"type": "string", "pattern": "[0-9]", "maxLength": 8},
                                       "tag": {"type": "string", "pattern": "^(ab|[0-9]+)", "maxLength": 5}}},
     b'{"id":"ab1 x","tag":"ab\\t"}'),
    ({"type": "object", "properties": {"s": {"type": "string", "pattern": "[0-9]", "maxLength": 3},
                                       "t": {"type": "string", "pattern": "[0-9\u00e9]", "minLength": 2,
                                             "maxLength": 4}}},
     b'{"s":"\xc3\xa9a1","t":"\xd0\xb6\xc3\xa9"}'),
]


@pytest.mark.parametrize("case", range(len(BOUNDED_STRING_CASES)))
def test_bounded_strings_equal_reference(case, smollm2_info, real_info):
    schema, text = BOUNDED_STRING_CASES[case]
    for info in (smollm2_info, real_info):
        compiled, pair = _walked_pair(info, schema, text, case, walks=3, max_steps=12)
        assert pair.states > 8
        assert compiled.index.stats()["level_walks"] >= 1


# Host names and e-mail domains: labels of up to 63 characters, each position a state of
# its own where a letter or digit and a hyphen lead apart. The search for the subtrees taken
# whole steps one byte of each group of bytes that the rule takes alike within their class
# (ConfigIndex::ascii_reps): all letters and digits here, but only a-c and 0-4 of their
# classes under "[a-c0-4]", and g-m apart from n-z below.
LABEL_CASES = [
    ({"type": "object", "properties": {"h": {"type": "string", "format": "hostname"},
                                       "e": {"type": "string", "format": "email"}}},
     b'{"h":"api.example-host.com","e":"john.doe@mail.example.com"}'),
    ({"type": "string", "pattern": "^[a-c0-4]+(-[a-c0-4]+)*$", "maxLength": 40}, b'"ab1-c0-4ccc-ba"'),
    # g-m and n-z lead apart: after n-z only a 0 goes on
    ({"type": "string", "pattern": "^([a-mA-Z][a-zA-Z]{10}|[n-z]0)+$", "maxLength": 60}, b'"aBCDEFGHIJKn0gabcdefghijz0"'),
]


# A first class of plain bytes, then a loop on a class holding it: the plain tokens of the
# loop's class that start in the first class are set in bulk, those holding a byte that
# leaves the loop (a quote, an escape, a hyphen below) are stepped, the rest is walked.
FIRST_CLASS_CASES = [
    ({"type": "object", "properties": {"name": {"type": "string", "pattern": "^[A-Za-z0-9_][^<>*#.%&:\\\\+?/]*$"},
                                       "id": {"type": "string", "pattern": "^[a-z][a-z0-9_]*(-[a-z0-9_]+)*$"}}},
     b'{"name":"Copy_01 (\xc3\xa9t\xc3\xa9) \\t \\" x","id":"ab_9-c-d0"}'),
    ({"type": "array", "items": {"type": "string", "pattern": "^[A-Z][A-Za-z ]*$"}}, b'["Hello World","X"]'),
    # a few first bytes lead elsewhere: `$` into "$(...)", digits into "NN-..."; their tokens are walked
    ({"type": "array", "items": {"type": "string", "pattern": "^(?:(?:[\\w\\-\\.\\s]+)|(?:\\$\\([\\w\\-\\.]+\\)))+$"}},
     b'["My Metric","$(nf.asg)","a\\tb $(x.y)-z"]'),
    ({"type": "string", "pattern": "^([A-Za-z][A-Za-z0-9 ]*|[0-9]{2}-[a-z]+)$"}, b'"12-ab"'),
    # a URI's authority: most bytes lead into a host or user name, seven others apart
    ({"type": "string", "format": "uri"}, b'"http://user@example.com:8080/a?b=1#c"'),
]


@pytest.mark.parametrize("case", range(len(FIRST_CLASS_CASES)))
def test_first_classes_equal_reference(case, smollm2_info, real_info):
    schema, text = FIRST_CLASS_CASES[case]
    for info in (smollm2_info, real_info):
        compiled, _ = _walked_pair(info, schema, text, 80 + case, walks=3, max_steps=12)
        assert compiled.index.stats()["first_classes"] >= 1


# A class that leads from the first character's configuration through a chain of states, one
# per character, rather than a loop (a host name's label, whose length bound makes each
# character a state of its own): the class's tokens are set from the per-vocabulary bitmask,
# the tokens holding one of the other bytes those states take (a hyphen, a dot) are stepped
# (ConfigIndex::chain_class_walk). An e-mail domain, a host name, and a label pattern of its own.
CHAIN_CASES = [
    ({"type": "object", "properties": {"email": {"type": "string", "format": "email"}}},
     b'{"email":"john.doe@mail-1.example.org"}'),
    ({"type": "string", "format": "hostname"}, b'"a-1.example.com"'),
    ({"type": "string", "pattern": "^[a-z0-9]{1,40}(\\.[a-z0-9]{1,40})+$"}, b'"abc.de9"'),
]


@pytest.mark.parametrize("case", range(len(CHAIN_CASES)))
def test_chain_classes_equal_reference(case, smollm2_info, real_info):
    schema, text = CHAIN_CASES[case]
    for info in (smollm2_info, real_info):
        compiled, _ = _walked_pair(info, schema, text, 95 + case, walks=4, max_steps=12)
        # (a vocabulary whose letters-and-digits tokens outgrow a 63-byte label, Llama-3's 96,
        # keeps the walk: the shortcut holds only where every token of the class fits)
        assert compiled.index.stats()["chain_classes"] >= (info is smollm2_info or case == 2)


# A member name's start among declared names: a stack per name, each in a simple state taking
# its name's next byte; the mask is the union of each frame's own walk down its name's path
# (ConfigIndex::frames_walk), beside the free names' own mask where additionalProperties allow
# them (split_frames). Names share prefixes; one is a prefix of another; a value is bounded
# (a grammar with counters); the anyOf gives frames of several names each. (Declared members
# come in schema order, free ones after them.)
_NAMES = ["alpha", "alphabet", "allowJs", "allowUmd", "beta", "build", "charset", "checkJs", "debug", "declaration",
          "x-one", "\u00e9t\u00e9"]
FRAMES_CASES = [
    ({"type": "object", "properties": {n: {"type": "integer"} for n in _NAMES}, "additionalProperties": False},
     b'{"alphabet":1,"allowUmd":2,"debug":4,"\xc3\xa9t\xc3\xa9":3}', "frames_walks"),
    ({"type": "object", "properties": {**{n: {"$ref": "#"} for n in _NAMES}, "beta": {"type": "string", "maxLength": 5}},
      "additionalProperties": {"type": "string"}},
     b'{"alphabet":{},"beta":"ab","build":{"debug":{"x":"y"}},"charsets":"y"}', "split_frames"),
    ({"anyOf": [{"type": "object", "properties": {n: {"type": "integer"} for n in _NAMES[:6]}, "required": ["beta"],
                 "additionalProperties": False},
                {"type": "object", "properties": {n: {"type": "string"} for n in _NAMES[4:]}, "required": ["debug"],
                 "additionalProperties": False}]},
     b'{"build":"x","checkJs":"z","debug":"y"}', "frames_walks"),
]


@pytest.mark.parametrize("case", range(len(FRAMES_CASES)))
def test_frames_walks_equal_reference(case, smollm2_info, real_info):
    schema, text, stat = FRAMES_CASES[case]
    for info in (smollm2_info, real_info):
        compiled, _ = _walked_pair(info, schema, text, 90 + case, walks=4, max_steps=12)
        assert compiled.index.stats()[stat] >= 1


@pytest.mark.parametrize("case", range(len(LABEL_CASES)))
def test_labels_equal_reference(case, smollm2_info, real_info):
    schema, text = LABEL_CASES[case]
    for info in (smollm2_info, real_info):
        _walked_pair(info, schema, text, 70 + case, walks=3, max_steps=12)


# Unanchored patterns: the states of "abc" count how much of it was seen, none rejects a
# character, and none loops on every byte. From any of them every plain and text token is
# allowed and only the tokens with quotes, escapes, controls or partial characters are walked
# (ConfigIndex::text_total). "café" is met through a character from U+0080 up; `^[^x]*abc`
# rejects x until abc is seen and only then is total; `^[ -~]*ab` takes every plain byte but
# no character from U+0080 up before ab, and is total only after it; beside a bounded member the shortcut
# must leave the bounded string's states to their own walks.
UNANCHORED_CASES = [
    ({"type": "string", "pattern": "abc"}, b'"x ab\\"abd\\u00e9 \xc3\xa9abc \\n x"'),
    ({"type": "string", "pattern": "caf\u00e9"}, b'"cafe caf\xc3\xa9\\"\xe6\x97\xa5 z"'),
    ({"type": "object", "properties": {"p": {"type": "string", "pattern": "^[^x]*abc"},
                                       "q": {"type": "string", "pattern": "[0-9]", "maxLength": 6},
                                       "r": {"type": "array", "items": {"type": "string", "pattern": "[a-z]"}},
                                       "a": {"type": "string", "pattern": "^[ -~]*ab"}},
      "required": ["p", "r"]},
     b'{"p":"yy abc x \\t\xc3\xa9","q":"a1b","r":["0 a","\\"b"],"a":"x ab \xc3\xa9"}'),
]


@pytest.mark.parametrize("case", range(len(UNANCHORED_CASES)))
def test_unanchored_patterns_equal_reference(case, smollm2_info, real_info):
    schema, text = UNANCHORED_CASES[case]
    for info in (smollm2_info, real_info):
        compiled, pair = _walked_pair(info, schema, text, 40 + case, walks=3, max_steps=12)
        # (inside the object most first bytes of these strings loop, and the first bytes are
        # taken per byte there instead: the shortcut serves the strings standing alone)
        assert compiled.index.stats()["text_totals"] >= (case < 2)


# Long bounded strings are counters: each position is a configuration of its own. A string
# body alone in its configuration, whose item is one character, takes its unbounded twin's
# mask less the tokens that start more characters than are left, or leave the string before
# the lower bound (ConfigIndex::bounded_walk). Elsewhere (two bounded strings side by side in
# an anyOf), far from the upper bound (farther than the longest token) a step along the
# string repeats from every position, so the search for the room left and the walk of the
# tokens holding quotes or escapes read one step instead of each position
# (ConfigIndex::shifted). The texts run from far to near the bound (and one past the lower
# bound), where the room left is below a long token's length: masks there must refuse the
# tokens that overshoot.
_LONG = "the quick brown fox, \u00e9t\u00e9 \u65e5\u672c ... " * 6


_NAME = "Copy_Pipeline-01 (\u00e9t\u00e9) \u65e5\u672c, [x] $y ! " * 12


def _name(n: int) -> bytes:
    return _NAME[:n].encode()


def _counted_text(n: int) -> bytes:
    return ('"' + (_LONG * 4)[:n] + '"').encode()


COUNTED_STRING_CASES = [
    ({"type": "string", "maxLength": 180}, _counted_text(170), "bounded_walks"),
    ({"type": "object", "properties": {"a": {"type": "string", "minLength": 3, "maxLength": 300},
                                       "b": {"type": "array", "items": {"type": "string", "maxLength": 150},
                                             "maxItems": 200}}},
     b'{"a":' + _counted_text(40) + b',"b":[' + _counted_text(145) + b',"x\\"\\\\y"]}', "bounded_walks"),
    # the lower bound far in: tokens that close the string early are refused, by their characters
    ({"type": "array", "items": {"type": "string", "minLength": 90, "maxLength": 100}},
     b'[' + _counted_text(95) + b',"a\\u00e9\\n' + _counted_text(92)[1:] + b']', "bounded_walks"),
    ({"anyOf": [{"type": "string", "maxLength": 180}, {"type": "string", "minLength": 3, "maxLength": 190}]},
     _counted_text(185), "counter_shifts"),
    # a first character, then a bounded class (items: a character or a JSON escape): the
    # walks below the first character step into the unbounded twin, up to where a token may
    # reach the bound
    ({"type": "object", "properties": {"name": {"type": "string", "maxLength": 260,
                                                "pattern": "^[A-Za-z0-9_][^<>*#.%&:\\\\+?/]*$"}}},
     b'{"name":"' + _name(120) + b'\\t' + _name(133) + b'"}', "walk_twins"),
    # a lower bound far in: no twin before it
    ({"type": "array", "items": {"type": "string", "minLength": 60, "maxLength": 300, "pattern": "^[A-Z][^<>]*$"}},
     b'["' + _name(100) + b'","' + _name(61) + b'"]', "walk_twins"),
]


@pytest.mark.parametrize("case", range(len(COUNTED_STRING_CASES)))
def test_counted_strings_equal_reference(case, smollm2_info, real_info):
    schema, text, path = COUNTED_STRING_CASES[case]
    for info in (smollm2_info, real_info):
        compiled = GrammarCompiler(info, cache_size=0).compile_json_schema(schema)
        pair = Pair(compiled, successors=False)
        pair.walk_text(text, every=3)
        pair.walk_tokens(compiled, info, np.random.default_rng(50 + case), walks=2, max_steps=12)
        assert compiled.index.stats()[path] >= 1


def test_counter_beside_an_item_byte_equals_reference(smollm2_info, real_info):
    """What follows the counter starts with a byte that also starts an item: a token's items
    are not its own to count there, so its masks are walked (no twin's mask)."""
    text = (_LONG * 4)[:95].encode() + b"x"
    for info in (smollm2_info, real_info):
        compiled = GrammarCompiler(info, cache_size=0).compile_grammar('start: /[^"\\\\\\x00-\\x1f]{0,100}/ "x"\n')
        pair = Pair(compiled, successors=False)
        pair.walk_text(text, every=3)
        pair.walk_tokens(compiled, info, np.random.default_rng(57), walks=2, max_steps=12)
        assert compiled.index.stats()["bounded_walks"] == 0


# Loops on every character but a few, which end them: `.` takes no U+2028 or U+2029, and
# patternProperties keep names to the characters where the regex engines agree. Every plain
# and text token is taken in bulk, the tokens holding a quote, an escape or a control are
# walked, and the tokens holding one of those characters are cleared.
KILLED_LOOP_CASES = [
    ({"type": "string", "pattern": "^.*$"}, '"ab \u00e9\\" \u65e5\\n"'.encode()),
    ({"type": "object", "patternProperties": {"^x-": {"type": "string", "pattern": "^.*$"}},
      "additionalProperties": False},
     '{"x-a\u00e9b":"c\u2027d","x-":"","x-\u65e5":"e"}'.encode()),
]


@pytest.mark.parametrize("case", range(len(KILLED_LOOP_CASES)))
def test_killed_loops_equal_reference(case, smollm2_info, real_info):
    schema, text = KILLED_LOOP_CASES[case]
    for info in (smollm2_info, real_info):
        compiled, pair = _walked_pair(info, schema, text, 60 + case, walks=3, max_steps=12)
        assert compiled.index.stats()["killed_char_loops"] >= 1


def test_class_loops_equal_reference(smollm2_info, real_info):
    for info in (smollm2_info, real_info):
        compiled, pair = _walked_pair(info, CLASS_LOOP_SCHEMA, CLASS_LOOP_TEXT, 5, walks=2,
                                      max_steps=15)
        assert pair.states > 40
        assert compiled.index.stats()["text_classes"] >= 1  # (\S+: its text tokens in bulk)


# A character class repeated, bounded or not ([a-z0-f]{40}, [a-zA-Z0-9_.]+ with maxLength, or
# without): every position is a configuration of its own, whose mask takes the class's plain
# tokens up to the room left from one bitmask per vocabulary and walks the tokens with other
# bytes. A class followed by another set of plain bytes ("-" after [a-z]{4}, more bytes, fewer),
# or whose bytes lead apart (x after [a-z]{2,5}), goes byte by byte.
CLASS_REPEAT_SCHEMA = {"type": "object", "properties": {
    "h": {"type": "string", "pattern": "^I[a-z0-f]{40}$"},
    "k": {"type": "string", "pattern": "^[a-zA-Z0-9_.]+$", "maxLength": 12},
    "u": {"type": "string", "pattern": "^[a-zA-Z0-9_.]+$"},
    "d": {"type": "string", "pattern": "^[a-z]{4}-[a-z]{2}$"},
    "x": {"type": "string", "pattern": "^[a-z]{2,5}x$"},
    "e": {"type": "string", "pattern": "^[a-z]{4}[a-z0-9]{2}$"},
    "f": {"type": "string", "pattern": "^[a-z]{3}[a-m]{3}$"}}}
CLASS_REPEAT_TEXT = (b'{"h":"I' + b"0123456789abcdef" * 2 + b'0a2b4c6d","k":"key_1.x","u":"some_Word.9",'
                     b'"d":"abcd-ef","x":"abcx","e":"abcd12","f":"xyzabc"}')


# A class of plain bytes that keeps a configuration among a few that all take it (an email's
# local part and domain, a host label's letters, digits and hyphens), left by a few other
# bytes ("@", ".", "-", digits after a leading letter): the plain tokens of the class alone are
# taken in bulk and the tokens holding an exit byte are stepped one by one. "t" takes
# letters first and digits only later; "w" has "_" inside its loop and "@" as its exit.
CLASS_CLOSURE_SCHEMA = {"type": "object", "properties": {
    "e": {"type": "string", "pattern": "^[a-z\\d_\\.\\+-]+@([a-z\\d\\.-]+\\.)+[a-z]+$"},
    "t": {"type": "string", "pattern": "^[A-Za-z](?:[A-Za-z0-9]+[-]?)+[A-Za-z0-9]$"},
    "w": {"type": "string", "pattern": "^[a-z_]+@[a-z]+$"},
    "h": {"type": "string", "pattern": "^[a-z0-9]+(-[a-z0-9]+)*(\\.[a-z0-9]+(-[a-z0-9]+)*)*$"}}}
CLASS_CLOSURE_TEXT = (b'{"e":"john.doe+x_1@mail-2.example.com","t":"a1-b2c-d","w":"some_name@host",'
                      b'"h":"www.my-host.example9.org"}')


# patternProperties keep names to the characters where ECMA-262 and Python read the patterns
# alike: without U+2028 and U+2029, and without Unicode digits, word or space characters where
# \d, \w or \s appear. A free name then loops on every character but those, which end it:
# the text tokens are taken in bulk and those holding such a character are cleared after.
KILLED_CHARS_SCHEMAS = [
    {"type": "object", "patternProperties": {"^\\d+$": {"type": "integer"}}},
    {"type": "object", "patternProperties": {"^x": {"type": "string"}, "^-?\\d+$": {"type": "array"}}},
    {"type": "object", "properties": {"ab": {}}, "patternProperties": {"^\\s": {"type": "null"}}},
    {"type": "object", "patternProperties": {"^[0-9]+$": {"type": "integer"}, "^w\\w*$": {}}}]
KILLED_CHARS_TEXTS = ['{"12":1,"a٣b":[],"x١":"s","é":{}}', '{"x":"a","-7":[],"ü":1}',
                      '{"ab":1,"a b":2,"日本":3}', '{"1":1,"wé":2,"ñ":3}']


@pytest.mark.parametrize("case", range(len(KILLED_CHARS_SCHEMAS)))
def test_killed_characters_equal_reference(case, smollm2_info, real_info):
    for info in (smollm2_info, real_info):
        _, pair = _walked_pair(info, KILLED_CHARS_SCHEMAS[case], KILLED_CHARS_TEXTS[case].encode(), 17 + case,
                               walks=3, max_steps=10)
        assert pair.states > 15


# A free name's first character may take what its body kills: after "a" here, [^z] takes
# U+2028 where . does not, so "a\u2028" is a name, and a token that is just U+2028 (Phi-3
# has one) must stay allowed there while the body's killed characters are cleared in bulk.
FIRST_KILLED_SCHEMA = {"type": "object", "properties": {"abc": {}},
                       "propertyNames": {"pattern": "^(a[^z].*|az.?|[b-y].*)$"}}


def test_a_first_character_the_body_kills_stays_allowed(smollm2_info, real_info):
    for info in (smollm2_info, real_info):
        compiled, _ = _walked_pair(info, FIRST_KILLED_SCHEMA, '{"abc":1,"a\u2028":2,"a\u2028b":3}'.encode(), 5,
                                   walks=2, max_steps=8)
        ix = compiled.index
        cid = ix.step_bytes(ix.initial, b'{"a')
        allowed = ix.allowed_tokens(cid)
        alone = [t for t, b in enumerate(info.token_bytes) if b == "\u2028".encode()]
        assert all(allowed[t] for t in alone)


# A name's first character taking what the name's body kills (its class takes any character
# but "z", the body none from U+0080 up, no "é", no U+2028, no Unicode space): the tokens that
# start with such a character and go on in the body stay allowed ("és", U+2028 alone), and the
# bulk clearing of the body's killed characters must not reach them.
FIRST_KILLED_CASES = [(lead, {"type": "object", "propertyNames": {"pattern": f"^({lead}{first}{body})$"}})
                      for lead, first, body in itertools.product(["x", "ab"], ["[^z]", "[\\s\\S]"],
                                                                 ["[ -~]*", "[^é]*", ".*", "\\S*"])]


def test_first_characters_the_body_kills_equal_reference(smollm2_info, real_info):
    for info in (smollm2_info, real_info):
        for k, (lead, schema) in enumerate(FIRST_KILLED_CASES):
            text = '{"%sés":1,"%s\u2028 ":2,"%s\ufeffa":3}' % (lead, lead, lead)
            _walked_pair(info, schema, text.encode(), k, walks=1, max_steps=4)


def test_killed_characters_are_cleared_in_bulk(smollm2_info):
    # (\w keeps Unicode letters out of every name: SmolLM2's text tokens hold some)
    compiled, _ = _walked_pair(smollm2_info, KILLED_CHARS_SCHEMAS[3], KILLED_CHARS_TEXTS[3].encode())
    assert compiled.index.stats()["killed_char_loops"] >= 1


# A bounded string body counts characters: every position is a configuration of its own, where
# each plain byte and each character from U+0080 up advance alike. The text tokens (whole
# characters, some from U+0080 up) are taken by their count of characters, and only the other
# tokens are walked. Where characters from U+0080 up do not act like the plain bytes (printable
# ASCII only; every character but "é"), or only some may come last (after two characters
# only an "é": "tré" is allowed at the start), every token is walked.
BOUNDED_TEXT_SCHEMA = {"type": "object", "properties": {
    "m": {"type": "string", "maxLength": 6},
    "n": {"type": "string", "minLength": 3, "maxLength": 4},
    "l": {"type": "string", "minLength": 5},
    "a": {"type": "string", "pattern": "^[ -~]{0,6}$"},
    "e": {"type": "string", "pattern": "^[^é]{0,5}$"},
    "z": {"type": "string", "pattern": "^.{0,3}[a-zé]?$"},
    "y": {"type": "string", "pattern": "^[\\s\\S]{0,2}é?$"}}}
BOUNDED_TEXT_TEXT = ('{"m":"é東京x","n":"añb","l":"ü∂日本語 more","a":"ab c~","e":"日本ü","z":"ñ€é",'
                     '"y":"tré"}').encode()


def test_bounded_text_equals_reference(smollm2_info, real_info):
    for info in (smollm2_info, real_info):
        compiled, pair = _walked_pair(info, BOUNDED_TEXT_SCHEMA, BOUNDED_TEXT_TEXT, 11, walks=3,
                                      max_steps=12)
        assert pair.states > 50


# (schema, text, seed, walks, states at least, the stat of the shortcut, its count at least)
CLASS_TABLE_CASES = {
    "repeats": (CLASS_REPEAT_SCHEMA, CLASS_REPEAT_TEXT, 7, 2, 80, "classes", 2),
    "closures": (CLASS_CLOSURE_SCHEMA, CLASS_CLOSURE_TEXT, 13, 3, 60, "class_closures", 4),
}


@pytest.mark.parametrize("case", list(CLASS_TABLE_CASES))
def test_class_tables_equal_reference(case, smollm2_info, real_info):
    schema, text, seed, walks, states, stat, served = CLASS_TABLE_CASES[case]
    for info in (smollm2_info, real_info):
        compiled, pair = _walked_pair(info, schema, text, seed, walks=walks, max_steps=15)
        assert pair.states > states
        assert compiled.index.stats()[stat] >= served


def test_class_repeat_tokens_on_a_toy_vocabulary():
    # the class's tokens up to the room left ("dead" not at 3 left, "ab" at 2), a token past
    # the class ("ab\"" at 2 left: it ends the string) and one leaving it ("a-") told apart;
    # a class followed by more bytes ("ab1") or fewer ("apo" against "apb")
    info = toy_info([b"dead", b"beef", b"ab", b"0f9", b'ab"', b'f"', b"a-", b"Ab", b"ba" * 4, b"ab1", b"apo", b"apb"])
    cases = [("^[0-9a-f]{6}$", b'"deadbe"'), ("^[0-9a-f]{6}$", b'"0f9ab1"'), ("^[0-9a-f]+$", b'"ab0f9'),
             ("^[a-p]{2}[a-p0-9]{2}$", b'"ab1c"'), ("^[a-p]{2}[a-h]{2}$", b'"apbc"')]
    for pattern, text in cases:
        compiled = GrammarCompiler(info, cache_size=0).compile_json_schema({"type": "string", "pattern": pattern})
        ix, cid = compiled.index, compiled.index.initial
        for b in text:
            assert np.array_equal(ix.mask(cid), reference_mask(ix, cid)), (pattern, text)
            cid = ix.step_bytes(cid, bytes([b]))
            assert cid != DEAD
        # (the last pattern's [a-h] is too few bytes for a class: byte by byte throughout)
        assert ix.stats()["classes"] >= (pattern != cases[-1][0]), pattern


# Where a member name may start, the first bytes a name may take are the same from every
# member of one object: their tokens are set once per (token group, first bytes) into a
# memoised mask and ORed from it. A hit must give the bits that setting them gives, whichever
# configuration filled the memo first.
_INT = {"type": "integer"}
# two objects whose names take different first bytes, a part of the vocabulary each (every
# first byte would be set from the union, no memo), with declared names among them (walked
# below their first bytes): several memo entries in one index
NAME_MEMO_SCHEMA = {"type": "object", "properties": {
    "one": {"type": "object", "properties": {"s1": _INT, "c1": _INT, "p1": _INT, "t1": _INT},
            "propertyNames": {"pattern": "^[a-z]"}, "additionalProperties": _INT},
    "two": {"type": "object", "properties": {"a1": _INT, "d1": _INT, "m1": _INT, "r1": _INT},
            "propertyNames": {"pattern": "^[a-z0-9_]"}, "additionalProperties": _INT}}}
NAME_MEMO_TEXT = b'{"one":{"s1":1,"c1":2,"k":2},"two":{"a1":1,"m1":2,"k":3}}'


def test_name_start_memo_equals_reference(smollm2_info, real_info):
    for info in (smollm2_info, real_info):
        compiled, _ = _walked_pair(info, NAME_MEMO_SCHEMA, NAME_MEMO_TEXT)
        if info is smollm2_info:  # (elsewhere the ids may be few enough to set without it)
            assert compiled.index.stats()["run_masks"] > 1  # the memo took part, with several entries
        masks = []
        cid = compiled.index.initial
        for b in NAME_MEMO_TEXT:
            masks.append(compiled.index.mask(cid))
            cid = compiled.index.step_bytes(cid, bytes([b]))
        # a second index of the same grammar, its masks computed last position first
        other = GrammarCompiler(info, cache_size=0).compile_json_schema(NAME_MEMO_SCHEMA).index
        cids = [other.initial]
        for b in NAME_MEMO_TEXT[:-1]:
            cids.append(other.step_bytes(cids[-1], bytes([b])))
        for k in reversed(range(len(cids))):
            assert np.array_equal(other.mask(cids[k]), masks[k]), NAME_MEMO_TEXT[:k]


def test_without_frame_tables_equals_reference(smollm2_info, monkeypatch):
    # past the frame tables' budget rows close each distinct target once: same configurations
    from structgen.index import token_index

    monkeypatch.setattr(token_index, "_TABLE_CELLS", 0)
    compiled = GrammarCompiler(smollm2_info, cache_size=0).compile_json_schema(SCHEMAS[1])
    assert compiled.index.stats()["frame_tables"] == 0
    pair = Pair(compiled)
    pair.walk_text(TEXTS[1].encode())
    assert compiled.index.stats()["frame_tables"] == 0 and pair.states > 20


def test_deep_recursion_equals_reference():
    # a stack hundreds of frames deep: closure, rows and canonical stacks are iterative
    from structgen import Grammar

    g = Grammar.from_lark('start: v\nv: "[" v? "]" | "a"')
    compiled = GrammarCompiler(toy_info([b"[", b"]", b"a", b"[[", b"]]", b"[a]"])).compile_grammar(g)
    pair = Pair(compiled)
    pair.walk_text(b"[" * 600 + b"a" + b"]" * 600, every=37)
    assert pair.states > 30


def test_stack_limit_raises_limit_error_natively(monkeypatch):
    import structgen.index.counters

    compiled = GrammarCompiler(toy_info([])).compile_json_schema({"type": "string", "pattern": "^(a|aa){100}$"})
    index = compiled.index
    cid = index.step_bytes(index.initial, b'"')
    monkeypatch.setattr(structgen.index.counters, "MAX_CONFIG_STACKS", 3)
    with pytest.raises(LimitError) as info:
        for _ in range(20):
            cid = index.step_bytes(cid, b"a")
    assert info.value.limit_name == "MAX_CONFIG_STACKS" and info.value.reached > 3
    assert len(index.config_stacks(cid)) <= 3
    monkeypatch.setattr(structgen.index.counters, "MAX_CONFIG_STACKS", 512)
    assert index.step_bytes(cid, b"a") != DEAD  # the limit is read at each call


def test_threads_compute_masks_of_one_index_alike(smollm2_info):
    """Threads computing first masks of one fresh index at once (the GIL released through
    each whole mask) get the reference's masks and intern each configuration once."""
    compiler = GrammarCompiler(smollm2_info, cache_size=0)
    shared = compiler.compile_json_schema(SCHEMAS[0])
    data = TEXTS[0].encode()
    errors: list[str] = []
    results: dict[int, list[tuple[int, np.ndarray]]] = {}

    def run(k: int) -> None:
        try:
            ix, cid, out = shared.index, shared.index.initial, []
            for b in data:
                out.append((cid, ix.mask(cid).copy()))
                cid = ix.step_bytes(cid, bytes([b]))
                if cid == DEAD:
                    break
            results[k] = out
        except Exception as e:  # noqa: BLE001 - any failure in a thread is reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=run, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    stats = shared.index.stats()
    assert stats["config_keys"] == stats["configs"] == shared.index.num_configs
    alone = compiler.compile_json_schema(SCHEMAS[0])
    pair = Pair(alone, successors=False)
    ref = pair.ref
    rid, checked = ref.initial, 0
    for cid, mask in results[0]:
        assert shared.index.describe(cid) == _ref_describe(ref, rid)
        assert np.array_equal(mask, ref.mask(rid))
        rid = ref.step_bytes(rid, bytes([data[checked]]))
        checked += 1
    assert checked == len(data)




def test_a_first_visit_keeps_the_gil_through_a_short_walk_only(smollm2_tokenizer, smollm2_info):
    """A first-visit fill holds the GIL through a walk inside a member name (a few first
    bytes of the name's DFA row) and releases it once the mask needs more: a byte row, a
    string body's walk (``_core.gil_releases`` counts this thread's releases)."""
    from structgen import _core

    compiler = GrammarCompiler(smollm2_info, cache_size=0)
    schema = {"type": "object", "additionalProperties": False, "required": ["alpha"],
              "properties": {"alpha": {"type": "string", "minLength": 12, "maxLength": 12, "pattern": "[0-9a-f]+"}}}
    compiled = compiler.compile_json_schema(schema)
    bitmask = np.zeros((1, (smollm2_info.vocab_size + 31) // 32), np.int32)
    texts = ['{"', "alpha", '":"', "0", "1"]

    def releases_per_fill(matcher: GrammarMatcher) -> list[int]:
        out = []
        for text in texts:
            before = _core.gil_releases()
            matcher.fill_next_token_bitmask(bitmask)
            out.append(_core.gil_releases() - before)
            (token,) = smollm2_tokenizer.encode(text, add_special_tokens=False)
            assert matcher.accept_token(token)
        return out

    # the object's opening and the name (a first byte or two each) keep it; the byte row
    # after the name and the string body's walks release it, once per fill
    assert releases_per_fill(compiled.matcher()) == [0, 0, 1, 1, 1]
    # the same path again: every mask is memoised, and no fill releases it
    assert releases_per_fill(compiled.matcher()) == [0, 0, 0, 0, 0]


@pytest.mark.parametrize("walk", ["long output", "random walks"])
def test_configurations_and_stacks_are_interned_once(smollm2_info, walk):
    """Every configuration and every stack is interned once while the intern tables grow (a
    table grows without a pause: its entries move to the doubled table a few per insert, and
    lookups search both until the old one is empty). The masks along a long output of a
    150-member object make thousands of configurations and stacks across several growths;
    random walks through nested arrays and objects meet configurations made before again
    while the small tables are still moving. No two configurations or stacks are equal."""
    if walk == "long output":
        props = {f"member_{k:03d}": {"type": "string"} for k in range(150)}
        schema = {"type": "object", "properties": props, "required": sorted(props)}
        index = GrammarCompiler(smollm2_info, cache_size=0).compile_json_schema(schema).index
        cid = index.initial
        for b in json.dumps({k: f"value {k}" for k in sorted(props)}, separators=(",", ":")).encode():
            index.mask(cid)
            cid = index.step_bytes(cid, bytes([b]))
            assert cid != DEAD
        assert index.stats()["configs"] > 2000
    else:
        schema = {"type": "array", "items": {"type": "object", "properties": {
            "a": {"type": "integer"}, "b": {"type": "array", "items": {"type": "string", "maxLength": 5}}}}}
        compiled = GrammarCompiler(smollm2_info, cache_size=0).compile_json_schema(schema)
        index = compiled.index
        rng = np.random.default_rng(1)
        for _ in range(60):
            random_walk(GrammarMatcher(compiled), smollm2_info, rng, max_steps=150, stop_p=0.05)
    native = index._native
    stats = native.stats()
    configs = [(native.config_stacks(c), index.is_accepting(c)) for c in range(stats["configs"])]
    assert len(set(configs)) == len(configs)  # (DEAD and the finished output hold no stack)
    stacks = [native.stack(s) for s in range(stats["stacks"])]
    assert len(set(stacks)) == len(stacks)


def test_equal_masks_are_stored_once(real_info):
    """Configurations with equal masks share one stored copy, and no two stored copies are
    equal: the dedupe compares the chunks its hash found nonzero, then the words after the
    last whole 64-byte chunk (Llama-3's 4,008 words end in 8 such words; the stop token sits
    in them)."""
    props = {f"k{k}": {"enum": ["x", "y"]} for k in range(12)}
    schema = {"type": "array", "items": {"type": "object", "properties": props, "additionalProperties": False}}
    compiled = GrammarCompiler(real_info, cache_size=0).compile_json_schema(schema)
    index = compiled.index
    data = json.dumps([{k: "xy"[j % 2] for j, k in enumerate(props)}] * 3, separators=(",", ":")).encode()
    cid, seen = index.initial, {}
    for b in data:
        seen.setdefault(index.mask(cid).tobytes(), set()).add(cid)
        cid = index.step_bytes(cid, bytes([b]))
        assert cid != DEAD
    seen.setdefault(index.mask(cid).tobytes(), set()).add(cid)  # the end: the stop tokens' word
    stats = index._native.stats()
    assert stats["masks"] == len(seen) < stats["mask_configs"]
    addresses = {bits: {index.mask(c).__array_interface__["data"][0] for c in cids} for bits, cids in seen.items()}
    assert all(len(a) == 1 for a in addresses.values())  # one copy per content


def test_masks_with_few_set_chunks_are_kept_in_part(real_info):
    """A new mask whose set bits lie in at most a quarter of its 64-byte chunks (inside a name
    or a literal) is kept as those chunks and the words after the last whole one. A revisit
    writes the row's zeros and the chunks; ``mask()`` makes a whole copy once and keeps it. A
    second matcher's fills, served from the kept masks, equal the first's, computed in the
    row, and every whole copy equals the reference."""
    props = {f"member_{k}": {"enum": ["first value", "second value"]} for k in range(6)}
    schema = {"type": "object", "properties": props, "required": sorted(props), "additionalProperties": False}
    compiled = GrammarCompiler(real_info, cache_size=0).compile_json_schema(schema)
    index = compiled.index
    words = (real_info.vocab_size + 31) // 32
    rng = np.random.default_rng(7)
    first, tokens, cids = GrammarMatcher(compiled), [], []
    rows = []
    while not first.is_terminated() and len(tokens) < 200:
        row = np.zeros((1, words), dtype=np.int32)
        first.fill_next_token_bitmask(row)
        rows.append(row[0].copy())
        cids.append(first._history[-1])
        allowed = np.flatnonzero(np.unpackbits(row[0].view(np.uint8), bitorder="little")[: real_info.vocab_size])
        tokens.append(int(rng.choice(allowed)))
        assert first.accept_token(tokens[-1])
    assert first.is_terminated()
    stats = index._native.stats()
    assert 0 < stats["mask_bytes"] < stats["masks"] * words * 4 // 2  # most kept in part
    second = GrammarMatcher(compiled)
    for row, tok in zip(rows, tokens):
        again = np.full((1, words), -1, dtype=np.int32)  # (every word written, zeros too)
        second.fill_next_token_bitmask(again)
        assert np.array_equal(again[0], row)
        assert second.accept_token(tok)
    for cid in cids:
        assert np.array_equal(index.mask(cid), reference_mask(index, cid))
    assert index._native.stats()["mask_bytes"] > stats["mask_bytes"]  # the whole copies made
