"""Other schema documents a schema refers to, made part of it (nothing is ever fetched).

A ``$ref`` to ``https://example.com/address.json#/$defs/street`` needs that document. The
caller passes it (``compile_json_schema(schema, resources={uri: document})``); it is embedded
under ``$defs`` (``definitions`` before 2019-09) with ``"$id": uri``, where the converter's
ordinary ``$id`` resolution finds it. The document's base URI is the one it is given under,
as when a validator retrieves it from there (a different ``$id`` inside it is replaced).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urldefrag, urlsplit

from ..errors import SchemaError
from .document import legacy_dialect

__all__ = ["embed_resources"]


def embed_resources(schema: Any, resources: Mapping[str, Any]) -> Any:
    """``schema`` with each document of ``resources`` (absolute URI → schema) embedded.

    Raises:
        SchemaError: a URI is not absolute, or a document is not a schema (object or boolean).
    """
    if not resources or not isinstance(schema, dict):
        return schema  # a boolean schema refers to nothing
    key = "definitions" if legacy_dialect(schema) else "$defs"
    defs = dict(schema.get(key) or {})
    for i, (uri, doc) in enumerate(resources.items()):
        if not isinstance(uri, str) or not urlsplit(uri).scheme:
            raise SchemaError(f"resources: {uri!r} is not an absolute URI", pointer="")
        if not isinstance(doc, (dict, bool)):
            raise SchemaError(f"resources[{uri!r}]: a schema must be an object or a boolean, not "
                              f"{type(doc).__name__}", pointer="")
        base = urldefrag(uri)[0]
        body = {"allOf": [doc]} if isinstance(doc, bool) else {k: v for k, v in doc.items() if k not in ("$id", "id")}
        name = f"structgen-resource-{i}"
        while name in defs:
            name += "_"
        defs[name] = {**body, "$id": base}
    return {**schema, key: defs}
