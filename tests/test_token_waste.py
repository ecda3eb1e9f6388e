"""Token-waste comparison (structgen.compare): accounting with a scripted fake model, then a tiny real run."""
from __future__ import annotations

import gzip
import json
import re

import pytest

from structgen.compare import (
    ARMS,
    ArmSettings,
    Generation,
    Judge,
    Task,
    TaskError,
    load_tasks,
    parse_answer,
    run_arm,
    run_compare,
    strip_fence,
    summarise,
    token_budget,
)
from structgen.compare.arms import prompt_messages
from structgen.compare.tasks import task_from_record
from structgen.errors import StructgenError

ARMS4 = ["constrained", "json", "yaml", "json_mode"]

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
          "required": ["city", "days"], "additionalProperties": False}
SCHEMA_TASK = Task("s1", "schema", "schema_test", schema=SCHEMA, reference={"city": "Oslo", "days": 3})
BFCL_TASK = task_from_record({
    "id": "simple_1", "category": "simple",
    "messages": [[{"role": "user", "content": "Weather in Oslo for 3 days?"}]],
    "functions": [{"name": "weather.get", "description": "Forecast",
                   "parameters": {"type": "dict", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                                  "required": ["city"]}}],
    "ground_truth": [{"weather.get": {"city": ["Oslo", "oslo"], "days": [3, ""]}}],
}, "x")


def count(text: str) -> int:
    """The fake tokenizer: words and punctuation marks."""
    return len(re.findall(r"\w+|[^\w\s]", text))


class FakeBackend:
    """Answers from a script, one per call; records the conversations it was sent."""

    def __init__(self, *answers: str | tuple[str, bool]) -> None:
        self.script = [a if isinstance(a, tuple) else (a, True) for a in answers]
        self.calls: list[tuple[list[dict], object]] = []

    def generate(self, task, messages, *, max_new_tokens, constraint):
        text, finished = self.script[len(self.calls)]
        self.calls.append((messages, constraint))
        return Generation(text, count(text) + (1 if finished else 0), finished, 0.5, ttft=0.1, prompt_tokens=7)

    def count_tokens(self, text: str) -> int:
        return count(text)


# --------------------------------------------------------------------------- parsing


@pytest.mark.parametrize("text, inner, fence", [
    ('{"a": 1}', '{"a": 1}', ""),
    ('```json\n{"a": 1}\n```', '{"a": 1}', "```json\n\n```"),
    ('  ```\n{"a": 1}```  ', '{"a": 1}', "```\n```"),
    ('```yaml\na: 1\nb: 2', "a: 1\nb: 2", "```yaml\n"),  # cut off before the closing fence
    ('text ```json\n{}\n```', 'text ```json\n{}\n```', ""),  # a fence inside prose is not stripped
])
def test_strip_fence(text, inner, fence):
    assert strip_fence(text) == (inner, fence)


@pytest.mark.parametrize("fmt, text, value, kind", [
    ("json", '{"a": 1}', {"a": 1}, None),
    ("json", '```json\n[1, 2]\n```', [1, 2], None),
    ("json", "", None, "empty"),
    ("json", "```json\n\n```", None, "empty"),
    ("json", 'Sure! Here it is: {"a": 1}', None, "extra_text"),
    ("json", '{"a": 1}\nThis calls the tool.', None, "extra_text"),
    ("json", "{a: 1}", None, "syntax"),
    ("json", "The answer is Charles Darwin.", None, "syntax"),
    ("yaml", "a: 1\nb: [x, y]", {"a": 1, "b": ["x", "y"]}, None),
    ("yaml", "```yaml\n- name: f\n  arguments: {}\n```", [{"name": "f", "arguments": {}}], None),
    ("yaml", "The answer is Charles Darwin.", None, "syntax"),  # a bare scalar
    ("yaml", "a: [1, 2", None, "syntax"),
    ("yaml", "   ", None, "empty"),
])
def test_parse_answer_classifies(fmt, text, value, kind):
    got, got_kind, error, _ = parse_answer(text, fmt)
    assert (got, got_kind) == (value, kind)
    assert bool(error) == (kind is not None)


def test_judge_schema_failures_and_truncation():
    judge = Judge(SCHEMA_TASK)
    ok = judge.check('{"city": "Oslo", "days": 3}', "json")
    assert ok.ok and ok.answer == {"city": "Oslo", "days": 3} and ok.error_class is None
    bad = judge.check('{"city": "Oslo", "days": "three"}', "json")
    assert not bad.ok and bad.error_class == "schema" and "/days" in bad.error
    cut = judge.check('{"city": "Os', "json", finished=False)
    assert cut.error_class == "truncated" and "token limit" in cut.error
    # a complete, valid value is valid even when the budget ran out exactly there (closed outputs)
    assert judge.check('{"city": "Oslo", "days": 3}', "json", finished=False).ok
    assert judge.check("city: Oslo\ndays: 3", "yaml").answer == {"city": "Oslo", "days": 3}
    # YAML's implicit types are a real cost: an unquoted date is not a string
    dated = Task("d", "schema", "t", schema={"type": "object", "properties": {"d": {"type": "string"}}})
    assert Judge(dated).check("d: 2024-01-02", "yaml").error_class == "schema"


