"""Fast-forward constrained decoding: our own loop over a Hugging Face causal LM.

``model.generate`` runs one forward pass per output token. Structured output is full of
text the grammar forces (``","arguments":{"`` after a tool name); this loop appends such
text (as canonical, boundary-safe tokens from :mod:`structgen.runtime.fast_forward`) in the same
forward pass as the token sampled before it, so a pass costs one *choice*, not one token.

Batches: each row keeps its own matcher and its own chunk of tokens per pass (a sampled
token plus whatever was forced after it). Chunks are left-padded to the widest row, so every
row's newest token sits in the last column and the model computes one row of logits
(``logits_to_keep=1``); padding is masked out of attention and the position ids skip it, so
a row sees exactly the sequence it would see alone. Finished rows ride along as masked pads.

torch is imported when decoding starts, not with this module: ``import structgen`` (which
exports :func:`generate`) stays free of it.
"""
from __future__ import annotations

import codecs
import inspect
import json
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, cast

from ..errors import DecodingError, MatcherError
from ..runtime.bitmask import apply_token_bitmask_inplace, bitmask_words
from ..runtime.compiler import CompiledGrammar
from ..runtime.fast_forward import planner_for
from ..runtime.matcher import GrammarMatcher
from ..tools import ToolCallFormat, ToolSet
from .hf_tokenizer import compiler_for

if TYPE_CHECKING:
    import torch

__all__ = ["DecodeResult", "GenerationStream", "generate"]

Prompt = str | Sequence[dict]


@dataclass(frozen=True)
class DecodeResult:
    """One output of :func:`generate` and what it cost.

    Attributes:
        text: the output text (without the stop token).
        value: the parsed output when complete: the JSON value (``schema=``), the list of
            :class:`~structgen.tools.ToolCall` (``tools=``), ``None`` for a plain grammar or a
            truncated output.
        status: ``"complete"`` (the grammar reached its end: a stop token was sampled, or
            nothing but one could follow) or ``"truncated"`` (``max_new_tokens`` ran out first;
            the text may not parse).
        token_ids: the output tokens, a sampled stop token included.
        forced_flags: per output token, whether it was forced (not sampled).
        sampled_tokens: tokens chosen from the model's logits (one forward pass each).
        forced_tokens: tokens appended because the grammar left no choice.
        forward_passes: model calls made for this row's batch (the prompt pass included).
        ttft: seconds from the call to the first sampled token (prompt pass + first choice).
        tpot: seconds per output token after the first (``0.0`` with fewer than two).
        seconds: wall time of the whole call.
    """

    text: str
    value: Any
    status: Literal["complete", "truncated"]
    token_ids: list[int] = field(repr=False)
    forced_flags: list[bool] = field(repr=False)
    sampled_tokens: int
    forced_tokens: int
    forward_passes: int
    ttft: float
    tpot: float
    seconds: float

    @property
    def total_tokens(self) -> int:
        return self.sampled_tokens + self.forced_tokens

    @property
    def forced_share(self) -> float:
        """Forced tokens over all output tokens."""
        return self.forced_tokens / self.total_tokens if self.total_tokens else 0.0


@dataclass
class _Row:
    matcher: GrammarMatcher
    pending: list[int]  # fed at the next pass
    ids: list[int] = field(default_factory=list)
    flags: list[bool] = field(default_factory=list)
    sampled: int = 0
    forced: int = 0
    done: bool = False


