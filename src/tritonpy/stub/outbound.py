# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Every frame the stub process sends: built here, sent in order through
``Outbound``. (A process the stub forks sends its BLS frames on its own
socket, through ``bls_fork.ForkedBls``.)

``Outbound`` owns the stub's arenas (``own``) and the rule that a new
arena's ARENA frame leaves before any frame that may refer to it: the
frames that can (RESPONSES, BLS_REQUEST, MODEL_CONTROL) are sent with
``send_built`` or ``send_referring``, which write the announcements made
so far first; the others with ``send``. (The backend accepts no ARENA
before INIT: an arena a model made while being imported is announced
with the first frame that refers to it.) Frames are built on any
thread (``log``, BLS requests, model-control calls, metric ops); they are
*sent* only by whoever has the channel (the loop thread, or the thread
reading in turn while the loop is away: stub/turns.py), so the order in
which they are handed to ``send`` is the order on the wire.

The engine (_engine.pyx) writes its RESPONSES frames into a
``FrameWriter`` of its own, used by whoever has the channel, and sends
them with ``send_built``: a body larger than a frame goes into an arena. So does
the body of any frame carrying a long text (a log line, an error): texts
are only cut, with a marker, past what the backend takes
(``stub-max-body-bytes``), or before INIT, when no arena may be announced
(docs/protocol.md, "Text").
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from functools import partial
from typing import Any

from tritonpy.pb_utils._seam import TritonModelException
from tritonpy.stub import _bls_wire
from tritonpy.stub import _codec as C
from tritonpy.stub._channel import Channel
from tritonpy.stub.arena import OwnArenas

# The largest body that travels inline.
_INLINE_BODY = C.MAX_FRAME - C.HEADER_SIZE
# Characters of text a frame surely carries inline: a character takes at
# most 12 bytes (JSON's escape of one past U+FFFF), and the other fields
# of any text frame fit in the 4096 bytes left.
_SMALL_TEXT = (C.MAX_FRAME - 4096) // 12
# Bytes of a body left for what is not the text being cut.
TEXT_SLACK = 4096


def finish_frame(w: C.FrameWriter, own: OwnArenas) -> bytes:
    """``w``'s frame, its body placed in one of ``own``'s arenas when larger
    than a frame (the arena must be announced before the frame is sent)."""
    if w.size() > C.MAX_FRAME:
        body = w.body_bytes()
        aid, off, view = own.alloc(len(body))
        view[:] = body
        return w.finish_in_arena(aid, off)
    return w.finish()