def test_judge_bfcl_calls_and_accuracy():
    judge = Judge(BFCL_TASK)
    one = judge.check('{"name": "weather.get", "arguments": {"city": "Oslo", "days": 3}}', "json")
    assert one.ok and one.answer == [{"name": "weather.get", "arguments": {"city": "Oslo", "days": 3}}]
    assert judge.accuracy(one.answer) is True
    assert judge.canonical(one.answer) == one.answer[0]
    listed = judge.check('[{"name": "weather.get", "arguments": {"city": "Paris"}}]', "json")
    assert listed.ok and judge.accuracy(listed.answer) is False
    assert judge.check('{"name": "weather.get", "arguments": {"days": 3}}', "json").error_class == "schema"
    assert judge.check('{"name": "nope", "arguments": {}}', "json").error_class == "schema"
    assert judge.check("[]", "json").error_class == "schema"
    assert Judge(SCHEMA_TASK).accuracy({"city": "x", "days": 1}) is None  # no ground truth


# --------------------------------------------------------------------------- accounting


def test_retries_add_up_and_errors_are_fed_back():
    backend = FakeBackend("I think the answer is Oslo.", '{"city": "Oslo"}', '{"city": "Oslo", "days": 3}')
    row = run_arm(backend, SCHEMA_TASK, Judge(SCHEMA_TASK), ArmSettings(64, 3), name="json", fmt="json", constraint=None)
    log = row["attempt_log"]
    assert [a["error_class"] for a in log] == ["syntax", "schema", None]
    assert row["attempts"] == 3 and row["retries"] == 2
    assert row["tokens"] == sum(a["tokens"] for a in log) == sum(count(t) + 1 for t, _ in backend.script)
    assert (row["valid_first"], row["valid"]) == (False, True)
    # each re-ask carries the previous answer and the error
    second = backend.calls[1][0]
    assert second[-2] == {"role": "assistant", "content": "I think the answer is Oslo."}
    assert "not valid" in second[-1]["content"] and "invalid JSON" in second[-1]["content"]
    assert "'days' is a required property" in backend.calls[2][0][-1]["content"]
    assert len(backend.calls[2][0]) == len(backend.calls[0][0]) + 4


def test_retries_stop_at_max_and_failed_answers_have_no_useful_tokens():
    backend = FakeBackend(*["nope"] * 10)
    row = run_arm(backend, SCHEMA_TASK, Judge(SCHEMA_TASK), ArmSettings(64, 3), name="yaml", fmt="yaml", constraint=None)
    assert row["attempts"] == 4 and row["retries"] == 3 and len(backend.calls) == 4
    assert not row["valid"] and row["useful_tokens"] == 0 and row["useful_ratio"] == 0.0 and row["answer"] is None
    zero = run_arm(FakeBackend("nope", "nope"), SCHEMA_TASK, Judge(SCHEMA_TASK), ArmSettings(64, 0), name="json",
                   fmt="json", constraint=None)
    assert zero["attempts"] == 1


@pytest.mark.parametrize("script", [["a", "b", "c", "d"], ["a", '{"city": "Oslo", "days": 3}'],
                                    ["a", "b", '{"city": "Oslo", "days": 3}']])
def test_cut_retries_equals_a_run_with_fewer_retries(script):
    from structgen.compare import cut_retries

    def run(n):
        return run_arm(FakeBackend(*script), SCHEMA_TASK, Judge(SCHEMA_TASK), ArmSettings(64, n), name="json",
                       fmt="json", constraint=None)

    def timeless(row):
        return {k: v for k, v in row.items() if k not in ("wall_seconds", "attempt_log")}

    assert timeless(cut_retries(run(3), 1)) == timeless(run(1))
    assert timeless(cut_retries(run(3), 3)) == timeless(run(3))


def test_fence_is_waste_and_useful_ratio():
    fenced = '```json\n{"city": "Oslo", "days": 3}\n```'
    row = run_arm(FakeBackend(fenced), SCHEMA_TASK, Judge(SCHEMA_TASK), ArmSettings(64, 3), name="json", fmt="json",
                  constraint=None)
    assert row["valid"] and row["fenced"] == 1
    assert row["fence_tokens"] == count("```json\n\n```") > 0
    useful = count('{"city":"Oslo","days":3}')
    assert row["useful_tokens"] == useful
    assert row["useful_ratio"] == pytest.approx(useful / (count(fenced) + 1))
    assert row["useful_ratio"] < 1


