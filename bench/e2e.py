"""End to end: tokens/s of ``model.generate()`` constrained vs unconstrained.

    python bench/e2e.py                                  # SmolLM2 (embedded, CPU), batch 1 and 8
    python bench/e2e.py --random-llama 1b --tokenizer ../shared/data/tokenizers/llama3 \
        --device cuda --batches 1,64                      # the GPU figure of the speed issue

Arms, same model, same prompt, greedy decoding:
- ``unconstrained``: plain ``generate``;
- ``structgen``: ``JSONSchemaLogitsProcessor`` for the schema;
- ``xgrammar``: XGrammar's Hugging Face processor for the same schema, when installed.

The figure compared is the time per decoding step (wall time of ``generate`` ÷ steps
taken), since arms stop at different lengths; tokens/s = batch × steps ÷ wall. The first
constrained run of a schema fills the mask tables (``cold``); the reported figure is the
median of the runs after it (``warm``), the cold run is reported beside it. Grammar compile
time is not part of either (it is measured by bench/compile_mask.py). Writes
bench/results/e2e_<device>.json and prints a table.
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SCHEMA = {  # a function call with an enum, a number range, a nested object and an array
    "type": "object",
    "properties": {
        "name": {"const": "book_flight"},
        "arguments": {
            "type": "object",
            "properties": {
                "origin": {"type": "string", "pattern": "^[A-Z]{3}$"},
                "destination": {"type": "string", "pattern": "^[A-Z]{3}$"},
                "date": {"type": "string", "format": "date"},
                "passengers": {"type": "integer", "minimum": 1, "maximum": 9},
                "cabin": {"enum": ["economy", "premium", "business", "first"]},
                "notes": {"type": "array", "items": {"type": "string", "maxLength": 40}, "maxItems": 4},
            },
            "required": ["origin", "destination", "date", "passengers", "cabin", "notes"],
            "additionalProperties": False,
        },
    },
    "required": ["name", "arguments"],
    "additionalProperties": False,
}
PROMPT = ("Book a flight from Paris (CDG) to New York (JFK) on 2026-12-24 for two passengers in business class. "
          "Answer with a JSON function call.")


def random_llama(size: str, vocab_size: int, device: str):
    """A randomly initialised Llama of a real shape (weights cannot travel to the GPU machine)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    shapes = {  # Llama-3.2-1B's shape and a small one for trying the script on a CPU
        "1b": {"hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16, "num_attention_heads": 32,
                   "num_key_value_heads": 8, "tie_word_embeddings": True},
        "tiny": {"hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 2, "num_attention_heads": 4,
                     "num_key_value_heads": 2, "tie_word_embeddings": True},
    }
    config = LlamaConfig(vocab_size=vocab_size, max_position_embeddings=4096, rope_theta=500000.0, **shapes[size])
    torch.manual_seed(0)
    with torch.device(device):
        model = LlamaForCausalLM(config)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    return model.to(dtype).eval()


def load(args):
    import torch

    if args.random_llama:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(args.tokenizer, local_files_only=True)
        model = random_llama(args.random_llama, len(tok), args.device)
        ids = tok(PROMPT, return_tensors="pt")["input_ids"]
        name = f"random-llama-{args.random_llama} + {Path(args.tokenizer).name} tokenizer"
    else:
        from structgen.integrations.hf_generate import chat_inputs
        from structgen.models import load_default

        model, tok = load_default()
        model = model.to(args.device).eval()
        ids = chat_inputs(tok, PROMPT)["input_ids"]
        name = "SmolLM2-135M-Instruct (embedded GGUF)"
    torch.set_grad_enabled(False)
    return model, tok, ids, name


def make_processors(tok, model):
    """Per arm: a factory of fresh logits-processor lists (one per generate call)."""
    from structgen.integrations.hf import JSONSchemaLogitsProcessor

    vocab = model.config.vocab_size
    arms = {"unconstrained": list,
            "structgen": lambda: [JSONSchemaLogitsProcessor(SCHEMA, tok, vocab_size=vocab)]}
    try:
        import xgrammar as xgr
        from xgrammar.contrib.hf import LogitsProcessor as XgrProcessor

        compiled = xgr.GrammarCompiler(xgr.TokenizerInfo.from_huggingface(tok, vocab_size=vocab)).compile_json_schema(
            json.dumps(SCHEMA))
        arms["xgrammar"] = lambda: [XgrProcessor(compiled)]
    except ImportError:
        pass
    return arms


class Timed:
    """Wraps a logits processor and adds up the CPU time of its calls (masks filled, kernel launched)."""

    def __init__(self, proc) -> None:
        self.proc, self.seconds = proc, 0.0

    def __call__(self, input_ids, scores):
        t0 = time.perf_counter()
        out = self.proc(input_ids, scores)
        self.seconds += time.perf_counter() - t0
        return out


