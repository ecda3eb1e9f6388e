"""vLLM glue: a batch-level logits processor that decodes opted-in requests under a grammar.

Register :class:`StructgenLogitsProcessor` once, when the engine is created, and every request
that carries a ``"structgen"`` entry in its extra arguments is constrained; other requests
are left alone::

    from vllm import LLM, SamplingParams
    from structgen.integrations.vllm import StructgenLogitsProcessor

    llm = LLM(model, logits_processors=[StructgenLogitsProcessor])
    params = SamplingParams(extra_args={"structgen": {"json_schema": schema}})

The OpenAI-compatible server takes the class by name
(``--logits-processors structgen.integrations.vllm:StructgenLogitsProcessor``) and the request's
``vllm_xargs`` (whose values must be strings or numbers, so the spec travels as JSON text):
``{"vllm_xargs": {"structgen": json.dumps({"tools": [...]})}}``.

The ``"structgen"`` spec (a dict, or its JSON text) holds exactly one of

* ``"json_schema"``: a JSON Schema (dict or JSON text);
* ``"grammar"``: Lark grammar text (``"start"`` names the start rule, default ``"start"``);
* ``"tools"``: OpenAI tool definitions, with ``"tool_choice"`` (``"required"`` default,
  ``"auto"``, ``"none"`` or a tool name), ``"parallel"`` (bool) and ``"format"``
  (``"json"`` default, ``"hermes"``, ``"smollm2"``);
* ``"json": true``: any JSON value;

and the options ``"whitespace"`` (``"compact"`` or ``"flexible"``) and ``"strict"`` (bool).

This is vLLM's V1 logits-processor interface (``vllm.v1.sample.logits_processor``), which
the V1 model runner uses. vLLM 0.32 runs its Model Runner V2 by default wherever Triton is
installed (CUDA builds), and V2 only loads processors of its own, different interface: there,
start vLLM with ``VLLM_USE_V2_MODEL_RUNNER=0``. The CPU build has no Triton and runs V1.

How the engine drives it (read from vLLM 0.32's ``gpu_input_batch.py`` / ``sampler.py``):

* ``update_state(batch_update)`` runs before each forward pass. ``batch_update`` lists the
  rows removed, added and moved since the last step, to be applied in that order. A removed
  row whose slot was refilled in the same step (by a new request or by ``condense()``
  sliding the last row down) is *not* listed as removed: the add or the one-way move
  overwrites it, so both must drop what the target row held. Preemption is a removal; a
  resumed request is added again with the tokens it had already generated.
* The ``output_tok_ids`` list of an added request is the engine's own running list: it grows
  as tokens are sampled. With async scheduling its last entry can be a ``-1`` placeholder
  that vLLM repairs just before the logits processors run, so matchers are advanced in
  :meth:`~StructgenLogitsProcessor.apply`, never in ``update_state``.
* ``apply(logits)`` gets float32 logits ``(batch, vocab)``; rows are the batch indices above.

Compilation never runs on the decode path: a request's grammar is submitted to one compile
thread when the request is admitted (in ``update_state``, so it overlaps that step's forward
pass) and futures are shared by every request with the same spec. A row whose grammar is not
ready when its first mask is needed blocks on the future at that point: correctness over
latency, and only the first step of that one request waits on a cold grammar (structgen's
compiles are lazy and take milliseconds; masks are then computed on first use and memoised).
"""
from __future__ import annotations

import concurrent.futures
import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from ..errors import StructgenArgsError, StructgenError
from ..grammar import Grammar
from ..runtime.bitmask import apply_token_bitmask_inplace, bitmask_words
from ..runtime.compiler import CompiledGrammar, GrammarCompiler
from ..runtime.matcher import GrammarMatcher
from ..schema.text import loads_schema
from ..schema.to_grammar import schema_to_grammar
from ..tools import ToolSet
from .hf import compiler_for
from ..runtime.batch import fill_next_token_bitmasks

try:  # the engine only loads subclasses of its own base class
    from vllm.v1.sample.logits_processor import LogitsProcessor as _Base
except ImportError:  # vLLM is optional: the bookkeeping is usable (and tested) without it
    _Base = object

__all__ = ["EXTRA_ARGS_KEY", "GrammarSpec", "StructgenArgsError", "StructgenLogitsProcessor"]

log = logging.getLogger(__name__)

EXTRA_ARGS_KEY = "structgen"
"""The key of ``SamplingParams.extra_args`` (or of the server's ``vllm_xargs``) read here."""

