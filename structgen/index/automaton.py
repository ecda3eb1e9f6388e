"""Grammar → byte-level pushdown automaton: one minimal DFA per recursive rule.

Every rule that is not part of a reference cycle is inlined into its callers, so a grammar
without recursion (most JSON Schemas) becomes a single DFA over bytes. Rules on a cycle
(``value`` in the JSON grammar, recursive ``$ref``s) stay separate and are reached through
*call edges*: a DFA state may, besides its byte transitions, call rule ``R`` and continue in
a return state once ``R`` has matched. The matcher runs the resulting pushdown automaton.

Pipeline per rule: expression → Thompson NFA over byte ranges (code points are expanded to
UTF-8 byte sequences) → subset construction → trimming of states that cannot reach an
accepting state (given which rules can match at all) → Hopcroft minimisation. Subset
construction and minimisation run in the native core (structgen._core).
"""
from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from itertools import chain
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from .. import _core
from .counters import COUNT_THRESHOLD, CounterRule, lift_counters
from ..errors import AutomatonSizeError, EmptyGrammarError, GrammarError
from ..grammar import Expr, Grammar, Ref
from ..regex.expr_arrays import serializer

__all__ = ["RuleDFA", "PushdownAutomaton", "build_automaton", "calls_csr", "DEFAULT_MAX_STATES", "UNREACHABLE"]

DEFAULT_MAX_STATES = 50_000
"""Default limit on NFA and DFA states of one grammar (raise with ``max_states=``)."""


@dataclass(frozen=True, slots=True)
class RuleDFA:
    """The minimal DFA of one rule; state 0 is the start state.

    Attributes:
        name: the rule name in the grammar.
        trans: ``(n, 256)`` int32, next state per byte, -1 where the byte is rejected.
        final: ``(n,)`` bool, the rule may end here.
        calls: per state, ``(callee_rule_index, return_state)`` pairs.
    """

    name: str
    trans: np.ndarray
    final: np.ndarray
    calls: Sequence[tuple[tuple[int, int], ...]]
    csr: tuple[np.ndarray, np.ndarray] | None = field(default=None, compare=False, repr=False)
    """``calls`` as CSR arrays ``(call_off, call_edge)``, when the builder had them."""

    @property
    def num_states(self) -> int:
        return int(self.trans.shape[0])


@dataclass(frozen=True, slots=True)
class PushdownAutomaton:
    """The rules that remain after inlining; ``root`` is the index of the start rule.

    ``trimmed``: every rule state a parser can be in can also reach its rule's end
    (:func:`build_automaton` trims its output so), hence every parser configuration but
    ``DEAD`` can complete the output; the token index then tells so without computing
    completion distances."""

    rules: tuple[RuleDFA | CounterRule, ...]
    root: int
    trimmed: bool = False

    @property
    def num_states(self) -> int:
        """DFA states; a counter counts as one (its states are virtual)."""
        return sum(1 if isinstance(r, CounterRule) else r.num_states for r in self.rules)


# --------------------------------------------------------------------------- DFA


def _too_large(kind: str, reached: int, limit: int) -> AutomatonSizeError:
    return AutomatonSizeError(
        f"the grammar's automaton needs more than {limit:,} {kind} states (construction stopped at "
        f"{reached:,}); simplify the schema (smaller maxLength/maxItems/bounded repeats, fewer enum "
        f"values) or raise the limit: GrammarCompiler(tokenizer_info, max_states=N) (default "
        f"{DEFAULT_MAX_STATES:,})",
        limit=limit, reached=reached,
    )


