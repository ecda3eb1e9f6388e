"""Constrained generation through Hugging Face's ``model.generate`` with a logits processor
(used by the CLI, the comparison backend and examples).

:func:`generate_json` writes one JSON value, :func:`generate_tool_calls` one answer of tool
calls; :func:`generate_constrained` is the loop both share. structgen's own decoding loop,
which appends forced tokens without a forward pass each, is :func:`structgen.generate`
(:mod:`structgen.integrations.decoding`). Nothing here imports torch: the tokenizer and
model the caller passes do.
"""
from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import MatcherError
from ..runtime.matcher import GrammarMatcher
from ..tools import ToolCallFormat, ToolChoice, ToolGeneration, ToolSet, shortest_completion
from .hf import GrammarLogitsProcessor, JSONSchemaLogitsProcessor, ToolCallLogitsProcessor

__all__ = ["GenerationResult", "ConstrainedRun", "generate_json", "generate_tool_calls", "generate_constrained",
           "chat_inputs"]


@dataclass(frozen=True)
class GenerationResult:
    """Text of one constrained generation and what it cost.

    ``complete``: the output is a complete value of the grammar. ``truncated``: the length
    limit, not a stop token, ended it — without budget-aware mode the model was cut off
    (even where the text happens to be complete, e.g. ``12`` of a longer number); with
    ``budget=True`` the value is complete by construction.
    """

    text: str
    new_tokens: int
    seconds: float
    complete: bool
    truncated: bool


def chat_inputs(tokenizer: Any, prompt: str | list[dict]) -> Any:
    """Token ids of a user prompt (or chat messages) with the model's chat template."""
    messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    return tokenizer("\n".join(m["content"] for m in messages), return_tensors="pt")


def generate_json(
    model: Any,
    tokenizer: Any,
    prompt: str | list[dict],
    schema: Any,
    *,
    max_new_tokens: int = 128,
    do_sample: bool = False,
    strict: bool = True,
    whitespace: Literal["compact", "flexible"] = "compact",
    budget: bool = False,
    **generate_kwargs: Any,
) -> GenerationResult:
    """Generate one JSON value valid under ``schema`` with ``model.generate``.

    With ``budget=True`` (budget-aware mode) tokens after which the value could not be
    completed within ``max_new_tokens`` are masked: the result is always complete.
    """
    inputs = chat_inputs(tokenizer, prompt).to(model.device)
    proc = JSONSchemaLogitsProcessor(schema, tokenizer, strict=strict, whitespace=whitespace,
                                     vocab_size=getattr(model.config, "vocab_size", None),
                                     max_new_tokens=max_new_tokens if budget else None)
    run = generate_constrained(model, tokenizer, inputs, proc, max_new_tokens=max_new_tokens, do_sample=do_sample,
                               **generate_kwargs)
    text = tokenizer.decode(run.body, skip_special_tokens=True)
    return GenerationResult(text, len(run.new), run.seconds, run.matcher.is_completed(), run.truncated)


@dataclass(frozen=True)
class ConstrainedRun:
    """One ``model.generate`` call under a grammar processor, replayed on a fresh matcher.

    ``new``: generated ids; ``body``: those before the stop token; ``matcher``: where the
    output stands (``is_completed()``: a complete value).
    """

    new: list[int]
    body: list[int]
    seconds: float
    matcher: GrammarMatcher

    @property
    def truncated(self) -> bool:
        """The length limit ended the output before a stop token."""
        return not self.matcher.is_terminated()


def generate_constrained(model: Any, tokenizer: Any, inputs: Any, proc: GrammarLogitsProcessor, *, max_new_tokens: int,
                         do_sample: bool = False, **generate_kwargs: Any) -> ConstrainedRun:
    """Run ``model.generate`` (batch of one) with ``proc`` and replay the output.

    generate() never shows the processor its last token, so the output is replayed on a
    fresh matcher, which also double-checks every token.

    Raises:
        MatcherError: a generated token the grammar forbids (another processor interfered).
    """
    t0 = time.perf_counter()
    out = model.generate(**inputs, logits_processor=[proc], max_new_tokens=max_new_tokens, do_sample=do_sample,
                         pad_token_id=tokenizer.pad_token_id or tokenizer.eos_token_id, **generate_kwargs)
    seconds = time.perf_counter() - t0
    proc.finish(out)  # the processor's truncated/completed flags become exact
    new = out[0, inputs["input_ids"].shape[1]:].tolist()
    compiled = proc.compiled
    if isinstance(compiled, Sequence):
        if len(compiled) != 1:
            raise MatcherError(f"generate_constrained runs a batch of one; the processor has {len(compiled)} grammars")
        compiled = compiled[0]
    matcher = compiled.matcher()
    body = []
    for t in new:
        if matcher.is_terminated():
            break
        if not matcher.accept_token(t):
            raise MatcherError(f"generated token {t} is not allowed by the grammar")
        if not matcher.is_terminated():
            body.append(t)
    return ConstrainedRun(new, body, seconds, matcher)


def generate_tool_calls(tools: ToolSet, model: Any, tokenizer: Any, messages: str | Sequence[Mapping[str, Any]], *,
                        tool_choice: ToolChoice = "required", parallel: bool = False, min_calls: int = 1,
                        max_calls: int | None = None, format: str | ToolCallFormat | None = None,
                        whitespace: Literal["compact", "flexible"] = "compact", max_whitespace: int = 2,
                        max_new_tokens: int = 128, close_truncated: bool = True, do_sample: bool = False,
                        **generate_kwargs: Any) -> ToolGeneration:
    """Prompt with the tools (:meth:`ToolSet.chat_prompt <structgen.tools.ToolSet.chat_prompt>`),
    generate under the call grammar (:class:`~structgen.integrations.hf.ToolCallLogitsProcessor`), parse.

    When the token budget runs out mid-call and ``close_truncated`` is set, the shortest
    text that completes the grammar is appended (``ToolGeneration.closed``), so the calls
    still parse and validate.
    """
    fmt = ToolCallFormat.detect(tokenizer) if format is None else ToolCallFormat.named(format)
    prompt = tools.chat_prompt(tokenizer, messages, format=fmt)
    inputs = tokenizer(prompt, return_tensors="pt", add_special_tokens=False).to(model.device)
    proc = ToolCallLogitsProcessor(tools, tokenizer, tool_choice, parallel=parallel, min_calls=min_calls,
                                   max_calls=max_calls, format=fmt, whitespace=whitespace,
                                   max_whitespace=max_whitespace, vocab_size=getattr(model.config, "vocab_size", None))
    run = generate_constrained(model, tokenizer, inputs, proc, max_new_tokens=max_new_tokens, do_sample=do_sample,
                               **generate_kwargs)
    new, seconds, matcher = run.new, run.seconds, run.matcher
    info = proc.compiled.tokenizer_info
    body = bytearray(b"".join(info.token_bytes[t] or b"" for t in run.body))
    complete = matcher.is_completed()
    closed = False
    if not complete and close_truncated:
        tail = shortest_completion(matcher)
        if tail is not None:
            body += tail
            closed = True
    text = body.decode("utf-8", errors="replace")
    calls = tools.parse(text, format=fmt) if (complete or closed) else []
    return ToolGeneration(text, calls, len(new), seconds, complete, closed)
