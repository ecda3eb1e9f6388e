"""The native subset construction and Hopcroft minimisation (structgen._core) build the same
rule DFAs as the reference stages (tests/reference_automaton.py), array for array: every
schema of tests/data/core_schemas.json, the built-in JSON grammars, and schemas chosen for
long chains (bounded strings and arrays), recursion, counters and the size limit.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from structgen.index import automaton
from structgen.index.automaton import build_automaton
from structgen.grammar.builtin import load_grammar
from structgen.errors import AutomatonSizeError
from structgen.schema.to_grammar import schema_to_grammar

from . import reference_automaton
from .conftest import DATA

CASES = json.loads((DATA / "core_schemas.json").read_text(encoding="utf-8"))

EXTRA = {
    "long_string": {"type": "string", "minLength": 3, "maxLength": 300},
    "bounded_array": {"type": "array", "items": {"enum": ["a", "ab", "abc"]}, "minItems": 2, "maxItems": 60},
    "recursive": {"$defs": {"n": {"type": "object", "properties": {"v": {"type": "integer"},
                                                                   "k": {"type": "array", "items": {"$ref": "#/$defs/n"}}}}},
                  "$ref": "#/$defs/n"},
    "pattern": {"type": "string", "pattern": "^(ab|a[bc]d|[x-z]{2,5})+é?$"},
    "numbers": {"type": "object", "properties": {"x": {"type": "number", "minimum": -5, "maximum": 123.5},
                                                 "y": {"type": "integer", "multipleOf": 3}}},
}

_ALPHABET = np.ones(256, bool)
_ALPHABET[[0xC0, 0xC1] + list(range(0xF5, 0x100))] = False  # as a byte-level vocabulary leaves them out


def _build(grammar, reference: bool, monkeypatch, **kw):
    with monkeypatch.context() as m:
        # both sides build every rule: none comes from the process's cache of rule automata
        m.setattr(automaton, "_RULES", automaton._RuleDFAs())
        if reference:
            m.setattr(automaton, "_rule_dfa", reference_automaton.rule_dfa)
            m.setattr(automaton, "_trim_and_minimise", reference_automaton.trim_and_minimise)
            m.setattr(automaton, "BUILD_THREADS", 1)  # no rule built natively ahead
        return build_automaton(grammar, **kw)


def _assert_same(native, ref) -> None:
    assert native.root == ref.root and len(native.rules) == len(ref.rules)
    for a, b in zip(native.rules, ref.rules):
        assert type(a) is type(b) and a.name == b.name
        if isinstance(a, automaton.RuleDFA):
            assert np.array_equal(a.trans, b.trans), a.name
            assert np.array_equal(a.final, b.final), a.name
            assert a.calls == b.calls, a.name
        else:
            assert a == b


GRAMMARS = [(c["name"], c["schema"]) for c in CASES] + list(EXTRA.items())


@pytest.mark.parametrize("name,schema", GRAMMARS, ids=[g[0][:40] for g in GRAMMARS])
def test_rule_dfas_equal_reference(name, schema, monkeypatch):
    grammar = schema_to_grammar(schema)
    for alphabet in (None, _ALPHABET):
        native = _build(grammar, False, monkeypatch, byte_alphabet=alphabet)
        ref = _build(grammar, True, monkeypatch, byte_alphabet=alphabet)
        _assert_same(native, ref)


def _assert_path(built) -> None:
    """A rule's ``path_callees`` (see _rule_dfa): its start state reaches a final state by
    bytes and calls to those callees alone; empty exactly when bytes alone do."""
    trans, final, call_off, call_edge, alone, _, callees = built
    if not len(final):
        assert callees is None
        return
    assert callees is not None and (callees == ()) == alone and list(callees) == sorted(set(callees))
    seen, stack = {0}, [0]
    while stack:
        s = stack.pop()
        nxt = set(trans[s].tolist()) - {-1}
        nxt |= {int(t) for c, t in call_edge[call_off[s]:call_off[s + 1]].tolist() if c in callees}
        for t in nxt - seen:
            seen.add(t)
            stack.append(t)
    assert any(final[s] for s in seen)


def test_rule_dfa_outputs_equal_reference(monkeypatch):
    """Rule by rule, every output of the native construction equals the reference's, the flag
    "ends by bytes alone" (which lets the productivity pass skip a rule) included."""
    native_rule_dfa = automaton._rule_dfa
    seen = {True: 0, False: 0}

    def both(arrays, root, *rest):
        got = native_rule_dfa(arrays, root, *rest)
        want = reference_automaton.rule_dfa(arrays, root, *rest)
        assert all(np.array_equal(g, w) for g, w in zip(got[:4], want[:4])) and got[4] == want[4]
        _assert_path(got)
        seen[got[4]] += 1
        return got

    monkeypatch.setattr(automaton, "_rule_dfa", both)
    monkeypatch.setattr(automaton, "BUILD_THREADS", 1)  # every rule through _rule_dfa
    monkeypatch.setattr(automaton, "_RULES", automaton._RuleDFAs())
    monkeypatch.setattr(automaton._RuleDFAs, "put", lambda *a: None)  # every rule built, none cached
    for _, schema in GRAMMARS:
        build_automaton(schema_to_grammar(schema), byte_alphabet=_ALPHABET)
    assert seen[True] and seen[False]  # both answers occur


def _index(pda):
    """The configuration index of an automaton, over a toy vocabulary (its distances do not
    depend on the vocabulary)."""
    from structgen import GrammarCompiler
    from structgen.index.token_index import TokenIndex

    from .conftest import toy_info

    info = toy_info([b'"', b"{", b"}"])
    return TokenIndex(pda, info, GrammarCompiler(info).trie)


def _same_distances(native, ref) -> None:
    assert len(native) == len(ref)
    for a, b in zip(native, ref):
        if isinstance(b, reference_automaton.CounterDistances):
            assert a == (b.lo, b.item_min)
        else:
            assert a.dtype == np.int64 and np.array_equal(a, b)


@pytest.mark.parametrize("name,schema", GRAMMARS, ids=[g[0][:40] for g in GRAMMARS])
def test_completion_distances_equal_reference(name, schema):
    pda = build_automaton(schema_to_grammar(schema))
    _same_distances(_index(pda).rule_distances(), reference_automaton.completion_distances(pda))


@pytest.mark.parametrize("name,schema", GRAMMARS, ids=[g[0][:40] for g in GRAMMARS])
def test_shortest_match_equals_the_start_states_distance(name, schema):
    # the forward search a counted grammar's index runs when it is built (fa::shortest_match)
    # gives each rule's dist[0] of the full distances, given the callees' shortest matches
    from structgen import _core
    from structgen.index.counters import CounterRule

    pda = build_automaton(schema_to_grammar(schema))
    dists = _index(pda).rule_distances()
    minlen = np.array([d[0] * d[1] if isinstance(r, CounterRule) else d[0] if len(d) else automaton.UNREACHABLE
                       for r, d in zip(pda.rules, dists)], np.int64)
    minlen = np.minimum(minlen, automaton.UNREACHABLE)
    for rule, d in zip(pda.rules, dists):
        if isinstance(rule, CounterRule) or not len(d):
            continue
        got = _core.shortest_match(rule.trans, rule.final, *automaton.calls_csr(rule), minlen, automaton.UNREACHABLE)
        assert got == d[0], rule.name


@pytest.mark.parametrize("name", ["json", "json_compact"])
def test_builtin_grammars_equal_reference(name, monkeypatch):
    grammar = load_grammar(name)
    _assert_same(_build(grammar, False, monkeypatch), _build(grammar, True, monkeypatch))


def test_size_limit_reports_the_same_count(monkeypatch):
    # (a|b)*a(a|b){9}: a small NFA whose DFA needs 2^10 states
    grammar = schema_to_grammar({"type": "string", "pattern": "^[ab]*a[ab]{9}$"})
    errors = []
    for reference in (False, True):
        with pytest.raises(AutomatonSizeError) as info:
            _build(grammar, reference, monkeypatch, max_states=500)
        errors.append(str(info.value))
    assert errors[0] == errors[1] and "DFA states" in errors[0]


def _ahead(grammar, threads: int, monkeypatch, **kw):
    """build_automaton with a fresh rule cache, rules built ahead on ``threads`` threads
    whatever the grammar's size (1: one after the other in the loop)."""
    with monkeypatch.context() as m:
        m.setattr(automaton, "_RULES", automaton._RuleDFAs())
        m.setattr(automaton, "BUILD_THREADS", threads)
        m.setattr(automaton, "AHEAD_MIN_KEY_BYTES", 0)
        return build_automaton(grammar, **kw)