def _rule_dfa(arrays: tuple[np.ndarray, np.ndarray], root: int, max_states: int, used: int,
              alphabet: np.ndarray, n_rules: int):
    """The trimmed minimal DFA of node ``root`` of the serialized expressions, in one native
    call: Thompson NFA, subset construction, bytes outside ``alphabet`` (bool ``(256,)``)
    removed, then :func:`_trim_and_minimise` with each of the ``n_rules`` callees taken as
    productive. Returns ``(trans (n, 256) int32, final, call_off, call_edge, alone, need,
    path_callees)`` (see :func:`_calls_csr`); ``n`` is 0 where the rule matches nothing;
    ``alone``: the start state reaches a final state by bytes alone (productive whatever the
    callees); ``need``: the smallest NFA and DFA budgets (``max_states``, ``max_states -
    used``) the build fits; ``path_callees``: the callees of a path from the start state to a
    final state (a tuple of rule indices, empty when ``alone``; ``None``: none given), so
    that the rule is productive once they all are.

    ``used`` DFA states of other rules already count against ``max_states``; the rule's NFA
    and DFA are checked while they grow (the NFA against ``max_states`` alone)."""
    out = _core.build_rule(arrays[0], arrays[1], root, max_states, 0, max_states, used, alphabet, n_rules)
    if len(out) == 2:
        kind, reached = out
        raise _too_large("NFA" if kind == 0 else "DFA", int(reached) + (kind == 1), max_states)
    return _rule_result(out)


def _rule_result(out: tuple):
    """``_core.build_rule``'s tuple as :func:`_rule_dfa` returns it."""
    return out[0], out[1], out[2], out[3], bool(out[5]), (int(out[4]), int(out[6])), out[7]


BUILD_THREADS = max(1, min(4, os.cpu_count() or 1))
"""Threads building a grammar's new rule automata at once (the native pool's, GIL released)."""

AHEAD_MIN_KEY_BYTES = 3_000
"""Rules are built ahead in parallel only when the rules to build, the largest left out, have
canonical forms (rule keys) of this many bytes or more in all: building a rule costs about
0.1 µs per byte of its key, so that is about 300 µs of work for a second thread. Less does
not pay for waking it and for two builds sharing the machine (o10518's rules of 704 and
86 µs took 863 µs on two threads, 807 µs one after the other). A median schema builds one
rule, or one and a few small ones; a grammar whose work is one large rule gains nothing
from a second thread either."""


def _build_ahead(arrays: tuple[np.ndarray, np.ndarray], roots: Mapping[str, int], keys: Mapping[str, bytes],
                 max_states: int, alphabet: np.ndarray, n_rules: int) -> tuple[dict[bytes, tuple], dict[bytes, tuple]]:
    """The rules not in the rule cache, built in parallel ahead of :func:`build_automaton`'s
    loop (``_core.build_rules``): per rule key, :func:`_rule_dfa`'s result. Each build
    had the whole budget less the cached rules' states; the loop takes a result only where it
    fits the budget left at that rule, and builds any other rule itself, as before, so sizes,
    limits and errors are those of building the rules one after the other. Empty when there
    is too little to build for threads to pay.

    Also returned: the rule cache's entries (``_RuleDFAs.peek``) of the rules found there.
    The loop's own insertions may evict them before it reaches them (a grammar with more new
    states than the cache holds); held here, they are not rebuilt one by one."""
    if BUILD_THREADS < 2 or len(keys) < 2:
        return {}, {}
    todo: dict[bytes, int] = {}  # rule key -> root node, in the loop's order
    held: dict[bytes, tuple] = {}
    cached = 0  # states of the cached rules: a lower bound of the states before any rule
    for name, key in keys.items():
        if key in todo or key in held:
            continue
        hit = _RULES.peek(key)
        if hit is None:
            todo[key] = roots[name]
        else:
            held[key] = hit
            cached += hit[1][0][0].shape[0]
    sizes = [len(key) - alphabet.size for key in todo]  # (each key ends with the alphabet's 256 bytes)
    if len(todo) < 2 or sum(sizes) - max(sizes) < AHEAD_MIN_KEY_BYTES:
        return {}, held
    built = _core.build_rules(arrays[0], arrays[1], np.fromiter(todo.values(), np.int32, len(todo)), max_states,
                              cached, alphabet, n_rules, BUILD_THREADS)
    return {key: _rule_result(out) for key, out in zip(todo, built) if out is not None}, held


