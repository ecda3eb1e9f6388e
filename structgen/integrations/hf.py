"""Hugging Face ``transformers`` glue: logits processors for ``model.generate()``.

One processor per ``generate()`` call (or call :meth:`GrammarLogitsProcessor.reset`). It
builds one matcher per row on its first call, when the batch size and device are known,
then at every step advances each row by the token just sampled, fills one CPU bitmask for
the whole batch, and masks the logits on their device in one pass.

Greedy decoding and sampling are supported; beam search (which reorders rows) is not.

Length limits: ``generate()`` never shows a processor its last token, so after it returns
call :meth:`GrammarLogitsProcessor.finish` with the output ids; ``truncated`` then says per
row whether the length limit, not a stop token, ended the output. With
``max_new_tokens=`` (budget-aware mode, opt-in) the processor also masks every token after
which the output could no longer be completed within that many tokens, so every row ends
on a complete value (see ``structgen.runtime.budget``).
"""
from __future__ import annotations

from typing import Any, Literal, Sequence

from ..errors import MatcherError
from ..runtime.bitmask import apply_token_bitmask_inplace, bitmask_words
from ..runtime.budget import TokenBudget
from ..runtime.compiler import CompiledGrammar
from ..runtime.matcher import GrammarMatcher
from ..tools import ToolCallFormat, ToolChoice, ToolSet
from .hf_tokenizer import compiler_for
from ..runtime.batch import fill_next_token_bitmasks

__all__ = ["GrammarLogitsProcessor", "JSONSchemaLogitsProcessor", "ToolCallLogitsProcessor", "compiler_for"]


class GrammarLogitsProcessor:
    """Masks every token that cannot continue a valid output, for a whole batch.

    ``generate()`` calls its processors by shape (``processor(input_ids, scores)``), so this
    class does not subclass ``transformers.LogitsProcessor``: importing that would import torch
    with this module.

    Args:
        compiled: one :class:`CompiledGrammar` for every row, or a sequence with one per row.
        max_new_tokens: budget-aware mode (opt-in): pass the same ``max_new_tokens`` as to
            ``generate()``; tokens after which a row could not be completed within it are
            masked, so every row ends on a complete value. ``None`` (default): no budget;
            a row cut by the length limit is reported in :attr:`truncated`.

    Attributes:
        compiled: the grammar given (one, or one per row).
        matchers: the per-row matchers (after the first call).
        budgets: the per-row :class:`~structgen.runtime.budget.TokenBudget` (budget-aware mode).
    """

    def __init__(self, compiled: CompiledGrammar | Sequence[CompiledGrammar], *,
                 max_new_tokens: int | None = None) -> None:
        self.compiled = compiled
        self.max_new_tokens = max_new_tokens
        if max_new_tokens is not None:  # refuse a budget too small for the grammar now, not mid-generate()
            for g in (compiled if isinstance(compiled, Sequence) else [compiled]):
                TokenBudget(g, max_new_tokens)
        self.matchers: list[GrammarMatcher] | None = None
        self.budgets: list[TokenBudget] | None = None
        self._bitmask: Any = None  # a torch tensor once the batch is known
        self._bitmask_np: Any = None
        self._prompt_len = 0
        self._consumed = 0
        self._finished = False

    def reset(self) -> None:
        """Forget the batch, so the processor can serve another ``generate()`` call."""
        self.matchers = None
        self.budgets = None
        self._bitmask = None
        self._bitmask_np = None
        self._consumed = 0
        self._finished = False

    def _setup(self, input_ids: Any, scores: Any) -> None:
        import torch

        batch, width = scores.shape
        grammars = list(self.compiled) if isinstance(self.compiled, Sequence) else [self.compiled] * batch
        if len(grammars) != batch:
            raise MatcherError(f"{len(grammars)} grammars given for a batch of {batch} rows")
        info = grammars[0].tokenizer_info
        if width < len(info.token_bytes):
            raise MatcherError(
                f"the logits have {width} columns but the tokenizer has {len(info.token_bytes)} tokens: "
                f"this tokenizer does not belong to this model"
            )
        self.matchers = [GrammarMatcher(g) for g in grammars]
        if self.max_new_tokens is not None:
            self.budgets = [TokenBudget(g, self.max_new_tokens) for g in grammars]
        words = bitmask_words(max(width, info.vocab_size))
        bitmask = torch.zeros((batch, words), dtype=torch.int32)
        if scores.device.type == "cuda":
            bitmask = bitmask.pin_memory()
        self._bitmask = bitmask
        self._bitmask_np = bitmask.numpy()  # the fill's view, made once (a conversion costs microseconds a step)
        self._prompt_len = input_ids.shape[1]

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        """Advance every row by its last token, then mask ``scores`` in place and return it."""
        if self.matchers is None:
            self._setup(input_ids, scores)
        else:
            if input_ids.shape[0] != len(self.matchers):
                raise MatcherError(
                    f"the batch changed from {len(self.matchers)} to {input_ids.shape[0]} rows mid-generation; "
                    f"use one processor per generate() call or call reset()"
                )
            self._advance(input_ids[:, -1].tolist())
        matchers = self.matchers or []  # set by _setup above
        fill_next_token_bitmasks(matchers, self._bitmask_np)  # one call: rows of distinct grammars, missing masks in a pool
        if self.budgets is not None:
            for row, m in enumerate(matchers):
                if not m.is_terminated():
                    self.budgets[row].restrict(m.state, self._bitmask, row, names=m.name_state)
        apply_token_bitmask_inplace(scores, self._bitmask)
        return scores

    def _advance(self, tokens: list[int]) -> None:
        """Advance every row by its next generated token."""
        self._consumed += 1
        for row, (m, tok) in enumerate(zip(self.matchers or (), tokens)):
            if m.is_terminated():
                continue  # finished rows are padded by generate(); nothing to check
            if not m.accept_token(tok):
                raise MatcherError(
                    f"row {row}: token {tok} was generated although the grammar forbids it "
                    f"(another logits processor or beam search changed the choice?)"
                )
            if self.budgets is not None:
                self.budgets[row].advance(tok, m.state, m.is_terminated(), names=m.name_state)

    def finish(self, sequences: Any) -> list[bool]:
        """Feed the rows the tokens ``generate()`` produced after the processor's last call.

        ``generate()`` never shows a logits processor the token it samples last, so the
        matchers lag one token behind when it returns. Pass its output (the ids, prompt
        included, or the ``GenerateOutput``); afterwards :attr:`completed`,
        :attr:`terminated` and :attr:`truncated` describe the final outputs.

        Returns:
            :attr:`truncated`.

        Raises:
            MatcherError: the processor was never called, the batch differs, or a token the
                grammar forbids is in the output.
        """
        if self.matchers is None:
            raise MatcherError("finish() called before the processor saw a batch")
        seqs = getattr(sequences, "sequences", sequences)
        if seqs.shape[0] != len(self.matchers):
            raise MatcherError(f"finish() got {seqs.shape[0]} rows for a batch of {len(self.matchers)}")
        start = self._prompt_len + self._consumed
        for k in range(start, seqs.shape[1]):
            self._advance(seqs[:, k].tolist())
        self._finished = True
        return self.truncated

    @property
    def completed(self) -> list[bool]:
        """Per row: the output is a complete match (EOS was accepted or would be).

        Exact after :meth:`finish`; before it, one token behind."""
        return [m.is_completed() for m in self.matchers or []]

    @property
    def terminated(self) -> list[bool]:
        """Per row: a stop token was generated (exact after :meth:`finish`)."""
        return [m.is_terminated() for m in self.matchers or []]

    @property
    def truncated(self) -> list[bool]:
        """Per row: the length limit ended the output before a stop token.

        A truncated row may still hold a complete value (:attr:`completed`: always so in
        budget-aware mode), but the model did not choose to end there: without budget mode
        treat it as cut off, never as a finished answer.

        Raises:
            MatcherError: :meth:`finish` was not called (the last token is unknown).
        """
        if not self._finished:
            raise MatcherError(
                "truncated is known only after finish(output_ids): generate() never shows "
                "a logits processor its last token"
            )
        return [not m.is_terminated() for m in self.matchers or []]


