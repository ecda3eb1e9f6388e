"""The Hugging Face backend of the comparison: one ``model.generate`` per attempt, timed.

Constrained attempts go through :func:`structgen.integrations.hf_generate.generate_constrained` (the helper
behind ``generate_json`` and ``ToolSet.generate``) with a grammar processor; free attempts
call ``model.generate`` directly. Both are greedy, batch of one, same chat template. A
streamer-shaped clock records when each token arrives (time to first token, time per output
token). On CUDA, NVML's energy counter gives joules per call when ``pynvml`` is importable.
"""
from __future__ import annotations

import time
from typing import Any

from ..grammar.builtin import grammar_text
from ..integrations.decoding import generate as structgen_generate
from ..integrations.hf import GrammarLogitsProcessor, compiler_for
from ..integrations.hf_generate import chat_inputs, generate_constrained
from ..tools import shortest_completion
from .bfcl_match import toolset_for
from ..tools.formats import JSON
from .arms import Constraint, Generation
from .tasks import Task

__all__ = ["EnergyMeter", "HFBackend", "json_object_schema"]


def json_object_schema(task: Task) -> dict[str, Any]:
    """JSON mode's schema: any object; for a parallel BFCL task (a list of calls) any array of objects."""
    if task.family == "bfcl" and task.parallel:
        return {"type": "array", "items": {"type": "object"}}
    return {"type": "object"}


class _Clock:
    """The streamer interface ``generate`` calls: ``put`` (the prompt first, then each token), ``end``."""

    def __init__(self) -> None:
        self.times: list[float] = []

    def put(self, value: Any) -> None:
        self.times.append(time.perf_counter())

    def end(self) -> None:
        pass

    def ttft(self, t0: float) -> float | None:
        return self.times[1] - t0 if len(self.times) > 1 else None


class EnergyMeter:
    """Total GPU energy (joules) from NVML's counter (Volta and newer)."""

    def __init__(self, nvml: Any, handle: Any) -> None:
        self._nvml = nvml
        self._handle = handle

    @classmethod
    def for_device(cls, device: Any) -> EnergyMeter | None:
        """A meter for a CUDA device, or None (not CUDA, no pynvml, or no energy counter)."""
        if getattr(device, "type", str(device)) != "cuda":
            return None
        try:
            import pynvml

            pynvml.nvmlInit()
            # the torch index is the NVML index unless CUDA_VISIBLE_DEVICES reorders devices
            handle = pynvml.nvmlDeviceGetHandleByIndex(getattr(device, "index", None) or 0)
            pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
        except Exception:  # noqa: BLE001 - any NVML trouble: no energy figures, not a failure
            return None
        return cls(pynvml, handle)

    def read(self) -> float:
        """Joules consumed since the driver loaded."""
        return self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle) / 1000.0


