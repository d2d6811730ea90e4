"""A trace's JSON text cut, as it is read, into batches of whole events of its ``traceEvents`` array.

A trace of millions of events is decoded a batch at a time (:func:`daydream.trace.load.load_trace`), so that memory
grows with the events kept, not with the text: the text of a batch is dropped once it is decoded. The cutting does
not parse the JSON; it proposes cuts that the decoder confirms:

- the array starts after the first ``"traceEvents": [`` (a key: inside a JSON string its quotes would be escaped),
  or at the text's first byte in Chrome's array format (``[{...}, ...]``);
- a batch ends at the last ``}`` followed by ``,`` and ``{`` in the text read so far. That is an event's end if the
  batch, bracketed, decodes: JSON is read left to right, so a prefix of the text that decodes as a whole array ends
  where an element of the array ends. A cut that does not decode is retried further on (the ``}, {`` was inside an
  event's arguments) until the text held passes ``max_pending`` bytes;
- the array ends at the first ``}`` followed by ``]`` (or a bare ``]``) after which the rest decodes as events;
  the rest of the document (the text before the array, ``[]``, the text after it) is decoded on its own.

Anything else, a cut never confirmed, more text than ``max_pending`` without a cut, is :class:`Unsplittable`: the
caller decodes the text whole, and its messages say what is wrong where.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

_ARRAY_START = re.compile(rb'"traceEvents"\s*:\s*\[')
_FIRST_BYTE = re.compile(rb"[^ \t\n\r]")
_CUT = re.compile(rb"\}\s*,\s*\{")
_ARRAY_END = re.compile(rb"\}\s*\]|\A.\s*\]", re.DOTALL)

MAX_END_TRIES = 16  # candidate ends of the array tried before the text is called unsplittable


class Unsplittable(Exception):
    """The text could not be cut into batches of events: decode it whole."""


class EventBatches:
    """Feed the text a chunk at a time (:meth:`feed`) and decode the batches of events it holds (:meth:`decoded`);
    once the text is all read, :meth:`end` decodes the last batch and returns the rest of the document.

    ``decode`` takes a JSON array of events (a buffer, valid during the call only) and returns what it decoded, or
    None where the text is not JSON (the cut lay inside an event: a cut further on is tried once more text is read);
    it raises where the text is JSON that is wrong, which ends the batching.
    """

    def __init__(self, decode: Callable[[memoryview], Any], batch_bytes: int, max_pending: int) -> None:
        self.decode = decode
        self.batch_bytes = batch_bytes
        self.max_pending = max_pending
        self.head = bytearray()  # the text before the array (while it is looked for: everything read)
        # The array's text not yet decoded, from the byte before an event's opening brace (the array's own bracket,
        # or a comma or space between events): a batch is decoded in place, that byte made its opening bracket.
        self.pending = bytearray()
        self.in_array = False
        self.array_format = False  # the text is a bare array of events: nothing may follow it
        self._refused = 0  # the last cut refused: the next one tried lies past it, ...
        self._retry_at = 0  # ... once the pending text is twice as long (a text that never cuts costs 2x its decode)

    def feed(self, chunk: bytes | bytearray) -> None:
        """Add text read."""
        if self.in_array:
            try:
                self.pending += chunk
            except BufferError:  # see _drop
                self.pending = self.pending + chunk
            return
        self.head += chunk
        start = self._array_start()
        if start is None:
            if len(self.head) > self.max_pending:
                raise Unsplittable("no traceEvents array found in the text's first bytes")
            return
        self.pending = self.head[start - 1 :]
        del self.head[start - 1 :]  # the array's opening bracket too: the rest of the document is head + [] + tail
        self.in_array = True

    def _array_start(self) -> int | None:
        m = _FIRST_BYTE.search(self.head)
        if m is None:
            return None
        if self.head[m.start()] == ord("["):  # the array format: the text is the array
            self.array_format = True
            return m.start() + 1
        m = _ARRAY_START.search(self.head)
        return None if m is None else m.end()

    def decoded(self) -> Iterator[Any]:
        """The batches that the text read so far holds, decoded."""
        while self.in_array and len(self.pending) >= max(self.batch_bytes, self._retry_at):
            cut = self._last_cut()
            if len(self.pending) > self.max_pending:
                raise Unsplittable(f"no event boundary confirmed in {len(self.pending):,} bytes")
            if cut is None or cut <= self._refused:
                return
            result = self._decode_to(cut)
            if result is None:
                self._refused, self._retry_at = cut, min(2 * len(self.pending), self.max_pending)
                return
            self._refused = self._retry_at = 0
            self._drop(_CUT.match(self.pending, cut - 1).end() - 2)  # type: ignore[union-attr]
            yield result

    def _drop(self, size: int) -> None:
        """Drop the first ``size`` bytes of the pending text, in place; where a decoder still holds a view of the text
        it was given (numba does, in reference cycles, while it compiles the scanner on a first run), the rest is
        copied and that text left to it: a buffer with a view of it cannot be resized."""
        try:
            del self.pending[:size]
        except BufferError:
            self.pending = self.pending[size:]

    def _decode_to(self, cut: int) -> Any:
        """Decode the pending events up to ``cut`` (just past a closing brace, or the array's own closing bracket),
        bracketed in place."""
        text = self.pending
        after = text[cut]
        text[0], text[cut] = ord("["), ord("]")
        try:
            with memoryview(text) as view, view[: cut + 1] as batch:
                return self.decode(batch)
        finally:
            text[cut] = after

    def _last_cut(self) -> int | None:
        """Just past the last ``}`` followed by ``,`` and ``{`` in the pending text."""
        text = self.pending
        at = len(text)
        while (at := text.rfind(b"{", 1, at)) > 0:
            i = at - 1
            while i >= 0 and text[i] in b" \t\n\r":
                i -= 1
            if i < 0 or text[i] != ord(","):
                continue
            i -= 1
            while i >= 0 and text[i] in b" \t\n\r":
                i -= 1
            if i >= 1 and text[i] == ord("}"):
                return i + 1
        return None

    def end(self) -> tuple[Any, bytes]:
        """Once the text is all read: the last batch decoded, and the rest of the document with an empty array in
        its place. The array ends at the first candidate end (a ``]`` after an event or after the batch's opening
        bracket) up to which the batch decodes."""
        if not self.in_array:
            raise Unsplittable("no traceEvents array in the text")
        text = self.pending
        for tries, m in enumerate(_ARRAY_END.finditer(text)):
            if tries == MAX_END_TRIES:
                break
            end = m.end() - 1  # the closing bracket
            result = self._decode_to(end)
            if result is not None:
                return result, bytes(self.head) + b"[]" + bytes(text[end + 1 :])
        raise Unsplittable("the end of the traceEvents array was not found")