def _spy_ahead(monkeypatch) -> list[int]:
    """Per call of _core.build_rules, how many rules it built."""
    counts: list[int] = []
    native = automaton._core.build_rules

    def spy(*args):
        out = native(*args)
        counts.append(sum(x is not None for x in out))
        return out

    monkeypatch.setattr(automaton._core, "build_rules", spy)
    return counts


@pytest.mark.parametrize("name,schema", GRAMMARS, ids=[g[0][:40] for g in GRAMMARS])
def test_rules_built_ahead_equal_one_by_one(name, schema, monkeypatch):
    """The rules built in parallel ahead of build_automaton's loop make the automaton the loop
    makes building them one after the other."""
    grammar = schema_to_grammar(schema)
    _assert_same(_ahead(grammar, 2, monkeypatch, byte_alphabet=_ALPHABET),
                 _ahead(grammar, 1, monkeypatch, byte_alphabet=_ALPHABET))


def _pattern_ring(*parts: tuple[str, int]) -> dict:
    """Objects in a cycle of $defs (each a called rule), each with a string of pattern
    ``^[xy]*x[xy]{k}$``: small NFAs, DFAs of 2^k states and more."""
    names = [chr(ord("a") + i) for i in range(len(parts))]
    defs = {}
    for i, ((pair, k), name) in enumerate(zip(parts, names)):
        x, y = pair
        defs[name] = {"type": "object", "properties": {
            "p": {"type": "string", "pattern": f"^[{x}{y}]*{x}[{x}{y}]{{{k}}}$"},
            "n": {"$ref": f"#/$defs/{names[(i + 1) % len(names)]}"}}}
    return {"$defs": defs, "$ref": "#/$defs/a"}