class _Sampler:
    def __init__(self, do_sample: bool, temperature: float, top_k: int | None, top_p: float | None,
                 seed: int | None) -> None:
        if do_sample and temperature <= 0:
            raise DecodingError(f"temperature must be > 0 when sampling, not {temperature}")
        import torch

        self.do_sample, self.temperature, self.top_k, self.top_p = do_sample, temperature, top_k, top_p
        self.gen = torch.Generator().manual_seed(seed) if seed is not None else None

    def __call__(self, logits: torch.Tensor) -> list[int]:
        """One token per row of masked float32 CPU logits."""
        import torch

        if not self.do_sample:
            return logits.argmax(-1).tolist()
        logits = logits / self.temperature
        if self.top_k:
            kth = logits.topk(min(self.top_k, logits.shape[-1]), dim=-1).values[:, -1:]
            logits = logits.masked_fill(logits < kth, float("-inf"))
        if self.top_p is not None and self.top_p < 1.0:
            sorted_logits, order = logits.sort(dim=-1, descending=True)
            cum = sorted_logits.softmax(-1).cumsum(-1)
            drop = cum - sorted_logits.softmax(-1) > self.top_p  # keep the token crossing top_p
            logits = logits.scatter(-1, order, sorted_logits.masked_fill(drop, float("-inf")))
        probs = logits.softmax(-1)
        return torch.multinomial(probs, 1, generator=self.gen).squeeze(-1).tolist()


def _finished(m: GrammarMatcher) -> bool:
    """A stop token was accepted, or nothing but one can follow (the grammar has ended)."""
    if m.is_terminated():
        return True
    return m.is_completed() and len(m.compiled.index.next_bytes(m.state)) == 0


def _decode(model: Any, tokenizer: Any, compiled: CompiledGrammar, prompts: list[list[int]], *,
            max_new_tokens: int, sampler: _Sampler, fast_forward: bool,
            stats: dict[str, Any]) -> Iterator[tuple[int, list[int]]]:
    """Decode every row; yield ``(row, new_token_ids)`` as tokens are decided.

    ``stats`` receives ``passes``, ``ttft`` and the rows (filled as decoding goes).
    """
    import torch

    t0 = time.perf_counter()
    planner = planner_for(compiled, tokenizer) if fast_forward else None
    stop_ids = set(compiled.tokenizer_info.stop_token_ids)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else min(stop_ids)
    rows = [_Row(compiled.matcher(), list(p)) for p in prompts]
    stats.update(rows=rows, passes=0, ttft=0.0, t0=t0)

    def advance(row: int, r: _Row, sampled: int | None) -> None:
        new = []
        if sampled is not None:
            if not r.matcher.accept_token(sampled):
                raise MatcherError(f"row {row}: sampled token {sampled} is not allowed (masking failed)")
            new.append(sampled)
            r.sampled += 1
        if planner is not None and not r.matcher.is_terminated():
            room = max_new_tokens - len(r.ids) - len(new)
            forced = list(planner.plan(r.matcher)[:room])
            for t in forced:
                r.matcher.accept_token(t)
            new += forced
            r.forced += len(forced)
        r.ids += new
        r.flags += [False] * (sampled is not None) + [True] * (len(new) - (sampled is not None))
        r.pending += [t for t in new if t not in stop_ids]
        if _finished(r.matcher) or len(r.ids) >= max_new_tokens:
            r.done = True
        if new:
            results.append((row, new))

    results: list[tuple[int, list[int]]] = []
    for i, r in enumerate(rows):
        advance(i, r, None)  # text forced at the start rides with the prompt
    yield from results
    width = max(bitmask_words(compiled.tokenizer_info.vocab_size), 1)
    bitmask = torch.zeros((len(rows), width), dtype=torch.int32)
    past = None
    mask_cols: list[torch.Tensor] = []
    seen = torch.zeros(len(rows), dtype=torch.long)  # real tokens fed so far, per row
    params = inspect.signature(model.forward).parameters
    cache_arg = "cache" if "cache" in params else "past_key_values"  # renamed in transformers 5.x
    extra = {"logits_to_keep": 1} if "logits_to_keep" in params else {}
    while not all(r.done for r in rows):
        chunks = [r.pending if not r.done else [] for r in rows]
        w = max(max(len(c) for c in chunks), 1)
        # chunks end at the last column (left-padded) so logits_to_keep=1 serves every row
        ids = torch.full((len(rows), w), pad_id, dtype=torch.long)
        real = torch.zeros((len(rows), w), dtype=torch.long)
        for i, c in enumerate(chunks):
            if c:
                ids[i, w - len(c):] = torch.tensor(c, dtype=torch.long)
                real[i, w - len(c):] = 1
        # pads take the position of the row's next real token: harmless, they are masked out
        pos = seen[:, None] + torch.cumsum(real, 1) - real
        mask_cols.append(real)
        attn = torch.cat(mask_cols, 1)
        with torch.no_grad():
            out = model(input_ids=ids.to(model.device), attention_mask=attn.to(model.device),
                        position_ids=pos.to(model.device), use_cache=True, **{cache_arg: past}, **extra)
        stats["passes"] += 1
        past = getattr(out, cache_arg)
        seen += real.sum(1)
        # the matchers already stand after this pass's tokens (advance() accepted them), so
        # the masks are filled while an accelerator still runs the pass just launched: the
        # copy of the logits below is where the CPU waits for it
        for i, r in enumerate(rows):
            r.pending = []
            if not r.done:
                r.matcher.fill_next_token_bitmask(bitmask, i)
            else:
                bitmask[i] = -1
        logits = out.logits[:, -1].float().cpu()
        apply_token_bitmask_inplace(logits, bitmask)
        choice = sampler(logits)
        if not stats["ttft"]:
            stats["ttft"] = time.perf_counter() - t0
        results = []
        for i, r in enumerate(rows):
            if not r.done:
                advance(i, r, choice[i])
        yield from results


