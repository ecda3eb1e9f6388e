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


# --------------------------------------------------------------------------- input errors: one located line, exit 2


import pytest  # noqa: E402


@pytest.fixture()
def no_model(monkeypatch):
    """Input errors must be reported before any tokenizer or model loads (seconds of work)."""
    import structgen.cli
    import structgen.compare.command
    import structgen.models

    def refuse(*a, **k):
        raise AssertionError("a tokenizer or model was loaded before the input was checked")

    for name in ("load_default_tokenizer", "load_tokenizer", "load_model", "load_default"):
        monkeypatch.setattr(structgen.models, name, refuse)
    monkeypatch.setattr(structgen.cli, "_load_tokenizer", refuse)
    monkeypatch.setattr(structgen.compare.command, "_generate", refuse)


def _files(tmp_path):
    (tmp_path / "broken.json").write_text('{"type": "object",\n  "properties": {"a": {"type": "string"}\n')
    (tmp_path / "phone.json").write_text(json.dumps(
        {"type": "object", "properties": {"when": {"type": "string", "format": "phone"}}}))
    (tmp_path / "bad.lark").write_text('start: "a" |\n  b ]\n')
    (tmp_path / "undefined.lark").write_text("start: missing_rule\n")
    (tmp_path / "latin1.json").write_bytes(b'{"a": "\xe9"}')
    (tmp_path / "tasks.jsonl").write_text('{"schema": {"type": "object"}}\n{"schema": \n')
    return tmp_path


@pytest.mark.parametrize("argv, expected", [
    (["compile", "{d}/missing.json"], "{d}/missing.json: no such file"),
    (["compile", "{d}"], "{d}: is a folder, not a file"),
    (["compile", "{d}/broken.json"], "{d}/broken.json:3:1: not JSON: Expecting ',' delimiter"),
    (["compile", "{d}/latin1.json"], "{d}/latin1.json: not UTF-8 text"),
    (["compile", "{d}/phone.json"], "{d}/phone.json: keyword 'format' is not supported"),
    (["compile", "{d}/bad.lark"], "{d}/bad.lark:2:5: invalid Lark grammar"),
    (["compile", "{d}/undefined.lark"], "{d}/undefined.lark: "),
    (["compile", "{d}/missing.lark"], "{d}/missing.lark: no such file"),
    (["generate", "--schema", "{d}/missing.json", "--prompt", "x"], "{d}/missing.json: no such file"),
    (["generate", "--schema", "{d}/broken.json", "--prompt", "x"], "{d}/broken.json:3:1: not JSON"),
    (["generate", "--schema", "{d}/phone.json", "--prompt", "x"], "at /properties/when/format"),
    (["compare", "--schema", "{d}/missing.json"], "{d}/missing.json: no such file"),
    (["compare", "--schema", "{d}/broken.json"], "{d}/broken.json:3:1: not JSON"),
    (["compare", "--schema", "{d}/phone.json"], "at /properties/when/format"),
    (["compare", "--tasks", "{d}/missing.jsonl"], "{d}/missing.jsonl does not exist"),
    (["compare", "--tasks", "{d}/tasks.jsonl"], "{d}/tasks.jsonl:2:"),
])
def test_input_errors_are_one_located_line_before_any_model_load(tmp_path, capsys, no_model, argv, expected):
    d = str(_files(tmp_path))
    assert main([a.format(d=d) for a in argv]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.startswith("structgen: error: ") and len(err.splitlines()) == 1, err
    assert expected.format(d=d) in err
    assert "Traceback" not in captured.err + captured.out


def test_phone_schema_error_names_the_pointer(tmp_path, capsys, no_model):
    d = _files(tmp_path)
    assert main(["compile", str(d / "phone.json")]) == 2
    assert "/properties/when/format" in capsys.readouterr().err


def test_lenient_compile_checks_before_loading(tmp_path, capsys, no_model):
    # --lenient accepts the unsupported format: the input is fine, so the tokenizer is loaded (refused here)
    d = _files(tmp_path)
    with pytest.raises(AssertionError, match="was loaded"):
        main(["compile", str(d / "phone.json"), "--lenient"])


def test_model_banner_names_the_model_and_sets_expectations():
    from structgen.models import model_banner

    default = model_banner(None)
    assert default.startswith("Model: SmolLM2-135M-Instruct") and "often wrong values" in default
    assert "guarantees the structure" in default
    assert model_banner("/models/qwen2-7b") == "Model: /models/qwen2-7b"


@pytest.mark.parametrize("model, expected", [
    ("{d}/nothing.gguf", "does not exist"),
    ("{d}", "not a model folder"),
    ("{d}/broken.json", "not a .gguf model file"),
    ("no-such-org/no-such-model-xyz", "cannot load 'no-such-org/no-such-model-xyz' offline"),
])
def test_compare_refuses_a_model_that_cannot_load_before_any_work(tmp_path, capsys, no_model, model, expected):
    d = str(_files(tmp_path))
    assert main(["compare", "--tasks", "default:1", "--model", model.format(d=d), "--out", d + "/out"]) == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err
