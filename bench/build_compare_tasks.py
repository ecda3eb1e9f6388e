"""Rebuild the default task set of ``structgen compare`` from ``../shared/data``.

    python bench/build_compare_tasks.py [--data ../shared/data]

Writes ``structgen/data/compare/default_tasks.jsonl`` (6 BFCL v4 function-calling tasks and
6 JSONSchemaBench schema prompts) and ``schema_prompt.json`` (JSONSchemaBench's system
prompt and the one-shot example every schema task is prompted with). The package ships
these files, so the default comparison runs on a fresh clone without ``../shared``.
"""
from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "structgen" / "data" / "compare"

# Short prompts and small tool sets keep the default run under ten minutes on 2 CPU cores.
BFCL_IDS = ["simple_python_20", "simple_python_242", "multiple_52", "live_simple_47-20-0", "parallel_76",
            "simple_javascript_0"]
# (subset, example index) of JSONSchemaBench's few-shot examples; Glaiveai2K #0 is the one-shot.
SCHEMAS = [("Snowplow", 1), ("Github_easy", 0), ("Glaiveai2K", 1), ("Kubernetes", 0), ("WashingtonPost", 0),
           ("JsonSchemaStore", 1)]
ONE_SHOT = ("Glaiveai2K", 0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    args = ap.parse_args()
    with gzip.open(args.data / "bfcl" / "tasks.jsonl.gz", "rt", encoding="utf-8") as f:
        bfcl = {t["id"]: t for t in map(json.loads, f)}
    prompts = json.loads((args.data / "prompts" / "jsonschemabench_fewshot_prompts.json").read_text(encoding="utf-8"))
    examples = {(g["subsets"][0], i): e for g in prompts["few_shot_examples"] for i, e in enumerate(g["examples"])}
    lines = [dict(bfcl[i], source="BFCL v4 (ShishirPatil/gorilla @ 6ea57973)") for i in BFCL_IDS]
    for subset, i in SCHEMAS:
        e = examples[(subset, i)]
        lines.append({"id": f"jsonschemabench_{subset}_{i}", "category": f"schema_{subset}",
                      "schema": json.loads(e["user"]), "reference": json.loads(e["assistant"]),
                      "source": "JSONSchemaBench few-shot examples (epfl-dlab/jsonschemabench @ 8003e840)"})
    one = examples[ONE_SHOT]
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "default_tasks.jsonl").write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines),
                                             encoding="utf-8")
    (OUT / "schema_prompt.json").write_text(json.dumps({
        "source": prompts["source"], "system_prompt": prompts["system_prompt"],
        "example_schema": json.loads(one["user"]), "example_answer": json.loads(one["assistant"]),
    }, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {len(lines)} tasks to {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