SpecKind = Literal["json_schema", "grammar", "tools", "json"]
_KINDS: tuple[SpecKind, ...] = ("json_schema", "grammar", "tools", "json")
_OPTIONS = {"json_schema": {"whitespace", "strict"}, "grammar": {"start"},
            "tools": {"tool_choice", "parallel", "format", "whitespace", "strict"}, "json": {"whitespace"}}


@dataclass(frozen=True)
class GrammarSpec:
    """What one request asked for, parsed from its extra arguments.

    Attributes:
        kind: ``"json_schema"``, ``"grammar"``, ``"tools"`` or ``"json"``.
        value: the schema, grammar text, tool list or ``True``.
        options: the remaining keys (``whitespace``, ``strict``, ``start``, ``tool_choice``...).
        key: a text that equal specs share (the compile-cache key; schema key order kept,
            because properties are generated in schema order).
    """

    kind: SpecKind
    value: Any
    options: Mapping[str, Any] = field(default_factory=dict)
    key: str = ""

    @classmethod
    def from_extra_args(cls, extra_args: Mapping[str, Any] | None) -> GrammarSpec | None:
        """The spec under ``extra_args["structgen"]``, or None when the request has none.

        Raises:
            StructgenArgsError: the entry is not a dict (or JSON text of one) with exactly
                one of the kinds and known options.
        """
        if not extra_args or extra_args.get(EXTRA_ARGS_KEY) is None:
            return None
        raw = extra_args[EXTRA_ARGS_KEY]
        if isinstance(raw, (str, bytes)):
            try:
                raw = json.loads(raw)
            except ValueError as exc:
                raise StructgenArgsError(f"extra_args[{EXTRA_ARGS_KEY!r}] is not valid JSON text: {exc}") from None
        if not isinstance(raw, Mapping):
            raise StructgenArgsError(
                f"extra_args[{EXTRA_ARGS_KEY!r}] must be a dict (or its JSON text), got {type(raw).__name__}")
        kinds = [k for k in _KINDS if k in raw]
        if len(kinds) != 1:
            raise StructgenArgsError(
                f"extra_args[{EXTRA_ARGS_KEY!r}] needs exactly one of {', '.join(_KINDS)}; "
                f"found {', '.join(kinds) if kinds else 'none'} (keys: {sorted(raw)})")
        kind = kinds[0]
        options = {k: v for k, v in raw.items() if k != kind}
        unknown = set(options) - _OPTIONS[kind]
        if unknown:
            raise StructgenArgsError(
                f"unknown option(s) {sorted(unknown)} for {kind!r}; expected some of {sorted(_OPTIONS[kind])}")
        value = raw[kind]
        if kind == "json_schema" and isinstance(value, (str, bytes)):
            try:
                value = loads_schema(value)  # NaN, Infinity and overlong numbers refused, located
            except ValueError as exc:
                raise StructgenArgsError(f"json_schema is not valid JSON text: {exc}") from None
        if kind == "grammar" and not isinstance(value, str):
            raise StructgenArgsError(f"grammar must be Lark grammar text, got {type(value).__name__}")
        if kind == "tools" and (not isinstance(value, list) or not all(isinstance(t, Mapping) for t in value)):
            raise StructgenArgsError("tools must be a list of OpenAI tool definitions (dicts)")
        if kind == "json" and value is not True:
            raise StructgenArgsError(f"json must be true, got {value!r}")
        if options.get("whitespace", "compact") not in ("compact", "flexible"):
            raise StructgenArgsError(f"whitespace must be 'compact' or 'flexible', got {options['whitespace']!r}")
        try:
            key = json.dumps([kind, value, sorted(options.items())])
        except (TypeError, ValueError) as exc:
            raise StructgenArgsError(f"extra_args[{EXTRA_ARGS_KEY!r}] is not JSON-serialisable: {exc}") from None
        return cls(kind, value, options, key)

    def check(self) -> None:
        """Build the grammar without a tokenizer, so a bad schema or grammar fails at admission.

        Raises:
            SchemaError, GrammarError, ToolError: as the compiler would, later.
        """
        o = self.options
        if self.kind == "json_schema":
            schema_to_grammar(self.value, strict=o.get("strict", True), whitespace=o.get("whitespace", "compact"))
        elif self.kind == "grammar":
            Grammar.from_lark(self.value, start=o.get("start", "start"))
        elif self.kind == "tools":
            self._toolset().grammar(o.get("tool_choice", "required"), parallel=bool(o.get("parallel", False)),
                                    format=o.get("format", "json"), whitespace=o.get("whitespace", "compact"))

    def _toolset(self) -> Any:
        return ToolSet.from_openai(self.value, lenient=not self.options.get("strict", True))

    def compile(self, compiler: GrammarCompiler) -> CompiledGrammar:
        """Compile for ``compiler``'s tokenizer (the compiler's own cache applies)."""
        o = self.options
        if self.kind == "json_schema":
            return compiler.compile_json_schema(
                self.value, strict=o.get("strict", True), whitespace=o.get("whitespace", "compact"))
        if self.kind == "grammar":
            return compiler.compile_grammar(self.value, start=o.get("start", "start"))
        if self.kind == "json":
            return compiler.compile_builtin_json(whitespace=o.get("whitespace", "flexible"))
        return self._toolset().compile(
            compiler, o.get("tool_choice", "required"), parallel=bool(o.get("parallel", False)),
            format=o.get("format", "json"), whitespace=o.get("whitespace", "compact"))


