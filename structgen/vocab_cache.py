"""The per-vocabulary work every grammar of one tokenizer shares, cached on disk.

:class:`~structgen.token_index.TokenTrie` (the vocabulary trie with its plain-byte split)
depends only on the token bytes, so it is stored once per vocabulary, keyed by
:attr:`TokenizerInfo.fingerprint <structgen.tokenizer.TokenizerInfo.fingerprint>` and a
format version, as one numpy ``.npz`` of plain integer arrays read back with
``allow_pickle=False``, through :mod:`structgen.disk_cache` (checksummed, private to the
user, rebuilt when stale or corrupt).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .disk_cache import cache_dir, cache_enabled, through_cache
from .token_index import PlainSplit, TokenTrie
from .tokenizer import TokenizerInfo

__all__ = ["load_trie"]

FORMAT = 2  # 2: the plain split also stores the plain-token trie, its orders, the text tokens
_FILE = "trie.npz"
_META = "trie.json"


MIN_CACHED_TOKENS = 4096  # smaller vocabularies (toys, tests) build in milliseconds


def load_trie(info: TokenizerInfo, *, cache: bool | None = None) -> TokenTrie:
    """The vocabulary trie of ``info``: from the disk cache, or built (and then cached)."""
    key = {"format": FORMAT, "kind": "vocabulary-trie", "fingerprint": info.fingerprint}
    use = cache_enabled(cache) and (cache is True or len(info.token_bytes) >= MIN_CACHED_TOKENS)
    entry = cache_dir() / "vocab" / info.fingerprint[:32] if use else None
    return through_cache(entry, key, _load, lambda: TokenTrie.build(info), _save)


def _arrays(trie: TokenTrie, prefix: str) -> dict[str, np.ndarray]:
    out = {f"{prefix}dups": trie.dups}
    for name in ("byte", "tok_at", "child_start", "child_count"):
        for d, arr in enumerate(getattr(trie, name)):
            out[f"{prefix}{name}_{d}"] = arr
    return out


def _save(trie: TokenTrie, folder: str) -> None:
    arrays = _arrays(trie, "")
    meta = {"levels": len(trie.byte), "num_nodes": trie.num_nodes, "plain": trie.plain is not None}
    if trie.plain is not None:
        p = trie.plain
        arrays.update(_arrays(p.rest, "rest_"))
        arrays.update(_arrays(p.only, "only_"))
        arrays.update(_arrays(p.other, "other_"))
        arrays.update(_arrays(p.text_trie, "text_"))
        arrays.update(plain_tokens=p.tokens, by_first=p.by_first, offsets=p.offsets, by_len=p.by_len,
                      len_offsets=p.len_offsets, text_tokens=p.text, text_by_first=p.text_by_first,
                      text_offsets=p.text_offsets)
        meta.update(rest_levels=len(p.rest.byte), rest_num_nodes=p.rest.num_nodes,
                    only_levels=len(p.only.byte), only_num_nodes=p.only.num_nodes,
                    other_levels=len(p.other.byte), other_num_nodes=p.other.num_nodes,
                    text_levels=len(p.text_trie.byte), text_num_nodes=p.text_trie.num_nodes)
    np.savez(Path(folder) / _FILE, **arrays)
    (Path(folder) / _META).write_text(json.dumps(meta), encoding="utf-8")


def _trie_from(z, prefix: str, levels: int, num_nodes: int, plain: PlainSplit | None) -> TokenTrie:
    def level_arrays(name: str) -> tuple[np.ndarray, ...]:
        return tuple(z[f"{prefix}{name}_{d}"] for d in range(levels))

    return TokenTrie(level_arrays("byte"), level_arrays("tok_at"), level_arrays("child_start"),
                     level_arrays("child_count"), z[f"{prefix}dups"], num_nodes, plain)


def _load(folder: str) -> TokenTrie:
    meta = json.loads((Path(folder) / _META).read_text(encoding="utf-8"))
    with np.load(Path(folder) / _FILE, allow_pickle=False) as z:
        plain = None
        if meta["plain"]:
            rest = _trie_from(z, "rest_", meta["rest_levels"], meta["rest_num_nodes"], None)
            only = _trie_from(z, "only_", meta["only_levels"], meta["only_num_nodes"], None)
            other = _trie_from(z, "other_", meta["other_levels"], meta["other_num_nodes"], None)
            text = _trie_from(z, "text_", meta["text_levels"], meta["text_num_nodes"], None)
            plain = PlainSplit(z["plain_tokens"], rest, only, z["by_first"], z["offsets"], z["by_len"],
                               z["len_offsets"], z["text_tokens"], other, text, z["text_by_first"], z["text_offsets"])
        return _trie_from(z, "", meta["levels"], meta["num_nodes"], plain)