def test_truncated_attempt_then_retry():
    backend = FakeBackend(('{"city": "Oslo", "da', False), '{"city": "Oslo", "days": 3}')
    row = run_arm(backend, SCHEMA_TASK, Judge(SCHEMA_TASK), ArmSettings(8, 3), name="json_mode", fmt="json",
                  constraint=None)
    assert [a["error_class"] for a in row["attempt_log"]] == ["truncated", None]
    assert row["attempt_log"][0]["tokens"] == count('{"city": "Oslo", "da')  # no stop token counted


def test_arms_prompt_and_constraint():
    call, yaml_call = '{"name": "weather.get", "arguments": {"city": "Oslo"}}', "name: weather.get\narguments:\n  city: Oslo"
    backend = FakeBackend(call, call, call, yaml_call, yaml_call, call)
    rows = run_compare(backend, [BFCL_TASK], max_retries=0)
    assert [r["arm"] for r in rows] == list(ARMS) == ["constrained", "json", "json_fewshot", "yaml", "yaml_fewshot",
                                                      "json_mode"]
    kinds = [None if c is None else c.kind for _, c in backend.calls]
    assert kinds == ["task", None, None, None, None, "json_object"]
    json_prompt, yaml_prompt = backend.calls[1][0], backend.calls[3][0]
    assert backend.calls[0][0] == json_prompt == backend.calls[5][0]  # constrained, free JSON, JSON mode: same prompt
    assert "ONLY with JSON" in json_prompt[0]["content"] and "ONLY with YAML" in yaml_prompt[0]["content"]
    # the few-shot arms: the same system prompt and question, two worked examples in between
    for zero, few in ((json_prompt, backend.calls[2][0]), (yaml_prompt, backend.calls[4][0])):
        assert few[0]["content"].startswith(zero[0]["content"]) and few[-1] == zero[-1]
        assert [m["role"] for m in few[1:-1]] == ["user", "assistant"] * 2
    assert all(r["valid"] and r["accurate"] for r in rows)


def test_schema_prompt_has_one_example_in_the_arms_format():
    msgs = prompt_messages(SCHEMA_TASK, "yaml")
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user"]
    assert "YAML" in msgs[0]["content"] and not msgs[2]["content"].startswith("{")
    assert json.loads(msgs[-1]["content"]) == SCHEMA
    asked = Task("a", "schema", "t", messages=[{"role": "user", "content": "A trip to Oslo."}], schema=SCHEMA)
    assert prompt_messages(asked, "json")[-1]["content"].startswith("A trip to Oslo.\n\nJSON Schema:\n")


def test_summary_figures_and_honest_findings():
    rows = run_compare(FakeBackend(
        '{"city": "Oslo", "days": 3}',                      # constrained
        '```json\n{"city": "Oslo", "days": 3}\n```',         # json: fenced, valid first
        "nope", "still nope", "city: Oslo\ndays: 3",          # yaml: two retries
        "1", '{"city": "Oslo", "days": 3}',                  # json mode: one retry
    ), [SCHEMA_TASK], arms=ARMS4, max_retries=3)
    s = summarise(rows, ARMS4)
    o = s["overall"]
    assert o["yaml"]["retries_total"] == 2 and o["yaml"]["attempts_total"] == 3 and o["yaml"]["valid_first_rate"] == 0
    assert o["yaml"]["failures"] == {"syntax": 2}
    assert o["json_mode"]["failures"] == {"schema": 1}
    assert o["json"]["fenced_attempts"] == 1 and o["json"]["valid_rate"] == 1.0
    assert o["constrained"]["tokens_total"] == count('{"city": "Oslo", "days": 3}') + 1
    assert o["constrained"]["accuracy"] is None and o["constrained"]["accuracy_n"] == 0
    assert o["json"]["tokens_per_second"] == pytest.approx(o["json"]["tokens_total"] / 0.5)
    assert s["by_family"]["schema"]["yaml"] == o["yaml"]
    # YAML's compact answer costs fewer (fake) tokens here, retries included: the report must say so
    assert o["yaml"]["tokens_total"] < o["constrained"]["tokens_total"]
    assert any(f.startswith("all tasks: yaml beats constrained on completion tokens") for f in s["findings"])
    assert not any(f.startswith("all tasks: json_mode beats constrained on completion tokens") for f in s["findings"])
    fast = [dict(r, attempt_log=[dict(a, seconds=0.01) for a in r["attempt_log"]]) if r["arm"] == "json" else r
            for r in rows]
    assert any(f.startswith("all tasks: json beats constrained on tokens per second") for f in summarise(fast, ARMS4)["findings"])


