"""GrammarMatcher: the only mutable object — where one output stands in its grammar."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .. import _core
from .bitmask import as_numpy_row
from ..errors import MatcherError, StructgenTypeError
from .names import INITIAL, NameState, clear_names, name_index
from ..index.counters import check_config_stacks
from ..index.token_index import DEAD
from .precompute import compute_mask

if TYPE_CHECKING:  # the compiler makes matchers (CompiledGrammar.matcher)
    from .compiler import CompiledGrammar

__all__ = ["GrammarMatcher", "check_token_id"]

_fill_row = _core.fill_row
_fill_matcher = _core.fill_matcher
_accept_token = _core.accept_token


def check_token_id(token_id: object, what: str = "a token id") -> int:
    """``token_id`` as an ``int``: Python and numpy integers pass; ``bool``, strings, floats
    and anything else raise, since ``int("90")`` or ``int(True)`` would silently name a token.

    Raises:
        StructgenTypeError: ``token_id`` is not an integer (a ``TypeError``).
    """
    if isinstance(token_id, (int, np.integer)) and not isinstance(token_id, (bool, np.bool_)):
        return int(token_id)
    raise StructgenTypeError(f"{what} must be an int (or numpy integer), not {type(token_id).__name__} {token_id!r}")


def _cpu_array(bitmask: Any) -> np.ndarray | None:
    """The numpy view of a CPU torch tensor (``None`` for anything else: the checked path
    then says what is wrong with it). The tensor is remembered natively with its view's rows:
    the next fills with the same tensor skip this method (``Tensor.numpy()`` costs about 1 µs)
    for as long as its memory and geometry stay the same."""
    if getattr(bitmask, "is_cpu", False) and hasattr(bitmask, "numpy"):
        arr = bitmask.numpy()
        _core.remember_tensor(bitmask, arr)
        return arr
    return None


class GrammarMatcher:
    """Tracks one output against a :class:`CompiledGrammar`, token by token.

    A rejected token returns ``False`` and leaves the matcher where it was. A stop token
    (EOS) is accepted exactly when the text so far is complete, and terminates the matcher.

    Args:
        compiled: the compiled grammar (shared, read-only; many matchers may use one).
        max_rollback_tokens: how many tokens :meth:`rollback` can undo (``None``: unlimited).
    """

    __slots__ = ("compiled", "_index", "_history", "_names", "_name_index", "_terminated", "_max_rollback",
                 "_view", "_counted", "_background", "_token_bytes")

    def __init__(self, compiled: CompiledGrammar, *, max_rollback_tokens: int | None = None) -> None:
        self.compiled = compiled
        self._index = compiled.index
        # what every fill passes or checks, read once here: a fill is a few hundred ns, and
        # each attribute chain of it (compiled.background, index._view) a few tens
        self._view = compiled.index._view
        self._counted = compiled.index._counted
        self._background = compiled.background
        self._token_bytes = compiled.tokenizer_info.token_bytes
        self._max_rollback = max_rollback_tokens
        self.reset()

    def reset(self) -> None:
        """Back to the start of the grammar."""
        self._history: list[int] = [self._index.initial]
        # Grammars with free member names (see structgen.runtime.names) also track the names written
        # in each open object, one entry per history entry; None (no work at all) otherwise.
        self._names: list[NameState] | None = [INITIAL] if self.compiled.free_names else None
        # the grammar's native name clears (made once per index, with the vocabulary's tables: not in a fill)
        traps = getattr(getattr(self.compiled, "grammar", None), "names_can_trap", True)
        self._name_index = name_index(self._index, traps=traps) if self._names is not None else None
        self._terminated = False

    @property
    def name_state(self) -> NameState | None:
        """Member names written so far in the open objects (``None``: not tracked, the
        grammar fixes every name)."""
        return self._names[-1] if self._names is not None else None

    @property
    def state(self) -> int:
        """An integer naming the current parser configuration (equal states, equal masks)."""
        return self._history[-1]

    def accept_token(self, token_id: int) -> bool:
        """Advance by one token; ``False`` (state unchanged) if the grammar forbids it.

        Raises:
            StructgenTypeError: ``token_id`` is not an integer (``"90"``, ``True``, ``90.0``).
        """
        if type(token_id) is not int:  # the usual int skips the checks
            token_id = check_token_id(token_id)
        # the usual token in one native call (stop tokens, ids outside the vocabulary and
        # limits come back here: -1)
        done = _accept_token(self, token_id, self._token_bytes)
        if done >= 0:
            return done == 1
        if self._terminated:
            return False
        cur = self._history[-1]
        if token_id in self.compiled.tokenizer_info.stop_token_ids:
            if not self._index.is_accepting(cur):
                return False
            self._terminated = True
            self._push(cur, None if self._names is None else self._names[-1])
            return True
        nxt = self._index.step_token(cur, token_id)
        if nxt == DEAD:
            return False
        if self._names is None and self._max_rollback is None:  # nothing else to keep per step
            self._history.append(nxt)
            return True
        names = None
        if self._names is not None:
            names = self._names[-1].feed(self.compiled.tokenizer_info.token_bytes[token_id] or b"")  # not DEAD: it has bytes
            if names is None:  # writes a member name twice in one object
                return False
        self._push(nxt, names)
        return True

    def accept_string(self, text: str | bytes) -> bool:
        """Advance by raw text (counts as one step for :meth:`rollback`); ``False`` if rejected."""
        if self._terminated:
            return False
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        nxt = self._index.step_bytes(self._history[-1], data)
        if nxt == DEAD:
            return False
        names = None
        if self._names is not None:
            names = self._names[-1].feed(data)
            if names is None:
                return False
        self._push(nxt, names)
        return True

    def _push(self, cid: int, names: NameState | None) -> None:
        self._history.append(cid)
        if self._names is not None:
            if names is None:  # pragma: no cover - callers pass the name state whenever names are tracked
                raise RuntimeError("internal: a step without its name state")
            self._names.append(names)
        if self._max_rollback is not None and len(self._history) > self._max_rollback + 1:
            del self._history[0]
            if self._names is not None:
                del self._names[0]

    def _fill_next_token_bitmask(self, bitmask: Any, index: int = 0) -> None:
        """Write the allowed next tokens into row ``index`` of a CPU int32 bitmask.

        ``bitmask`` is a numpy array or CPU torch tensor of shape ``(batch, words)`` with
        ``words >= ceil(vocab_size / 32)``. After termination only stop tokens are allowed
        (so a finished row of a batch can keep emitting padding EOS). To fill many rows
        from many matchers at once, see :func:`structgen.runtime.batch.fill_next_token_bitmasks`.
        """
        arr = bitmask if type(bitmask) is np.ndarray else _cpu_array(bitmask)
        # the usual case in one native call, first visits included (grammars without counters:
        # no stack limit to pass)
        if arr is not None and _fill_matcher(self, arr, index):
            return
        if not self._terminated and arr is not None:  # counters, a background precompute
            if self._counted:  # a first visit or the name clears may create configurations
                self._index._sync_limit()
            names = self._names
            task = self._background
            try:
                if _fill_row(arr, index, self._view, self._history[-1],
                             None if names is None else self._name_index,
                             None if names is None else names[-1],
                             task is None or task.finished.is_set()):
                    return
            except _core.StackLimitExceeded as e:
                check_config_stacks(int(e.args[0]))  # raises LimitError
                raise  # pragma: no cover - the limit was raised meanwhile
        row = as_numpy_row(bitmask, index)
        mask = self.next_mask()
        n = mask.shape[0]
        if row.shape[0] == n:  # the usual case: one copy, no tail to clear
            np.copyto(row, mask)
        elif row.shape[0] < n:
            raise MatcherError(
                f"bitmask row has {row.shape[0]} words but the vocabulary needs {n} "
                f"(vocab_size={self.compiled.tokenizer_info.vocab_size})"
            )
        else:
            row[:n] = mask
            row[n:] = 0
        if self._names is not None and not self._terminated:
            if row.flags.c_contiguous:
                self._clear_names(row.view(np.uint32))
            else:  # the native clears take contiguous words: a strided row goes through a copy
                words = np.ascontiguousarray(row).view(np.uint32)
                self._clear_names(words)
                row[:] = words.view(np.int32)

    if TYPE_CHECKING:
        fill_next_token_bitmask = _fill_next_token_bitmask
    else:
        # the same method, its usual case (a numpy bitmask, a grammar without counters) native
        # without a Python frame, every other call this one's (_core.fast_method)
        fill_next_token_bitmask = _core.fast_method(_fill_next_token_bitmask)

    def next_mask(self) -> np.ndarray:
        """The memoised mask of the current configuration (read-only int32 words), or the
        stop-token mask after termination. Member-name tracking is not applied to it:
        :meth:`fill_next_token_bitmask` does that on the row it fills."""
        if self._terminated:
            return self._index.stop_mask
        cid = self._history[-1]
        mask = self._index.mask_if_ready(cid)
        if mask is None:
            mask = compute_mask(self._index, cid, self.compiled.background)
        return mask

    def _clear_names(self, row: np.ndarray) -> None:
        """Clear the tokens that would repeat a member name, or trap one (structgen.runtime.names)."""
        if self._names is not None and self._name_index is not None:
            clear_names(self._name_index, self._names[-1], row, self._index, self._history[-1])

    def allowed_token_ids(self) -> np.ndarray:
        """Sorted ids of the tokens allowed next (convenience; slower than the bitmask)."""
        if self._terminated:
            return np.array(sorted(self.compiled.tokenizer_info.stop_token_ids))
        if self._names is not None:
            row = self._index.mask(self._history[-1]).view(np.uint32).copy()
            self._clear_names(row)
            bits = np.unpackbits(row.view(np.uint8), bitorder="little")
            return np.flatnonzero(bits[: self.compiled.tokenizer_info.vocab_size])
        return np.flatnonzero(self._index.allowed_tokens(self._history[-1]))

    def is_completed(self) -> bool:
        """The text so far is a complete match (a stop token would be accepted now)."""
        return self._terminated or self._index.is_accepting(self._history[-1])

    def is_terminated(self) -> bool:
        """A stop token has been accepted."""
        return self._terminated

    def rollback(self, num_tokens: int) -> None:
        """Undo the last ``num_tokens`` accepted tokens (or strings).

        Raises:
            MatcherError: more tokens than were accepted (or kept, with ``max_rollback_tokens``).
            StructgenTypeError: ``num_tokens`` is not an integer.
        """
        num_tokens = check_token_id(num_tokens, "num_tokens")
        if num_tokens < 0 or num_tokens > len(self._history) - 1:
            raise MatcherError(f"cannot roll back {num_tokens} tokens: only {len(self._history) - 1} can be undone")
        if num_tokens:
            del self._history[-num_tokens:]
            if self._names is not None:
                del self._names[-num_tokens:]
            self._terminated = False

    def find_forced_bytes(self) -> bytes:
        """The bytes every valid continuation starts with (``b""`` when there is a choice).

        Empty when the text so far is complete (a stop token is then a choice) or the matcher
        has terminated. Accepting these bytes does not change which outputs are possible,
        which is what lets a decoder append them without asking the model.
        """
        if self._terminated:
            return b""
        data = self._index.forced_bytes(self._history[-1])[0]
        if self._names is not None and data and self._names[-1].feed(data) is None:
            # the grammar forces a name already written here: stop before its closing
            # quote (no valid continuation exists; the mask will say so, not a forced byte)
            state = self._names[-1]
            for k in range(len(data)):
                after = state.feed(data[k:k + 1])
                if after is None:
                    return data[:k]
                state = after
        return data

    def forced_string(self) -> str:
        """:meth:`find_forced_bytes` as text, cut before an incomplete UTF-8 character."""
        data = self.find_forced_bytes()
        for cut in range(len(data), max(len(data) - 4, 0) - 1, -1):
            try:
                return data[:cut].decode("utf-8")
            except UnicodeDecodeError:
                continue
        return ""

    def fork(self) -> "GrammarMatcher":
        """An independent copy at the same position (for beam or speculative search)."""
        other = GrammarMatcher.__new__(GrammarMatcher)
        other.compiled = self.compiled
        other._index = self._index
        other._view, other._counted, other._background = self._view, self._counted, self._background
        other._token_bytes = self._token_bytes
        other._max_rollback = self._max_rollback
        other._history = list(self._history)
        other._names = None if self._names is None else list(self._names)
        other._name_index = self._name_index
        other._terminated = self._terminated
        return other