class _RuleDFAs:
    """Rule automata built in this process, shared by every grammar with an equal rule.

    Keyed by the rule's expression in canonical form (``_core.rule_key``: its nodes as far as
    they reach, the rules it calls by number) and the byte alphabet, so an entry is only ever
    reused for an expression that builds the same automaton. Schemas repeat rules: the
    any-value rule of every schema's free members, one definition under several names, the
    same tool arguments in schemas of one family. Computing a key costs a few microseconds,
    a twentieth of building an average rule.

    The size limits apply as if the rule were built: an entry keeps the smallest NFA and DFA
    budgets its build fits (``need`` of :func:`_rule_dfa`), and a smaller budget builds the
    rule, which raises where the limit is passed. Entries are dropped oldest first past
    :attr:`MAX_STATES` states in all (about 1 KB of transition table each); a rule larger
    than a quarter of that is not kept.
    """

    MAX_STATES = 8192

    def __init__(self) -> None:
        self._entries: OrderedDict[bytes, tuple] = OrderedDict()
        self._states = 0
        self._lock = threading.Lock()

    def get(self, key: bytes, nfa_budget: int, dfa_budget: int) -> tuple | None:
        with self._lock:
            hit = self._entries.get(key)
            if hit is None or not self.fits(hit, nfa_budget, dfa_budget):
                return None
            self._entries.move_to_end(key)
            return hit[1]

    def peek(self, key: bytes) -> tuple | None:
        """The entry ``(need, built)`` of ``key`` whatever the budgets (see :meth:`fits`), else
        None; does not count as a use."""
        with self._lock:
            return self._entries.get(key)

    @staticmethod
    def fits(entry: tuple, nfa_budget: int, dfa_budget: int) -> bool:
        """Whether an entry's rule builds within these budgets (else building it raises)."""
        need = entry[0]
        return nfa_budget >= need[0] and dfa_budget >= need[1]

    def put(self, key: bytes, need: tuple[int, int] | None, built: tuple) -> None:
        (trans, final, calls), rule_csr, _, _ = built
        size = trans.shape[0]
        if need is None or size > self.MAX_STATES // 4:  # (need None: the tests' reference builder)
            return
        for a in (trans, final, *rule_csr):
            a.setflags(write=False)  # shared by every grammar that uses the rule (half the cost of flags.writeable)
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._states -= old[1][0][0].shape[0]
            self._entries[key] = (need, built)
            self._states += size
            while self._states > self.MAX_STATES:
                _, (_, ((dropped, _, _), *_)) = self._entries.popitem(last=False)
                self._states -= dropped.shape[0]


_RULES = _RuleDFAs()


def _located(exc: AutomatonSizeError, grammar: Grammar, plan: "RulePlan", rule: str, nfa_budget: int,
            dfa_budget: int) -> AutomatonSizeError:
    """``exc`` located at the deepest schema construct whose own automaton is too large.

    A rule's automaton inlines the constructs nested in it, so the rule's pointer is often
    the schema's root. Only on this error path: from the rule's construct down, each nested
    construct (``Grammar.constructs``) is built alone against the states left (every attempt
    stops at that bound, so blaming costs at most a few failed constructions per level); the
    first one that alone crosses the bound is where the schema grew."""
    constructs = grammar.constructs
    at = grammar.origins.get(rule)
    if at is None:
        return AutomatonSizeError(f"rule {rule!r}: {exc}", limit=exc.limit, reached=exc.reached, rule=rule)
    while True:
        inside = {p for p in constructs if p.startswith(at + "/")}
        # the nearest constructs below: no other construct on the way (checked per "/" of the path)
        children = sorted(p for p in inside
                          if not any(p[:i] in inside for i in range(len(at) + 1, len(p)) if p[i] == "/"))
        for child in children:
            root = plan.ser.add(constructs[child])
            nodes, data = plan.arrays()
            if len(_core.build_dfa(nodes, data, root, True, nfa_budget, 0, dfa_budget, 0)) == 2:
                at = child
                break
        else:
            break
    return AutomatonSizeError(f"schema location #{at}: {exc}", limit=exc.limit, reached=exc.reached,
                              pointer=at, rule=rule)


