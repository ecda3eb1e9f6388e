"""Generate JSON under three schemas with SmolLM2-135M-Instruct (offline) and validate it.

    python examples/hf_generate_json.py [--model PATH]

Uses ``structgen.integrations.hf.JSONSchemaLogitsProcessor`` with ``model.generate()``: every token that
cannot continue a valid output is masked, so the output parses and validates.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import jsonschema

from structgen.integrations.hf_generate import generate_json
from structgen.models import load_model, model_banner

HERE = Path(__file__).parent
TASKS = [
    ("person.json", "Describe a fictional software engineer as a JSON object."),
    ("weather_call.json", "Call the weather tool for Paris in celsius for the next 3 days."),
    ("todo_list.json", "Make a short todo list for moving to a new flat."),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="HF model folder or .gguf file (default: embedded SmolLM2)")
    ap.add_argument("--max-new-tokens", type=int, default=160)
    args = ap.parse_args()
    print(model_banner(args.model), flush=True)
    model, tokenizer = load_model(args.model)
    failures = 0
    for file, prompt in TASKS:
        schema = json.loads((HERE / "schemas" / file).read_text())
        result = generate_json(model, tokenizer, prompt, schema, max_new_tokens=args.max_new_tokens)
        print(f"# {file}: {prompt}")
        print(result.text)
        if not result.complete:
            print(f"  -> truncated after {result.new_tokens} tokens")
            failures += 1
            continue
        errors = [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(json.loads(result.text))]
        print(f"  -> {'valid' if not errors else 'INVALID: ' + '; '.join(errors)}"
              f" ({result.new_tokens} tokens, {result.seconds:.2f}s)")
        failures += bool(errors)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
