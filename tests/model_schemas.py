"""Prompts and JSON Schemas the real-model tests constrain SmolLM2 with (HF generate() and vLLM)."""

SCHEMAS = [
    ("Give a person as JSON.", {"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 12}, "age": {"type": "integer", "minimum": 0, "maximum": 120}},
        "required": ["name", "age"], "additionalProperties": False}),
    ("Is the sky blue? Answer as JSON.", {"type": "object", "properties": {
        "answer": {"enum": ["yes", "no"]}, "confidence": {"type": "integer", "minimum": 0, "maximum": 100}},
        "required": ["answer", "confidence"], "additionalProperties": False}),
    ("List three colours.", {"type": "array", "items": {"type": "string", "maxLength": 10}, "minItems": 3, "maxItems": 3}),
    ("Call get_time for Tokyo.", {"type": "object", "properties": {
        "name": {"const": "get_time"}, "arguments": {"type": "object", "properties": {
            "city": {"type": "string", "maxLength": 15}}, "required": ["city"], "additionalProperties": False}},
        "required": ["name", "arguments"], "additionalProperties": False}),
    ("Pick a point.", {"type": "array", "prefixItems": [{"type": "integer", "minimum": -9, "maximum": 9},
                                                         {"type": "integer", "minimum": -9, "maximum": 9}],
                       "items": False, "minItems": 2}),
]