def timed_generate(model, tok, ids, procs, max_new_tokens: int, device: str) -> tuple[float, int]:
    import torch

    eos = tok.eos_token_id
    t0 = time.perf_counter()
    out = model.generate(ids, do_sample=False, max_new_tokens=max_new_tokens, logits_processor=procs,
                         pad_token_id=eos if eos is not None else 0, attention_mask=torch.ones_like(ids))
    if device == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t0, out.shape[1] - ids.shape[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--random-llama", choices=["1b", "tiny"], help="random weights of this shape (needs --tokenizer)")
    ap.add_argument("--tokenizer", help="tokenizer folder for --random-llama")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--out", help="JSON path (default bench/results/e2e_<device>.json)")
    args = ap.parse_args()

    model, tok, ids, model_name = load(args)
    ids = ids.to(args.device)
    # compile and tokenizer preparation happen here, outside the timed runs
    arms = make_processors(tok, model)
    for procs in arms.values():
        procs()
    rows = []
    for batch in map(int, args.batches.split(",")):
        batch_ids = ids.repeat(batch, 1)
        timed_generate(model, tok, batch_ids, [], 4, args.device)  # warm the model itself
        cold = {arm: timed_generate(model, tok, batch_ids, factory(), args.max_new_tokens, args.device)
                for arm, factory in arms.items()}
        runs: dict[str, list] = {arm: [] for arm in arms}
        for _ in range(args.repeats):  # arms interleaved, so drift of clocks or load hits all alike
            for arm, factory in arms.items():
                procs = [Timed(p) for p in factory()]
                wall, steps = timed_generate(model, tok, batch_ids, procs, args.max_new_tokens, args.device)
                runs[arm].append((wall, steps, sum(p.seconds for p in procs)))
        for arm in arms:
            step_ms = statistics.median(w / max(s, 1) for w, s, _ in runs[arm]) * 1e3
            rows.append({"batch": batch, "arm": arm, "steps": statistics.median(s for _, s, _ in runs[arm]),
                         "step_ms": step_ms, "tokens_per_s": batch * 1e3 / step_ms,
                         "processor_ms_per_step": statistics.median(p / max(s, 1) for _, s, p in runs[arm]) * 1e3,
                         "cold_step_ms": cold[arm][0] / max(cold[arm][1], 1) * 1e3,
                         "runs": [{"wall_s": w, "steps": s, "processor_s": p} for w, s, p in runs[arm]]})
            print(json.dumps({k: v for k, v in rows[-1].items() if k != "runs"}), flush=True)
    base = {r["batch"]: r for r in rows if r["arm"] == "unconstrained"}
    for r in rows:
        b = base[r["batch"]]
        r["slowdown_vs_unconstrained"] = r["step_ms"] / b["step_ms"] - 1
        # paired: repeat i of this arm ran right after repeat i of the unconstrained arm, so
        # the ratio of the two cancels most of a shared machine's drift; the processor's own
        # share of the step is the overhead that does not depend on that noise at all
        r["slowdown_paired_median"] = statistics.median(
            (w / max(s, 1)) / (bw / max(bs, 1)) - 1 for (w, s, _), (bw, bs, _) in
            zip(((x["wall_s"], x["steps"], 0) for x in r["runs"]), ((x["wall_s"], x["steps"], 0) for x in b["runs"])))
        r["processor_share_of_step"] = r["processor_ms_per_step"] / r["step_ms"]
    table = ["| batch | arm | steps | ms/step (warm) | processor ms/step | ms/step (cold) | tokens/s | vs unconstrained "
             "(medians) | vs unconstrained (paired) | processor share |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        table.append(f"| {r['batch']} | {r['arm']} | {r['steps']:.0f} | {r['step_ms']:.2f} | {r['processor_ms_per_step']:.2f} | "
                     f"{r['cold_step_ms']:.2f} | "
                     f"{r['tokens_per_s']:.1f} | {r['slowdown_vs_unconstrained']:+.1%} | "
                     f"{r['slowdown_paired_median']:+.1%} | {r['processor_share_of_step']:.2%} |")
    print("\n".join(table))
    import torch

    machine = {"python": platform.python_version(), "torch": torch.__version__, "processor": platform.processor(),
               "threads": torch.get_num_threads()}
    if args.device == "cuda":
        machine["gpu"] = torch.cuda.get_device_name()
    out = Path(args.out or ROOT / "bench" / "results" / f"e2e_{args.device}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"model": model_name, "device": args.device, "max_new_tokens": args.max_new_tokens,
                               "schema": SCHEMA, "prompt": PROMPT, "machine": machine, "rows": rows,
                               "table_md": "\n".join(table)}, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
