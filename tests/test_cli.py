"""The `structgen` command line (compile; generate is covered by the model tests)."""
from __future__ import annotations

import json

from structgen.cli import main


def test_compile_schema_prints_lark_and_stats(tmp_path, capsys, smollm2_tokenizer):
    schema = tmp_path / "s.json"
    schema.write_text(json.dumps({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}))
    assert main(["compile", str(schema)]) == 0
    out = capsys.readouterr().out
    assert out.startswith('start: "{\\"ok\\":"')
    stats = json.loads(out.strip().splitlines()[-1][3:])
    assert stats["tokenizer"]["tokens"] == 49152
    assert stats["automaton_states"] > 0 and stats["compile_ms"] > 0


def test_compile_lark_grammar(capsys, smollm2_tokenizer):
    assert main(["compile", "grammars/json.lark", "--lark", "--quiet-stats"]) == 0
    assert "value: object | array" in capsys.readouterr().out


def test_bad_schema_exits_2_with_pointer(tmp_path, capsys, smollm2_tokenizer):
    schema = tmp_path / "bad.json"
    schema.write_text(json.dumps({"type": "object", "properties": {"when": {"type": "string", "format": "phone"}}}))
    assert main(["compile", str(schema)]) == 2
    err = capsys.readouterr().err
    assert "format" in err and "/properties/when/format" in err