def test_token_budget():
    backend = FakeBackend()
    assert token_budget(SCHEMA_TASK, backend, 99) == 99
    assert token_budget(SCHEMA_TASK, backend) == max(48, 2 * count('{"city":"Oslo","days":3}') + 32)
    assert token_budget(Task("n", "schema", "t", schema=SCHEMA), backend) == 128
    big = Task("b", "schema", "t", schema=SCHEMA, reference={"k": "word " * 500})
    assert token_budget(big, backend) == 256


# --------------------------------------------------------------------------- tasks and CLI


def test_default_tasks_ship_with_the_package():
    tasks = load_tasks("default")
    assert len(tasks) == 12 and len({t.id for t in tasks}) == 12
    assert sorted({t.family for t in tasks}) == ["bfcl", "schema"]
    assert all(Judge(t).check(json.dumps(t.reference), "json").ok for t in tasks if t.family == "schema")
    assert any(t.parallel for t in tasks)
    assert len(load_tasks("default:3")) == 3


def test_jsonl_tasks(tmp_path):
    path = tmp_path / "t.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write(json.dumps({"schema": SCHEMA, "prompt": "Trip to Oslo"}) + "\n")
        f.write(json.dumps({"id": "b", "category": "parallel", "messages": [[{"role": "user", "content": "hi"}]],
                            "functions": [{"name": "f", "parameters": {"type": "dict", "properties": {}}}],
                            "ground_truth": [{"f": {}}]}) + "\n")
    a, b = load_tasks(str(path))
    assert (a.family, a.id, a.messages[0]["content"]) == ("schema", "t.jsonl.gz#0", "Trip to Oslo")
    assert (b.family, b.parallel, b.reference) == ("bfcl", True, [{"name": "f", "arguments": {}}])
    assert len(load_tasks(f"{path}:1")) == 1
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "no schema"}\n')
    with pytest.raises(TaskError, match="needs 'functions'"):
        load_tasks(str(bad))
    with pytest.raises(TaskError, match="does not exist"):
        load_tasks(str(tmp_path / "missing.jsonl"))
    with pytest.raises(TaskError, match="--data"):
        load_tasks("bfcl:2", shared_data=tmp_path)


def test_unknown_arm_is_refused():
    with pytest.raises(StructgenError, match="unknown arm"):
        run_compare(FakeBackend(), [SCHEMA_TASK], arms=["xml"])


def test_cli_names_the_missing_extra(monkeypatch, capsys):
    import importlib.util

    from structgen.cli import main

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    assert main(["compare", "--tasks", "default:1"]) == 2
    assert 'needs matplotlib: pip install "structgen[bench]"' in capsys.readouterr().err


def test_resume_merges_shard_rows_without_loading_a_model(tmp_path, monkeypatch, capsys):
    pytest.importorskip("matplotlib")
    from structgen.cli import main
    from structgen.compare import command

    def no_model(*a, **k):
        raise AssertionError("nothing left to generate: the model must not be loaded")

    monkeypatch.setattr(command, "_generate", no_model)
    task = load_tasks("default:1")[0]
    good = json.dumps({"name": task.functions[0]["name"], "arguments": {}})
    rows = run_compare(FakeBackend(good, "x", good, "x", good, good, "x", good), [task], arms=ARMS4, max_retries=1)
    shard = "".join(json.dumps(r) + "\n" for r in rows)
    (tmp_path / "rows.jsonl").write_text(shard + shard)  # two shards that both ran the task
    assert main(["compare", "--tasks", "default:1", "--arms", ",".join(ARMS4), "--out", str(tmp_path), "--resume",
                 "--no-progress"]) == 0
    result = json.loads((tmp_path / "token_waste.json").read_text())
    assert result["n_tasks"] == 1 and len(result["rows"]) == 4 and result["resumed_rows"] == 4
    assert result["summary"]["overall"]["json"]["attempts_total"] == 2
    assert (tmp_path / "report.md").is_file() and (tmp_path / "tokens.png").is_file()
    assert "Constrained call: " in capsys.readouterr().out
    # --report-only: tasks without rows are listed as not run, nothing is generated
    assert main(["compare", "--tasks", "default:2", "--arms", ",".join(ARMS4), "--out", str(tmp_path), "--resume",
                 "--report-only", "--no-progress"]) == 0
    result = json.loads((tmp_path / "token_waste.json").read_text())
    assert result["n_tasks"] == 1 and result["not_run"] == [load_tasks("default:2")[1].id]
    assert "## Not run (1 tasks" in (tmp_path / "report.md").read_text()


