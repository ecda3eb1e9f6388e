"""Token bytes of a SentencePiece ``tokenizer.model`` without sentencepiece or protobuf
(test helper: Mistral-v3 ships only that file, and neither package is installed here).

The file is a protobuf ``ModelProto``; only its ``pieces`` (field 1) are read, each a
``SentencePiece`` message with ``piece`` (field 1, text) and ``type`` (field 3: 1 normal,
2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte). Byte pieces are ``<0xAB>``; in the
others ``▁`` stands for a space.
"""
from __future__ import annotations

from pathlib import Path

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    out = shift = 0
    while True:
        b = data[pos]
        pos += 1
        out |= (b & 0x7F) << shift
        if b < 0x80:
            return out, pos
        shift += 7


def _fields(data: bytes):
    """(field number, wire type, value) of one message: ints for varints and fixed widths,
    bytes for length-delimited fields."""
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 1:
            value, pos = int.from_bytes(data[pos:pos + 8], "little"), pos + 8
        elif wire == 2:
            n, pos = _varint(data, pos)
            value, pos = data[pos:pos + n], pos + n
        elif wire == 5:
            value, pos = int.from_bytes(data[pos:pos + 4], "little"), pos + 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire} at byte {pos}")
        yield field, wire, value


def pieces(path: Path) -> list[tuple[str, int]]:
    """``(piece, type)`` per token id."""
    out = []
    for field, wire, value in _fields(Path(path).read_bytes()):
        if field == 1 and wire == 2:
            piece, kind = "", NORMAL
            for f, w, v in _fields(value):
                if f == 1 and w == 2:
                    piece = v.decode("utf-8")
                elif f == 3 and w == 0:
                    kind = v
            out.append((piece, kind))
    return out


def tokenizer_info(path: Path):
    """A :class:`~structgen.TokenizerInfo` of the model's pieces; the stop token is ``</s>``."""
    from structgen import TokenizerInfo

    token_bytes: list[bytes | None] = []
    specials = []
    stop = None
    for i, (piece, kind) in enumerate(pieces(path)):
        if kind == BYTE:
            token_bytes.append(bytes([int(piece[3:5], 16)]))
        elif kind in (NORMAL, USER_DEFINED):
            token_bytes.append(piece.replace("\u2581", " ").encode("utf-8"))
        else:
            token_bytes.append(None)
            specials.append(i)
            if piece == "</s>":
                stop = i
    if stop is None:
        raise ValueError(f"{path}: no </s> piece")
    return TokenizerInfo.from_token_bytes(token_bytes, stop_token_ids=[stop], special_token_ids=specials)