def _prompt_ids(tokenizer: Any, prompt: Prompt, tools: Any, fmt: Any) -> list[int]:
    if tools is not None:
        text = tools.chat_prompt(tokenizer, prompt, format=fmt)
    else:
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
        if getattr(tokenizer, "chat_template", None):
            text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        else:
            text = "\n".join(str(m["content"]) for m in messages)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def _is_batch(prompt: Any) -> bool:
    return not isinstance(prompt, str) and len(prompt) > 0 and not isinstance(prompt[0], dict)


class GenerationStream:
    """An iterator over text as it is decided; :attr:`results` is filled when it ends.

    Yields ``str`` pieces for one prompt, ``(row, str)`` pairs for a batch. Joining a row's
    pieces gives exactly its :attr:`DecodeResult.text`; forced text arrives in one piece.
    """

    def __init__(self, events: Iterator[tuple[int, list[int]]], finish: Any, batch: bool, token_bytes: Any,
                 stop_ids: set[int], rows: int) -> None:
        self._events, self._finish, self._batch = events, finish, batch
        self._bytes, self._stop = token_bytes, stop_ids
        self._decoders = [codecs.getincrementaldecoder("utf-8")("replace") for _ in range(rows)]
        self.results: list[DecodeResult] | None = None

    @property
    def result(self) -> DecodeResult:
        """The single prompt's result (after the stream is exhausted)."""
        if self.results is None:
            raise DecodingError("the stream has not been consumed yet")
        return self.results[0]

    def __iter__(self) -> Iterator[Any]:
        for row, toks in self._events:
            data = b"".join(self._bytes[t] or b"" for t in toks if t not in self._stop)
            piece = self._decoders[row].decode(data)
            if piece:
                yield (row, piece) if self._batch else piece
        for row, dec in enumerate(self._decoders):
            tail = dec.decode(b"", final=True)
            if tail:
                yield (row, tail) if self._batch else tail
        self.results = self._finish()