def _calls_csr(calls) -> tuple[np.ndarray, np.ndarray]:
    """Calls per state as CSR arrays: ``call_off[n + 1]`` and ``call_edge (k, 2)`` (callee, target)."""
    call_off = np.zeros(len(calls) + 1, np.int64)
    np.cumsum(np.fromiter(map(len, calls), np.int64, len(calls)), out=call_off[1:])
    call_edge = np.fromiter(chain.from_iterable(chain.from_iterable(calls)), np.int32).reshape(-1, 2)
    return call_off, call_edge


def calls_csr(rule: RuleDFA) -> tuple[np.ndarray, np.ndarray]:
    """``rule.calls`` as CSR arrays ``(call_off, call_edge)``: the builder's own when it kept
    them (``rule.csr``, or those a :class:`CallLists` reads), else made from the tuples."""
    if rule.csr is not None:
        return rule.csr
    return rule.calls.csr if isinstance(rule.calls, CallLists) else _calls_csr(rule.calls)


def _trim_and_minimise(trans, final, csr, productive: np.ndarray):
    """Drop dead states (calls only into ``productive`` rules), then unreachable ones, then
    merge equivalent ones (Hopcroft); all native, start stays 0."""
    m_trans, m_final, call_off, call_edge = _core.trim_minimise(trans, final, *csr, productive)
    return m_trans, m_final, CallLists(call_off, call_edge)


class CallLists(Sequence):
    """Per state, its ``(callee, target)`` pairs, read from the CSR arrays only when asked.

    The token index reads the CSR arrays (:func:`calls_csr`); the per-state tuples are for
    callers that inspect a rule, and building them for every rule of every grammar was 2 to
    3% of compiling a schema of 2 to 10 ms. Compares equal to the same pairs as a tuple."""

    __slots__ = ("_off", "_edge", "_lists")

    def __init__(self, call_off: np.ndarray, call_edge: np.ndarray) -> None:
        self._off, self._edge = call_off, call_edge
        self._lists: tuple[tuple[tuple[int, int], ...], ...] | None = None

    @property
    def csr(self) -> tuple[np.ndarray, np.ndarray]:
        """The arrays ``(call_off, call_edge)`` the pairs are read from."""
        return self._off, self._edge

    def _all(self) -> tuple[tuple[tuple[int, int], ...], ...]:
        if self._lists is None:
            self._lists = tuple(_calls_lists(self._off, self._edge))
        return self._lists

    def __len__(self) -> int:
        return len(self._off) - 1

    def __getitem__(self, i):  # type: ignore[override]
        return self._all()[i]

    def __iter__(self):
        return iter(self._all())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (CallLists, tuple, list)):
            return self._all() == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._all())

    def __repr__(self) -> str:
        return repr(self._all())


def _calls_lists(call_off: np.ndarray, call_edge: np.ndarray) -> list[tuple[tuple[int, int], ...]]:
    """CSR calls → per state a tuple of ``(callee, target)`` pairs. Most states call nothing:
    only those that do are visited (a slice per state of every DFA was a visible share of
    compiling)."""
    calls: list[tuple[tuple[int, int], ...]] = [()] * (len(call_off) - 1)
    if len(call_edge):
        pairs = call_edge.tolist()
        bounds = call_off.tolist()
        for i in np.flatnonzero(call_off[1:] != call_off[:-1]).tolist():
            calls[i] = tuple(map(tuple, pairs[bounds[i]:bounds[i + 1]]))
    return calls


# --------------------------------------------------------------------------- grammar analysis


INLINE_LIMIT = 400
"""Rules used in several places are called, not copied, when larger than this (expression nodes)."""
SPLIT_LIMIT = 10_000
"""A rule whose inlined NFA would pass this many states (estimated) calls its largest parts instead."""


