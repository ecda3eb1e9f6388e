"""A safe on-disk cache: folders of plain files (JSON, safetensors, numpy .npy) with a manifest.

Nothing is ever unpickled. An entry is a folder written under a temporary name (mode 0700,
files 0600) and renamed into place when complete; its manifest records the key it was built
for and every file's size and SHA-256. On load the key must match, every file must be
intact, and the folder and files must belong to the current user and be writable by nobody
else (another user could otherwise replace both files and manifest); anything off and the
entry is rebuilt. The cache lives in ``$STRUCTGEN_CACHE_DIR`` or ``~/.cache/structgen``
(``$XDG_CACHE_HOME/structgen`` when set); ``STRUCTGEN_NO_CACHE=1`` turns it off.

Used for converted GGUF models (:mod:`structgen.models`), prepared vocabularies
(:mod:`structgen.index.vocab_cache`) and the Unicode tables of regular expressions
(:mod:`structgen.regex.parser`).
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable

__all__ = ["MANIFEST", "cache_dir", "cache_enabled", "read_entry", "through_cache", "write_entry"]

log = logging.getLogger(__name__)

MANIFEST = "structgen-cache.json"


def cache_dir() -> Path:
    """The root folder of structgen's on-disk cache (it may not exist yet)."""
    env = os.environ.get("STRUCTGEN_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "structgen"


def cache_enabled(cache: bool | None) -> bool:
    if cache is not None:
        return cache
    return os.environ.get("STRUCTGEN_NO_CACHE", "").strip().lower() in ("", "0", "false", "no")


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _private(path: Path) -> bool:
    """Owned by the current user and writable by nobody else (POSIX; always True elsewhere)."""
    if not hasattr(os, "getuid"):
        return True
    st = os.lstat(path)
    return st.st_uid == os.getuid() and not st.st_mode & 0o022 and not os.path.islink(path)


def read_entry(entry: Path, key: dict[str, Any]) -> bool:
    """True when ``entry`` is a complete, intact cache entry for ``key``.

    The manifest must carry ``key``; every file it lists must exist with its recorded size
    and SHA-256, and no file may be listed that is not there; the folder and every file must
    be private to the current user (another user could otherwise swap both files and
    manifest).
    """
    try:
        if not _private(entry) or not _private(entry / MANIFEST):
            return False
        manifest = json.loads((entry / MANIFEST).read_text(encoding="utf-8"))
        if manifest.get("key") != key:
            return False
        files = manifest["files"]
        if not files or not isinstance(files, dict):
            return False
        for name, meta in files.items():
            path = entry / name
            if name != path.name or not path.is_file() or not _private(path):
                return False
            if path.stat().st_size != meta["size"] or file_sha256(path) != meta["sha256"]:
                return False
        return True
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False


def write_entry(entry: Path, key: dict[str, Any], save, *, after: Callable[[Path, dict], None] | None = None) -> None:
    """Write a cache entry atomically: ``save(tmpdir)``, a manifest, then rename into place
    (``after(entry, key)`` once it is in place: pruning older entries, say)."""
    tmp: str | None = None
    try:
        entry.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=f".{entry.name}.tmp-", dir=entry.parent)  # mode 0700
        save(tmp)
        files = {}
        for p in Path(tmp).iterdir():
            if p.is_file() and not p.is_symlink():
                os.chmod(p, 0o600)
                files[p.name] = {"size": p.stat().st_size, "sha256": file_sha256(p)}
        with open(os.path.join(tmp, MANIFEST), "w", encoding="utf-8") as fh:
            json.dump({"key": key, "files": files}, fh, indent=1, sort_keys=True)
        os.chmod(os.path.join(tmp, MANIFEST), 0o600)
        if entry.exists():  # stale or broken entry: it failed validation before we got here
            shutil.rmtree(entry, ignore_errors=True)
        try:
            os.rename(tmp, entry)
            tmp = None
        except OSError:  # another process won the race; its entry is as good as ours
            pass
        else:
            if after is not None:
                after(entry, key)
    except Exception as exc:  # noqa: BLE001 - disk full, read-only home...: caching is best effort
        log.warning("structgen: could not write the cache entry %s: %s", entry, exc)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def through_cache(entry: Path | None, key: dict[str, Any], load, build, save, *,
                  after: Callable[[Path, dict], None] | None = None) -> Any:
    """``load(folder)`` from a valid cache entry, else ``build()`` and ``save(obj, folder)`` it.

    ``entry`` None: no caching. An entry that fails :func:`read_entry` (stale key,
    corrupt or missing file, foreign owner) or whose ``load`` raises is rebuilt.
    """
    if entry is not None and read_entry(entry, key):
        try:
            return load(str(entry))
        except Exception as exc:  # noqa: BLE001 - any failure: rebuild from the source
            drop_entry(entry, exc)
    obj = build()
    if entry is not None:
        write_entry(entry, key, lambda d: save(obj, d), after=after)
    return obj


def drop_entry(entry: Path, exc: BaseException) -> None:
    log.warning("structgen: ignoring unreadable cache entry %s (%s); rebuilding it", entry, exc)
    shutil.rmtree(entry, ignore_errors=True)


