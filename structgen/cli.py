"""The ``structgen`` command: compile schemas or grammars, generate constrained JSON."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Sequence

import numpy as np

from .compare.command import add_arguments, run
from .errors import InputFileError, StructgenError
from .index.tokenizer import TokenizerInfo
from .inputs import check_grammar, check_schema, read_json, read_text
from .integrations.hf_generate import generate_json
from .models import load_default_tokenizer, load_model
from .runtime.compiler import GrammarCompiler
from .schema.validation import validator_for

__all__ = ["main"]


def _load_tokenizer(path: str | None):
    if path is None:
        return load_default_tokenizer()
    from transformers import AutoTokenizer

    p = Path(path)
    if p.is_file() and p.suffix == ".gguf":
        return AutoTokenizer.from_pretrained(str(p.parent), gguf_file=p.name)
    return AutoTokenizer.from_pretrained(path, local_files_only=True)


def cmd_compile(args: argparse.Namespace) -> int:
    # the input is read and checked before the tokenizer loads (seconds): a mistake is reported at once
    lark = args.lark or args.source.endswith(".lark")
    if lark:
        text = read_text(args.source)
        check_grammar(args.source, text)
    else:
        schema = read_json(args.source)
        check_schema(args.source, schema, strict=not args.lenient, whitespace=args.whitespace)
    if args.tokenizer is not None and not Path(args.tokenizer).exists() and Path(args.tokenizer).suffix == ".gguf":
        raise InputFileError(args.tokenizer, "no such file")
    t0 = time.perf_counter()
    tokenizer = _load_tokenizer(args.tokenizer)
    info = TokenizerInfo.from_huggingface(tokenizer)
    compiler = GrammarCompiler(info)
    _ = compiler.trie
    t_tok = time.perf_counter() - t0
    if lark:
        compiled = compiler.compile_grammar(text)
    else:
        compiled = compiler.compile_json_schema(schema, strict=not args.lenient, whitespace=args.whitespace)
    t1 = time.perf_counter()
    m = compiled.matcher()
    bm = np.zeros((1, (info.vocab_size + 31) // 32), np.int32)
    m.fill_next_token_bitmask(bm)
    t_first = time.perf_counter() - t1
    print(str(compiled.grammar), end="")
    s = compiled.stats
    stats = {
        "tokenizer": {"tokens": len(info), "vocab_size": info.vocab_size, "type": info.vocab_type,
                      "prepare_seconds": round(t_tok, 3)},
        "rules": s.rules,
        "automaton_rules": s.automaton_rules,
        "automaton_states": s.automaton_states,
        "compile_ms": round(s.total_seconds * 1000, 2),
        "first_mask_ms": round(t_first * 1000, 2),
        "warnings": list(compiled.warnings),
    }
    print("// " + json.dumps(stats), file=sys.stderr if args.quiet_stats else sys.stdout)
    return 0


def cmd_generate(args: argparse.Namespace) -> int:
    schema = read_json(args.schema)
    check_schema(args.schema, schema, strict=not args.lenient, whitespace=args.whitespace)
    model, tokenizer = load_model(args.model)
    result = generate_json(model, tokenizer, args.prompt, schema, max_new_tokens=args.max_new_tokens,
                           do_sample=args.sample, strict=not args.lenient, whitespace=args.whitespace,
                           budget=args.budget)
    print(result.text)
    status = ("TRUNCATED (raise --max-new-tokens or pass --budget)" if not result.complete
              else "complete, but ended by the token limit, not EOS" if result.truncated else "complete")
    valid = "n/a"
    if result.complete:
        errors = [e.message for e in validator_for(schema).iter_errors(json.loads(result.text))]
        valid = "valid" if not errors else f"INVALID: {errors[:3]}"
    print(f"// {result.new_tokens} tokens in {result.seconds:.2f}s, {status}, jsonschema: {valid}", file=sys.stderr)
    return 0 if result.complete and valid == "valid" else 1


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="structgen", description="Grammar-constrained structured decoding.")
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("compile", help="compile a JSON Schema or Lark grammar; print the grammar and stats")
    c.add_argument("source", help="SCHEMA.json or GRAMMAR.lark")
    c.add_argument("--tokenizer", help="HF tokenizer folder or .gguf file (default: SmolLM2-135M-Instruct)")
    c.add_argument("--lark", action="store_true", help="read SOURCE as Lark grammar text")
    c.add_argument("--lenient", action="store_true", help="warn about unsupported keywords instead of failing")
    c.add_argument("--whitespace", choices=["compact", "flexible"], default="compact")
    c.add_argument("--quiet-stats", action="store_true", help="print the stats line on stderr")
    c.set_defaults(func=cmd_compile)
    g = sub.add_parser("generate", help="generate JSON valid under a schema with a model")
    g.add_argument("--schema", required=True, help="SCHEMA.json")
    g.add_argument("--prompt", required=True, help="the user message")
    g.add_argument("--model", help="HF model folder or .gguf file (default: embedded SmolLM2-135M-Instruct)")
    g.add_argument("--max-new-tokens", type=int, default=128)
    g.add_argument("--budget", action="store_true",
                   help="budget-aware: mask tokens after which the value cannot end within --max-new-tokens")
    g.add_argument("--sample", action="store_true", help="sample instead of greedy decoding")
    g.add_argument("--lenient", action="store_true")
    g.add_argument("--whitespace", choices=["compact", "flexible"], default="compact")
    g.set_defaults(func=cmd_generate)
    k = sub.add_parser("compare", help="token economy: constrained calls vs free-form JSON vs YAML vs JSON mode",
                       description="Count the tokens of the same answers in each format with every shipped tokenizer "
                                   "(no model), then run every task with six arms on one model: the constrained call "
                                   "(structgen), free-form JSON and YAML (zero-shot and with two worked examples) and "
                                   "JSON mode (any object), retrying failed answers; report tokens, retries, validity, "
                                   "accuracy and speed per arm. Results are always written (--out).")
    add_arguments(k)
    k.set_defaults(func=run)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except StructgenError as exc:
        print(f"structgen: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
