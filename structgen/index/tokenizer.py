"""TokenizerInfo: the exact bytes of every token id, stop tokens and the model's vocabulary size.

Grammars are matched on bytes, so the first job is to recover, for each token id, the bytes
it appends to the output. Hugging Face vocabularies store token *strings* in one of a few
encodings:

* byte-level BPE (GPT-2, Llama-3, Qwen, SmolLM2): every byte is mapped to a printable
  character (``Ġ`` for a space...); we invert that table;
* SentencePiece (Llama-2, Mistral, Phi-3): ``▁`` stands for a space and ``<0xNN>`` tokens
  are raw bytes (byte fallback);
* anything else: the token string is UTF-8 text.

Special tokens (BOS, EOS, padding, chat markers...) get no bytes: grammar text can never
produce them, and only stop tokens are ever allowed, when the output is complete.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Iterable, Literal, Sequence

import numpy as np

from ..errors import TokenizerError

__all__ = ["TokenizerInfo", "VocabType"]

VocabType = Literal["byte_level", "sentencepiece", "raw"]


@lru_cache(maxsize=1)
def _byte_decoder() -> dict[str, int]:
    """Inverse of GPT-2's bytes→unicode table (printable stand-ins for every byte)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


@dataclass(frozen=True, eq=False)
class TokenizerInfo:
    """What the grammar engine needs to know about a tokenizer.

    Attributes:
        token_bytes: per token id, the bytes it appends, or ``None`` for special tokens.
        vocab_size: the model's vocabulary size (width of the logits); may exceed
            ``len(token_bytes)`` when the embedding matrix is padded.
        stop_token_ids: ids that end generation (EOS, end-of-turn); allowed only when the
            output is complete.
        special_token_ids: ids never produced by grammar text (includes stop tokens).
        vocab_type: how token strings were decoded.
    """

    token_bytes: tuple[bytes | None, ...]
    vocab_size: int
    stop_token_ids: tuple[int, ...]
    special_token_ids: frozenset[int] = frozenset()
    vocab_type: VocabType = "raw"
    _fingerprint: list = field(default_factory=list, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.vocab_size < len(self.token_bytes):
            raise TokenizerError(
                f"vocab_size={self.vocab_size} is smaller than the tokenizer's {len(self.token_bytes)} "
                f"tokens; pass the model's logits width (config.vocab_size) or leave it unset"
            )
        if not self.stop_token_ids:
            raise TokenizerError(
                "the tokenizer has no stop token (EOS): pass stop_token_ids=[...] so a complete "
                "output can end"
            )
        for t in self.stop_token_ids:
            if not 0 <= t < self.vocab_size:
                raise TokenizerError(f"stop token id {t} is outside the vocabulary [0, {self.vocab_size})")

    @property
    def fingerprint(self) -> str:
        """SHA-256 over the token bytes, stop tokens and vocabulary size (cache key)."""
        if not self._fingerprint:
            # the lengths (-1: no bytes) then every token's bytes in one piece: three hash
            # updates (one per token cost 0.1 s at 128K tokens); the lengths by map(len) with
            # b"" for None, then -1 set at the None positions (a generator expression per
            # token was a quarter of preparing a 128K vocabulary)
            tb = self.token_bytes
            filled = [b"" if b is None else b for b in tb]
            lengths = np.fromiter(map(len, filled), "<i4", len(filled))
            lengths[[i for i, b in enumerate(tb) if b is None]] = -1
            h = hashlib.sha256()
            h.update(f"v2|{self.vocab_size}|{sorted(self.stop_token_ids)}|{self.vocab_type}|".encode())
            h.update(lengths.tobytes())
            h.update(b"".join(filled))
            self._fingerprint.append(h.hexdigest())
        return self._fingerprint[0]

    @classmethod
    def from_token_bytes(
        cls,
        token_bytes: Sequence[bytes | None],
        *,
        stop_token_ids: Iterable[int],
        vocab_size: int | None = None,
        special_token_ids: Iterable[int] = (),
    ) -> "TokenizerInfo":
        """Build from explicit token bytes (toy vocabularies, tests, other frameworks)."""
        stops = tuple(dict.fromkeys(int(t) for t in stop_token_ids))
        specials = frozenset(int(t) for t in special_token_ids) | frozenset(stops)
        tb = tuple(None if (i in specials or b is None) else bytes(b) for i, b in enumerate(token_bytes))
        return cls(tb, vocab_size or len(tb), stops, specials, "raw")

    @classmethod
    def from_huggingface(
        cls,
        tokenizer: Any,
        *,
        vocab_size: int | None = None,
        stop_token_ids: Iterable[int] | None = None,
    ) -> "TokenizerInfo":
        """Adapt a ``transformers`` tokenizer (fast or slow).

        Args:
            tokenizer: a ``PreTrainedTokenizer(Fast)``.
            vocab_size: the model's logits width (``model.config.vocab_size``) when it is
                larger than the tokenizer; defaults to ``len(tokenizer)``.
            stop_token_ids: ids that end generation; defaults to the EOS id(s) of the
                tokenizer (and of its generation config, if the tokenizer carries one).

        Raises:
            TokenizerError: no EOS id is known, or ``vocab_size`` is too small.
        """
        dense = _dense_strings(tokenizer)
        if dense is not None:
            strings: list[str | None] = dense
            n = len(dense)
        else:
            vocab = tokenizer.get_vocab()
            n = max(max(vocab.values()) + 1, len(tokenizer))
            strings = [None] * n
            for text, i in vocab.items():
                strings[i] = text
        specials = set(getattr(tokenizer, "all_special_ids", []) or [])
        for i, tok in (getattr(tokenizer, "added_tokens_decoder", None) or {}).items():
            if getattr(tok, "special", False):
                specials.add(int(i))
        # (strings by id, not the dict: its order is the backend's hash order, so a guess from
        # its first entries changed between processes)
        vtype = _detect_vocab_type(tokenizer, strings)
        token_bytes: list[bytes | None] = []
        added = {int(i): t.content for i, t in (getattr(tokenizer, "added_tokens_decoder", None) or {}).items()}
        whole = _byte_level_bulk(strings, specials, added) if vtype == "byte_level" else None
        if whole is not None:
            strings = []  # every token converted at once
            token_bytes = whole
        for i, s in enumerate(strings):
            if s is None or i in specials:
                token_bytes.append(None)
            elif i in added:  # added tokens are stored verbatim, not in the vocab's encoding
                token_bytes.append(added[i].encode("utf-8"))
            elif vtype == "byte_level":
                if s.translate(_BYTE_LEVEL_KEYS):  # a character outside the byte alphabet
                    token_bytes.append(s.encode("utf-8"))
                else:
                    token_bytes.append(s.translate(_BYTE_LEVEL_LATIN1).encode("latin-1"))
            elif vtype == "sentencepiece":
                if len(s) == 6 and s.startswith("<0x") and s.endswith(">"):
                    token_bytes.append(bytes([int(s[3:5], 16)]))
                else:
                    token_bytes.append(s.replace("\u2581", " ").encode("utf-8"))
            else:
                token_bytes.append(s.encode("utf-8"))
        if stop_token_ids is None:
            stops: list[int] = []
            eos = getattr(tokenizer, "eos_token_id", None)
            if isinstance(eos, int):
                stops.append(eos)
            elif isinstance(eos, (list, tuple)):
                stops.extend(int(x) for x in eos)
            stop_token_ids = stops
        stops_t = tuple(dict.fromkeys(int(t) for t in stop_token_ids))
        specials |= set(stops_t)
        token_bytes = list(token_bytes)
        for i in specials:
            if 0 <= i < len(token_bytes):
                token_bytes[i] = None
        return cls(tuple(token_bytes), vocab_size or n, stops_t, frozenset(specials), vtype)

    @classmethod
    def from_tokenizer_json(cls, path: str, **kwargs: Any) -> "TokenizerInfo":
        """Load a ``tokenizer.json`` folder or file through ``transformers`` (offline)."""
        from transformers import AutoTokenizer, PreTrainedTokenizerFast

        if os.path.isdir(path):
            tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
        else:
            tok = PreTrainedTokenizerFast(tokenizer_file=path)
        return cls.from_huggingface(tok, **kwargs)

    def __len__(self) -> int:
        return len(self.token_bytes)

    def __repr__(self) -> str:
        return (
            f"TokenizerInfo(tokens={len(self.token_bytes)}, vocab_size={self.vocab_size}, "
            f"type={self.vocab_type}, stop_token_ids={list(self.stop_token_ids)})"
        )


# str.translate tables: byte-level characters -> the latin-1 character of their byte (then
# one encode gives the bytes), and -> deleted (anything left is not byte-level text)
_BYTE_LEVEL_LATIN1 = {ord(c): chr(b) for c, b in _byte_decoder().items()}
_BYTE_LEVEL_KEYS = dict.fromkeys(_BYTE_LEVEL_LATIN1)
# code point -> its byte (-1: not a byte-level character), for whole-vocabulary conversion
_BYTE_LEVEL_TABLE = np.full(max(_BYTE_LEVEL_LATIN1) + 1, -1, "int16")
_BYTE_LEVEL_TABLE[list(_BYTE_LEVEL_LATIN1)] = [ord(c) for c in _BYTE_LEVEL_LATIN1.values()]


def _byte_level_bulk(strings: list[str | None], specials: set[int], added: dict[int, str]) -> list[bytes | None] | None:
    """Byte-level token strings to bytes for the whole vocabulary at once: the joined strings'
    code points go through one table lookup (numpy), instead of two ``str.translate`` calls
    per token (Llama-3: 0.2 s of the 0.5 s ``from_huggingface`` took). Each byte-level
    character is one byte, so token ``i``'s bytes are the slice at its offset. ``None`` when
    some token holds a character outside the byte alphabet (the per-token conversion handles
    those)."""
    keep = ["" if s is None else s for s in strings]
    for i in specials | added.keys():
        if 0 <= i < len(keep):
            keep[i] = ""
    points = np.frombuffer("".join(keep).encode("utf-32-le"), np.uint32)
    if len(points) and int(points.max()) >= len(_BYTE_LEVEL_TABLE):
        return None
    values = _BYTE_LEVEL_TABLE[points]
    if len(values) and int(values.min()) < 0:
        return None
    data = values.astype(np.uint8).tobytes()
    lengths = np.fromiter(map(len, keep), np.int64, len(keep))
    ends = np.cumsum(lengths).tolist()
    out: list[bytes | None] = [data[a:b] for a, b in zip([0] + ends[:-1], ends)]
    for i in np.flatnonzero(lengths == 0).tolist():  # the rare tokens that are not plain byte-level text
        if strings[i] is None or i in specials:
            out[i] = None
    for i, text in added.items():
        if 0 <= i < len(out) and strings[i] is not None and i not in specials:
            out[i] = text.encode("utf-8")  # added tokens are stored verbatim
    return out


def _dense_strings(tokenizer: Any) -> list[str | None] | None:
    """Every token's string by id from a fast tokenizer's backend, when its ids are exactly
    ``0 .. len(tokenizer) - 1``; else None (then ``get_vocab`` and its ids are used).

    One ``id_to_token`` per id is cheaper than building ``get_vocab``'s dict (Llama-3: about
    0.14 s against 0.23 s, a third of preparing the vocabulary)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return None
    try:
        n = len(tokenizer)
        if backend.get_vocab_size(with_added_tokens=True) != n:
            return None
        strings = [backend.id_to_token(i) for i in range(n)]
    except Exception:  # noqa: BLE001 - bindings without these methods: the dictionary path
        return None
    # n entries, every id below n present: no id can lie beyond
    return None if any(t is None for t in strings) else strings


def _detect_vocab_type(tokenizer: Any, tokens: Iterable[str | None]) -> VocabType:
    """The vocabulary's encoding, from the tokenizer's pipeline; else guessed from ``tokens``
    (the vocabulary's strings by id, None for holes)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        text, byte_fallback = _pipeline_text(backend)
        if '"ByteLevel"' in text:
            return "byte_level"
        if "\u2581" in text or "ByteFallback" in text or byte_fallback:
            return "sentencepiece"
    vocab = [k for k in tokens if k is not None]  # only here: most tokenizers decide above
    if any(k.startswith("<0x") and len(k) == 6 for k in vocab) or any("\u2581" in k for k in vocab[:2000]):
        return "sentencepiece"
    if "Ġ" in vocab or any(k.startswith("Ġ") for k in vocab[:5000]):
        return "byte_level"
    return "raw"


def _pipeline_text(backend: Any) -> tuple[str, bool]:
    """The decoder and pre-tokenizer as JSON text, and the model's byte_fallback flag.

    Serialised component by component: the whole tokenizer's JSON (the vocabulary and merges
    included) took 1.3 s to write and parse for Llama-3, most of TokenizerInfo's cost."""
    try:
        parts = [c.__getstate__() for c in (backend.decoder, backend.pre_tokenizer) if c is not None]
        text = "".join(json.dumps(json.loads(p)) for p in parts)
        return text, bool(getattr(backend.model, "byte_fallback", False))
    except Exception:  # noqa: BLE001 - bindings without component state: the whole document
        try:
            spec = json.loads(backend.to_str())
        except Exception:  # noqa: BLE001 - exotic backends
            spec = {}
        text = json.dumps(spec.get("decoder") or {}) + json.dumps(spec.get("pre_tokenizer") or {})
        return text, bool((spec.get("model") or {}).get("byte_fallback"))