@dataclass(slots=True, eq=False)
class _Row:
    """One constrained request in the persistent batch."""

    spec: GrammarSpec
    future: concurrent.futures.Future
    output: list[int]  # vLLM's running output list for the request (a reference, it grows)
    matcher: GrammarMatcher | None = None
    consumed: int = 0  # how many entries of ``output`` the matcher has accepted
    failed: bool = False  # compile failed: only stop tokens are allowed (the request ends)


class StructgenLogitsProcessor(_Base):
    """vLLM V1 batch-level logits processor: structgen grammars for opted-in requests.

    vLLM constructs it as ``StructgenLogitsProcessor(vllm_config, device, is_pin_memory)``
    and loads the model's tokenizer from ``vllm_config.model_config``. Without vLLM (tests,
    other engines with the same protocol) use :meth:`from_compiler`.

    Attributes:
        compiler: the :class:`GrammarCompiler` for the model's tokenizer.
        waits: how many times a row blocked on a grammar still compiling at its first mask.
    """

    # Shared by every request of this processor. Compiles go through one worker thread: the
    # compiler's caches and the vocabulary trie are built lazily and are not locked.
    def __init__(self, vllm_config: Any, device: Any, is_pin_memory: bool) -> None:
        from transformers import AutoTokenizer

        mc = vllm_config.model_config
        tokenizer = AutoTokenizer.from_pretrained(
            mc.tokenizer, revision=getattr(mc, "tokenizer_revision", None),
            trust_remote_code=bool(getattr(mc, "trust_remote_code", False)))
        vocab = mc.get_vocab_size()
        self._setup(compiler_for(tokenizer, vocab_size=max(vocab, len(tokenizer))), device=device,
                    max_num_seqs=vllm_config.scheduler_config.max_num_seqs, vocab_size=vocab,
                    pin_memory=is_pin_memory)

    @classmethod
    def from_compiler(
        cls,
        compiler: GrammarCompiler,
        *,
        max_num_seqs: int,
        vocab_size: int | None = None,
        device: Any = "cpu",
        pin_memory: bool = False,
    ) -> StructgenLogitsProcessor:
        """A processor without a ``VllmConfig``: for tests and engines speaking the same protocol.

        Args:
            compiler: compiles the requests' grammars (one tokenizer).
            max_num_seqs: the most rows a batch can have.
            vocab_size: the logits width (default: the compiler's vocabulary size).
            device: where the logits live.
            pin_memory: pin the CPU bitmask (faster copies to a GPU).
        """
        self = cls.__new__(cls)
        self._setup(compiler, device=device, max_num_seqs=max_num_seqs,
                    vocab_size=vocab_size or compiler.tokenizer_info.vocab_size, pin_memory=pin_memory)
        return self

    def _setup(self, compiler: GrammarCompiler, *, device: Any, max_num_seqs: int, vocab_size: int,
               pin_memory: bool) -> None:
        import torch

        self.compiler = compiler
        self.device = torch.device(device)
        self.waits = 0
        self._rows: dict[int, _Row] = {}
        self._futures: OrderedDict[str, concurrent.futures.Future] = OrderedDict()
        self._lock = threading.Lock()
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="structgen-compile")
        words = bitmask_words(max(vocab_size, compiler.tokenizer_info.vocab_size))
        bitmask = torch.zeros((max_num_seqs, words), dtype=torch.int32)
        if pin_memory and self.device.type == "cuda":
            bitmask = bitmask.pin_memory()
        self._bitmask = bitmask
        stop = np.zeros(words * 32, dtype=bool)
        stop[list(compiler.tokenizer_info.stop_token_ids)] = True
        self._stop_row = np.packbits(stop, bitorder="little").view("<i4")

    # ------------------------------------------------------------------ vLLM interface

    @classmethod
    def validate_params(cls, sampling_params: Any) -> None:
        """Reject a malformed spec, schema or grammar when the request arrives (vLLM: HTTP 400)."""
        spec = GrammarSpec.from_extra_args(getattr(sampling_params, "extra_args", None))
        if spec is not None:
            try:
                spec.check()
            except ValueError:
                raise
            except StructgenError as exc:  # e.g. AutomatonSizeError: still the request's fault
                raise StructgenArgsError(str(exc)) from exc

    def is_argmax_invariant(self) -> bool:
        """False: masking changes the greedy choice, so vLLM must call it for greedy rows too."""
        return False

    def update_state(self, batch_update: Any) -> None:
        """Apply vLLM's ``BatchUpdate``: rows removed, added, moved (in that order)."""
        if batch_update is None:
            return
        for index in batch_update.removed:
            self._rows.pop(index, None)  # releases the matcher
        for index, params, _prompt, output in batch_update.added:
            spec = GrammarSpec.from_extra_args(getattr(params, "extra_args", None))
            if spec is None:
                self._rows.pop(index, None)  # the slot may still hold a finished request
            else:
                self._rows[index] = _Row(spec, self._submit(spec), output)
        for a, b, direction in batch_update.moved:
            row_a = self._rows.pop(a, None)
            row_b = self._rows.pop(b, None)
            if row_a is not None:
                self._rows[b] = row_a
            # a one-way move (condense) overwrites b, whose request is gone; a swap keeps it
            if row_b is not None and getattr(direction, "name", direction) == "SWAP":
                self._rows[a] = row_b

    def apply(self, logits: Any) -> Any:
        """Advance each constrained row by its new tokens, then mask those rows in one call."""
        if not self._rows:
            return logits
        rows = sorted(i for i in self._rows if i < logits.shape[0])
        bitmask = self._bitmask.numpy()
        fill: list[GrammarMatcher] = []
        fill_at: list[int] = []
        for k, index in enumerate(rows):
            row = self._rows[index]
            if row.matcher is None and not row.failed:
                self._start(index, row)
            if row.failed:
                bitmask[k] = self._stop_row
                continue
            self._advance(index, row)
            if index not in self._rows:  # dropped by _advance: leave the row as the model wrote it
                bitmask[k] = -1
            elif row.matcher is not None:
                fill.append(row.matcher)
                fill_at.append(k)
        fill_next_token_bitmasks(fill, bitmask, fill_at)  # one call for the batch: see structgen.runtime.batch
        if rows:
            apply_token_bitmask_inplace(logits, self._bitmask[: len(rows)], indices=rows)
        return logits

    # ------------------------------------------------------------------ internals

    @property
    def constrained_rows(self) -> dict[int, GrammarMatcher | None]:
        """Batch row → its matcher (None until its first mask), for the constrained rows."""
        return {i: r.matcher for i, r in sorted(self._rows.items())}

    def _submit(self, spec: GrammarSpec) -> concurrent.futures.Future:
        with self._lock:
            fut = self._futures.get(spec.key)
            if fut is None or (fut.done() and fut.exception() is not None):
                fut = self._pool.submit(spec.compile, self.compiler)
                self._futures[spec.key] = fut
            self._futures.move_to_end(spec.key)
            while len(self._futures) > 256:  # the compiler keeps its own LRU of compiled grammars
                self._futures.popitem(last=False)
            return fut

    def _start(self, index: int, row: _Row) -> None:
        if not row.future.done():
            self.waits += 1
        try:
            compiled = row.future.result()
        except StructgenError as exc:
            # validate_params caught what it could; what fails only here (a grammar too large
            # for the automaton) must not take the engine down: end the request at once
            log.error("structgen: request in batch row %d: its grammar failed to compile (%s); "
                      "it is ended with a stop token", index, exc)
            row.failed = True
            return
        row.matcher = GrammarMatcher(compiled)

    def _advance(self, index: int, row: _Row) -> None:
        m = row.matcher
        if m is None:  # a row that failed to start has no matcher and is never advanced
            return
        out = row.output
        while row.consumed < len(out):
            tok = out[row.consumed]
            if tok < 0:  # async-scheduling placeholder not yet repaired: nothing new to read
                return
            if m.is_terminated():  # EOS accepted; ignore_eos keeps the row going on stop tokens
                row.consumed = len(out)
                return
            if not m.accept_token(tok):
                log.error("structgen: batch row %d: token %d was sampled although the grammar forbids it "
                          "(another logits processor, or a stop string?); the row is no longer constrained",
                          index, tok)
                del self._rows[index]
                return
            row.consumed += 1

    def close(self) -> None:
        """Stop the compile thread (vLLM never calls this; the thread is idle between compiles)."""
        self._pool.shutdown(wait=False, cancel_futures=True)