class Outbound:
    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        self._send = channel.send
        # Sends a frame that refers to no arena: the channel's own method.
        self.send: Callable[[bytes], None] = channel.send
        self.own = OwnArenas(self.announce)
        self._lock = threading.Lock()
        # New arenas whose ARENA frames go before the next frame that may
        # refer to them (read, not written, by the engine: send_built).
        self.announcing: list[tuple[int, int, int]] = []
        # Until INIT the backend takes no arena of ours: bodies are inline.
        self.arenas_ok = False
        self.body_limit = _INLINE_BODY

    def allow_arenas(self, max_body: int) -> None:
        """INIT: bodies may go into arenas, up to the backend's
        stub-max-body-bytes (``max_body``)."""
        self.arenas_ok = True
        self.body_limit = max(int(max_body), _INLINE_BODY)

    # ---------------------------------------------------------------- arenas

    def announce(self, arena_id: int, size: int, fd: int) -> None:
        """OwnArenas made a new arena (maybe in a model's thread): its
        ARENA frame goes before the next frame sent."""
        with self._lock:
            self.announcing.append((arena_id, size, fd))

    def _send_announcements(self) -> None:
        # Unlocked peek: whoever allocated an arena appended its
        # announcement before it handed over a frame referring to it.
        if not self.announcing:
            return
        with self._lock:
            items, self.announcing = self.announcing, []
        send = self._send
        for arena_id, size, fd in items:
            send(C.encode_simple(C.ARENA, (arena_id, size)), (fd,))

    # ---------------------------------------------------------------- sending

    def send_referring(self, frame: bytes) -> None:
        """Send a frame that may refer to arenas (BLS_REQUEST,
        MODEL_CONTROL), after their announcements."""
        if self.announcing:
            self._send_announcements()
        self._send(frame)

    def send_built(self, w: C.FrameWriter) -> None:
        """Finish the frame open in ``w`` (the engine's RESPONSES writer,
        say) and send it."""
        if self.announcing or w.size() > C.MAX_FRAME:
            self.send_referring(self.finish(w))
        else:
            self._send(w.finish())

    def finish(self, w: C.FrameWriter) -> bytes:
        """``w``'s frame (any thread): a body larger than a frame is placed
        in an arena (announced by the next send_referring) and the frame
        refers to it."""
        return finish_frame(w, self.own)

    def flush_blocking(self, what: str, instance: str) -> None:
        """On the way out: what is queued goes (waiting a few seconds at
        most), then the socket closes."""
        if self.channel.flush_blocking():
            stderr(instance, f"{what} could not be sent")
        self.channel.close()

    # ---------------------------------------------------------------- frames

    def hello(self) -> None:
        info = {
            "protocol": C.VERSION,
            "pid": os.getpid(),
            "python": ".".join(map(str, sys.version_info[:3])),
            "executable": sys.executable,
        }
        self.send(C.encode_json(C.HELLO, info))

    # -- frames with a text: any length (see text_frame)

    def text_frame(
        self, build: Callable[[str], C.FrameWriter], text: str, inline: bool = False
    ) -> bytes:
        """The frame ``build(text)`` writes (an open FrameWriter), its body
        in an arena when larger than a frame; ``text`` cut (C.clip) where
        the body would pass what the backend takes, or a frame when no
        arena can hold it (before INIT, ``inline``, no arena space left).
        Send it with ``send_text``."""
        if inline or not self.arenas_ok:
            return _fit(build, text, _INLINE_BODY).finish()
        w = _fit(build, text, self.body_limit)
        if w.size() <= C.MAX_FRAME:
            return w.finish()
        try:
            return self.finish(w)
        except (MemoryError, OSError):  # no arena space: cut to a frame
            return _fit(build, text, _INLINE_BODY).finish()

    def json_frame(self, ftype: int, obj: dict[str, Any], inline: bool = False) -> bytes:
        """INIT_DONE, AUTO_COMPLETE_DONE, FINALIZE_DONE: their "error" text
        of any length."""
        error = obj.get("error")
        if not isinstance(error, str) or len(error) < _SMALL_TEXT:
            return C.encode_json(ftype, obj)

        def build(text: str) -> C.FrameWriter:
            return C.json_writer(ftype, {**obj, "error": text})

        return self.text_frame(build, error, inline)

    def send_text(self, frame: bytes) -> None:
        """Send a frame made by ``text_frame``: after the announcements
        when its body went into an arena."""
        if C.body_in_arena(frame):
            self.send_referring(frame)
        else:
            self._send(frame)

    def send_json(self, ftype: int, obj: dict[str, Any]) -> None:
        self.send_text(self.json_frame(ftype, obj))

    def log_frame(self, level: int, file: str, line: int, message: str) -> bytes:
        """A LOG frame (any thread); send it with ``send_text``."""
        if len(message) < _SMALL_TEXT and len(file) < _SMALL_TEXT:
            return C.encode_simple(C.LOG, (level, file, line, message))
        file = C.clip(file, 1024)
        return self.text_frame(partial(C.log_writer, level, file, line), message)

    def _with_text(self, ftype: int, fid: int, flag: bool, message: str) -> None:
        """EXECUTE_DONE and READY: ``u8 flag, str message``."""
        if len(message) < _SMALL_TEXT:
            self._send(C.encode_simple(ftype, (1 if flag else 0, message), fid))
            return
        self.send_text(self.text_frame(partial(C.flag_text_writer, ftype, fid, flag), message))

    def execute_done(self, batch_id: int, ok: bool, message: str = "") -> None:
        self._with_text(C.EXECUTE_DONE, batch_id, ok, message)

    def ready(self, query: int, ready: bool, message: str) -> None:
        self._with_text(C.READY, query, ready, message)

    def error(self, message: str) -> None:
        """ERROR, on the way out: inline, so that it needs nothing more."""
        self.send(self.text_frame(C.error_writer, message, inline=True))

    # -- business logic scripting and model control

    def bls_request(self, call_id: int, request: Any) -> bytes:
        """The BLS_REQUEST frame (any thread); large inputs are copied into
        the stub's arenas (the backend returns them with RELEASE)."""
        return _bls_wire.request_frame(call_id, request, self.own)

    @staticmethod
    def bls_cancel(call_id: int) -> bytes:
        return C.encode_simple(C.BLS_CANCEL, None, call_id)

    def bls_releases(self, refs: list[tuple[int, int]]) -> None:
        for frame in C.encode_releases(C.BLS_RELEASE, refs):
            self.send(frame)

    def model_control(self, call_id: int, msg: dict[str, Any]) -> bytes:
        """The MODEL_CONTROL frame (any thread)."""
        w = C.json_writer(C.MODEL_CONTROL, msg, call_id)
        size = w.size() - C.HEADER_SIZE
        if size > self.body_limit:
            # Refused here, to the model: the backend would take it for a
            # protocol violation.
            raise TritonModelException(
                f"tritonpy: the model loading request is {size} bytes of JSON, more than "
                f"the backend takes (stub-max-body-bytes={self.body_limit})"
            )
        return self.finish(w)

    # -- custom metrics

    def metric(self, ops: list[tuple], call_id: int = 0) -> None:
        for frame in encode_metric(ops, call_id):
            self.send(frame)


def _fit(build: Callable[[str], C.FrameWriter], text: str, limit: int) -> C.FrameWriter:
    """``build(text)``, with ``text`` cut until the body takes at most
    ``limit`` bytes. The share of the text is cut in proportion, so that
    escapes (JSON) are accounted for; a few rounds at most."""
    w = build(text)
    size = w.size() - C.HEADER_SIZE
    keep = len(text.encode("utf-8", "backslashreplace"))
    while size > limit and keep > 0:
        keep = max(0, keep * limit // size - TEXT_SLACK)
        w = build(C.clip(text, keep))
        size = w.size() - C.HEADER_SIZE
    return w


def stderr(instance: str, text: str) -> None:
    print(f"tritonpy stub {instance}: {text}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------ METRIC


def check_fits(op: tuple) -> int:
    """The encoded size of the metric ``op``; the model's error if it
    cannot fit in a frame."""
    try:
        return C.metric_op_size(op)
    except OverflowError as e:
        raise TritonModelException(str(e)) from None


def encode_metric(ops: list[tuple], call_id: int) -> list[bytes]:
    """METRIC frames holding ``ops`` (tuples as ``_codec.decode_body``
    returns them), as few as fit; the last one carries ``call_id``."""
    try:
        return C.encode_metric(ops, call_id)
    except OverflowError as e:
        raise TritonModelException(str(e)) from None
