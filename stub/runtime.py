# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The stub's runtime: one model instance served on one event loop.

Frames from the backend arrive through ``Channel``; this module turns them
into calls on the user's ``TritonPythonModel`` and turns the results back into
frames. Everything runs on the loop thread.
"""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import os
import sys
import traceback
from typing import Any

from tritonpy import pb_utils
from tritonpy.stub import _codec as C
from tritonpy.stub.arena import OwnArenas, PeerArenas
from tritonpy.stub.channel import Channel

LOG_INFO, LOG_WARN, LOG_ERROR, LOG_VERBOSE = 0, 1, 2, 3
_InferenceResponse = pb_utils.InferenceResponse
_TensorFromWire = pb_utils.Tensor._from_wire
_RequestFromStub = pb_utils.InferenceRequest._from_stub
# Bytes kept free in a frame for the per-tensor header of the next tensor.
_TENSOR_HEAD_RESERVE = 1024


class Stub:
    def __init__(self, fd: int, instance: str, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.instance = instance
        self.model_name = instance
        self.channel = Channel(fd, loop, self._on_frame, self._on_eof)
        self.own = OwnArenas(self._announce_arena)
        self.peer = PeerArenas()
        self.writer = C.FrameWriter()
        self.model: Any = None
        self.exit_code: int | None = None

    # ---------------------------------------------------------------- life

    def start(self) -> None:
        hello = {"protocol": C.VERSION, "pid": os.getpid(),
                 "python": ".".join(map(str, sys.version_info[:3])),
                 "executable": sys.executable}
        self.channel.send(C.encode_json(C.HELLO, hello))
        self.channel.start()

    def _stop(self, code: int) -> None:
        self.exit_code = code
        self.loop.stop()

    def _on_eof(self, why: str) -> None:
        # The backend (or the whole server) went away: nothing is left to
        # answer, so leave without running user code.
        self._stop(0)

    def _fatal(self, message: str) -> None:
        """A protocol violation: tell the backend why, then leave."""
        try:
            self.channel.send(C.encode_simple(C.ERROR, message))
            self.channel.flush_blocking()
        except OSError:
            pass
        self.channel.close()
        print(f"tritonpy stub {self.instance}: {message}", file=sys.stderr, flush=True)
        self._stop(70)

    def log(self, level: int, message: str, file: str = "", line: int = 0) -> None:
        self.channel.send(C.encode_simple(C.LOG, (level, file or "tritonpy/stub", line, message)))

    # ---------------------------------------------------------------- dispatch

    def _on_frame(self, mv: memoryview, fds: list[int]) -> None:
        try:
            ftype, flags, fid, body_len = C.decode_header(mv)
            if fds and ftype != C.ARENA:
                raise C.ProtocolError(f"frame type {ftype} carried file descriptors")
            if ftype == C.ARENA:
                self._on_arena(mv, fds)
                return
            if flags & C.FLAG_BODY_IN_ARENA:
                aid, off = C.decode_arena_ref(mv)
                buf: Any = self.peer.view(aid, off, body_len)
                start = 0
            elif ftype == C.EXECUTE:
                # Inputs are zero-copy views of the frame: give the batch its own copy.
                buf, start = bytearray(mv), C.HEADER_SIZE
            else:
                buf, start = mv, C.HEADER_SIZE
            body = C.decode_body(ftype, buf, start)
            if ftype == C.EXECUTE:
                self._on_execute(fid, body, buf)
            elif ftype == C.RELEASE:
                for aid, off in body:
                    self.own.free(aid, off)
            elif ftype == C.INIT:
                self._on_init(body)
            elif ftype == C.FINALIZE:
                self._on_finalize()
            elif ftype == C.ERROR:
                print(f"tritonpy stub {self.instance}: the backend reports: {body}",
                      file=sys.stderr, flush=True)
            else:
                raise C.ProtocolError(f"frame type {ftype} is not sent to the stub")
        except (C.ProtocolError, ValueError, KeyError, UnicodeDecodeError) as e:
            for fd in fds:
                try:
                    os.close(fd)
                except OSError:
                    pass
            self._fatal(f"protocol error: {e}")

    def _on_arena(self, mv: memoryview, fds: list[int]) -> None:
        aid, size = C.decode_body(C.ARENA, mv, C.HEADER_SIZE)
        if len(fds) != 1:
            raise C.ProtocolError(f"ARENA frame with {len(fds)} descriptors, expected 1")
        self.peer.add(aid, size, fds[0])

    def _announce_arena(self, arena_id: int, size: int, fd: int) -> None:
        self.channel.send(C.encode_simple(C.ARENA, (arena_id, size)), (fd,))

    # ---------------------------------------------------------------- init / finalize

    def _on_init(self, msg: dict[str, Any]) -> None:
        args = msg.get("args", {})
        self.model_name = args.get("model_name", self.instance)
        try:
            self.model = _load_model(msg["model_file"], msg["model_dir"])
            init = getattr(self.model, "initialize", None)
            if init is not None:
                init(args)
        except BaseException as e:  # noqa: BLE001 - every failure must reach Triton
            if isinstance(e, (KeyboardInterrupt, SystemExit)) and not isinstance(e, SystemExit):
                raise
            err = (f"tritonpy: model '{self.model_name}' failed to initialize: "
                   f"{type(e).__name__}: {e}\n{traceback.format_exc()}")
            self.channel.send(C.encode_json(C.INIT_DONE, {"ok": False, "error": err}))
            return
        self._execute_is_async = inspect.iscoroutinefunction(getattr(self.model, "execute", None))
        self.channel.send(C.encode_json(C.INIT_DONE, {"ok": True}))

    def _on_finalize(self) -> None:
        reply: dict[str, Any] = {"ok": True}
        fin = getattr(self.model, "finalize", None)
        if fin is not None:
            try:
                fin()
            except Exception as e:  # noqa: BLE001
                reply = {"ok": False, "error": f"tritonpy: model '{self.model_name}': finalize() "
                                               f"raised {type(e).__name__}: {e}\n"
                                               f"{traceback.format_exc()}"}
        self.channel.send(C.encode_json(C.FINALIZE_DONE, reply))
        self.channel.flush_blocking()
        self.channel.close()
        self._stop(0)

    # ---------------------------------------------------------------- execute

    def _on_execute(self, batch_id: int, wire: list[tuple], buf: Any) -> None:
        requests = []
        for rid, corr, flags, timeout, params, names, tensors in wire:
            inputs = []
            for name, dtype, dims, nbytes, loc, a, b in tensors:
                view = (memoryview(buf)[a:a + nbytes] if loc == C.LOC_INLINE
                        else self.peer.view(a, b, nbytes))
                inputs.append(_TensorFromWire(name, dtype, dims, view))
            requests.append(_RequestFromStub(self.model_name, rid, 0 if corr is None else corr,
                                             flags, timeout, params, names, inputs))
        try:
            result = self.model.execute(requests)
        except Exception as e:  # noqa: BLE001
            self._batch_failed(batch_id, e)
            return
        if inspect.isawaitable(result):
            task = self.loop.create_task(_await(result))
            task.add_done_callback(lambda t: self._async_done(batch_id, requests, t))
            return
        self._send_responses(batch_id, requests, result)

    def _async_done(self, batch_id: int, requests: list[Any], task: asyncio.Task) -> None:
        if task.cancelled():
            self._batch_failed(batch_id, asyncio.CancelledError("execute() was cancelled"))
            return
        exc = task.exception()
        if exc is not None:
            self._batch_failed(batch_id, exc)
            return
        self._send_responses(batch_id, requests, task.result())

    def _batch_failed(self, batch_id: int, e: BaseException) -> None:
        tb = "".join(traceback.format_exception(type(e), e, e.__traceback__))
        msg = f"tritonpy: model '{self.model_name}': execute() raised {type(e).__name__}: {e}\n{tb}"
        self.channel.send(C.encode_simple(C.EXECUTE_DONE, (0, msg), batch_id))

    def _send_responses(self, batch_id: int, requests: list[Any], result: Any) -> None:
        problem = _check_result(result, len(requests))
        if problem:
            msg = f"tritonpy: model '{self.model_name}': {problem}; every request of the batch fails"
            self.channel.send(C.encode_simple(C.EXECUTE_DONE, (0, msg), batch_id))
            return
        w = self.writer
        w.begin(C.RESPONSES, batch_id, C.FLAG_BATCH_DONE)
        w.u32(len(requests))
        for index, (req, resp) in enumerate(zip(requests, result)):
            self._write_response(w, index, req, resp)
        if w.size() > C.MAX_FRAME:
            body = w.body_bytes()
            aid, off, view = self.own.alloc(len(body))
            view[:] = body
            frame = w.finish_in_arena(aid, off)
        else:
            frame = w.finish()
        self.channel.send(frame)

    def _write_response(self, w: C.FrameWriter, index: int, req: Any, resp: Any) -> None:
        """Append one final response; a bad output turns it into an error
        response for this request alone."""
        err = resp.error() if resp.has_error() else None
        outputs: list[tuple] = []
        params = ""
        if err is None:
            try:
                params = resp._parameters_json()
                outputs = self._prepare_outputs(req, resp, w.size())
            except Exception as e:  # noqa: BLE001
                err = pb_utils.TritonError(
                    f"model '{self.model_name}', request '{req.request_id()}': {e}",
                    pb_utils.TritonError.INVALID_ARG)
                outputs = []
        w.u32(index)
        w.u32(1)  # TRITONSERVER_RESPONSE_COMPLETE_FINAL
        if err is not None:
            w.u8(1)
            w.u32(err.code())
            w.string(err.message())
            w.string("")
            w.u32(0)
            return
        w.u8(0)
        w.u32(0)
        w.string("")
        w.string(params)
        w.u32(len(outputs))
        for name, dtype, dims, data, aid, off, nbytes in outputs:
            if data is not None:
                w.tensor_inline(name, dtype, dims, data)
            else:
                w.tensor_arena(name, dtype, dims, nbytes, aid, off)

    def _prepare_outputs(self, req: Any, resp: Any, frame_size: int) -> list[tuple]:
        wanted = req.requested_output_names()
        out = []
        budget = C.MAX_FRAME - frame_size - _TENSOR_HEAD_RESERVE
        allocated: list[tuple[int, int]] = []
        try:
            for t in resp.output_tensors():
                if not isinstance(t, pb_utils.Tensor):
                    raise TypeError(f"output_tensors holds a {type(t).__name__},"
                                    " not a pb_utils.Tensor")
                if wanted and t.name() not in wanted:
                    continue
                try:
                    name, dtype, dims, data = t._to_wire()
                    mv = memoryview(data).cast("B") if not isinstance(data, (bytes, bytearray)) \
                        else memoryview(data)
                except Exception as e:  # noqa: BLE001
                    raise type(e)(f"output '{t.name()}': {e}") from e
                n = mv.nbytes
                if n <= C.INLINE_LIMIT and n + 128 <= budget:
                    budget -= n + 128
                    out.append((name, dtype, tuple(dims), mv, 0, 0, n))
                else:
                    aid, off, view = self.own.alloc(n)
                    allocated.append((aid, off))
                    view[:] = mv
                    budget -= 128
                    out.append((name, dtype, tuple(dims), None, aid, off, n))
        except BaseException:
            for aid, off in allocated:
                self.own.free(aid, off)
            raise
        return out


def _check_result(result: Any, n: int) -> str:
    if not isinstance(result, (list, tuple)):
        return (f"execute() must return a list of pb_utils.InferenceResponse, "
                f"got {type(result).__name__}")
    if len(result) != n:
        return f"execute() returned {len(result)} responses for a batch of {n} requests"
    for i, r in enumerate(result):
        if not isinstance(r, _InferenceResponse):
            return (f"element {i} of execute()'s result is a {type(r).__name__}, "
                    "not a pb_utils.InferenceResponse")
    return ""


async def _await(aw: Any) -> Any:
    return await aw


def _load_model(model_file: str, model_dir: str) -> Any:
    if model_dir not in sys.path:
        sys.path.insert(0, model_dir)
    name = os.path.splitext(os.path.basename(model_file))[0]
    spec = importlib.util.spec_from_file_location(name, model_file)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {model_file}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    cls = getattr(module, "TritonPythonModel", None)
    if cls is None:
        raise AttributeError(f"{model_file} defines no class TritonPythonModel")
    return cls()