class HFBackend:
    """A ``transformers`` causal LM and its tokenizer, as the comparison's :class:`Backend`."""

    def __init__(self, model: Any, tokenizer: Any, *, fast_forward: bool = False) -> None:
        # fast_forward: constrained attempts decode with structgen.generate, which appends
        # grammar-forced tokens without a forward pass each (forced_tokens, forward_passes)
        self.fast_forward = fast_forward

        self.model = model
        self.tokenizer = tokenizer
        self.vocab_size = getattr(model.config, "vocab_size", None)
        self.compiler = compiler_for(tokenizer, vocab_size=self.vocab_size)
        self.meter = EnergyMeter.for_device(model.device)
        eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
        self._toolsets: dict[str, Any] = {}  # the current task's tool set only
        # prefix caching within one arm's retry chain: (token ids the cache holds, cache)
        self._prefix: tuple[list[int], Any] | None = None
        self.stop_ids = {tokenizer.eos_token_id, *(eos if isinstance(eos, list) else [eos])} - {None}

    def reset_prefix_cache(self) -> None:
        """Forget the cached prompt: called when an arm starts, so that an arm never reuses
        another arm's prompt (its time to first token stays its own)."""
        self._prefix = None

    def _cache_for(self, ids: list[int]) -> Any:
        """A KV cache holding the longest prefix of ``ids`` the previous attempt computed.

        A retry re-sends the conversation so far (prompt, failed answer) plus the error
        message; like a serving engine's prefix cache (vLLM's automatic prefix caching),
        only the tokens after the common prefix are processed again. Greedy outputs are
        the same as without the cache (tested)."""
        from transformers import DynamicCache

        if self._prefix is not None:
            held, cache = self._prefix
            n, limit = 0, min(len(held), len(ids) - 1, cache.get_seq_length())
            while n < limit and held[n] == ids[n]:
                n += 1
            if n > 0:
                extra = cache.get_seq_length() - n
                if extra > 0:
                    cache.crop(-extra)
                return cache
        return DynamicCache(config=self.model.config)

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` alone (no special tokens)."""
        return len(self.tokenizer.encode(text, add_special_tokens=False)) if text else 0

    def _compile(self, task: Task, kind: str) -> Any:
        """The grammar of an attempt (the compiler caches it, so retries do not recompile)."""
        if kind == "json":
            return self.compiler.compile_grammar(grammar_text("json"))
        if kind == "json_object":
            return self.compiler.compile_json_schema(json_object_schema(task))
        if task.family == "bfcl":
            if task.id not in self._toolsets:
                self._toolsets = {task.id: toolset_for({"functions": task.functions})[0]}
            return self._toolsets[task.id].compile(self.compiler, parallel=task.parallel, format=JSON)
        return self.compiler.compile_json_schema(task.schema)

    def generate(self, task: Task, messages: list[dict[str, Any]], *, max_new_tokens: int,
                 constraint: Constraint | None) -> Generation:
        """One greedy generation of ``messages`` (see :class:`Backend`)."""
        inputs = chat_inputs(self.tokenizer, messages).to(self.model.device)
        ids = inputs["input_ids"][0].tolist()
        clock = _Clock()
        e0 = self.meter.read() if self.meter else None
        setup = 0.0
        if constraint is None:
            cache = self._cache_for(ids)
            t0 = time.perf_counter()
            out = self.model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False, streamer=clock,
                                      pad_token_id=self.tokenizer.pad_token_id or self.tokenizer.eos_token_id,
                                      cache=cache)
            seconds = time.perf_counter() - t0
            new = out[0, inputs["input_ids"].shape[1]:].tolist()
            self._prefix = (ids + new[:-1], cache)  # the last token was never fed back
            finished = bool(new) and new[-1] in self.stop_ids
            text, closed = self.tokenizer.decode(new, skip_special_tokens=True), False
        else:
            s0 = time.perf_counter()
            compiled = self._compile(task, constraint.kind)
            setup = time.perf_counter() - s0
            if self.fast_forward:
                return self._fast_forward(compiled, messages, inputs, max_new_tokens, constraint, setup, e0)
            proc = GrammarLogitsProcessor(compiled)
            proc.compiled = compiled
            cache = self._cache_for(ids)
            t0 = time.perf_counter()
            run = generate_constrained(self.model, self.tokenizer, inputs, proc, max_new_tokens=max_new_tokens,
                                       streamer=clock, cache=cache)
            seconds = time.perf_counter() - t0
            new = run.new
            self._prefix = (ids + new[:-1], cache)
            info = compiled.tokenizer_info
            body = bytearray(b"".join(info.token_bytes[t] or b"" for t in run.body))
            finished, closed = run.matcher.is_completed(), False
            if not finished and constraint.close_truncated:
                tail = shortest_completion(run.matcher)
                if tail is not None:
                    body += tail
                    closed = True
            text = body.decode("utf-8", errors="replace")
        joules = self.meter.read() - e0 if self.meter and e0 is not None else None
        return Generation(text, len(new), finished, seconds, clock.ttft(t0), setup, joules, closed,
                          prompt_tokens=int(inputs["input_ids"].shape[1]))

    def _fast_forward(self, compiled: Any, messages: list[dict[str, Any]], inputs: Any, max_new_tokens: int,
                      constraint: Constraint, setup: float, e0: float | None) -> Generation:
        t0 = time.perf_counter()
        r = structgen_generate(self.model, self.tokenizer, messages, grammar=compiled, max_new_tokens=max_new_tokens)
        seconds = time.perf_counter() - t0
        text, finished, closed = r.text, r.status == "complete", False
        if not finished and constraint.close_truncated:
            matcher = compiled.matcher()
            if matcher.accept_string(text):
                tail = shortest_completion(matcher)
                if tail is not None:
                    text, closed = (text.encode("utf-8") + tail).decode("utf-8", errors="replace"), True
        joules = self.meter.read() - e0 if self.meter and e0 is not None else None
        return Generation(text, len(r.token_ids), finished, seconds, r.ttft, setup, joules, closed,
                          forced_tokens=r.forced_tokens, prompt_tokens=int(inputs["input_ids"].shape[1]),
                          forward_passes=r.forward_passes)
