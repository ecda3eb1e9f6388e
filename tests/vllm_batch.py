"""One offline vLLM run of tests/test_vllm.py's batch, in its own process.

``python tests/vllm_batch.py MODEL_FOLDER OUT.json [--structgen]``: 8 requests (4 carrying a
JSON Schema in ``extra_args["structgen"]``, 4 free), greedy, on the CPU; writes each output's
text, token ids and finish reason. Each run gets a fresh process because a vLLM engine
(with its engine-core subprocess) is not meant to be created twice in one interpreter.
"""
from __future__ import annotations

import json
import sys

try:
    from .model_schemas import SCHEMAS as _ALL
except ImportError:  # run as a script: tests/ is on sys.path, not a package
    from model_schemas import SCHEMAS as _ALL

SCHEMAS = _ALL[:4]  # four different schemas; the fifth is left to the HF test
FREE = ["What is the capital of France?", "Write a haiku about the sea.",
        "Name two prime numbers.", "Say hello in Spanish."]


def requests() -> list[tuple[str, dict | None]]:
    """(user message, schema or None), constrained and free interleaved."""
    out: list[tuple[str, dict | None]] = []
    for (msg, schema), free in zip(SCHEMAS, FREE):
        out += [(msg, schema), (free, None)]
    return out


def main(folder: str, out_path: str, use_structgen: bool) -> None:
    from transformers import AutoTokenizer
    from vllm import LLM, SamplingParams

    tok = AutoTokenizer.from_pretrained(folder)
    kwargs = {"logits_processors": ["structgen.integrations.vllm:StructgenLogitsProcessor"]} if use_structgen else {}
    llm = LLM(model=folder, dtype="float32", max_model_len=1024, max_num_seqs=8, seed=0,
              enforce_eager=True, **kwargs)
    prompts, params = [], []
    for msg, schema in requests():
        prompts.append(tok.apply_chat_template([{"role": "user", "content": msg}], tokenize=False,
                                               add_generation_prompt=True))
        extra = {"structgen": {"json_schema": schema}} if schema is not None else None
        params.append(SamplingParams(temperature=0.0, max_tokens=96 if schema else 40, extra_args=extra))
    results = llm.generate(prompts, params)
    rows = [{"text": r.outputs[0].text, "token_ids": list(r.outputs[0].token_ids),
             "finish_reason": r.outputs[0].finish_reason} for r in results]
    rejected = None
    if use_structgen:  # a bad schema is refused when the request arrives, not inside the engine
        bad = SamplingParams(max_tokens=4, extra_args={"structgen": {"json_schema": {"type": "integer", "minimum": 3,
                                                                                      "maximum": 1}}})
        try:
            llm.generate(prompts[:1], bad)
        except Exception as exc:  # noqa: BLE001 - vLLM wraps it as VLLMValidationError (HTTP 400 on the server)
            rejected = f"{type(exc).__name__}: {exc}"
    with open(out_path, "w", encoding="utf-8") as fh:
        json.dump({"rows": rows, "rejected": rejected}, fh, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], "--structgen" in sys.argv[3:])