def test_report_files(tmp_path):
    pytest.importorskip("matplotlib")
    pytest.importorskip("rich")
    from rich.console import Console

    from structgen.compare.report import markdown_report, plot, print_table

    rows = run_compare(FakeBackend('{"city": "Oslo", "days": 3}', "x", '{"city": "Oslo", "days": 3}'),
                       [SCHEMA_TASK], arms=["constrained", "json"], max_retries=1)
    summary = summarise(rows, ["constrained", "json"])
    pngs = plot(summary, tmp_path)
    assert [p.name for p in pngs] == ["tokens.png", "retries.png", "valid_rate.png", "latency.png"]
    assert all(p.read_bytes().startswith(b"\x89PNG") for p in pngs)
    result = {"command": "structgen compare", "model": "fake", "hardware": "none", "n_tasks": 1,
              "task_counts": {"schema": 1}, "settings": {"budget": "64", "max_retries": 1}, "wall_seconds": 1.0,
              "arm_seconds": 1.0, "summary": summary, "skipped": []}
    md = markdown_report(result, [str(p) for p in pngs])
    assert "| free-form JSON | 1 |" in md and "![tokens](tokens.png)" in md and "## Why attempts failed" in md
    console = Console(record=True, width=220)
    print_table(summary, console)
    assert "constrained call (structgen)" in console.export_text()


# --------------------------------------------------------------------------- the real model


@pytest.mark.model
def test_tiny_real_run():
    torch = pytest.importorskip("torch")
    from structgen.compare import HFBackend
    from structgen.models import load_default

    torch.set_num_threads(1)
    model, tok = load_default()
    backend = HFBackend(model, tok)
    tasks = [BFCL_TASK, SCHEMA_TASK]
    rows = run_compare(backend, tasks, max_retries=1, max_new_tokens=24)
    assert [(r["task"], r["arm"]) for r in rows] == [(t.id, a) for t in tasks for a in ARMS]
    for r in rows:
        log = r["attempt_log"]
        assert r["attempts"] == len(log) == r["retries"] + 1 <= 2
        assert r["tokens"] == sum(a["tokens"] for a in log) and all(1 <= a["tokens"] <= 24 for a in log)
        assert all(a["prompt_tokens"] > 20 and a["seconds"] > 0 for a in log)
        assert r["valid"] == (r["useful_tokens"] > 0)
    for r in rows:
        if r["arm"] == "constrained":  # strict decoding: valid at once (closed at the budget if need be)
            assert r["valid_first"] and r["retries"] == 0, r
            assert r["useful_tokens"] == backend.count_tokens(json.dumps(
                r["answer"], separators=(",", ":"), ensure_ascii=False))
    summary = summarise(rows, list(ARMS))
    assert summary["overall"]["constrained"]["valid_rate"] == 1.0
    assert summary["overall"]["constrained"]["ttft_mean"] > 0



@pytest.mark.model
def test_tiny_real_run_fast_forward():
    # --fast-forward: the constrained arm reports forced tokens and forward passes saved
    torch = pytest.importorskip("torch")
    from structgen.compare import HFBackend
    from structgen.models import load_default

    torch.set_num_threads(1)
    model, tok = load_default()
    backend = HFBackend(model, tok, fast_forward=True)
    rows = run_compare(backend, [BFCL_TASK], max_retries=0, max_new_tokens=40, arm_functions={"constrained": ARMS["constrained"]})
    (row,) = rows
    (attempt,) = row["attempt_log"]
    assert row["valid"] and attempt["forced_tokens"] > 0  # '{"name":"' and friends are forced
    assert attempt["forward_passes"] < attempt["tokens"] + 1  # fewer passes than token by token
    figures = summarise(rows, ["constrained"])["overall"]["constrained"]
    assert 0 < figures["forced_share"] < 1 and 0 < figures["forward_passes_saved"] < 1


@pytest.mark.model
def test_prefix_cache_gives_the_same_attempts():
    # retries reuse the arm's own prompt KV cache: every attempt's text must be what a run
    # without the cache produces (greedy), and the retry's prompt is mostly cached
    torch = pytest.importorskip("torch")
    from structgen.compare import HFBackend
    from structgen.models import load_default

    torch.set_num_threads(1)
    model, tok = load_default()
    arms = {a: ARMS[a] for a in ("json", "json_mode")}

    class NoCache(HFBackend):
        def _cache_for(self, ids):
            self._prefix = None
            return super()._cache_for(ids)

    cached = run_compare(HFBackend(model, tok), [BFCL_TASK], max_retries=2, max_new_tokens=24, arm_functions=arms)
    plain = run_compare(NoCache(model, tok), [BFCL_TASK], max_retries=2, max_new_tokens=24, arm_functions=arms)
    assert any(r["retries"] for r in plain), "the check needs a retry"
    for a, b in zip(cached, plain):
        assert [x["text"] for x in a["attempt_log"]] == [x["text"] for x in b["attempt_log"]]
        assert a["tokens"] == b["tokens"]


