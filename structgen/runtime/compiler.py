"""GrammarCompiler → CompiledGrammar: grammar + tokenizer → ready-to-match artefact."""
from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from ..index.automaton import DEFAULT_MAX_STATES, PushdownAutomaton, RuleDFA, build_automaton
from ..errors import EmptyGrammarError, GrammarError, SchemaError, StructgenError
from ..grammar import Grammar
from ..grammar.expr import NODE_CLASSES, untrack_nodes
from ..index.token_index import TokenIndex, TokenTrie, vocab_tables
from ..index.tokenizer import TokenizerInfo
from ..index.vocab_cache import load_trie
from ..guards import deep_recursion as _deep_recursion, gc_paused as _gc_paused
from ..schema.resources import embed_resources
from ..schema.text import check_schema_depth, loads_schema
from ..schema.to_grammar import convert_schema, prepare_default_check
from ..grammar.builtin import load_grammar
from .matcher import GrammarMatcher
from .precompute import DEFAULT_LIMIT, BackgroundPrecompute
from .precompute import start as start_background

_KEPT_NODES = NODE_CLASSES + (RuleDFA,)  # what a compiled grammar keeps of the compile

UNTRACK_MIN_STATES = 1_000
"""Grammars whose automaton has this many states or more have their expressions and rule
automata taken out of the garbage collector's lists (:func:`~structgen.grammar.expr.untrack_nodes`)."""

__all__ = ["GrammarCompiler", "CompiledGrammar", "CompileStats"]

# Compiled once per compiler with its vocabulary (GrammarCompiler.trie), not cached, so that
# the first schemas a process compiles do not each pay a part of the process's set-up: the
# regex, format and keyword-check caches of the converter, the rule automata that most
# schemas share (strings, numbers, any value; process-wide, per byte alphabet) and the
# native threads. In a fresh process the first eight schemas of the wide bench sample
# compiled at up to twice their later time without it (BFCL_sql_93: 1.6 against 0.7 ms).
_WARM_UP_SCHEMA: dict = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 64},
        "kind": {"enum": ["a", "b", 1, None]},
        "version": {"const": "1"},
        "count": {"type": "integer", "minimum": 0},
        "ratio": {"type": "number", "maximum": 1},
        "flag": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string", "pattern": "^[a-z][a-z0-9_-]*$"}, "minItems": 1},
        "link": {"type": "string", "format": "uri"},
        "when": {"type": "string", "format": "date-time"},
        "day": {"type": "string", "format": "date"},
        "mail": {"type": "string", "format": "email"},
        "child": {"$ref": "#/$defs/child"},
        "either": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "extra": {"type": "object", "additionalProperties": {"type": "string"}},
        "any": {},
    },
    "required": ["name", "count"],
    "additionalProperties": False,
    "$defs": {"child": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"],
                        "additionalProperties": False}},
}

_WARM_LOCK = threading.Lock()
_dialects_warmed = False

Whitespace = Literal["compact", "flexible"]


@dataclass(frozen=True, slots=True)
class CompileStats:
    """Sizes and timings of one compilation (seconds)."""

    rules: int
    automaton_rules: int
    automaton_states: int
    grammar_seconds: float
    automaton_seconds: float
    precompute_seconds: float
    precomputed_masks: int

    @property
    def total_seconds(self) -> float:
        return self.grammar_seconds + self.automaton_seconds + self.precompute_seconds


DRAFT_URIS = {
    "2020-12": "https://json-schema.org/draft/2020-12/schema",
    "2019-09": "https://json-schema.org/draft/2019-09/schema",
    "draft-07": "http://json-schema.org/draft-07/schema#",
    "draft-06": "http://json-schema.org/draft-06/schema#",
    "draft-04": "http://json-schema.org/draft-04/schema#",
}
"""The dialects :meth:`GrammarCompiler.compile_json_schema` can be told a schema is written in."""