def test_rules_built_ahead_keep_the_size_limit(monkeypatch):
    """Built ahead, each rule had the whole budget less the cached rules'; the loop takes a
    result only where it fits the states left at that rule. So for every limit around the
    rules' budgets and running totals, the outcome is the one-by-one build's: the same
    automaton, or the same error at the same rule and location."""
    grammar = schema_to_grammar(_pattern_ring(("ab", 5), ("cd", 6), ("ef", 4), ("gh", 7)))
    counts = _spy_ahead(monkeypatch)
    needs: list[tuple[int, int]] = []  # (DFA budget it needs, states kept) per rule, in order
    put = automaton._RuleDFAs.put

    def noting_put(self, key, need, built):
        needs.append((need[1], built[0][0].shape[0]))
        put(self, key, need, built)

    with monkeypatch.context() as m:
        m.setattr(automaton._RuleDFAs, "put", noting_put)
        _ahead(grammar, 2, monkeypatch)
    assert len(needs) >= 5 and counts[-1] >= 5  # several rules, all built ahead
    running = np.cumsum([0] + [kept for _, kept in needs]).tolist()
    limits = sorted({before + need + d for before, (need, _) in zip(running, needs) for d in (-1, 0, 1)}
                    | {x + d for x in running for d in (-1, 0, 1)} - {0, -1})
    outcomes = {"ok": 0, "error": 0}
    for limit in limits:
        got = []
        for threads in (2, 1):
            try:
                pda = _ahead(grammar, threads, monkeypatch, max_states=limit)
                got.append(("ok", [r.trans.tobytes() for r in pda.rules if isinstance(r, automaton.RuleDFA)]))
            except AutomatonSizeError as exc:
                got.append(("error", (str(exc), exc.reached, exc.pointer)))
        assert got[0] == got[1], limit
        outcomes[got[0][0]] += 1
    assert outcomes["ok"] and outcomes["error"]  # both sides of the limit were met
    # within some limits builds were stopped, or refused, and left to the loop
    assert any(0 < c < len(needs) - 1 for c in counts[1:])


def test_cached_rules_held_while_the_loop_evicts_them(monkeypatch):
    """A grammar with more new states than the rule cache holds: its own insertions evict the
    cached rules it found before the loop reaches them. Those were counted as cached, not
    built ahead; they are held from the look-up on, so none is rebuilt one by one, and the
    automaton equals a fresh build."""
    grammar = schema_to_grammar(_pattern_ring(("ab", 6), ("cd", 6), ("ef", 6), ("gh", 6)))
    cache = automaton._RuleDFAs()
    monkeypatch.setattr(automaton, "_RULES", cache)
    monkeypatch.setattr(automaton, "BUILD_THREADS", 2)
    monkeypatch.setattr(automaton, "AHEAD_MIN_KEY_BYTES", 0)
    first = build_automaton(grammar)
    sizes = sorted(r.trans.shape[0] for r in first.rules if isinstance(r, automaton.RuleDFA))
    # room for the largest rules but not for all: the first ones built were evicted
    monkeypatch.setattr(cache, "MAX_STATES", 4 * sizes[-1])
    cache._entries.clear()
    cache._states = 0
    build_automaton(grammar)
    assert 2 <= len(cache._entries) < len(sizes)
    one_by_one = []
    rule_dfa = automaton._rule_dfa

    def spy(*args, **kw):
        one_by_one.append(args[1])
        return rule_dfa(*args, **kw)

    monkeypatch.setattr(automaton, "_rule_dfa", spy)
    again = build_automaton(grammar)
    assert one_by_one == []
    _assert_same(again, first)