class RulePlan:
    """A grammar's rule bodies serialized once, and which rules are called rather than inlined.

    Every body is serialized with its rule references as placeholders; the native planner
    (``ExprSerializer.plan``, src/core/expr_plan.cpp) reads the serialized nodes for the
    references of each rule, the recursive rules (Tarjan) and the non-recursive rules to call
    anyway: those referenced from several places and larger than ``INLINE_LIMIT`` nodes, and,
    inside a rule whose inlined NFA would pass ``SPLIT_LIMIT`` states (estimated), its largest
    references until it would not (each called rule is determinised on its own, so no single
    NFA or subset construction holds a whole large schema; ``max_states`` is still checked
    exactly while they are built). :meth:`resolve` then turns each placeholder into a call or
    an inlined copy of the body. The nodes stay in the serializer until :meth:`arrays` or
    :meth:`rule_key` reads them: planning, resolving and keying a median schema's rules were
    a dozen small numpy operations, more than the native work they wrapped.

    Attributes:
        names: the rules, in order (``shape``'s keys); ``roots[i]`` is rule ``i``'s node.
        recursive: the rules on a reference cycle.
        shared: the non-recursive rules to call rather than inline.
    """

    def __init__(self, shape: Mapping[str, Expr]) -> None:
        self.names = list(shape)
        self.ser = serializer({n: i for i, n in enumerate(self.names)})
        self.roots: list[int] = self.ser.add_rules(shape.values())
        self._arrays: tuple[np.ndarray, np.ndarray] | None = None
        self.recursive: set[str] = set()
        self.shared: set[str] = set()

    def large_repeats(self, threshold: int = COUNT_THRESHOLD) -> bool:
        """Whether a repeat bounded above ``threshold`` occurs (regexes included): only then
        can counters be lifted."""
        return self.ser.largest_bound() > threshold

    def rule_bounds(self) -> dict[str, int]:
        """Per rule, the largest repeat bound in its body (-1: none; for :func:`lift_counters`)."""
        return dict(zip(self.names, self.ser.rule_bounds()))

    def rule_nullables(self) -> dict[str, bool]:
        """Per rule, whether it matches the empty string (for :func:`lift_counters`)."""
        return dict(zip(self.names, self.ser.rule_nullables()))

    def plan(self, inline_limit: int = INLINE_LIMIT, split_limit: int = SPLIT_LIMIT) -> None:
        """Fill ``recursive`` and ``shared`` (before :meth:`resolve`)."""
        names = self.names
        rank = [0] * len(names)
        for k, r in enumerate(sorted(range(len(names)), key=names.__getitem__)):  # ties: first name in order
            rank[r] = k
        recursive, shared = self.ser.plan(rank, inline_limit, split_limit)
        self.recursive = {names[i] for i in recursive}
        self.shared = {names[i] for i in shared}

    def resolve(self, called: Mapping[str, int], rule_ids: Mapping[str, int]) -> None:
        """Placeholders become ``(CALL, called[name])`` or ``(INLINE, rule_ids[name], body)``
        (once, after :meth:`plan`)."""
        call_ids = [called.get(name, -1) for name in self.names]
        self.ser.resolve(call_ids, [rule_ids[name] if c < 0 else 0 for name, c in zip(self.names, call_ids)])

    def rule_key(self, root: int) -> bytes:
        """The canonical form of node ``root`` (placeholders resolved): equal keys, equal
        rule automata (``_core.rule_key``)."""
        return self.ser.rule_key(root)

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """The serialized nodes (placeholders resolved) and data; nodes added since included."""
        if self._arrays is None or len(self.ser) != len(self._arrays[0]):
            self._arrays = self.ser.arrays()
        return self._arrays