@dataclass(frozen=True, eq=False)
class CompiledGrammar:
    """A grammar compiled for one tokenizer. Immutable in meaning; share it freely.

    Attributes:
        grammar: the source grammar (``str(compiled.grammar)`` is Lark text).
        tokenizer_info: the tokenizer it was compiled for.
        automaton: the byte-level pushdown automaton.
        index: configuration/mask memo tables (grow on use, never change an answer).
        warnings: schema keywords accepted without being enforced (lenient mode only).
        stats: sizes and timings.
    """

    grammar: Grammar
    tokenizer_info: TokenizerInfo
    automaton: PushdownAutomaton
    index: TokenIndex = field(repr=False)
    warnings: tuple[str, ...] = ()
    stats: CompileStats | None = None
    free_names: bool = False
    """Matchers keep member names distinct per object (``Grammar.free_names``)."""
    background: BackgroundPrecompute | None = field(default=None, repr=False)
    """The masks being precomputed in the background (``precompute="background"``), else ``None``."""

    def matcher(self, **kwargs: Any):
        """A new :class:`~structgen.runtime.matcher.GrammarMatcher` for this grammar."""
        return GrammarMatcher(self, **kwargs)


class GrammarCompiler:
    """Compiles schemas and grammars for one tokenizer, with an in-memory LRU cache.

    Thread-safe: the cache and the shared vocabulary trie are guarded by a lock; two threads
    compiling the same input at once may both compile it, and both get the first result.

    Args:
        tokenizer_info: the target vocabulary.
        cache_size: compiled grammars kept (keyed by canonical input, options and the
            tokenizer fingerprint); 0 disables the cache.
        max_states: automaton size limit; larger grammars raise ``AutomatonSizeError``.
        precompute: ``"lazy"`` computes each mask when first needed (compile in
            milliseconds); ``"eager"`` also walks every reachable configuration of grammars
            without recursion at compile time; ``"background"`` returns once the automaton
            exists and computes the masks of up to ``precompute_limit`` reachable
            configurations, nearest first, in a daemon thread while the model runs (a mask
            not ready yet is computed when first needed, see :mod:`structgen.runtime.precompute`).
        precompute_limit: masks a background precompute computes at most per grammar.
    """

    def __init__(
        self,
        tokenizer_info: TokenizerInfo,
        *,
        cache_size: int = 128,
        max_states: int = DEFAULT_MAX_STATES,
        precompute: Literal["lazy", "eager", "background"] = "lazy",
        precompute_limit: int = DEFAULT_LIMIT,
    ) -> None:
        if precompute not in ("lazy", "eager", "background"):
            raise ValueError(f"precompute must be 'lazy', 'eager' or 'background', not {precompute!r}")
        if precompute_limit < 0:
            raise ValueError(f"precompute_limit must be >= 0, not {precompute_limit!r}")
        self.tokenizer_info = tokenizer_info
        self.max_states = max_states
        self.precompute = precompute
        self.precompute_limit = precompute_limit
        self._cache_size = cache_size
        self._cache: OrderedDict[tuple, CompiledGrammar] = OrderedDict()
        self._trie: TokenTrie | None = None
        self._alphabet = None
        self._lock = threading.RLock()  # compiling itself runs outside it
        # per-process set-up here, with the compiler, rather than in the first request's compile
        prepare_default_check()

    @property
    def trie(self) -> TokenTrie:
        """The vocabulary trie shared by every grammar of this compiler (built once)."""
        with self._lock:
            if self._trie is None:
                self._trie = load_trie(self.tokenizer_info)  # disk-cached per vocabulary fingerprint
                # with the trie, not in the first compile that needs them (3 ms at 49K tokens)
                vocab_tables(self._trie)
                self._warm_up(self._trie)
            return self._trie

    def _warm_up(self, trie: TokenTrie) -> None:
        """Compile :data:`_WARM_UP_SCHEMA` once, uncached and without precompute, and the first
        time in a process convert it in the other dialects too (about 14 ms the first time in
        a process, under 2 ms for another compiler after)."""
        try:
            with _deep_recursion(), _gc_paused():
                grammar = convert_schema(_WARM_UP_SCHEMA, strict=True, whitespace="compact", max_whitespace=0)
                self._index(grammar, trie, self._byte_alphabet())
        except StructgenError:
            pass  # (a max_states too small for it, a vocabulary without some character: nothing to warm)
        global _dialects_warmed
        with _WARM_LOCK:
            if _dialects_warmed:
                return
            _dialects_warmed = True
        # the other dialects' metaschema checks and keyword validators, once per process (real
        # schemas often name draft-07, -06 or -04; a schema's first draft-06 cost it 1.3 ms
        # more): converted only, their rules being the same
        with _deep_recursion(), _gc_paused():
            for uri in DRAFT_URIS.values():
                if uri != DRAFT_URIS["2020-12"]:
                    convert_schema({"$schema": uri, **_WARM_UP_SCHEMA}, strict=True, whitespace="compact",
                                   max_whitespace=0)

    def _index(self, grammar: Grammar, trie: TokenTrie, alphabet: np.ndarray) -> tuple[PushdownAutomaton, TokenIndex]:
        """The grammar's automaton and its token index (every compile, and the warm-up)."""
        pda = build_automaton(grammar, max_states=self.max_states, byte_alphabet=alphabet)
        return pda, TokenIndex(pda, self.tokenizer_info, trie)

    @property
    def byte_alphabet(self):
        """bool ``(256,)``: bytes that occur in at least one token of the vocabulary."""
        with self._lock:
            return self._byte_alphabet()

    def _byte_alphabet(self):
        if self._alphabet is None:
            # every byte of every token is the last byte of one of the trie's nodes (the node
            # of the token's prefix ending there): a count over the nodes, not over the token
            # bytes joined (17 ms at 128K tokens, which the first compile paid)
            self._alphabet = np.bincount(self.trie.byte[1:], minlength=256) > 0  # (the lock is reentrant)
        return self._alphabet

    def compile_json_schema(
        self,
        schema: Any,
        *,
        strict: bool = True,
        whitespace: Whitespace = "compact",
        max_whitespace: int = 8,
        draft: str | None = None,
        resources: Mapping[str, Any] | None = None,
    ) -> CompiledGrammar:
        """Compile a JSON Schema (dict, bool, or JSON text).

        Args:
            schema: the schema.
            strict: unsupported keywords raise ``UnsupportedSchemaError``; with ``False`` they
                are recorded in ``CompiledGrammar.warnings`` (and warned) instead.
            whitespace: ``"compact"`` (no whitespace, the default) or ``"flexible"`` (up to
                ``max_whitespace`` whitespace characters wherever JSON allows them).
            draft: the dialect of a schema without ``$schema``: ``"2020-12"`` (what such a
                schema means by default), ``"2019-09"``, ``"draft-07"``, ``"draft-06"`` or
                ``"draft-04"``. A ``$schema`` in the schema wins.
            resources: other schema documents the schema's ``$ref``s may name, by absolute
                URI (``{"https://example.com/address.json": {...}}``); nothing is ever fetched.

        Raises:
            SchemaError: invalid or unsatisfiable schema (with the JSON pointer), or an unknown draft.
            UnsupportedSchemaError: an unsupported keyword in strict mode.
            LimitError: a construct would cost more than a limit of ``docs/limits.md``
                allows (with its JSON pointer, or line and column in schema text).
            AutomatonSizeError: the automaton would exceed ``max_states``.
        """
        if isinstance(schema, (str, bytes, bytearray)):
            with _deep_recursion():  # the decoder recurses once per nesting level
                schema = loads_schema(schema)  # NaN, Infinity, overlong numbers, too deep: refused, located
        if draft is not None:
            if draft not in DRAFT_URIS:
                raise SchemaError(f"unknown draft {draft!r}; expected one of {', '.join(DRAFT_URIS)}", pointer="")
            if isinstance(schema, dict) and "$schema" not in schema:
                schema = {"$schema": DRAFT_URIS[draft], **schema}
        check_schema_depth(schema)  # before json.dumps and the converter recurse into it
        if resources:
            schema = embed_resources(schema, resources)
            check_schema_depth(schema)  # the documents embedded too
        try:
            with _deep_recursion():
                # key order matters: properties are generated in schema order. Without a cache
                # nothing is looked up, and the schema's text is not made (about 1% of
                # compiling a median schema)
                text = json.dumps(schema) if self._cache_size else None
                key = ("schema", text, strict, whitespace, max_whitespace)
                return self._cached(key, lambda: convert_schema(
                    schema, strict=strict, whitespace=whitespace, max_whitespace=max_whitespace))
        except RecursionError:
            raise SchemaError("the schema nests too deeply to compile", pointer="") from None
        except EmptyGrammarError:
            raise SchemaError("the schema is unsatisfiable: no JSON value can be valid, or none that this "
                              "tokenizer's tokens can write (a character whose UTF-8 bytes no token holds)",
                              pointer="") from None

    def compile_grammar(self, grammar: Grammar | str, *, start: str = "start") -> CompiledGrammar:
        """Compile a :class:`Grammar` or Lark grammar text."""
        try:
            with _deep_recursion():
                if isinstance(grammar, str):
                    text = grammar
                    return self._cached(("lark", text, start), lambda: Grammar.from_lark(text, start=start))
                return self._cached(("grammar", str(grammar), grammar.start, grammar.free_names, grammar.names_can_trap), lambda: grammar)
        except RecursionError:
            raise GrammarError("the grammar nests too deeply to compile") from None

    def compile_builtin_json(self, *, whitespace: Whitespace = "flexible") -> CompiledGrammar:
        """Any JSON value (``grammars/json.lark``), the "JSON mode" of other engines."""
        name = "json" if whitespace == "flexible" else "json_compact"
        # any JSON value: every object's names are free, and must still be distinct
        return self._cached(("builtin", name), lambda: dataclasses.replace(load_grammar(name), free_names=True))

    def clear_cache(self) -> None:
        with self._lock:
            self._cache.clear()

    def _cached(self, key: tuple, make_grammar) -> CompiledGrammar:
        key = key + (self.tokenizer_info.fingerprint, self.max_states, self.precompute)
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        trie, alphabet = self.trie, self.byte_alphabet  # per-vocabulary work, outside the timings
        with _gc_paused():
            t0 = time.perf_counter()
            grammar = make_grammar()
            t1 = time.perf_counter()
            pda, index = self._index(grammar, trie, alphabet)
            # the grammar (CompiledGrammar.grammar) and the rule automata outlive the compile:
            # a large grammar's frozen nodes leave the collector's lists before the collections
            # paused here run, which traversed them again and again (see untrack_nodes); a
            # small one's cost a collection less than taking them out
            states = pda.num_states
            if states >= UNTRACK_MIN_STATES:
                untrack_nodes([*grammar.rules.values(), *grammar.constructs.values(), *pda.rules], _KEPT_NODES)
            t2 = time.perf_counter()
        pre = 0
        if self.precompute == "eager" and len(pda.rules) == 1:
            pre = index.precompute()
        t3 = time.perf_counter()
        stats = CompileStats(
            rules=len(grammar.rules),
            automaton_rules=len(pda.rules),
            automaton_states=states,
            grammar_seconds=t1 - t0,
            automaton_seconds=t2 - t1,
            precompute_seconds=t3 - t2,
            precomputed_masks=pre,
        )
        background = None
        if self.precompute == "background":
            background = BackgroundPrecompute(index, limit=self.precompute_limit)
        compiled = CompiledGrammar(grammar, self.tokenizer_info, pda, index, tuple(grammar.warnings), stats,
                                   grammar.free_names, background)
        if self._cache_size:
            with self._lock:
                won = self._cache.setdefault(key, compiled)  # a racing thread's result wins
                self._cache.move_to_end(key)
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
            if won is not compiled:
                return won  # its own task already runs; this one is never started
        if background is not None:
            start_background(background)
        return compiled