FREE = {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": True}


RECURSIVE_DEF = {"type": "object", "properties": {"v": {"type": "integer"},
                                                "k": {"type": "array", "items": {"$ref": "#/$defs/n"}}}}


def test_rule_automata_shared_between_grammars(monkeypatch):
    """A rule built once is reused by later grammars with an equal rule (the any-value rule of
    free members, a recursive definition in two schemas): they share its arrays, read-only,
    which equal a fresh build's. Another byte alphabet is another automaton."""
    monkeypatch.setattr(automaton, "_RULES", automaton._RuleDFAs())
    first = build_automaton(schema_to_grammar(FREE), byte_alphabet=_ALPHABET)
    other_schema = {"type": "array", "items": {}}
    other = build_automaton(schema_to_grammar(other_schema), byte_alphabet=_ALPHABET)
    value = {r.name: r for r in first.rules}["json_value"]
    again = {r.name: r for r in other.rules}["json_value"]
    assert again.trans is value.trans and not value.trans.flags.writeable
    _assert_same(other, _build(schema_to_grammar(other_schema), True, monkeypatch, byte_alphabet=_ALPHABET))
    wide = {r.name: r for r in build_automaton(schema_to_grammar(FREE)).rules}["json_value"]
    assert wide.trans is not value.trans

    def recursive(wrapper):
        schema = {**wrapper, "$defs": {"n": RECURSIVE_DEF}}
        pda = build_automaton(schema_to_grammar(schema), byte_alphabet=_ALPHABET)
        return schema, pda, [r for r in pda.rules if r.name != "start"]

    _, _, mine = recursive({"$ref": "#/$defs/n"})
    schema, pda, theirs = recursive({"type": "array", "items": {"$ref": "#/$defs/n"}, "maxItems": 3})
    assert mine and [r.name for r in mine] == [r.name for r in theirs]
    assert all(a.trans is b.trans for a, b in zip(mine, theirs))
    _assert_same(pda, _build(schema_to_grammar(schema), True, monkeypatch, byte_alphabet=_ALPHABET))


def test_compiler_warms_the_rule_cache_with_its_vocabulary(monkeypatch):
    """Loading a compiler's vocabulary compiles the warm-up schema once, uncached: the rules
    most schemas share are in the rule cache before the first request (a schema of nothing
    but them builds none), the compiler's own cache stays empty, and a limit too small for
    the warm-up leaves it out rather than failing the compiler."""
    from structgen import GrammarCompiler
    from structgen.runtime import compiler as compiler_module

    from .conftest import toy_info

    info = toy_info([bytes([b]) for b in range(32, 127)] + [b'"', b"{", b"}", b"true", b"null"])
    cache = automaton._RuleDFAs()
    monkeypatch.setattr(automaton, "_RULES", cache)
    monkeypatch.setattr(compiler_module, "_dialects_warmed", False)
    converted = []
    real_convert = compiler_module.convert_schema
    monkeypatch.setattr(compiler_module, "convert_schema",
                        lambda schema, **kw: converted.append(schema.get("$schema")) or real_convert(schema, **kw))
    compiler = GrammarCompiler(info)
    assert not cache._entries  # (nothing before the vocabulary is loaded)
    compiler.trie
    # every dialect's checks once per process, the default one with the whole compile
    assert converted == [None] + [uri for uri in compiler_module.DRAFT_URIS.values() if "2020-12" not in uri]
    GrammarCompiler(info).trie
    assert converted[-1] is None and len(converted) == len(compiler_module.DRAFT_URIS) + 1
    warmed = dict(cache._entries)
    assert warmed and not compiler._cache
    puts = []
    monkeypatch.setattr(cache, "put", lambda *a: puts.append(a))
    compiler.compile_json_schema({"type": "array", "items": {}})  # the any-value rule, shared
    compiler.compile_json_schema({"type": "object", "properties": {"name": {"type": "string", "minLength": 1,
                                                                             "maxLength": 64}}})
    assert [key for key, *_ in puts if key in warmed] == []
    assert len(compiler._cache) == 2

    small = GrammarCompiler(info, max_states=20)
    small.trie  # (the warm-up passes the limit: left out)
    with pytest.raises(AutomatonSizeError):
        small.compile_json_schema(compiler_module._WARM_UP_SCHEMA)


def test_rule_cache_is_bounded_by_states(monkeypatch):
    """Past MAX_STATES states in all the oldest entries go; a rule larger than a quarter of the
    bound is not kept; a grammar built after an eviction equals a fresh build."""
    cache = automaton._RuleDFAs()
    monkeypatch.setattr(cache, "MAX_STATES", 60)
    monkeypatch.setattr(automaton, "_RULES", cache)
    # one rule each, a dozen states (distinct items: distinct rules)
    schemas = [{"type": "array", "items": {"enum": [f"x{k}"]}, "maxItems": 2} for k in range(10)]
    for schema in schemas:
        build_automaton(schema_to_grammar(schema), byte_alphabet=_ALPHABET)
        held = [e[1][0][0].shape[0] for e in cache._entries.values()]
        assert cache._states == sum(held) <= 60 and max(held) <= 15
    assert 60 - max(held) < cache._states and 2 <= len(held) < len(schemas)  # only the oldest went
    kept = list(cache._entries)
    big = {"type": "array", "items": {"enum": ["y"]}, "maxItems": 5}  # over a quarter of the bound
    assert build_automaton(schema_to_grammar(big), byte_alphabet=_ALPHABET).rules[0].trans.shape[0] > 15
    assert list(cache._entries) == kept
    grammar = schema_to_grammar(schemas[0])
    _assert_same(build_automaton(grammar, byte_alphabet=_ALPHABET),
                 _build(grammar, True, monkeypatch, byte_alphabet=_ALPHABET))


@pytest.mark.parametrize("ahead", [False, True], ids=["loop", "held-ahead"])
def test_cached_rule_keeps_the_size_limit(ahead, monkeypatch):
    """A limit a cached rule does not fit is refused as if it were built, whatever the
    process built before: each outcome (the automaton's size or the error) equals a build
    with nothing cached. ``held-ahead``: the cached entries are taken by the look-up before
    the loop (``_build_ahead``), which checks the same budgets."""
    if ahead:
        monkeypatch.setattr(automaton, "BUILD_THREADS", 2)
        monkeypatch.setattr(automaton, "AHEAD_MIN_KEY_BYTES", 0)
    # limits around the any-value rule's own NFA need (its caller is small), and its DFA need
    # (its caller, about 130 states, built first, counts against the DFA limit)
    cases = [({"type": "array"}, range(150, 170)),
             ({"type": "array", "prefixItems": [{"type": "string", "pattern": "^[ab]*a[ab]{6}$"}]}, range(125, 215))]
    kinds = set()
    for schema, limits in cases:
        grammar = schema_to_grammar(schema)
        for max_states in limits:
            outcomes = []
            for cold in (True, False):
                if cold:
                    monkeypatch.setattr(automaton, "_RULES", automaton._RuleDFAs())
                else:  # the rules cached under the default limit first
                    build_automaton(grammar)
                try:
                    outcomes.append(build_automaton(grammar, max_states=max_states).num_states)
                except AutomatonSizeError as exc:
                    outcomes.append(str(exc))
            assert outcomes[0] == outcomes[1], (schema, max_states)
            if isinstance(outcomes[0], str) and "#/items" in outcomes[0]:
                kinds.add("NFA" if "NFA" in outcomes[0] else "DFA")
    assert kinds == {"NFA", "DFA"}  # the rule itself passed each limit somewhere


def test_rule_key_is_canonical():
    """Equal keys for the same expression serialized at other node numbers; another byte,
    bound or called rule changes the key."""
    from structgen import _core
    from structgen.grammar import Alt, Lit, Repeat, Seq
    from structgen.regex.expr_arrays import serializer

    def key(expr, pad=()):
        ser = serializer({"r": 0})
        for p in pad:
            ser.add(p)
        root = ser.add(expr)
        nodes, data = ser.arrays()
        return _core.rule_key(nodes, data, root)

    body = Seq((Lit("ab"), Repeat(Alt((Lit("x"), Lit("yz"))), 1, 3)))
    assert key(body) == key(body, pad=[Lit("zzz"), Repeat(Lit("q"), 0, 2)])
    assert key(body) != key(Seq((Lit("ab"), Repeat(Alt((Lit("x"), Lit("yy"))), 1, 3))))
    assert key(body) != key(Seq((Lit("ab"), Repeat(Alt((Lit("x"), Lit("yz"))), 1, 4))))
    with pytest.raises(ValueError, match="out of range"):
        _core.rule_key(np.array([[2, 0, 1, 0]], np.int32), np.array([5], np.int32), 0)


def test_native_stages_reject_malformed_input():
    from structgen import _core

    with pytest.raises(ValueError, match="node index out of range"):
        _core.build_dfa(np.array([[2, 0, 1, 0]], np.int32), np.array([5], np.int32), 0, True, 100, 0, 100, 0)
    with pytest.raises(ValueError, match="unknown expression node kind"):
        _core.build_dfa(np.array([[42, 0, 0, 0]], np.int32), np.zeros(0, np.int32), 0, True, 100, 0, 100, 0)
    with pytest.raises(ValueError, match="data span out of range"):
        _core.build_dfa(np.array([[0, 0, 9, 0]], np.int32), np.zeros(2, np.int32), 0, False, 100, 0, 100, 0)
    with pytest.raises(ValueError, match="lone surrogate"):  # no UTF-8 encoding: refused, not mis-encoded
        _core.build_dfa(np.array([[0, 0, 1, 0]], np.int32), np.array([0xD800], np.int32), 0, True, 100, 0, 100, 0)
    with pytest.raises(ValueError, match="rule call in a regular expression"):
        _core.build_dfa(np.array([[5, 0, 0, 0]], np.int32), np.zeros(0, np.int32), 0, False, 100, 0, 100, 0)
    z = np.zeros(2, np.int64)
    with pytest.raises(ValueError, match="out of range"):
        _core.minimise(np.full((1, 256), 7, np.int32), np.zeros(1, bool), z, np.zeros((0, 2), np.int32))


def _shapes():
    """(label, rule shape) of every schema here and a few of many shared or large parts."""
    from structgen.index.automaton import RulePlan  # noqa: F401 (imported where used)
    from structgen.grammar import Ref
    from structgen.index.counters import lift_counters
    schemas = {c["name"]: c["schema"] for c in CASES} | EXTRA
    schemas["protocol"] = {"type": "object", "additionalProperties": False, "$defs": {
        f"D{i}": {"type": "object", "additionalProperties": False,
                  "properties": {f"m{i}_{j}": {"type": ["string", "integer"][j % 2]} for j in range(5)}}
        for i in range(30)}, "properties": {f"D{i}": {"$ref": f"#/$defs/D{i}"} for i in range(30)}}
    schemas["shared"] = {"$defs": {"s": {"type": "string", "pattern": "^[a-z]{3,9}(-[0-9]{2,4})*$"}},
                         "type": "array", "items": {"anyOf": [{"$ref": "#/$defs/s"}, {"type": "object", "properties": {
                             "a": {"$ref": "#/$defs/s"}, "b": {"type": "array", "items": {"$ref": "#/$defs/s"}}}}]}}
    for label, schema in schemas.items():
        grammar = schema_to_grammar(schema, strict=False)
        rules, counters = lift_counters(grammar.rules)
        yield label, {**rules, **{c: Ref(item) for c, (item, _, _) in counters.items()}}


@pytest.mark.parametrize("limits", [(400, 10_000), (20, 200), (5, 30), (1, 1)])
def test_native_rule_plan_matches_reference(limits):
    """Which rules are recursive and which are called rather than inlined: the native planner
    over the serialized arrays decides as the reference analyses over the expression trees,
    also with limits small enough that most schemas split."""
    from structgen.index.automaton import RulePlan
    inline_limit, split_limit = limits
    split_somewhere = False
    for label, shape in _shapes():
        plan = RulePlan(shape)
        plan.plan(inline_limit, split_limit)
        recursive, called = reference_automaton.rule_plan(shape, inline_limit, split_limit)
        assert (plan.recursive, plan.shared) == (recursive, called), label
        split_somewhere = split_somewhere or bool(called)
    assert split_somewhere


def test_serializer_refuses_what_it_cannot_serialize():
    from structgen.errors import GrammarError
    from structgen.grammar import Lit, Ref, Seq
    from structgen.regex.expr_arrays import REF, serializer
    from structgen.regex.regular import intersect

    with pytest.raises(GrammarError, match="must be regular: found a reference to 'x'"):
        intersect(Seq((Lit("a"), Ref("x"))), Lit("a"))
    with pytest.raises(TypeError, match="not a grammar expression"):
        serializer().add(Seq((Lit("a"), "b")))  # type: ignore[arg-type]
    with pytest.raises(GrammarError, match="undefined rule 'y'"):
        serializer({"x": 0}).add(Ref("y"))
    ser = serializer({"x": 0, "y": 1})
    shared = Seq((Lit("ab"), Ref("y")))
    root = ser.add(Seq((shared, Ref("x"), shared)))
    nodes, data = ser.arrays()
    assert root == len(nodes) - 1 and list(ser.refs()) == [1, 3]  # the shared subtree once
    assert [tuple(nodes[i]) for i in ser.refs()] == [(REF, 1, 0, 0), (REF, 0, 0, 0)]


def _expr_size_reference(e, cap=None) -> int:
    """expr_size as it was in Python (the native one must count alike, cap included)."""
    from structgen.grammar import Dfa, Repeat, iter_nodes
    n = 0
    for x in iter_nodes(e):
        if cap is not None and n >= cap:
            break
        n += 1 + (x.max or x.min if isinstance(x, Repeat) else sum(1 + len(r) for r in x.trans) if isinstance(x, Dfa) else 0)
    return n


def test_native_expr_size_matches_reference():
    import random

    from structgen.grammar import Alt, CharSet, Dfa, Lit, Ref, Regex, Repeat, Seq, expr_size
    rng = random.Random(7)
    dfa = Dfa("two states", (((0x61, 0x61, 1),), ()), (False, True))

    def tree(depth: int):
        k = rng.randrange(8 if depth else 4)
        if k == 0:
            return Lit(rng.choice(["", "a", "abc"]))
        if k == 1:
            return rng.choice([Ref("r"), Regex("[a-z]+"), dfa])
        if k == 2:
            return CharSet(((0x30, 0x39),))
        if k == 3:
            return Repeat(Lit("x"), rng.randrange(3), rng.choice([None, 0, 2, 70]))
        kids = tuple(tree(depth - 1) for _ in range(rng.randrange(4)))
        if k < 6:
            return (Seq if k == 4 else Alt)(kids)
        return Repeat(Seq(kids), rng.randrange(3), rng.choice([None, 0, 1, 5]))

    for _ in range(500):
        e = tree(5)
        shared = Seq((e, Alt((e, Lit("q")))))  # a shared subtree counts at each occurrence
        for x in (e, shared):
            assert expr_size(x) == _expr_size_reference(x)
            for cap in (0, 1, 5, 64):
                assert expr_size(x, cap) == _expr_size_reference(x, cap)



@pytest.mark.parametrize("bad", [-2, 3, np.iinfo(np.int32).min, np.iinfo(np.int32).max])
def test_transition_tables_are_range_checked(bad):
    # every binding that takes a (states, 256) table checks its targets, four at a time:
    # -1 and the last state pass, anything else anywhere in the table is refused
    from structgen import GrammarCompiler, _core
    from structgen.index import token_index as ti
    from structgen.index.automaton import calls_csr

    from .conftest import toy_info

    trans = np.full((3, 256), -1, np.int32)
    trans[0, 0], trans[0, 5], trans[1, 254], trans[2, 255] = 1, 2, 2, 0
    final = np.array([False, False, True])
    off, edge = np.zeros(4, np.int64), np.zeros((0, 2), np.int32)
    assert _core.distances(trans, final, off, edge, np.zeros(1, np.int64), 1 << 60).tolist() == [1, 1, 0]
    # the configuration index's constructor, with the tables a compiled grammar gives it
    info = toy_info([b"ab"])
    compiled = GrammarCompiler(info, cache_size=0).compile_grammar('start: "a" "b"')
    pda = compiled.index._pda
    (rule,) = pda.rules
    good = ("dfa", rule.trans, rule.final, *calls_csr(rule))
    args = (pda.root, ti.vocab_tables(compiled.index.trie), list(info.stop_token_ids), compiled.index.words,
            ti._TABLE_CELLS, 1000)
    assert _core.ConfigIndex([good], *args).num_configs >= 1
    for row, col in ((1, 77), (2, 3), (0, 255)):
        bad_trans = trans.copy()
        bad_trans[row, col] = bad
        with pytest.raises(ValueError, match="out of range"):
            _core.distances(bad_trans, final, off, edge, np.zeros(1, np.int64), 1 << 60)
        with pytest.raises(ValueError, match="out of range"):
            _core.minimise(bad_trans, final, off, edge)
        bad_rule = rule.trans.copy()
        bad_rule[min(row, len(bad_rule) - 1), col] = bad if bad != 3 else len(bad_rule)
        with pytest.raises(ValueError, match="out of range"):
            _core.ConfigIndex([("dfa", bad_rule, *good[2:])], *args)


def test_distances_see_a_transition_on_every_byte():
    """A single transition on byte b (then runs of -1 before and after it), for every b: the
    start state is one byte from the end. The native scan reads rows four bytes per compare
    and gathers 64-bit words; every byte position of a word must count, the first ones included."""
    from structgen import _core

    no_calls = (np.zeros(4, np.int64), np.zeros((0, 2), np.int32))
    for b in range(256):
        for other in (-1, 2):  # the rest of the row dead, or going elsewhere
            trans = np.full((3, 256), -1, np.int32)
            trans[0, :] = other
            trans[0, b] = 1
            trans[2, 0] = 2  # state 2: a loop that never ends
            final = np.array([False, True, False])
            dist = _core.distances(trans, final, *no_calls, np.zeros(0, np.int64), automaton.UNREACHABLE)
            assert dist.tolist() == [1, 0, automaton.UNREACHABLE], (b, other)


def test_completion_distances_follow_the_callees_of_a_shared_table(monkeypatch):
    # Two grammars share their start rule's table through the rule cache (same expression,
    # same callee number) while the callee's shortest match differs (1 byte, then 3): each
    # index computes the shared table's distances with its own callee costs, equal to the
    # reference's; the same table with other final states (an automaton made by hand)
    # completes at once.
    from structgen.grammar import Grammar

    monkeypatch.setattr(automaton, "_RULES", automaton._RuleDFAs())
    short = 'start: "a" x "c"\nx: "b" | "(" x ")"'
    pdas = [build_automaton(Grammar.from_lark(text)) for text in (short, short.replace('"b"', '"bbb"'))]
    assert pdas[0].rules[0].trans is pdas[1].rules[0].trans  # one shared table
    dists = [_index(p).rule_distances() for p in pdas]
    for p, d in zip(pdas, dists):
        _same_distances(d, reference_automaton.completion_distances(p))
    assert int(dists[0][0][0]) == 3 and int(dists[1][0][0]) == 5  # "abc", "abbbc"
    rule = pdas[0].rules[0]
    every_final = np.ones_like(rule.final)
    other = automaton.PushdownAutomaton((automaton.RuleDFA(rule.name, rule.trans, every_final, rule.calls, rule.csr),
                                         *pdas[0].rules[1:]), 0)
    assert int(_index(other).rule_distances()[0][0]) == 0


def test_distances_asked_after_masks_equal_distances_known_before():
    # The index computes distances when first asked: configurations interned before that
    # (by masks and steps) get theirs then, those interned after at once. Both orders give
    # every configuration the same distance, and the shortest completions complete.
    from structgen import GrammarCompiler

    from .conftest import toy_info

    info = toy_info([b'{"', b'":', b'"}', b"12", b"true"])
    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "array", "items": {"type": "boolean"}}},
              "required": ["a"]}
    compiled = GrammarCompiler(info, cache_size=0).compile_json_schema(schema)
    text = b'{"a": 12, "b": [true, false]}'
    early, late = _index(compiled.automaton), _index(compiled.automaton)
    early.completion_length(early.initial)  # distances known before any configuration but the first
    for index in (early, late):
        cid = index.initial
        for i in range(len(text)):
            index.mask(cid)
            cid = index.step_bytes(cid, text[i:i + 1])
    assert early.num_configs == late.num_configs > 5
    for cid in range(1, late.num_configs):
        assert late.completion_length(cid) == early.completion_length(cid), cid
        tail = late.shortest_completion(cid)
        assert tail is not None and late.is_accepting(late.step_bytes(cid, tail))