@pytest.mark.model
def test_workers_give_the_rows_of_one_process(tmp_path):
    # --workers 2 spreads tasks over two processes; the attempts are those of one process
    pytest.importorskip("matplotlib")
    from structgen.cli import main

    common = ["compare", "--tasks", "default:3", "--arms", "constrained,json", "--max-new-tokens", "12",
              "--max-retries", "1", "--no-progress"]
    assert main([*common, "--workers", "2", "--out", str(tmp_path / "two")]) == 0
    assert main([*common, "--workers", "1", "--out", str(tmp_path / "one")]) == 0
    two, one = (json.loads((tmp_path / d / "token_waste.json").read_text()) for d in ("two", "one"))
    assert "2 worker processes" in two["hardware"]
    assert [(r["task"], r["arm"]) for r in two["rows"]] == [(r["task"], r["arm"]) for r in one["rows"]]
    assert len(two["rows"]) == 6
    for a, b in zip(two["rows"], one["rows"]):
        assert [x["text"] for x in a["attempt_log"]] == [x["text"] for x in b["attempt_log"]]
    assert len((tmp_path / "two" / "rows.jsonl").read_text().splitlines()) == 6  # saved as tasks finished


# --------------------------------------------------------------------------- few-shot arms, JSON mode


def _bfcl_sample():
    from pathlib import Path

    path = Path(__file__).resolve().parents[1].parent / "shared" / "data"
    try:
        return load_tasks("bfcl:20", shared_data=path)
    except TaskError:
        return []


def test_fewshot_examples_never_include_the_asked_task():
    from structgen.compare.arms import fewshot_examples

    default = load_tasks("default")
    for task in default + _bfcl_sample() + [BFCL_TASK, SCHEMA_TASK]:
        examples = fewshot_examples(task)
        assert len(examples) == 2, task.id
        assert all(e.id != task.id and e.family == task.family and e.reference is not None for e in examples)
        if task.family == "bfcl" and not task.parallel:
            assert all(len(e.reference) == 1 for e in examples)  # a single call is asked: single-call examples
        for fmt in ("json", "yaml"):
            msgs = prompt_messages(task, fmt, None, examples)
            question = msgs[-1]["content"]
            assert msgs[-1] == prompt_messages(task, fmt)[-1]  # the task is asked last, as in the zero-shot arm
            # the asked question or schema appears in no example turn, nor its reference as an answer
            assert all(question not in m["content"] for m in msgs[1:-1])
            if task.reference is not None:
                assert all(m["content"] != json.dumps(task.reference) for m in msgs[1:-1])
    # a pool holding only the asked task (under another id too) gives no example at all
    clone = Task("other", BFCL_TASK.family, BFCL_TASK.category, BFCL_TASK.messages, functions=BFCL_TASK.functions,
                 reference=BFCL_TASK.reference)
    from structgen.compare.arms import fewshot_examples as fe
    assert fe(BFCL_TASK, [BFCL_TASK, clone]) == []


def test_fewshot_examples_are_written_in_the_arms_format_and_shape():
    from structgen.compare.arms import fewshot_examples

    parallel = next(t for t in load_tasks("default") if t.parallel)
    msgs = prompt_messages(parallel, "json", None, fewshot_examples(parallel))
    answers = [json.loads(m["content"]) for m in msgs if m["role"] == "assistant"]
    assert len(answers) == 2 and all(isinstance(a, list) for a in answers)  # a parallel task answers with a list
    msgs = prompt_messages(SCHEMA_TASK, "yaml", None, fewshot_examples(SCHEMA_TASK))
    yaml = pytest.importorskip("yaml", reason="needs pyyaml (in the test and bench extras)")

    answers = [m["content"] for m in msgs if m["role"] == "assistant"]
    assert len(answers) == 2 and all(isinstance(yaml.safe_load(a), dict) and not a.startswith("{") for a in answers)
    assert json.loads(msgs[-1]["content"]) == SCHEMA


def test_json_mode_means_any_object(smollm2_compiler):
    from structgen.compare.backend import json_object_schema

    compiled = smollm2_compiler.compile_json_schema(json_object_schema(SCHEMA_TASK))
    assert not compiled.matcher().accept_string("1.1")  # a bare number is no JSON-mode answer
    m = compiled.matcher()
    assert m.accept_string('{"a":[1,{"b":null}]}') and m.is_completed()
    parallel = next(t for t in load_tasks("default") if t.parallel)
    m = smollm2_compiler.compile_json_schema(json_object_schema(parallel)).matcher()
    assert m.accept_string('[{"name":"f"},{}]') and m.is_completed()
    assert not smollm2_compiler.compile_json_schema(json_object_schema(parallel)).matcher().accept_string('[1]')