class JSONSchemaLogitsProcessor(GrammarLogitsProcessor):
    """A :class:`GrammarLogitsProcessor` for a JSON Schema and a Hugging Face tokenizer.

    Args:
        schema: the JSON Schema (dict, bool or JSON text).
        tokenizer: the model's ``transformers`` tokenizer.
        strict: refuse unsupported keywords (default) or record warnings.
        whitespace: ``"compact"`` or ``"flexible"`` (bounded whitespace).
        vocab_size: the model's logits width, if it differs from ``len(tokenizer)``.
        max_new_tokens: budget-aware mode (see :class:`GrammarLogitsProcessor`).
    """

    def __init__(
        self,
        schema: Any,
        tokenizer: Any,
        *,
        strict: bool = True,
        whitespace: Literal["compact", "flexible"] = "compact",
        vocab_size: int | None = None,
        max_new_tokens: int | None = None,
    ) -> None:
        compiled = compiler_for(tokenizer, vocab_size=vocab_size).compile_json_schema(
            schema, strict=strict, whitespace=whitespace)
        super().__init__(compiled, max_new_tokens=max_new_tokens)
        self.compiled: CompiledGrammar = compiled


class ToolCallLogitsProcessor(GrammarLogitsProcessor):
    """A :class:`GrammarLogitsProcessor` for the calls of a :class:`~structgen.tools.ToolSet`.

    Args:
        tools: the tool set.
        tokenizer: the model's ``transformers`` tokenizer.
        tool_choice, parallel, min_calls, max_calls, whitespace, max_whitespace: as in
            :meth:`ToolSet.grammar <structgen.tools.ToolSet.grammar>`.
        format: the call format; ``None`` reads it from the tokenizer's chat template
            (:meth:`ToolCallFormat.detect <structgen.tools.ToolCallFormat.detect>`).
        vocab_size: the model's logits width, if it differs from ``len(tokenizer)``.
        max_new_tokens: budget-aware mode (see :class:`GrammarLogitsProcessor`).

    Attributes:
        format: the call format the grammar was built for (parse the output with it).
    """

    def __init__(self, tools: ToolSet, tokenizer: Any, tool_choice: ToolChoice = "required", *,
                 parallel: bool = False, min_calls: int = 1, max_calls: int | None = None,
                 format: str | ToolCallFormat | None = None, whitespace: Literal["compact", "flexible"] = "compact",
                 max_whitespace: int = 8, vocab_size: int | None = None, max_new_tokens: int | None = None) -> None:
        fmt = ToolCallFormat.detect(tokenizer) if format is None else ToolCallFormat.named(format)
        compiled = tools.compile(compiler_for(tokenizer, vocab_size=vocab_size), tool_choice, parallel=parallel,
                                 min_calls=min_calls, max_calls=max_calls, format=fmt, whitespace=whitespace,
                                 max_whitespace=max_whitespace)
        super().__init__(compiled, max_new_tokens=max_new_tokens)
        self.compiled: CompiledGrammar = compiled
        self.format: ToolCallFormat = fmt
