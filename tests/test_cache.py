"""On-disk cache of converted models (structgen.models): versioned, checksummed, private,
rebuilt when stale or corrupt; nothing in it is unpickled.

The cache logic is tested on small files; one test goes through the real tokenizer
conversion of the default model into a temporary cache folder.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from structgen import models
from structgen.models import _MANIFEST, _read_entry, _through_cache

KEY = {"format": models._CACHE_FORMAT, "file": "toy.gguf", "size": 3, "mtime_ns": 1, "head_sha256": "x",
       "transformers": "0"}


class Source:
    """A toy conversion: counts builds; the cached form is two small files."""

    def __init__(self) -> None:
        self.builds = 0

    def build(self) -> dict:
        self.builds += 1
        return {"vocab": ["a", "b", "c"] * 50}

    @staticmethod
    def save(obj: dict, folder: str) -> None:
        Path(folder, "tokenizer.json").write_text(json.dumps(obj), encoding="utf-8")
        Path(folder, "config.json").write_text('{"n": 150}', encoding="utf-8")

    @staticmethod
    def load(folder: str) -> dict:
        return json.loads(Path(folder, "tokenizer.json").read_text(encoding="utf-8"))

    def get(self, entry: Path, key: dict = KEY) -> dict:
        return _through_cache(entry, key, self.load, self.build, self.save)


@pytest.fixture
def entry(tmp_path):
    return tmp_path / "gguf" / "toy-0123" / "tokenizer"


def _flip_one_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01  # same size: only a checksum notices
    path.write_bytes(bytes(data))


def test_entry_is_written_once_then_reused(entry):
    src = Source()
    first = src.get(entry)
    assert src.get(entry) == first and src.builds == 1
    manifest = json.loads((entry / _MANIFEST).read_text())
    assert manifest["key"] == KEY and manifest["key"]["format"] == models._CACHE_FORMAT
    assert set(manifest["files"]) == {"tokenizer.json", "config.json"}
    assert all(len(m["sha256"]) == 64 for m in manifest["files"].values())
    if hasattr(os, "getuid"):
        assert (entry.stat().st_mode & 0o777) == 0o700
        assert all((entry / n).stat().st_mode & 0o777 == 0o600 for n in [*manifest["files"], _MANIFEST])


@pytest.mark.parametrize("damage", ["flip-byte", "truncate", "delete-file", "delete-manifest", "garbage-manifest",
                                    "extra-listed-file", "group-writable", "symlinked-file"])
def test_corrupt_entry_is_rebuilt(entry, tmp_path, damage):
    src = Source()
    good = src.get(entry)
    target = entry / "tokenizer.json"
    if damage == "flip-byte":
        _flip_one_byte(target)
    elif damage == "truncate":
        target.write_bytes(target.read_bytes()[:-5])
    elif damage == "delete-file":
        target.unlink()
    elif damage == "delete-manifest":
        (entry / _MANIFEST).unlink()
    elif damage == "garbage-manifest":
        (entry / _MANIFEST).write_text("{not json")
    elif damage == "extra-listed-file":
        manifest = json.loads((entry / _MANIFEST).read_text())
        manifest["files"]["../outside.json"] = {"size": 2, "sha256": "0" * 64}
        (entry / _MANIFEST).write_text(json.dumps(manifest))
    elif damage == "group-writable":
        if not hasattr(os, "getuid"):
            pytest.skip("POSIX permissions")
        os.chmod(target, 0o664)  # someone else could have replaced it, manifest and all
    else:
        other = tmp_path / "elsewhere.json"
        other.write_bytes(target.read_bytes())
        target.unlink()
        target.symlink_to(other)
    assert not _read_entry(entry, KEY)
    assert src.get(entry) == good and src.builds == 2, "a damaged entry must be rebuilt"
    assert _read_entry(entry, KEY)
    assert src.get(entry) == good and src.builds == 2, "the rebuilt entry is used again"


@pytest.mark.parametrize("field,value", [("format", models._CACHE_FORMAT - 1), ("mtime_ns", 2),
                                         ("transformers", "9.9")])
def test_stale_entry_is_rebuilt(entry, field, value):
    src = Source()
    src.get(entry)
    assert not _read_entry(entry, {**KEY, field: value})
    src.get(entry, {**KEY, field: value})
    assert src.builds == 2


def test_load_failure_drops_the_entry(entry):
    src = Source()
    src.get(entry)
    calls = []

    def bad_load(folder: str) -> dict:
        calls.append(folder)
        raise ValueError("unreadable")

    again = _through_cache(entry, KEY, bad_load, src.build, src.save)
    assert calls and again == src.build() and _read_entry(entry, KEY)


def test_nothing_is_unpickled():
    """The cache reads JSON and safetensors only (the model through use_safetensors=True)."""
    import inspect

    text = inspect.getsource(models)
    assert "pickle" not in text.replace("unpickled", "")
    assert "use_safetensors=True" in text and "torch.load" not in text


@pytest.mark.model
def test_real_tokenizer_cache_rebuilt_when_corrupt(tmp_path, monkeypatch):
    monkeypatch.setenv("STRUCTGEN_CACHE_DIR", str(tmp_path))
    tok = models.load_default_tokenizer(cache=True)
    entries = list(tmp_path.glob("gguf/*/tokenizer"))
    assert len(entries) == 1
    files = {p.name for p in entries[0].iterdir()}
    assert files and all(n.endswith((".json", ".jinja")) for n in files), files  # text only: nothing to unpickle
    _flip_one_byte(entries[0] / "tokenizer.json")
    again = models.load_default_tokenizer(cache=True)
    assert again.get_vocab() == tok.get_vocab() and again.eos_token_id == tok.eos_token_id
    assert _read_entry(entries[0], json.loads((entries[0] / _MANIFEST).read_text())["key"])


def test_vocabulary_trie_cache_round_trip_and_corruption(tmp_path, monkeypatch, smollm2_info):
    # the prepared vocabulary is cached as plain arrays (no pickle) and rebuilt when corrupt
    import numpy as np

    from structgen.index.token_index import TokenTrie
    from structgen.index.vocab_cache import load_trie

    monkeypatch.setenv("STRUCTGEN_CACHE_DIR", str(tmp_path))
    built = load_trie(smollm2_info)
    entry = tmp_path / "vocab" / smollm2_info.fingerprint[:32]
    assert (entry / "trie.npz").is_file() and (entry / _MANIFEST).is_file()

    def same(a: TokenTrie, b: TokenTrie) -> bool:
        return all(np.array_equal(getattr(a, f), getattr(b, f)) for f in ("byte", "tok", "depth", "end", "dups"))

    loaded = load_trie(smollm2_info)
    assert same(loaded, built) and same(loaded.plain.rest, built.plain.rest) and same(loaded.plain.only, built.plain.only)
    assert same(loaded.plain.other, built.plain.other) and same(loaded.plain.text_trie, built.plain.text_trie)
    assert same(loaded.plain.other_head, built.plain.other_head) and same(loaded.plain.other_tail, built.plain.other_tail)
    for f in ("tokens", "by_first", "offsets", "by_len", "len_offsets", "text", "text_by_first", "text_offsets",
              "tail_ids", "tail_offsets"):
        assert np.array_equal(getattr(loaded.plain, f), getattr(built.plain, f)), f
    data = bytearray((entry / "trie.npz").read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, one byte flipped: only the checksum can tell
    (entry / "trie.npz").write_bytes(bytes(data))
    assert not _read_entry(entry, json.loads((entry / _MANIFEST).read_text())["key"])
    again = load_trie(smollm2_info)
    assert same(again, built) and _read_entry(entry, json.loads((entry / _MANIFEST).read_text())["key"])


def test_unicode_tables_kept_on_disk(tmp_path, monkeypatch):
    """The tables of \\d \\w \\s and of the General_Category values are scanned once per
    interpreter: later processes read them back, equal to a fresh scan; a damaged entry is
    scanned again, and another Unicode version is another entry."""
    from types import SimpleNamespace

    from structgen.regex import parser

    monkeypatch.setenv("STRUCTGEN_CACHE_DIR", str(tmp_path))
    scans = []

    def scan():
        scans.append(1)
        return parser._scan_python_categories()

    fresh = parser._scan_python_categories()
    assert parser._through_disk("python-classes", scan) == fresh and len(scans) == 1
    assert parser._through_disk("python-classes", scan) == fresh and len(scans) == 1
    [entry] = (tmp_path / "unicode").iterdir()
    (entry / "tables.npz").write_bytes(b"not an archive")
    assert parser._through_disk("python-classes", scan) == fresh and len(scans) == 2
    monkeypatch.setattr(parser, "unicodedata", SimpleNamespace(unidata_version="0.0.0"))
    assert parser._through_disk("python-classes", scan) == fresh and len(scans) == 3
    assert len(list((tmp_path / "unicode").iterdir())) == 2
    monkeypatch.undo()
    monkeypatch.setenv("STRUCTGEN_CACHE_DIR", str(tmp_path))
    categories = parser._through_disk("general-categories", parser._scan_general_categories)
    assert categories == parser._through_disk("general-categories", lambda: pytest.fail("scanned again"))
    assert categories == parser._scan_general_categories()


def test_unicode_tables_refused_when_malformed(tmp_path):
    """A table file whose ranges leave the code points, or whose names do not match, fails to
    load (and through_cache then scans again)."""
    import numpy as np

    from structgen.regex import parser

    folder = tmp_path / "forged"
    folder.mkdir()
    np.savez(folder / "tables.npz", d=np.array([[0, 0x110000]]), s=np.array([[9, 13]]), w=np.array([[48, 57]]))
    (folder / "names.json").write_text('["d", "s", "w"]')
    with pytest.raises(ValueError, match="no code-point ranges"):
        parser._load_tables(str(folder))
    np.savez(folder / "tables.npz", d=np.array([[48, 57]]))
    (folder / "names.json").write_text('["d", "s", "w"]')
    with pytest.raises(ValueError, match="names do not match"):
        parser._load_tables(str(folder))
