"""Forced text → the tokens a decoder may append without asking the model.

Where the grammar admits one continuation (``GrammarMatcher.find_forced_bytes``), a
decoder can append it in the same forward pass as the token before it. Two rules keep the
appended tokens ones the model could have produced itself:

* **canonical**: the tokens are the tokenizer's own encoding of the forced text, not any
  token sequence that spells it (the model was trained on canonical encodings only);
* **boundary-safe**: a token is appended only if no continuation the grammar allows could
  change it. Byte-level BPE (SmolLM2, GPT-2, Llama-3) merges across the end of a text: the
  encoding of ``":`` ends in ``":`` but ``":"`` is one token, so forcing ``":`` before a
  string would put the model off its usual encoding. We probe: encode the forced text
  followed by a representative character for every byte the grammar allows next (one per
  Unicode class the pre-tokenizer distinguishes: letter, digit, space, other), each with a
  few second characters, and keep the longest token prefix that all probes share. The
  held-back tail is left to the model, which picks its own boundary token next step.

A forced run that starts or ends inside a UTF-8 character is cut at character boundaries
(encoders work on text). A plan is memoised per parser configuration, so after warm-up a
step costs one dictionary lookup.

Limit: non-ASCII continuations are probed with one character per class and lead byte, so a
merge that only one specific non-ASCII character would trigger is not seen (none was found
on the SmolLM2 documents of ``tests/test_decoding.py``).
"""
from __future__ import annotations

import unicodedata
import weakref
from collections.abc import Callable, Sequence
from functools import cache
from typing import Any

from ..index.token_index import DEAD
from .compiler import CompiledGrammar
from .matcher import GrammarMatcher

__all__ = ["Encoder", "ForcedTokenPlanner", "hf_encoder", "planner_for"]

Encoder = Callable[[Sequence[str]], list[list[int]]]
"""Encodes a batch of texts without special tokens (the tokenizer's canonical ids)."""

# Second characters after a probe: contractions ('re, 'll), digits, spaces, JSON punctuation.
_SUFFIXES = ("", "a", "e", "l", "0", " ", '"')


def hf_encoder(tokenizer: Any) -> Encoder:
    """The :data:`Encoder` of a Hugging Face tokenizer (no BOS/EOS added)."""

    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:  # the Rust tokenizer directly: about twice as fast for probes

        def encode(texts: Sequence[str]) -> list[list[int]]:
            return [e.ids for e in backend.encode_batch(list(texts), add_special_tokens=False)]
    else:

        def encode(texts: Sequence[str]) -> list[list[int]]:
            return tokenizer(list(texts), add_special_tokens=False)["input_ids"]

    return encode


def _char_class(ch: str) -> str:
    if ch.isspace():
        return "space"
    cat = unicodedata.category(ch)[0]
    return cat if cat in "LN" else "other"


@cache
def _representatives(lead: int) -> tuple[str, ...]:
    """One character per class (letter, digit, space, other) whose UTF-8 starts with ``lead``."""
    if lead < 0x80:
        return (chr(lead),)
    if 0xC2 <= lead <= 0xDF:
        lo, hi = (lead & 0x1F) << 6, ((lead & 0x1F) << 6) | 0x3F
    elif 0xE0 <= lead <= 0xEF:
        lo, hi = (lead & 0x0F) << 12, ((lead & 0x0F) << 12) | 0xFFF
    elif 0xF0 <= lead <= 0xF4:
        lo, hi = (lead & 0x07) << 18, min(((lead & 0x07) << 18) | 0x3FFFF, 0x10FFFF)
    else:  # a continuation byte or a byte UTF-8 never uses: no character starts with it
        return ()
    found: dict[str, str] = {}
    step = max(1, (hi - lo) // 4096)  # every class shows up long before the range ends
    for cp in range(lo, hi + 1, step):
        # overlong ranges (E0 below U+0800, F0 below U+10000) and surrogates are skipped here
        if 0xD800 <= cp <= 0xDFFF or chr(cp).encode("utf-8")[0] != lead:
            continue
        found.setdefault(_char_class(chr(cp)), chr(cp))
        if len(found) == 4:
            break
    return tuple(found.values())


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


class ForcedTokenPlanner:
    """Plans the tokens to append where the grammar forces the text (see the module doc).

    Args:
        compiled: the grammar the matchers follow.
        encode: the tokenizer's canonical encoder (:func:`hf_encoder` for Hugging Face).
    """

    def __init__(self, compiled: CompiledGrammar, encode: Encoder) -> None:
        self.compiled = compiled
        self.encode = encode
        self._index = compiled.index
        self._plans: dict[int, tuple[int, ...]] = {}

    def plan(self, matcher: GrammarMatcher) -> tuple[int, ...]:
        """Token ids to append at the matcher's position (empty when the model must choose).

        The matcher is not moved; every planned token is allowed in sequence.
        """
        if matcher.is_terminated():
            return ()
        cid = matcher.state
        hit = self._plans.get(cid)
        if hit is None:
            hit = self._plans[cid] = self._plan(cid)
        names = matcher.name_state
        if hit and names is not None:
            # plans are per configuration; whether one writes a member name a second time
            # depends on the names this output wrote: keep the tokens before such a name
            tb = self.compiled.tokenizer_info.token_bytes
            for k, t in enumerate(hit):
                names = names.feed(tb[t])
                if names is None:
                    return hit[:k]
        return hit

    def _plan(self, cid: int) -> tuple[int, ...]:
        forced, end = self._index.forced_bytes(cid)
        text, rest = _split_text(forced)
        if not text:
            return ()
        tokens = self.encode([text])[0]
        token_bytes = self.compiled.tokenizer_info.token_bytes
        if b"".join(token_bytes[t] or b"" for t in tokens) != text.encode("utf-8"):
            return ()  # the encoder rewrites text (e.g. a SentencePiece dummy prefix): never guess
        follow = [rest[0]] if rest else self._index.next_bytes(end).tolist()
        probes = [text + ch + s for b in follow for ch in _representatives(b) for s in _SUFFIXES]
        keep = len(tokens)
        for enc in self.encode(probes) if probes else ():
            keep = min(keep, _common_prefix(tokens, enc))
            if keep == 0:
                return ()
        plan = tuple(tokens[:keep])
        state = cid
        for t in plan:  # belt and braces: the bytes matched, so each step must be allowed
            state = self._index.step_token(state, t)
            if state == DEAD:
                return ()
        return plan


def _split_text(data: bytes) -> tuple[str, bytes]:
    """The longest prefix of ``data`` that is whole UTF-8 characters, and the bytes after it."""
    for cut in range(len(data), max(len(data) - 4, 0) - 1, -1):
        try:
            return data[:cut].decode("utf-8"), data[cut:]
        except UnicodeDecodeError:
            continue
    return "", data  # starts inside a character (the previous token ended mid-character)


# Plans outlive one generate() call (they are the expensive part); dropped with the grammar.
_PLANNERS: weakref.WeakKeyDictionary[CompiledGrammar, list[tuple[Any, ForcedTokenPlanner]]] = (
    weakref.WeakKeyDictionary())


def planner_for(compiled: CompiledGrammar, tokenizer: Any) -> ForcedTokenPlanner:
    """The (cached) planner of a compiled grammar and a Hugging Face tokenizer."""
    per = _PLANNERS.setdefault(compiled, [])
    for tok, planner in per:
        if tok is tokenizer:
            return planner
    planner = ForcedTokenPlanner(compiled, hf_encoder(tokenizer))
    per.append((tokenizer, planner))
    return planner