# --------------------------------------------------------------------------- format cost


def test_format_cost_counts_equal_direct_tokenization():
    from tokenizers import Tokenizer

    from structgen.compare.format_cost import FORMATS, format_cost, format_texts, load_counter

    tasks = load_tasks("default")
    cost = format_cost(tasks, tokenizers=["Phi-3"])  # tests/data/tokenizers/phi3 ships with the tests
    assert cost["n_tasks"] == 12 and list(cost["by_tokenizer"]) == ["Phi-3"]
    from pathlib import Path

    tok = Tokenizer.from_file(str(Path(__file__).parent / "data" / "tokenizers" / "phi3" / "tokenizer.json"))
    per_task = {r["task"]: r["tokens"] for r in cost["tasks"]}
    totals = dict.fromkeys(FORMATS, 0)
    for t in tasks:
        texts = format_texts(t, "json")
        for f in FORMATS:
            n = len(tok.encode(texts[f], add_special_tokens=False).ids)
            assert per_task[t.id][f] == n, (t.id, f)
            totals[f] += n
    figures = cost["by_tokenizer"]["Phi-3"]
    assert figures["totals"] == totals
    assert figures["ratios"]["tool_call"] == 1.0
    assert figures["ratios"]["json_pretty"] == pytest.approx(totals["json_pretty"] / totals["tool_call"])
    assert figures["ratios"]["json_fenced"] > figures["ratios"]["json_pretty"] > 1  # fence and indent cost tokens
    assert sum(figures["by_family"][f]["totals"]["yaml"] for f in figures["by_family"]) == totals["yaml"]
    assert isinstance(load_counter("Mistral-v3"), str)  # not shipped with the tests: said, not raised


def test_format_texts_are_the_same_content():
    yaml = pytest.importorskip("yaml", reason="needs pyyaml (in the test and bench extras)")

    from structgen.compare.format_cost import format_texts

    parallel = next(t for t in load_tasks("default") if t.parallel)
    for task in (BFCL_TASK, parallel, SCHEMA_TASK):
        texts = format_texts(task, "hermes")
        value = json.loads(texts["json_compact"])
        assert json.loads(texts["json_pretty"]) == value == yaml.safe_load(texts["yaml"])
        assert json.loads(texts["json_fenced"].removeprefix("```json\n").removesuffix("\n```")) == value
    hermes = format_texts(parallel, "hermes")["tool_call"]
    assert hermes.count("<tool_call>\n") == 2 == len(parallel.reference)
    assert format_texts(parallel, "smollm2")["tool_call"].startswith("<tool_call>[{")
    assert json.loads(format_texts(BFCL_TASK, "llama3")["tool_call"])["parameters"] == {"city": "Oslo", "days": 3}
    assert format_texts(SCHEMA_TASK, "smollm2")["tool_call"] == '{"city":"Oslo","days":3}'
    assert format_texts(Task("n", "schema", "t", schema=SCHEMA), "json") is None


def test_format_cost_on_shared_tokenizers():
    from pathlib import Path

    from structgen.compare.format_cost import format_cost

    shared = Path(__file__).resolve().parents[1].parent / "shared" / "data"
    if not (shared / "tokenizers" / "qwen2").is_dir():
        pytest.skip("shared tokenizers not present")
    cost = format_cost(load_tasks("default"), shared_data=shared, tokenizers=["Llama-3", "Qwen2", "GPT-2"])
    assert set(cost["by_tokenizer"]) == {"Llama-3", "Qwen2", "GPT-2"}
    for name, t in cost["by_tokenizer"].items():
        assert t["ratios"]["json_pretty"] > 1 and t["ratios"]["json_fenced"] > t["ratios"]["json_pretty"], name


# --------------------------------------------------------------------------- the 80-column summary


def _result_of(rows, arms, cost=None):
    return {"command": "structgen compare", "model": "a-model-with-a-rather-long-name-" * 4, "hardware": "none",
            "n_tasks": 1, "task_counts": {"schema": 1}, "settings": {"budget": "64", "max_retries": 3},
            "wall_seconds": 1.0, "arm_seconds": 1.0, "summary": summarise(rows, arms), "format_cost": cost,
            "skipped": []}