def _all_proven(path_callees: list[tuple[int, ...] | None]) -> bool:
    """Whether every rule is productive by the paths the builds found (each rule's
    ``path_callees``, see :func:`_rule_dfa`): a rule is once all the callees on its path are,
    a least fixed point over those few callees per rule. Where it proves every rule, the
    table search of ``_core.productive_rules`` is not needed; else that search decides (a rule
    may still be productive by another path)."""
    waiting: dict[int, list[int]] = {}  # callee -> rules whose path calls it
    left = [0] * len(path_callees)  # per rule, callees on its path not proven yet
    ready: list[int] = []
    for r, callees in enumerate(path_callees):
        if callees is None:
            return False
        left[r] = len(callees)
        for c in callees:
            waiting.setdefault(c, []).append(r)
        if not callees:
            ready.append(r)
    proven = 0
    while ready:
        c = ready.pop()
        proven += 1
        for r in waiting.get(c, ()):
            left[r] -= 1
            if left[r] == 0:
                ready.append(r)
    return proven == len(path_callees)


def _check_left_recursion(dfas: list[tuple], csr: list[tuple[np.ndarray, np.ndarray]], names: list[str]) -> None:
    """Reject left recursion: a rule that can call itself without consuming a byte
    (``_core.left_recursion``: from the final flags and calls, no transition table read)."""
    cycle = _core.left_recursion([d[1] for d in dfas], [c[0] for c in csr], [c[1] for c in csr])
    if cycle is not None:
        raise GrammarError(
            "left recursion is not supported: "
            + " -> ".join(names[i] for i in cycle)
            + " can recurse without consuming input; rewrite it with repetition (x*)"
        )


# --------------------------------------------------------------------------- entry point


