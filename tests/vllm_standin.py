"""A stand-in for vLLM's V1 persistent batch, as the logits processors see it (no vLLM needed).

It reproduces the bookkeeping of vLLM 0.32's ``vllm/v1/worker/gpu_input_batch.py`` and
``vllm/v1/sample/logits_processor/state.py`` (``InputBatch`` + ``BatchUpdateBuilder``), written
afresh from reading them:

* ``remove`` frees a slot and records it as removed;
* ``add`` fills the lowest removed slot (taking it off the removed list, so a reused slot is
  never reported as removed) or appends; the added tuple carries the request's own running
  output list;
* ``condense`` slides the last live rows down into the lowest holes, each a one-way move
  (``UNIDIRECTIONAL``) that also takes the hole off the removed list;
* ``swap`` (attention backends reorder decodes first) is a two-way move (``SWAP``);
* ``refresh`` hands the processor one ``BatchUpdate`` (or None when nothing changed);
* ``step`` samples every row greedily from the processed logits and appends each token to
  that request's output list, as the engine does after sampling.

Each engine step (``GPUModelRunner._update_states``) removes finished and preempted requests,
adds new and resumed ones, condenses, may reorder, then refreshes.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum, auto
from typing import Any


class MoveDirectionality(Enum):
    UNIDIRECTIONAL = auto()
    SWAP = auto()


@dataclass(frozen=True)
class BatchUpdate:
    batch_size: int
    removed: Sequence[int]
    added: Sequence[tuple[int, Any, list[int] | None, list[int]]]
    moved: Sequence[tuple[int, int, MoveDirectionality]]


@dataclass
class SamplingParams:
    extra_args: dict[str, Any] | None = None


@dataclass
class Request:
    req_id: str
    params: SamplingParams
    prompt: list[int] = field(default_factory=list)
    output: list[int] = field(default_factory=list)


class PersistentBatch:
    def __init__(self, processor: Any, max_num_reqs: int) -> None:
        self.processor = processor
        self.max_num_reqs = max_num_reqs
        self.slots: list[Request | None] = []
        self._removed: list[int] = []
        self._added: list[tuple[int, Any, list[int] | None, list[int]]] = []
        self._moved: list[tuple[int, int, MoveDirectionality]] = []
        self.updates: list[BatchUpdate | None] = []

    @property
    def num_reqs(self) -> int:
        return sum(r is not None for r in self.slots)

    def index_of(self, req_id: str) -> int:
        return next(i for i, r in enumerate(self.slots) if r is not None and r.req_id == req_id)

    def add(self, req: Request) -> int:
        if self._removed:
            index = min(self._removed)
            self._removed.remove(index)
        else:
            index = self.num_reqs
        assert index < self.max_num_reqs
        if index == len(self.slots):
            self.slots.append(req)
        else:
            self.slots[index] = req
        self._added.append((index, req.params, req.prompt, req.output))
        return index

    def remove(self, req_id: str) -> Request:
        index = self.index_of(req_id)
        req = self.slots[index]
        self.slots[index] = None
        self._removed.append(index)
        return req

    def swap(self, i1: int, i2: int) -> None:
        self.slots[i1], self.slots[i2] = self.slots[i2], self.slots[i1]
        self._moved.append((i1, i2, MoveDirectionality.SWAP))

    def condense(self) -> None:
        holes = sorted(self._removed)
        if not holes:
            return
        last = len(self.slots) - 1
        while holes:
            while last >= 0 and self.slots[last] is None:
                last -= 1
            hole = holes[0]
            if hole >= last:
                break
            holes.pop(0)
            self._removed.remove(hole)
            self.slots[hole], self.slots[last] = self.slots[last], None
            self._moved.append((last, hole, MoveDirectionality.UNIDIRECTIONAL))
        del self.slots[self.num_reqs:]

    def refresh(self) -> None:
        if self._removed or self._added or self._moved:
            update = BatchUpdate(self.num_reqs, sorted(self._removed, reverse=True), list(self._added),
                                 list(self._moved))
        else:
            update = None
        self._removed, self._added, self._moved = [], [], []
        self.updates.append(update)
        self.processor.update_state(update)

    def step(self, raw_logits: Callable[[Request], Any], check: Callable[[Request, Any, Any], None] | None = None) -> None:
        """One forward pass: logits per row, ``processor.apply``, greedy sampling, append."""
        import torch

        rows = [r for r in self.slots]
        assert all(r is not None for r in rows), "condense() before a step"
        raw = torch.stack([raw_logits(r) for r in rows])
        logits = self.processor.apply(raw.clone())
        for i, req in enumerate(rows):
            if check is not None:
                check(req, raw[i], logits[i])
            req.output.append(int(torch.argmax(logits[i])))