def test_left_recursion_check_matches_reference():
    # random call graphs: rules of a few states, some final, with calls between them; the
    # native check finds the same cycle (or none) as the reference, from flags and calls alone
    from structgen import _core
    from structgen.index.automaton import _calls_csr

    rng = np.random.default_rng(7)
    found = 0
    for _ in range(400):
        n = int(rng.integers(1, 7))
        finals, calls = [], []
        for _r in range(n):
            states = int(rng.integers(1, 5))
            finals.append(rng.random(states) < 0.3)
            calls.append([tuple((int(rng.integers(n)), int(rng.integers(states)))
                                for _ in range(int(rng.poisson(0.6)))) for _s in range(states)])
        csr = [_calls_csr(c) for c in calls]
        native = _core.left_recursion(finals, [c[0] for c in csr], [c[1] for c in csr])
        assert native == reference_automaton.left_recursion_cycle(finals, calls)
        found += native is not None
    assert 40 < found < 360  # both answers occur often


def test_left_recursion_through_a_nullable_rule_is_refused():
    from structgen.errors import GrammarError
    from structgen.grammar import Grammar

    with pytest.raises(GrammarError, match="left recursion is not supported: start -> start"):
        build_automaton(Grammar.from_lark('start: a start "x" | "y"\na: "b"?'))
    build_automaton(Grammar.from_lark('start: a "z" start "x" | "y"\na: "b"?'))  # a byte first: fine


