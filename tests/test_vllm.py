"""structgen inside the real vLLM engine: SmolLM2 on the CPU through the offline LLM API.

Skipped unless vLLM is importable (CI without it skips). A batch of 8 requests, 4 constrained
by different JSON Schemas and 4 free, greedy: every constrained output must validate, and
every free output must be token for token what the same batch gives without structgen.
Each run is a subprocess (tests/vllm_batch.py): one vLLM engine per interpreter.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("vllm")
jsonschema = pytest.importorskip("jsonschema")

from .vllm_batch import requests

pytestmark = pytest.mark.model

ROOT = Path(__file__).resolve().parents[1]


def run_batch(folder: Path, out: Path, *, use_structgen: bool) -> list[dict]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    # nothing downloads; V1 model runner: vLLM's Model Runner V2 (its default wherever Triton
    # is importable) loads only processors of its own interface
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", VLLM_USE_V2_MODEL_RUNNER="0",
               VLLM_CPU_KVCACHE_SPACE=env.get("VLLM_CPU_KVCACHE_SPACE", "1"))
    cmd = [sys.executable, str(ROOT / "tests" / "vllm_batch.py"), str(folder), str(out)]
    proc = subprocess.run(cmd + (["--structgen"] if use_structgen else []), check=False, env=env, capture_output=True,
                          text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-6000:]
    return json.loads(out.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    from structgen.models import hf_folder

    folder = hf_folder()
    tmp = tmp_path_factory.mktemp("vllm")
    plain = run_batch(folder, tmp / "plain.json", use_structgen=False)
    constrained = run_batch(folder, tmp / "structgen.json", use_structgen=True)
    return plain, constrained


def test_constrained_outputs_validate(runs):
    _, got = runs
    for (msg, schema), row in zip(requests(), got["rows"]):
        if schema is None:
            continue
        assert row["finish_reason"] == "stop", (msg, row)
        jsonschema.validate(json.loads(row["text"]), schema)


def test_free_outputs_are_identical_to_a_run_without_structgen(runs):
    plain, got = runs
    free = [i for i, (_, schema) in enumerate(requests()) if schema is None]
    assert len(free) == 4
    for i in free:
        a, b = got["rows"][i], plain["rows"][i]
        assert a["token_ids"] == b["token_ids"], (i, a["text"], b["text"])


def test_an_unsatisfiable_schema_is_refused_at_admission(runs):
    _, got = runs
    assert got["rejected"] is not None and "no integer" in got["rejected"], got["rejected"]