def test_summary_fits_80_columns_headline_first(capsys):
    from structgen.compare.format_cost import format_cost
    from structgen.compare.report import print_summary, summary_lines

    rows = run_compare(FakeBackend(
        '{"city": "Oslo", "days": 3}', "nope " * 60, "nope", "nope", "nope", '{"city": "Oslo", "days": 3}',
        "city: Oslo\ndays: 3", "x", "x", "x", "x", "1", "1", "1", "1"), [SCHEMA_TASK], max_retries=3)
    result = _result_of(rows, list(ARMS), format_cost([SCHEMA_TASK], tokenizers=["Phi-3", "Mistral-v3"]))
    lines = summary_lines(result)
    assert max(len(x) for x in lines) <= 80
    text = "\n".join(lines)
    assert text.index("Constrained call: 100% valid, 0 retries") < text.index("arm ") < text.index("Format cost")
    assert "JSON +2 examples" in text and "YAML +2 examples" in text and "JSON mode" in text
    # where each arm wins comes before where it loses
    assert text.index("YAML wins on:") < text.index("YAML loses on:")
    assert "Not available: Mistral-v3" in text
    print_summary(result)
    printed = capsys.readouterr().out
    assert max(len(x) for x in printed.splitlines()) <= 80
    assert printed.index("Model: ") < printed.index("Constrained call") < printed.index("Format cost")


def test_summary_says_when_the_model_is_too_weak():
    from structgen.compare.report import summary_lines

    rows = run_compare(FakeBackend('{"city": "Oslo", "days": 3}', "prose", "prose", "prose"), [SCHEMA_TASK],
                       arms=["constrained", "json", "yaml", "json_mode"], max_retries=0)
    text = "\n".join(summary_lines(_result_of(rows, ["constrained", "json", "yaml", "json_mode"])))
    assert "too weak for free-form output" in text
    good = '{"city": "Oslo", "days": 3}'
    rows = run_compare(FakeBackend(good, good), [SCHEMA_TASK], arms=["constrained", "json"], max_retries=0)
    assert "too weak" not in "\n".join(summary_lines(_result_of(rows, ["constrained", "json"])))


def test_task_line():
    from structgen.compare.command import task_line

    rows = run_compare(FakeBackend('{"city": "Oslo", "days": 3}', "x"), [SCHEMA_TASK], arms=["constrained", "json"],
                       max_retries=0)
    assert task_line(3, 61, "s1", rows) == f"3/61 s1: call ✓{rows[0]['tokens']} json ✗{rows[1]['tokens']}"


# --------------------------------------------------------------------------- resuming and the output folder


def test_resume_runs_only_the_missing_arms(tmp_path, monkeypatch, capsys):
    pytest.importorskip("matplotlib")
    from structgen.cli import main
    from structgen.compare import command

    task = load_tasks("default:1")[0]
    good = json.dumps(task.reference[0])  # a valid call
    old = run_compare(FakeBackend(good, "x", good), [task], arms=["constrained", "json"], max_retries=1)
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in old))
    asked = []

    def fake_generate(args, todo, arms, rows_path, skipped):
        asked.append(([t.id for t in todo], arms))
        new = run_compare(FakeBackend(good, good), todo, arms=arms, max_retries=1)
        command._save(rows_path, new)
        return new

    monkeypatch.setattr(command, "_generate", fake_generate)
    assert main(["compare", "--tasks", "default:1", "--arms", "constrained,json,json_mode", "--out", str(tmp_path),
                 "--resume", "--no-progress"]) == 0
    assert asked == [([task.id], ["json_mode"])]
    result = json.loads((tmp_path / "token_waste.json").read_text())
    assert [r["arm"] for r in result["rows"]] == ["constrained", "json", "json_mode"] and result["resumed_rows"] == 2
    assert "format_cost" in result and (tmp_path / "format_cost.png").is_file()


def test_results_are_always_written(tmp_path, monkeypatch, capsys):
    pytest.importorskip("matplotlib")
    from structgen.cli import main
    from structgen.compare import command

    monkeypatch.chdir(tmp_path)
    good = '{"city": "Oslo", "days": 3}'
    monkeypatch.setattr(command, "_generate", lambda args, todo, arms, rows_path, skipped: run_compare(
        FakeBackend(good, good), todo, arms=arms, max_retries=0))
    schema = tmp_path / "s.json"
    schema.write_text(json.dumps(SCHEMA))
    assert main(["compare", "--schema", str(schema), "--arms", "constrained,json", "--no-progress"]) == 0
    (folder,) = [p for p in tmp_path.iterdir() if p.name.startswith("structgen-compare-")]
    assert (folder / "token_waste.json").is_file() and (folder / "report.md").is_file()
    assert str(folder.name) in capsys.readouterr().err  # the folder is named at the end
    assert main(["compare", "--resume", "--no-progress"]) == 2
    assert "--resume needs --out" in capsys.readouterr().err
