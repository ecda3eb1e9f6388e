"""Regenerate maskbench_sample.json: a seeded sample of MaskBench schemas (JSONSchemaBench, MIT).

Usage: python tests/data/build_maskbench_sample.py [--data DIR] [--per-subset N]
(DIR defaults to ../shared/data, or $STRUCTGEN_SHARED_DATA). Schemas larger than 6,000
characters of JSON are skipped so the file stays small.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import random
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEED = 20261201


def main() -> None:
    ap = argparse.ArgumentParser()
    default = os.environ.get("STRUCTGEN_SHARED_DATA", HERE.parents[2] / "shared" / "data")
    ap.add_argument("--data", type=Path, default=Path(default))
    ap.add_argument("--per-subset", type=int, default=2)
    args = ap.parse_args()
    out = []
    for path in sorted((args.data / "maskbench").glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            rows = [json.loads(line) for line in f]
        rows = [r for r in rows if isinstance(r.get("schema"), dict) and len(json.dumps(r["schema"])) <= 6000]
        rng = random.Random(f"{SEED}/{path.name}")
        for r in sorted(rng.sample(rows, min(args.per_subset, len(rows))), key=lambda r: r["id"]):
            out.append({"id": r["id"], "source": f"maskbench/{path.name}", "schema": r["schema"]})
    (HERE / "maskbench_sample.json").write_text(json.dumps(out, indent=0, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {len(out)} schemas")


if __name__ == "__main__":
    main()