def test_productive_rules_match_a_fixed_point_in_python():
    # random rules (a few states, random byte transitions, finals and calls): the native
    # worklist finds the rules whose start reaches a final state as rounds to a fixed point
    # do here; a table with a target out of range is refused
    from structgen import _core
    from structgen.index.automaton import _calls_csr

    rng = np.random.default_rng(11)
    mixed = 0
    for _ in range(300):
        n = int(rng.integers(1, 7))
        trans, finals, calls = [], [], []
        for _r in range(n):
            states = int(rng.integers(1, 6))
            t = np.full((states, 256), -1, np.int32)
            for s in range(states):
                for b in rng.choice(256, size=int(rng.integers(0, 3)), replace=False):
                    t[s, b] = rng.integers(states)
            trans.append(t)
            finals.append(rng.random(states) < 0.15)
            calls.append([tuple((int(rng.integers(n)), int(rng.integers(states)))
                                for _ in range(int(rng.poisson(0.7)))) for _s in range(states)])
        alone = [bool(rng.random() < 0.2) for _ in range(n)]
        prod = set(r for r in range(n) if alone[r])
        changed = True
        while changed:
            changed = False
            for r in range(n):
                if r in prod:
                    continue
                seen, stack = {0}, [0]
                while stack:
                    s = stack.pop()
                    nxt = [int(x) for x in trans[r][s] if x >= 0] + [t for c, t in calls[r][s] if c in prod]
                    for x in nxt:
                        if x not in seen:
                            seen.add(x)
                            stack.append(x)
                if any(finals[r][s] for s in seen):
                    prod.add(r)
                    changed = True
        csr = [_calls_csr(c) for c in calls]
        got = _core.productive_rules(trans, finals, [c[0] for c in csr], [c[1] for c in csr], alone)
        assert got == [r in prod for r in range(n)]
        mixed += 0 < len(prod) < n
    assert mixed > 30
    bad = np.full((2, 256), -1, np.int32)
    bad[0, 7] = 2
    off, edge = np.zeros(3, np.int64), np.zeros((0, 2), np.int32)
    with pytest.raises(ValueError, match="out of range"):
        _core.productive_rules([bad], [np.array([False, True])], [off], [edge], [False])