def build_automaton(
    grammar: Grammar, *, max_states: int = DEFAULT_MAX_STATES, byte_alphabet: np.ndarray | None = None
) -> PushdownAutomaton:
    """Compile a grammar into a pushdown automaton of minimal per-rule byte DFAs.

    Args:
        byte_alphabet: optional bool ``(256,)``: the bytes some token contains; others are removed.

    Raises:
        GrammarError: the language is empty, or a rule is left-recursive.
        AutomatonSizeError: more than ``max_states`` NFA or DFA states would be built.
    """
    plan = RulePlan(grammar.rules)
    if plan.large_repeats():
        rules, counters = lift_counters(grammar.rules, bounds=plan.rule_bounds(), nullables=plan.rule_nullables())
        if counters:  # for the plan a counter is a rule that refers to its item
            plan = RulePlan({**rules, **{c: Ref(item) for c, (item, _, _) in counters.items()}})
    else:
        rules, counters = dict(grammar.rules), {}
    plan.plan()
    lifted = set(counters) | {item for item, _, _ in counters.values()}
    called_names = [grammar.start] + sorted(n for n in plan.recursive | plan.shared | lifted if n != grammar.start)
    called = {n: i for i, n in enumerate(called_names)}
    # Every rule is serialized once (a rule inlined in several places shares its nodes) and
    # grown natively, unless an equal expression was built before in this process (_RULES:
    # keyed natively over the serialized nodes; hashing the expression trees in Python cost
    # more than the construction it saved).
    plan.resolve(called, {n: i for i, n in enumerate(rules)})
    root_of = dict(zip(plan.names, plan.roots))
    roots = {name: root_of[name] for name in called_names if name not in counters}
    raw = []
    csr: list[tuple[np.ndarray, np.ndarray]] = []  # calls of each rule of ``raw`` as CSR arrays
    alone: list[bool] = []  # per rule of ``raw``: ends by bytes alone, so productive at once
    path_callees: list[tuple[int, ...] | None] = []  # per rule of ``raw``: see _rule_dfa
    total = 0
    alphabet = np.ones(256, bool) if byte_alphabet is None else np.asarray(byte_alphabet, bool)
    alphabet_key = alphabet.tobytes()
    keys = {name: plan.rule_key(roots[name]) + alphabet_key for name in called_names if name not in counters}
    arrays = plan.arrays()
    ahead, held = _build_ahead(arrays, roots, keys, max_states, alphabet, len(called_names))
    for name in called_names:
        if name in counters:
            # a two-state stand-in with the counter's nullability, productivity and left
            # calls: "call the item once, then end" (lo == 0: may also end at once)
            item, lo, _ = counters[name]
            raw.append((np.full((2, 256), -1, np.int32), np.array([lo == 0, True]), [((called[item], 1),), ()]))
            csr.append(_calls_csr(raw[-1][2]))
            alone.append(lo == 0)
            path_callees.append(() if lo == 0 else (called[item],))
            total += 2
            continue
        # each rule's NFA is its own, so max_states bounds the NFA of one rule, the DFAs of all.
        # Bytes no token contains can never be produced: they are dropped before trimming, so
        # no state is kept whose only way forward needs one (no dead ends in the masks). The
        # DFA is minimal before it is counted and kept (every callee taken as productive
        # here: exact, merging only states with the same future; trimming comes below).
        key = keys[name]
        built = _RULES.get(key, max_states, max_states - total)
        if built is None and key in held and _RuleDFAs.fits(held[key], max_states, max_states - total):
            built = held[key][1]
        if built is None:
            out = ahead.get(key)
            if out is None or out[5][1] > max_states - total:  # not built ahead, or past the budget here
                try:
                    out = _rule_dfa(arrays, roots[name], max_states, total, alphabet, len(called_names))
                except AutomatonSizeError as exc:
                    raise _located(exc, grammar, plan, name, max_states, max(max_states - total, 1)) from None
            m_trans, m_final, call_off, call_edge, ends, need, callees = out
            if len(m_final):
                built = ((m_trans, m_final, CallLists(call_off, call_edge)), (call_off, call_edge), ends, callees)
            else:  # the rule matches nothing: one rejecting state (the productivity pass below drops it)
                empty = (np.full((1, 256), -1, np.int32), np.zeros(1, bool), [()])
                built = (empty, _calls_csr(empty[2]), ends, None)
            _RULES.put(key, need, built)
        dfa, rule_csr, ends, callees = built
        alone.append(ends)
        path_callees.append(callees)
        csr.append(rule_csr)
        total += dfa[0].shape[0]
        raw.append(dfa)
    _check_left_recursion(raw, csr, called_names)
    # productive rules: those whose start state reaches a final state by bytes and calls to
    # productive rules (native, a worklist to the least fixed point). A rule that ends by
    # bytes alone is productive from the start; most are, and then nothing is tested.
    productive: list[bool] = alone
    everywhere = all(alone)
    if not everywhere and _all_proven(path_callees):
        productive, everywhere = [True] * len(raw), True
    if not everywhere:
        productive = _core.productive_rules([d[0] for d in raw], [d[1] for d in raw], [c[0] for c in csr],
                                            [c[1] for c in csr], alone)
        everywhere = all(productive)
    if not productive[0]:
        raise EmptyGrammarError(f"the grammar matches no string at all (rule {grammar.start!r} is empty)")
    mask = None if everywhere else np.array(productive, bool)
    out = []
    for r, (trans, final, calls) in enumerate(raw):
        if not productive[r]:  # unreachable after trimming; keep a placeholder rejecting all
            out.append(RuleDFA(called_names[r], np.full((1, 256), -1, np.int32), np.zeros(1, bool), ((),)))
            continue
        if called_names[r] in counters:
            item, lo, hi = counters[called_names[r]]
            productive_item = productive[called[item]]  # else lo == 0: only the empty match
            out.append(CounterRule(called_names[r], called[item], lo, hi if productive_item else 0))
            continue
        call_edge = csr[r][1]
        if mask is None or mask[call_edge[:, 0]].all():
            # every callee is productive: trimming against ``mask`` drops nothing from this
            # already trimmed and minimal DFA, and its states keep their numbers (classes are
            # numbered by first appearance), so the second pass would return it unchanged
            out.append(RuleDFA(called_names[r], trans, final, calls, csr[r]))
            continue
        m_trans, m_final, m_calls = _trim_and_minimise(trans, final, csr[r], mask)
        out.append(RuleDFA(called_names[r], m_trans, m_final, m_calls))
    return PushdownAutomaton(tuple(out), 0, trimmed=True)


UNREACHABLE = 1 << 60
"""Completion distance of a state from which a rule cannot end (never kept after trimming;
see ``TokenIndex.rule_distances``)."""
