"""One-call constrained generation with a Hugging Face model (used by the CLI and examples).

This module is also callable: ``structgen.generate(model, tokenizer, prompt, schema=...)``
runs :func:`structgen.decoding.generate`, the fast-forward decoding loop. (A package
attribute and a submodule of the same name cannot be two objects: importing the submodule
rebinds the attribute. So the module itself answers the call, and both
``structgen.generate(...)`` and ``from structgen.generate import generate_json`` work.)
torch is imported on the first call, not here.
"""
from __future__ import annotations

import sys
import time
import types
from dataclasses import dataclass
from typing import Any, Literal

from .errors import MatcherError

__all__ = ["GenerationResult", "ConstrainedRun", "generate_json", "generate_constrained", "chat_inputs"]


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
    from .hf import JSONSchemaLogitsProcessor

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
    matcher: Any

    @property
    def truncated(self) -> bool:
        """The length limit ended the output before a stop token."""
        return not self.matcher.is_terminated()


def generate_constrained(model: Any, tokenizer: Any, inputs: Any, proc: Any, *, max_new_tokens: int,
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
    if hasattr(proc, "finish"):
        proc.finish(out)  # the processor's truncated/completed flags become exact
    new = out[0, inputs["input_ids"].shape[1]:].tolist()
    matcher = proc.compiled.matcher()
    body = []
    for t in new:
        if matcher.is_terminated():
            break
        if not matcher.accept_token(t):
            raise MatcherError(f"generated token {t} is not allowed by the grammar")
        if not matcher.is_terminated():
            body.append(t)
    return ConstrainedRun(new, body, seconds, matcher)


class _CallableModule(types.ModuleType):
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Fast-forward constrained generation: see :func:`structgen.decoding.generate`."""
        from .decoding import generate

        return generate(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