@pytest.mark.parametrize("paths,proven", [
    ([(1,), (2,), ()], True),  # a chain down to a rule that ends by bytes
    ([(1, 2), (), (1,)], True),
    ([(1,), (0,)], False),  # each waits on the other: no proof, the table search decides
    ([(0,), ()], False),  # a path through itself proves nothing
    ([(), None], False),  # a rule without a path given
])
def test_paths_prove_productivity_only_where_they_can(paths, proven):
    assert automaton._all_proven(paths) is proven


def test_a_rule_productive_by_another_path_than_its_fewest_calls(monkeypatch):
    """The fewest-calls path of `start` goes through `a`, which never ends; the proof by
    paths fails, and the table search finds `start` productive through `b b`."""
    from structgen import GrammarCompiler
    from structgen.grammar import Grammar
    from .conftest import toy_info

    searched = []
    search = automaton._core.productive_rules
    monkeypatch.setattr(automaton._core, "productive_rules", lambda *a: searched.append(1) or search(*a))
    monkeypatch.setattr(automaton, "_RULES", automaton._RuleDFAs())
    g = Grammar.from_lark('start: a | b b\na: "y" a\nb: "b" b | "c"')
    compiled = GrammarCompiler(toy_info([])).compile_grammar(g)
    assert searched  # (the paths proved nothing: `a` is on start's only one-call path)
    m = compiled.matcher()
    assert m.accept_string("bcc") and m.is_completed()
    assert not compiled.matcher().accept_string("y")


def test_call_lists_read_from_the_builders_arrays_when_asked(monkeypatch):
    """A built rule's per-state calls are the CSR arrays' pairs, made only when read."""
    pda = _build(schema_to_grammar(EXTRA["recursive"]), False, monkeypatch)
    rules = [r for r in pda.rules if isinstance(r, automaton.RuleDFA) and isinstance(r.calls, automaton.CallLists)]
    rule = next(r for r in rules if len(r.calls.csr[1]))
    assert rule.calls._lists is None  # compiling never asked for them
    off, edge = automaton.calls_csr(rule)
    assert edge is rule.calls.csr[1]
    want = tuple(tuple(map(tuple, edge[off[s]:off[s + 1]].tolist())) for s in range(len(off) - 1))
    assert len(rule.calls) == rule.num_states == len(want)
    assert rule.calls == want and tuple(rule.calls) == want and rule.calls[-1] == want[-1]
    assert any(want)