def generate(
    model: Any,
    tokenizer: Any,
    prompt: Prompt | Sequence[Prompt],
    *,
    schema: Any = None,
    grammar: Any = None,
    tools: Any = None,
    tool_choice: str = "required",
    parallel: bool = False,
    max_new_tokens: int = 128,
    do_sample: bool = False,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int | None = None,
    fast_forward: bool = True,
    stream: bool = False,
    strict: bool = True,
    whitespace: Literal["compact", "flexible"] = "compact",
) -> DecodeResult | list[DecodeResult] | GenerationStream:
    """Generate output valid under a JSON Schema, a grammar or a tool set, fast-forwarding
    through text the grammar forces.

    Args:
        model: a Hugging Face causal LM (anything called like ``LlamaForCausalLM`` with a KV cache).
        tokenizer: its tokenizer.
        prompt: a user prompt, a list of chat messages, or a list of either (a batch).
        schema: a JSON Schema (dict, bool or JSON text). Exactly one of ``schema``,
            ``grammar`` and ``tools`` is given.
        grammar: a :class:`~structgen.Grammar`, Lark text, or a
            :class:`~structgen.CompiledGrammar` compiled for this tokenizer.
        tools: a :class:`~structgen.tools.ToolSet` (or a list of OpenAI tool definitions);
            the prompt then gets the tools (:meth:`ToolSet.chat_prompt`) and ``value`` the calls.
        tool_choice, parallel: as in :meth:`ToolSet.grammar`.
        max_new_tokens: output budget in tokens (sampled + forced).
        do_sample, temperature, top_k, top_p, seed: sampling (greedy by default).
        fast_forward: append forced tokens without a forward pass each (``False``: one pass
            per token, the baseline).
        stream: return a :class:`GenerationStream` of text pieces instead of the results.
        strict, whitespace: JSON Schema compilation options.

    Returns:
        One :class:`DecodeResult` for one prompt, a list for a batch, or a stream.

    Raises:
        DecodingError: not exactly one of schema/grammar/tools, or an empty batch.
        SchemaError, GrammarSyntaxError, ToolError: the grammar does not compile.
    """
    if sum(x is not None for x in (schema, grammar, tools)) != 1:
        raise DecodingError("give exactly one of schema=, grammar= or tools=")
    if max_new_tokens < 1:
        raise DecodingError(f"max_new_tokens must be >= 1, not {max_new_tokens}")
    batch = _is_batch(prompt)
    prompts = cast("list[Prompt]", list(prompt)) if batch else [cast(Prompt, prompt)]  # as _is_batch found
    if not prompts:
        raise DecodingError("the batch of prompts is empty")
    compiler = compiler_for(tokenizer, vocab_size=getattr(getattr(model, "config", None), "vocab_size", None))
    fmt = None
    if schema is not None:
        compiled = compiler.compile_json_schema(schema, strict=strict, whitespace=whitespace)
    elif tools is not None:
        if not isinstance(tools, ToolSet):
            tools = ToolSet.from_openai(tools)
        fmt = ToolCallFormat.detect(tokenizer)
        # max_whitespace as ToolSet.generate: the same grammar, so outputs compare
        compiled = tools.compile(compiler, tool_choice, parallel=parallel, format=fmt, whitespace=whitespace,
                                 max_whitespace=2)
    elif isinstance(grammar, CompiledGrammar):
        compiled = grammar
    else:
        compiled = compiler.compile_grammar(grammar)
    ids = [_prompt_ids(tokenizer, p, tools, fmt) for p in prompts]
    stats: dict[str, Any] = {}
    events = _decode(model, tokenizer, compiled, ids, max_new_tokens=max_new_tokens,
                     sampler=_Sampler(do_sample, temperature, top_k, top_p, seed),
                     fast_forward=fast_forward, stats=stats)
    stop_ids = set(compiled.tokenizer_info.stop_token_ids)
    token_bytes = compiled.tokenizer_info.token_bytes

    def finish() -> list[DecodeResult]:
        seconds = time.perf_counter() - stats["t0"]
        out = []
        for r in stats["rows"]:
            body = b"".join(token_bytes[t] or b"" for t in r.ids if t not in stop_ids)
            text = body.decode("utf-8", errors="replace")
            complete = _finished(r.matcher)
            value = None
            if complete and schema is not None:
                value = json.loads(text)
            elif complete and tools is not None:
                value = tools.parse(text, format=fmt)
            n = len(r.ids)
            ttft = stats["ttft"] or seconds
            out.append(DecodeResult(text, value, "complete" if complete else "truncated", list(r.ids), list(r.flags), r.sampled,
                                    r.forced, stats["passes"], ttft, (seconds - ttft) / (n - 1) if n > 1 else 0.0,
                                    seconds))
        return out

    if stream:
        return GenerationStream(events, finish, batch, token_bytes, stop_ids, len(prompts))
    for _ in events:
        pass
    results = finish()
    return results if batch else results[0]
