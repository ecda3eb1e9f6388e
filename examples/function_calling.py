"""SmolLM2 picks one of several Python functions for a request; the call is parsed and dispatched.

    python examples/function_calling.py [--model PATH] [--prompt TEXT]

The functions are plain Python with type hints and docstrings; ``ToolSet.from_functions``
turns them into tool schemas, ``ToolSet.generate`` prompts the model with them in its chat
format and constrains the answer to a valid call (the name fixes the arguments' schema), and
``ToolSet.dispatch`` converts the JSON arguments back to the Python types (Enum, dataclass)
and calls the function.
"""
from __future__ import annotations

import argparse
import dataclasses
import enum
import sys

from structgen.integrations.hf_generate import generate_tool_calls
from structgen.models import load_model, model_banner
from structgen.tools import ToolSet


class Unit(enum.Enum):
    CELSIUS = "celsius"
    FAHRENHEIT = "fahrenheit"


@dataclasses.dataclass
class Reminder:
    """A reminder to set."""

    text: str
    minutes: int = 10


def get_weather(city: str, unit: Unit = Unit.CELSIUS) -> str:
    """Get the current weather in a city.

    Args:
        city: The city, e.g. "Paris".
        unit: Temperature unit.
    """
    temp = 21 if unit is Unit.CELSIUS else 70
    return f"It is {temp} degrees {unit.value} and sunny in {city}."


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b


def set_reminder(reminder: Reminder) -> str:
    """Set a reminder that goes off after some minutes.

    Args:
        reminder: What to remind about and when.
    """
    return f"Reminder {reminder.text!r} set for {reminder.minutes} minutes from now."


REQUESTS = [
    "What's the weather like in Tokyo?",
    "What is 1234 plus 4321?",
    "Remind me to call mom in 30 minutes.",
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="HF model folder or .gguf file (default: embedded SmolLM2-135M-Instruct)")
    ap.add_argument("--prompt", action="append", help="a request (repeatable; default: three examples)")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    args = ap.parse_args()

    print(model_banner(args.model), flush=True)
    model, tokenizer = load_model(args.model)
    tools = ToolSet.from_functions(get_weather, add, set_reminder)
    for request in args.prompt or REQUESTS:
        result = generate_tool_calls(tools, model, tokenizer, request, tool_choice="required",
                                     max_new_tokens=args.max_new_tokens)
        print(f"# {request}")
        print(f"  model : {result.text}")
        note = "" if result.complete else "  (token budget reached: closed by the grammar)"
        for call in result.calls:
            print(f"  call  : {call.name}({call.arguments}){note}")
            print(f"  result: {tools.dispatch(call)}")
        print(f"  ({result.new_tokens} tokens, {result.seconds:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
