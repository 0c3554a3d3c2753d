# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Business logic scripting and the model loading API, stub side.

One ``Call`` per BLS call or model-control call in flight, keyed by call
id; frames from the backend resolve them (docs/protocol.md, *Business logic
scripting*).

How waiting works without deadlock (stub/turns.py says who may use the
channel while model code holds the loop thread):

- ``await async_exec()`` sends BLS_REQUEST from the loop and awaits a
  future: nothing blocks, any number of calls may be in flight. With
  ``decoupled=True`` it returns once the first response (or the end) is
  there, as the official backend does, so coroutines that then iterate
  the responses with a plain ``for`` have all sent their calls first.
- ``exec()`` on the loop thread (a sync ``execute``, or sync code inside a
  coroutine) cannot let the loop run, so it reads the socket itself in
  turn: every frame it reads goes to the normal handlers (responses,
  cancellations, other calls' answers) until its own answer has arrived.
- ``exec()`` on another thread waits on an event set by whoever reads its
  answer: the loop, or, while model code holds the loop thread, whoever
  has the turn (this thread itself if nobody else).
- A call that could never be answered fails at once: a blocking ``exec()``
  on the loop thread whose target is this very model with a single
  instance. A request timeout is also enforced here (cancel, then a
  local error) so a call can never wait forever once it has one.
- BLS is refused in ``initialize()`` and ``finalize()``, as on the official
  backend; the model loading API and metrics work there.
"""

from __future__ import annotations

import asyncio
import ctypes
import itertools
import json
import mmap
import os
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from tritonpy.pb_utils import _seam
from tritonpy.pb_utils._seam import pb_utils
from tritonpy.stub import _bls_wire
from tritonpy.stub import _codec as C
from tritonpy.stub._bls_wire import Call

if TYPE_CHECKING:
    from tritonpy.stub._channel import Channel
    from tritonpy.stub.lifecycle import Lifecycle
    from tritonpy.stub.names import ModelNames
    from tritonpy.stub.outbound import Outbound
    from tritonpy.stub.turns import Turns

_Response = pb_utils.InferenceResponse
_TritonError = pb_utils.TritonError
_ResponseOutputs = _bls_wire.response_outputs
_ITER = pb_utils.ResponseIterator
_RESP_FINAL = C.RESP_FINAL
_LOC_ARENA = C.LOC_ARENA
_deadline_of = _bls_wire.deadline
# Extra wait past a request's own timeout before the stub gives up on it.
_TIMEOUT_GRACE = 1.0
# How long a blocking exec() polls for its answer before it sleeps (the
# model parameter bls_spin_microseconds; docs/bls.md), and how many calls
# at most skip that after spins that caught nothing.
SPIN_US = 300
_SPIN_BACKOFF = 64
# How long one turn of a blocking exec() on the channel waits: this, or its
# spin when that is longer; never past the call's deadline.
_TURN = 0.05
_TURN_NS = 50_000_000
# The largest spin taken (bls_spin_microseconds beyond it: this), a day.
_SPIN_MAX_US = 86_400_000_000


class _Lease:
    """Owns one backend BLS allocation while numpy arrays use it: the array
    made from ``__array_interface__`` keeps this object as its base, so the
    allocation is released when the last view is gone."""

    __slots__ = ("__array_interface__", "_client", "_ref", "_keep", "__weakref__")

    def __init__(
        self, client: BlsClient, ref: tuple[int, int], addr: int, n: int, keep: Any
    ) -> None:
        self.__array_interface__ = {
            "shape": (n,),
            "typestr": "|u1",
            "data": (addr, False),
            "version": 3,
        }
        self._client = client
        self._ref = ref
        self._keep = keep  # the arena mapping must outlive the view

    def __del__(self) -> None:
        try:
            self._client._queue_release(self._ref)
        except Exception:  # noqa: BLE001 - never raise from a finalizer
            pass


class BlsClient:
    # Whether this client's connection is gone for good (a forked child's
    # may be: bls_fork.py; the stub's own leaves with the stub).
    lost = False

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        out: Outbound,
        turns: Turns,
        channel: Channel,
        life: Lifecycle,
        names: ModelNames,
    ) -> None:
        self.out = out
        self.loop = loop
        self.channel = channel  # closed: no call can be answered
        self.life = life  # whether the stub's state lets model code call
        self.names = names
        self._loop_thread = threading.get_ident()
        self._calls: dict[int, Call] = {}
        self._ids = itertools.count(1)  # next() is atomic under the GIL
        self._arenas: dict[int, tuple[mmap.mmap, int]] = {}
        self._unmapped: dict[int, str] = {}  # arena id -> why it is not mapped
        self._releases: list[tuple[int, int]] = []
        self._release_lock = threading.Lock()
        self._release_scheduled = False
        self.turns = turns
        self.instance_count = 1
        self.spin_ns = SPIN_US * 1000
        # Blocking calls still to go without a spin, and how many the next
        # spin that catches nothing makes skip (doubling, up to _SPIN_BACKOFF).
        self._spin_skip = 0
        self._spin_backoff = 1
        # In a process forked from the stub: what makes that process's own
        # client (stub/bls_fork.py), and the client once made.
        self._forked: Callable[[BlsClient], BlsClient] | None = None
        self._child: BlsClient | None = None

    # ---------------------------------------------------------------- set-up

    def configure(self, args: dict[str, Any]) -> None:
        try:
            groups = json.loads(args.get("model_config", "{}")).get("instance_group") or []
            self.instance_count = sum(int(g.get("count", 1)) for g in groups) or 1
        except (ValueError, TypeError, AttributeError):
            self.instance_count = 1
        spin_us = _model_parameter(args, "bls_spin_microseconds", SPIN_US)
        self.spin_ns = min(spin_us, _SPIN_MAX_US) * 1000

    # ---------------------------------------------------------------- forked children

    def after_fork_in_child(self, connect: Callable[[BlsClient], BlsClient]) -> None:
        """In a process just forked from the stub (or from one of its
        children): the stub's socket, calls and locks are not this
        process's. Its calls go through ``connect(self)``, made at the
        first one; releases of outputs leased before the fork are the
        parent's business."""
        self._forked = connect
        self._child = None
        self._calls = {}
        self._releases = []
        self._release_lock = threading.Lock()
        self._release_scheduled = False

    def _child_client(self) -> BlsClient:
        child = self._child
        if child is None or child.lost:
            with self._release_lock:  # (made after the fork: this process's)
                child = self._child
                if child is None or child.lost:  # (a lost one: connect again)
                    assert self._forked is not None
                    if not self.life.model_may_send(C.BLS_REQUEST):
                        # Forked in initialize() (or finalize()): the backend
                        # takes no connection before the model serves.
                        raise pb_utils.TritonModelException(
                            f"tritonpy: a process forked from model '{self.names.model}' "
                            "outside execute() (in initialize() or finalize()) cannot use "
                            "BLS nor the model loading API"
                        )
                    child = self._child = self._forked(self)
        return child

    # ---------------------------------------------------------------- frames in

    def on_arena(self, arena_id: int, size: int, fd: int) -> None:
        try:
            if arena_id in self._arenas:
                return  # announced again to a restarted reader: same memfd
            if os.fstat(fd).st_size < size:
                raise C.ProtocolError(f"BLS arena {arena_id} is shorter than announced")
            try:
                m = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            except OSError as e:
                # The stub's address space is limited: the outputs placed
                # there fail their calls (_lease), the stub serves on.
                self._unmapped[arena_id] = f"BLS arena {arena_id} of {size} bytes: {e}"
                return
        finally:
            os.close(fd)
        addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
        self._arenas[arena_id] = (m, addr)

    def on_response(self, call_id: int, body: C.WireResponse, buf: Any) -> None:
        outputs = body.outputs
        final = bool(body.flags & _RESP_FINAL)
        call = self._calls.get(call_id)
        if call is None or call.abandoned:
            # Nobody waits (cancelled by timeout, or the caller went away):
            # give the arena space back at once.
            for t in outputs:
                if t.location == _LOC_ARENA:
                    self._queue_release((t.arena_id, t.arena_offset))
            if final:
                self._calls.pop(call_id, None)
            return
        if body.has_error:
            code = body.error_code
            resp = _Response(error=_TritonError(body.error_message, code if code <= 7 else 0))
            for t in outputs:
                if t.location == _LOC_ARENA:
                    self._queue_release((t.arena_id, t.arena_offset))
        else:
            try:
                resp = _Response(_ResponseOutputs(outputs, buf, self._lease, self._queue_release))
            except Exception as e:  # noqa: BLE001 - a bad response fails this call only
                resp = _Response(error=_TritonError(f"BLS response: {e}"))
            if body.parameters:
                _seam.set_parameters_json(resp, body.parameters)
        if final:
            self._calls.pop(call_id, None)
        self._push(call, resp, final)

    def on_control_done(self, call_id: int, reply: dict[str, Any]) -> None:
        call = self._calls.pop(call_id, None)
        if call is None:
            return
        call.reply = reply
        self._push(call, None, True)

    def _lease(self, arena_id: int, offset: int, n: int) -> Any:
        entry = self._arenas.get(arena_id)
        if entry is None and arena_id in self._unmapped:
            raise MemoryError(
                f"the stub could not map {self._unmapped[arena_id]}; its address space"
                " is limited by stub-sandbox-address-space-bytes"
            )
        if entry is None:
            raise C.ProtocolError(f"unknown BLS arena {arena_id}")
        m, addr = entry
        if offset > len(m) or n > len(m) - offset:
            raise C.ProtocolError(f"BLS output outside arena {arena_id}")
        lease = _Lease(self, (arena_id, offset), addr + offset, n, m)
        return np.asarray(lease)

    def _push(self, call: Call, resp: Any, final: bool) -> None:
        if resp is not None:
            call.responses.append(resp)
        if final:
            call.final = True
        event = call.event  # read after the state changed: see _wait_sync
        if event is not None:
            event.set()
        fut = call.future
        if fut is not None:
            if threading.get_ident() == self._loop_thread:
                if not fut.done():
                    fut.set_result(None)
            else:
                self.loop.call_soon_threadsafe(_wake, fut)

    def fail_all(self, why: str) -> None:
        """The backend is gone: every waiter gets an error."""
        for call in list(self._calls.values()):
            if call.control:
                call.reply = {"ok": False, "error": why}
                self._push(call, None, True)
            else:
                self._push(call, _Response(error=_TritonError(why, _TritonError.UNAVAILABLE)), True)
        self._calls.clear()

    # ---------------------------------------------------------------- releases

    def _queue_release(self, ref: tuple[int, int]) -> None:
        if self._forked is not None:
            return  # leased before the fork: the parent releases it
        with self._release_lock:
            self._releases.append(ref)
            if self._release_scheduled:
                return
            self._release_scheduled = True
        self.turns.soon(self.flush_releases)

    def flush_releases(self) -> None:
        if not self._releases:
            # Unlocked peek: a release queued after it schedules this again.
            return
        with self._release_lock:
            refs, self._releases = self._releases, []
            self._release_scheduled = False
        self.out.bls_releases(refs)

    # ---------------------------------------------------------------- calls out

    def in_flight(self) -> int:
        """Calls still waiting for an answer (the debug counters)."""
        return len(self._calls)

    def control_call(self) -> Call:
        """A new call answered by one reply (MODEL_CONTROL_DONE or
        METRIC_DONE), for ``register`` and ``reply``."""
        call = Call(self, next(self._ids), False)
        call.control = True
        return call

    def register(self, call: Call) -> None:
        """Where the channel may be used, before the call's frame is sent:
        its answer finds it."""
        self._calls[call.id] = call

    def reply(self, call: Call) -> dict[str, Any]:
        """Wait for a control call's reply (any thread)."""
        while not call.final:
            self._wait_sync(call)
        return call.reply or {"ok": False, "error": "no answer"}

    def _check_usable(self, what: str, ftype: int = C.BLS_REQUEST) -> None:
        """A TritonModelException unless model code may have a frame of
        ``ftype`` sent now (the life cycle's table: no BLS in initialize()
        nor finalize()) and the connection is open."""
        if not self.life.model_may_send(ftype):
            raise pb_utils.TritonModelException(
                "BLS is only supported during the 'execute' function. "
                f"(tritonpy: {what} was called from model '{self.names.model}' "
                "outside execute(): during initialize() or finalize())"
            )
        if self.channel.closed:
            raise pb_utils.TritonModelException(f"{what}: the server connection is closed")

    def _start(self, call: Call, frame: bytes) -> None:
        """Loop thread (or a reader in turn): register and send."""
        self._calls[call.id] = call
        self.out.send_referring(frame)

    def _submit(self, call: Call, frame: bytes) -> None:
        self.turns.run(self._start, call, frame)

    def exec(self, request: Any, decoupled: bool) -> Any:
        self._check_usable("InferenceRequest.exec()")
        if self._forked is not None:
            return self._child_client().exec(request, decoupled)
        if (  # a call that could never be answered
            self.instance_count <= 1
            and _seam.model_name(request) == self.names.model
            and threading.get_ident() == self._loop_thread
        ):
            err = _Response(
                error=_TritonError(
                    f"model '{_seam.model_name(request)}' called itself with a blocking exec() from its "
                    "only instance: the request could never run (it would deadlock). Use more "
                    "instances, or 'async def execute' with 'await async_exec()'",
                    _TritonError.UNAVAILABLE,
                )
            )
            if decoupled:
                call = Call(self, 0, True)
                call.responses.append(err)
                call.final = True
                return _ITER(call)
            return err
        call = Call(self, next(self._ids), decoupled)
        deadline = call.deadline = _deadline_of(request, _TIMEOUT_GRACE)
        frame = self.out.bls_request(call.id, request)
        if decoupled:
            self._submit(call, frame)
            return _ITER(call)
        turns = self.turns
        if not turns.hold():
            self._submit(call, frame)
            return self._wait_final(call)
        # The loop thread in a sync execute, nobody else reading: it sends,
        # then reads in turn until the answer is in (or the deadline has
        # passed: _wait_final times the call out), holding the channel.
        try:
            self._start(call, frame)
            if self._spin_skip:  # (sleeping at once after spins that caught nothing)
                self._spin_skip -= 1
                spin = 0
            else:
                spin = self.spin_ns
            while not call.final:
                # A turn (and the spin that starts it) ends by the call's
                # deadline: _wait_final then times the call out.
                wait = _TURN if spin < _TURN_NS else spin / 1e9
                if deadline:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    if left < wait:
                        wait = left
                if turns.turn(wait, spin):
                    self._spin_backoff = 1
                elif spin:
                    # Nothing came while it spun: the answers take longer
                    # than a spin now (a busy server), so the next calls
                    # sleep at once, more of them each time.
                    spin = 0
                    self._spin_skip = self._spin_backoff
                    self._spin_backoff = min(2 * self._spin_backoff, _SPIN_BACKOFF)
        finally:
            turns.lock.release()
        return self._wait_final(call)

    async def async_exec(self, request: Any, decoupled: bool) -> Any:
        self._check_usable("InferenceRequest.async_exec()")
        if self._forked is not None:
            return await self._child_client().async_exec(request, decoupled)
        call = Call(self, next(self._ids), decoupled)
        call.deadline = _deadline_of(request, _TIMEOUT_GRACE)
        self._start(call, self.out.bls_request(call.id, request))
        if decoupled:
            # Back once there is something to iterate: a plain ``for`` over
            # the responses blocks the loop, and by then every coroutine
            # started with this one has sent its calls too.
            while not call.responses and not call.final:
                await self._wait_async(call)
            return _ITER(call)
        while not call.final:
            await self._wait_async(call)
        return (
            call.responses[-1]
            if call.responses
            else _Response(error=_TritonError("BLS call ended without a response"))
        )

    def model_control(self, msg: dict[str, Any]) -> dict[str, Any]:
        # (In a forked child too: the state it was forked in decides.)
        self._check_usable("the model loading API", C.MODEL_CONTROL)
        if self._forked is not None:
            return self._child_client().model_control(msg)
        call = self.control_call()
        self._submit(call, self.out.model_control(call.id, msg))
        return self.reply(call)

    # ---------------------------------------------------------------- waiting

    def _wait_final(self, call: Call) -> Any:
        while not call.final:
            self._wait_sync(call)
        return (
            call.responses[-1]
            if call.responses
            else _Response(error=_TritonError("BLS call ended without a response"))
        )

    def next_sync(self, call: Call) -> Any:
        while not call.responses:
            if call.final:
                return None
            self._wait_sync(call)
        return call.responses.popleft()

    async def next_async(self, call: Call) -> Any:
        while not call.responses:
            if call.final:
                return None
            await self._wait_async(call)
        return call.responses.popleft()

    async def _wait_async(self, call: Call) -> None:
        if self._forked is not None:
            self._orphaned(call)
            return
        fut = self.loop.create_future()
        call.future = fut
        if call.responses or call.final:
            return
        timeout = None
        if call.deadline:
            timeout = max(0.0, call.deadline - time.monotonic())
        try:
            await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            self._time_out(call)
        except asyncio.CancelledError:
            # The caller went away: cancel the call, drop what comes back.
            self.cancel(call)
            call.abandoned = True
            raise
        finally:
            call.future = None

    def _wait_sync(self, call: Call) -> None:
        """Wait a little for ``call`` to make progress, reading the socket
        in turn when nobody else does."""
        if self._forked is not None:
            self._orphaned(call)
            return
        if call.deadline and time.monotonic() > call.deadline:
            self._time_out(call)
            return
        turns = self.turns
        if threading.get_ident() == self._loop_thread:
            # The pump flushes what is queued (responses, releases) first.
            if turns.away:  # in a sync execute (or initialize, finalize)
                if turns.pump(0.05):
                    return
            else:  # sync code in a coroutine: other threads' work runs in turn meanwhile
                turns.enter()
                try:
                    pumped = turns.pump(0.05)
                finally:
                    turns.leave()
                if pumped:
                    return
        elif turns.away and turns.pump(0.02):
            return
        event = call.event
        if event is None:
            # Made here, then the state checked again: a response pushed
            # before the event existed is seen now, one pushed after sets it.
            event = call.event = threading.Event()
            if call.responses or call.final:
                return
        event.wait(0.05)
        event.clear()

    def _orphaned(self, call: Call) -> None:
        """A forked child waits on a call its parent made before the fork:
        its answers go to the parent."""
        self._push(
            call,
            _Response(
                error=_TritonError(
                    "tritonpy: this BLS call was made before the process forked: its "
                    "responses go to the process that made it",
                    _TritonError.UNAVAILABLE,
                )
            ),
            True,
        )

    def _time_out(self, call: Call) -> None:
        self.cancel(call)
        call.abandoned = True
        self._calls.pop(call.id, None)
        self._push(
            call,
            _Response(
                error=_TritonError(
                    f"BLS call timed out (no final response {_TIMEOUT_GRACE:.0f} s past the request's "
                    "timeout)",
                    _TritonError.UNAVAILABLE,
                )
            ),
            True,
        )

    def cancel(self, call: Call) -> None:
        if call.final or call.id == 0 or self._forked is not None:
            return
        self.turns.run(self.out.send, self.out.bls_cancel(call.id))


def _wake(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)


# The BLS_REQUEST encoder (compiled), under the name the golden-frame tests use.
encode_bls_request = _bls_wire.encode_request


def _model_parameter(args: dict[str, Any], key: str, default: int) -> int:
    """The model config's parameter ``key`` as a non-negative int, or
    ``default`` (absent, or not such a number)."""
    try:
        params = json.loads(args.get("model_config", "{}")).get("parameters") or {}
        value = int(params[key]["string_value"])
    except (ValueError, TypeError, AttributeError, KeyError):
        return default
    return value if value >= 0 else default
