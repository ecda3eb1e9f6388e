"""The per-vocabulary work every grammar of one tokenizer shares, cached on disk.

:class:`~structgen.index.token_index.TokenTrie` (the vocabulary trie with its plain-byte split)
depends only on the token bytes, so it is stored once per vocabulary, keyed by
:attr:`TokenizerInfo.fingerprint <structgen.index.tokenizer.TokenizerInfo.fingerprint>` and a
format version, as one numpy ``.npz`` of plain integer arrays read back with
``allow_pickle=False``, through :mod:`structgen.disk_cache` (checksummed, private to the
user, rebuilt when stale or corrupt).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..disk_cache import cache_dir, cache_enabled, through_cache
from .token_index import PlainSplit, TokenTrie
from .tokenizer import TokenizerInfo

__all__ = ["load_trie"]

FORMAT = 4  # 4: the tries in preorder (the native walk's layout), the plain and text tokens as bitmasks,
# the other tokens split at their text prefix
_FILE = "trie.npz"
_META = "trie.json"


MIN_CACHED_TOKENS = 4096  # smaller vocabularies (toys, tests) build in milliseconds


def load_trie(info: TokenizerInfo, *, cache: bool | None = None) -> TokenTrie:
    """The vocabulary trie of ``info``: from the disk cache, or built (and then cached)."""
    key = {"format": FORMAT, "kind": "vocabulary-trie", "fingerprint": info.fingerprint}
    use = cache_enabled(cache) and (cache is True or len(info.token_bytes) >= MIN_CACHED_TOKENS)
    entry = cache_dir() / "vocab" / info.fingerprint[:32] if use else None
    return through_cache(entry, key, _load, lambda: TokenTrie.build(info), _save)


_TRIE_FIELDS = ("byte", "tok", "depth", "end", "dups")
_SUBTRIES = ("rest", "only", "other", "text_trie", "other_head", "other_tail")


def _save(trie: TokenTrie, folder: str) -> None:
    arrays = {name: getattr(trie, name) for name in _TRIE_FIELDS}
    meta = {"plain": trie.plain is not None}
    if trie.plain is not None:
        p = trie.plain
        for sub in _SUBTRIES:
            arrays.update({f"{sub}_{name}": getattr(getattr(p, sub), name) for name in _TRIE_FIELDS})
        arrays.update(plain_tokens=p.tokens, by_first=p.by_first, offsets=p.offsets, by_len=p.by_len,
                      len_offsets=p.len_offsets, text_tokens=p.text, text_by_first=p.text_by_first,
                      text_offsets=p.text_offsets, tail_ids=p.tail_ids, tail_offsets=p.tail_offsets)
    np.savez(Path(folder) / _FILE, **arrays)
    (Path(folder) / _META).write_text(json.dumps(meta), encoding="utf-8")


def _trie_from(z, prefix: str, plain: PlainSplit | None) -> TokenTrie:
    return TokenTrie(*(z[f"{prefix}{name}"] for name in _TRIE_FIELDS), plain)


def _load(folder: str) -> TokenTrie:
    meta = json.loads((Path(folder) / _META).read_text(encoding="utf-8"))
    with np.load(Path(folder) / _FILE, allow_pickle=False) as z:
        plain = None
        if meta["plain"]:
            rest, only, other, text, head, tail = (_trie_from(z, f"{sub}_", None) for sub in _SUBTRIES)
            plain = PlainSplit(z["plain_tokens"], rest, only, z["by_first"], z["offsets"], z["by_len"],
                               z["len_offsets"], z["text_tokens"], other, text, z["text_by_first"], z["text_offsets"],
                               head, tail, z["tail_ids"], z["tail_offsets"])
        return _trie_from(z, "", plain)
