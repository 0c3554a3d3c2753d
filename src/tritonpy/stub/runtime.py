# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The stub's runtime: one model instance served on one event loop.

Frames from the backend arrive through ``Channel`` at the request path's
compiled core, ``Engine`` (_engine.pyx), which handles EXECUTE, batches,
response senders and cancellation itself and hands every other frame to
its handler here: the model's life cycle (init, readiness, finalize).
Everything runs on the loop thread.
"""

from __future__ import annotations

import asyncio
import gc
import importlib.machinery
import importlib.util
import inspect
import json
import os
import sys
import threading
import traceback
from collections.abc import Callable
from typing import Any

from tritonpy.pb_utils._seam import ModelConfig
from tritonpy.stub import _batch, bls_fork, debug
from tritonpy.stub import _codec as C
from tritonpy.stub._channel import Channel
from tritonpy.stub._engine import Engine
from tritonpy.stub.arena import PeerArenas
from tritonpy.stub.bls import BlsClient
from tritonpy.stub.lifecycle import Handler, Lifecycle, State
from tritonpy.stub.metrics import MetricClient
from tritonpy.stub.names import ModelNames
from tritonpy.stub.outbound import TEXT_SLACK, Outbound, stderr
from tritonpy.stub.pb_host import PbHost
from tritonpy.stub.pylogging import TritonLog, TritonLogRoute
from tritonpy.stub.readiness import Readiness
from tritonpy.stub.turns import Turns

# What a bad frame raises while it is decoded or handled: the stub leaves.
_PROTOCOL_ERRORS = (C.ProtocolError, ValueError, KeyError, UnicodeDecodeError)
# Frames whose handlers start loop work (tasks, model calls): one read in
# turn by another thread while the loop is away waits for the loop.
_LOOP_ONLY = frozenset((C.DRAIN, C.INIT, C.AUTO_COMPLETE, C.FINALIZE))

LOG_INFO, LOG_WARN, LOG_ERROR, LOG_VERBOSE = 0, 1, 2, 3
# For a host that sends no grace (test hosts); the backend always sends
# finalize-grace-seconds, 0 unless set.
DEFAULT_FINALIZE_GRACE = 5.0
# The backend's stub-max-body-bytes default, for a backend that does not say.
DEFAULT_MAX_BODY = 64 << 20
# (model file, TritonPythonModel) that a model's own stub template imported,
# and whose initialize_shared it ran, before it forked this stub
# (stub/template.py); None in an exec'd stub or one of a shared template.
PREPARED: tuple[str, Any] | None = None


class Stub:
    def __init__(
        self,
        fd: int,
        instance: str,
        loop: asyncio.AbstractEventLoop,
        *,
        make_channel: Callable[..., Channel] = Channel,
    ) -> None:
        """``make_channel(fd, loop, on_eof, on_violation)``: the I/O
        (tests pass one that keeps what is sent and feeds frames).

        The composition root: every part gets the parts it works with,
        none gets the stub."""
        self.loop = loop
        self.names = ModelNames(instance)
        self.channel = ch = make_channel(fd, loop, self._on_eof, self._fatal)
        self.turns = turns = Turns(loop, ch)
        self.out = out = Outbound(ch)
        self.own = out.own
        self.peer = PeerArenas()
        # Changed only by its move() (stub/lifecycle.py has the moves, and
        # which frames each state takes).
        self.life = Lifecycle()
        self.log = TritonLog(turns, out)
        self.bls = BlsClient(loop, out, turns, ch, self.life, self.names)
        self.metrics = MetricClient(out, turns, ch, self.bls, self.names)
        self.engine = Engine(
            loop,
            out,
            turns,
            self.peer,
            self.metrics,
            self.names,
            self.log,
            self.life,
            self._on_descriptor_frame,
            self._fatal,
        )
        self.readiness = Readiness(loop, turns, out, self.names)
        # pb_utils reaches the stub through it.
        self.host = PbHost(self.engine, self.bls, self.metrics, self.own, self.log.log).attach()
        # A forked child's BLS calls and arenas: its own (stub/bls_fork.py).
        bls_fork.install(self.bls, self.host)
        self.python_logging = TritonLogRoute(self.log, self.host, ch, self.names)
        self.life.route(self._frame_handlers(), self._loop_only)
        self.model: Any = None
        # (model file, TritonPythonModel) imported for AUTO_COMPLETE, reused
        # by the INIT that follows on this stub.
        self._model_class: tuple[str, Any] | None = None
        self.settings: dict[str, Any] = {}
        self.exit_code: int | None = None

    # ---------------------------------------------------------------- life

    def start(self) -> None:
        self.python_logging.install()  # before the model file is imported
        self.out.hello()
        self.channel.start(self.engine)  # it receives every frame
        # The deputy's turns flush what is queued to go out.
        self.turns.start_deputy([self.engine.flush, self.bls.flush_releases])
        if debug.enabled():
            debug.IdleReporter(
                self.loop, self.engine, self.bls, self.own, self.log, self.names
            ).start()

    @property
    def state(self) -> State:
        return self.life.state

    def _stop(self, code: int) -> None:
        self.exit_code = code
        if self.life.state is not State.DONE:
            self.life.move(State.DONE, "leaving")
        if threading.get_ident() == self.turns.loop_thread:
            self.loop.stop()
        else:  # read in turn while the loop is away
            self.loop.call_soon_threadsafe(self.loop.stop)

    def _on_eof(self, why: str) -> None:
        # The backend (or the whole server) went away: nothing is left to
        # answer, so leave without running user code.
        self.bls.fail_all(f"tritonpy: the server connection closed ({why})")
        self._stop(0)

    def _fatal(self, message: str) -> None:
        """A protocol violation: tell the backend why, then leave. Answers
        already made (of the sync batches read with the bad frame) go
        first."""
        self.engine.drained()
        self.out.error(message)
        self.out.flush_blocking("the ERROR frame", self.names.instance)
        self.stderr(message)
        self._stop(70)

    def stderr(self, text: str) -> None:
        stderr(self.names.instance, text)

    # ---------------------------------------------------------------- dispatch

    def _frame_handlers(self) -> dict[int, Handler]:
        """Frame type -> handler(id, body, buf), for every frame the
        backend sends but the two that carry a descriptor (ARENA,
        BLS_ARENA: ``_on_descriptor_frame``). A handler runs only in a
        state that takes its frame (the life cycle's table); the engine
        receives every frame and calls them."""
        return {
            C.EXECUTE: self.engine.execute_handler,
            C.BLS_RESPONSE: self.bls.on_response,
            C.RELEASE: self._on_release,
            C.CANCEL: self._on_cancel,
            C.SEND_ERROR: self._on_send_error,
            C.MODEL_CONTROL_DONE: self._on_control_done,
            C.METRIC_DONE: self._on_metric_done,
            C.LOG_LEVELS: self._on_log_levels,
            C.ERROR: self._on_error,
            C.IS_READY: self.readiness.on_query,
            C.DRAIN: self._on_drain,
            C.INIT: self._on_init,
            C.AUTO_COMPLETE: self._on_auto_complete,
            C.FINALIZE: self._on_finalize,
        }

    def _on_descriptor_frame(self, ftype: int, mv: memoryview, fds: list[int]) -> None:
        if ftype == C.ARENA:
            name, add = "ARENA", self.peer.add
        elif ftype == C.BLS_ARENA:
            name, add = "BLS_ARENA", self.bls.on_arena
        else:
            raise C.ProtocolError(f"frame type {ftype} carried file descriptors")
        aid, size = C.decode_body(ftype, mv, C.HEADER_SIZE)
        if len(fds) != 1:
            raise C.ProtocolError(f"{name} frame with {len(fds)} descriptors, expected 1")
        add(aid, size, fds[0])

    def _loop_only(self, ftype: int, handler: Handler) -> Handler:
        """What the dispatch map holds for a frame of ``ftype``: for one
        in _LOOP_ONLY read in turn by another thread while the loop is
        away, a call on the loop, where the state then decides. (Its body
        is decoded: the frame's bytes are not kept.)"""
        if ftype not in _LOOP_ONLY:
            return handler
        loop_thread = self.turns.loop_thread

        def on_loop_thread(fid: int, body: Any, buf: Any) -> None:
            if threading.get_ident() == loop_thread:
                handler(fid, body, buf)
            else:
                self.loop.call_soon_threadsafe(self._dispatch_later, ftype, fid, body)

        return on_loop_thread

    def _dispatch_later(self, ftype: int, fid: int, body: Any) -> None:
        try:
            self.life.handlers[ftype](fid, body, None)
        except _PROTOCOL_ERRORS as e:
            self._fatal(f"protocol error: {e}")

    # -- handlers, one per frame type (the table above)

    def _on_release(self, fid: int, body: Any, buf: Any) -> None:
        free = self.own.free
        for aid, off in body:
            free(aid, off)

    def _on_cancel(self, fid: int, body: Any, buf: Any) -> None:
        self.engine.on_cancel(body)

    def _on_send_error(self, fid: int, body: Any, buf: Any) -> None:
        self.engine.on_send_error(*body)

    def _on_control_done(self, fid: int, body: Any, buf: Any) -> None:
        self.bls.on_control_done(fid, body)

    def _on_metric_done(self, fid: int, body: Any, buf: Any) -> None:
        self.metrics.on_done(fid, body)

    def _on_log_levels(self, fid: int, body: Any, buf: Any) -> None:
        self.host.log_levels = body

    def _on_error(self, fid: int, body: Any, buf: Any) -> None:
        self.stderr(f"the backend reports: {body}")

    def _on_drain(self, fid: int, body: Any, buf: Any) -> None:
        # Taken only while serving: no work is in flight before READY, nor
        # new work after FINALIZE.
        self.life.move(State.DRAINING, "DRAIN")
        self.loop.create_task(self._drain())

    def _on_finalize(self, fid: int, body: Any, buf: Any) -> None:
        self.life.move(State.UNLOADING, "FINALIZE")
        self.loop.create_task(self._finalize())

    # ---------------------------------------------------------------- init / finalize

    def _set_model_name(self, name: str) -> None:
        self.names.model = name
        self.engine.named(name)

    def _route_python_logging(self, settings: dict[str, Any]) -> None:
        """Before any model code: stub-python-logging=false gives Python's
        logging its own last resort back (stub/pylogging.py)."""
        if not settings.get("python_logging", True):
            self.python_logging.uninstall()

    def _on_auto_complete(self, fid: int, msg: dict[str, Any], buf: Any) -> None:
        self.life.move(State.CONFIGURED, "AUTO_COMPLETE")
        model_file, config = msg["model_file"], msg["config"]
        self._route_python_logging(msg.get("settings", {}))
        self._set_model_name(msg.get("model_name", self.names.instance))
        step = f"importing {model_file} failed"
        try:
            _expose_model_dir(self.host, msg)
            with self.turns.model_code():
                cls = _prepared(model_file) or load_model_class(msg)
                self._model_class = (model_file, cls)
                step = "auto_complete_config failed"
                reply = _complete_config(cls, config)
        except (Exception, SystemExit) as e:  # noqa: BLE001 - every failure must reach Triton
            err = (
                f"tritonpy: model '{self.names.model}': {step}: "
                f"{type(e).__name__}: {e}\n{traceback.format_exc()}"
            )
            reply = {"ok": False, "error": err}
        # Inline: the backend takes no arena before INIT.
        frame = self.out.json_frame(C.AUTO_COMPLETE_DONE, reply, inline=True)
        if len(frame) > C.MAX_FRAME:
            err = (
                f"tritonpy: model '{self.names.model}': the config completed by "
                f"auto_complete_config is {len(frame)} bytes of JSON, more than one "
                f"frame carries ({C.MAX_FRAME})"
            )
            frame = self.out.json_frame(C.AUTO_COMPLETE_DONE, {"ok": False, "error": err})
        # After the LOG frames auto_complete_config queued on the loop: the
        # backend may stop this stub as soon as the answer is a failure.
        self.loop.call_soon(self.out.send, frame)

    def _on_init(self, fid: int, msg: dict[str, Any], buf: Any) -> None:
        self.life.move(State.INITIALIZING, "INIT")
        args = msg.get("args", {})
        self.settings = msg.get("settings", {})
        self._route_python_logging(self.settings)
        names = self.names
        names.instance = args.get("model_instance_name") or names.instance
        self._set_model_name(args.get("model_name", names.instance))
        self.own.limit(
            self.settings.get("stub_max_arenas", float("inf")),
            self.settings.get("stub_max_arena_bytes", float("inf")),
        )
        # Texts of any length from here on, up to what the backend takes.
        max_body = int(self.settings.get("stub_max_body_bytes", DEFAULT_MAX_BODY))
        self.out.allow_arenas(max_body)
        _batch.set_text_limit(self.out.body_limit - TEXT_SLACK)
        self.bls.configure(args)
        try:
            _expose_model_dir(self.host, msg)
            imported, self._model_class = self._model_class, None
            with self.turns.model_code():
                cls = _prepared(msg["model_file"])
                if cls is None:
                    if imported is not None and imported[0] == msg["model_file"]:
                        cls = imported[1]
                    else:
                        cls = load_model_class(msg)
                    # No template ran it: once per stub, as it would once
                    # per model (docs/api.md).
                    shared = getattr(cls, "initialize_shared", None)
                    if callable(shared):
                        shared(shared_args(args))
                # is_ready() may be asked while initialize() runs.
                self.model = self.readiness.model = cls()
                init = getattr(self.model, "initialize", None)
                if init is not None:
                    init(args)
            execute = getattr(self.model, "execute", None)
            if not callable(execute):
                raise AttributeError("TritonPythonModel defines no execute(requests) method")
        except (Exception, SystemExit) as e:  # noqa: BLE001 - every failure must reach Triton
            err = (
                f"tritonpy: model '{self.names.model}' failed to initialize: "
                f"{type(e).__name__}: {e}\n{traceback.format_exc()}"
            )
            self.model = self.readiness.model = None
            self.life.move(State.FAILED, "initialize() failed")
            self.out.send_json(C.INIT_DONE, {"ok": False, "error": err})
            return
        self.engine.serve(
            self.model,
            bool(self.settings.get("decoupled", False)),
            # Answers of sync batches read together wait for each other
            # only when no execute timeout counts each batch's time.
            not float(self.settings.get("execute_timeout_seconds", 0)),
        )
        self.life.move(State.READY, "initialize() returned")
        # What initialize() built lives as long as the model: keep it out of
        # the collector's full passes, which would walk it on every one.
        gc.freeze()
        self.metrics.flush()  # what initialize() dropped goes first
        self.out.send_json(
            C.INIT_DONE,
            {
                "ok": True,
                "execute": "async" if inspect.iscoroutinefunction(execute) else "sync",
                "is_ready": callable(getattr(self.model, "is_ready", None)),
            },
        )

    async def _drain(self) -> None:
        grace = float(self.settings.get("finalize_grace_seconds", DEFAULT_FINALIZE_GRACE))
        try:
            await self.engine.drain(grace)
        finally:
            if self.life.state is State.DRAINING:  # not FINALIZE meanwhile
                self.life.move(State.READY, "drained")

    async def _finalize(self) -> None:
        grace = float(self.settings.get("finalize_grace_seconds", DEFAULT_FINALIZE_GRACE))
        try:
            await self.engine.drain(grace)
        except Exception:  # noqa: BLE001 - finalize must go on
            self.log.log(
                LOG_ERROR,
                f"model '{self.names.model}': draining on unload failed:\n{traceback.format_exc()}",
            )
        reply: dict[str, Any] = {"ok": True}
        fin = getattr(self.model, "finalize", None)
        if fin is not None:
            self.life.move(State.FINALIZING, "finalize()")
            try:
                with self.turns.model_code():
                    result = fin()
                if inspect.isawaitable(result):
                    await result
            except Exception as e:  # noqa: BLE001
                reply = {
                    "ok": False,
                    "error": f"tritonpy: model '{self.names.model}': finalize() "
                    f"raised {type(e).__name__}: {e}\n"
                    f"{traceback.format_exc()}",
                }
        # After the LOG frames finalize() queued on the loop (from any
        # thread): the backend stops reading once FINALIZE_DONE is in.
        self.loop.call_soon(self._finalized, reply)

    def _finalized(self, reply: dict[str, Any]) -> None:
        self.out.send_json(C.FINALIZE_DONE, reply)
        self.out.flush_blocking("FINALIZE_DONE", self.names.instance)
        self._stop(0)


def _complete_config(cls: Any, config: str) -> dict[str, Any]:
    """The AUTO_COMPLETE_DONE reply for the model class ``cls``."""
    complete = getattr(cls, "auto_complete_config", None)
    if complete is None:
        return {"ok": True}
    result = complete(ModelConfig(config))
    if inspect.isawaitable(result):
        if inspect.iscoroutine(result):
            result.close()
        raise TypeError("auto_complete_config must be a plain function, not a coroutine")
    if not isinstance(result, ModelConfig):
        raise TypeError(
            "auto_complete_config must return the pb_utils.ModelConfig it was given, "
            f"not {type(result).__name__}"
        )
    return {"ok": True, "config": json.dumps(result.as_dict(), separators=(",", ":"))}


def _is_backend_model(msg: dict[str, Any]) -> bool:
    """Whether the INIT or AUTO_COMPLETE message ``msg`` is for a model of
    a Python-based backend (its file is backends/<name>/model.py): Triton
    then sets the config's runtime to "model.py", as the backend checks."""
    config = msg["config"] if "config" in msg else msg.get("args", {}).get("model_config")
    return bool(config) and json.loads(config).get("runtime") == "model.py"


def _expose_model_dir(host: PbHost, msg: dict[str, Any]) -> None:
    """What pb_utils.get_model_dir() answers: the model's version directory."""
    if not _is_backend_model(msg):
        host.set_model_dir(msg["model_dir"])
    elif "args" in msg:
        args = msg["args"]
        host.set_model_dir(os.path.join(args["model_repository"], args["model_version"]))
    else:  # the backend's AUTO_COMPLETE names the backend's directory only
        host.set_model_dir(
            None,
            "pb_utils.get_model_dir(): tritonpy does not know the model's directory in "
            "auto_complete_config of a Python-based backend (it does in initialize)",
        )


def _prepared(model_file: str) -> Any:
    """The class the template imported for ``model_file``, or None."""
    if PREPARED is not None and PREPARED[0] == model_file:
        return PREPARED[1]
    return None


def shared_args(args: dict[str, Any]) -> dict[str, Any]:
    """initialize's ``args`` without the instance's own keys
    (model_instance_name, _kind, _device_id): initialize_shared's."""
    return {k: v for k, v in args.items() if not k.startswith("model_instance_")}


def load_model_class(msg: dict[str, Any]) -> Any:
    """TritonPythonModel of the model file of an INIT or AUTO_COMPLETE
    message, imported as the official stub imports it.

    A repository model's file is the module ``<version>.<file stem>`` of a
    package made of its version directory, so relative imports (``from .
    import helper``) work. sys.path gets what the official stub appends, in
    its order: the version directory (``import helper``), then the model's
    directory. Appended, not inserted: a model file named like a standard
    or installed module (``wave.py``, ``utils.py``) does not hide it. A
    Python-based backend's model.py is the top-level module ``model``, its
    directory appended to sys.path: no package there (named after the
    backend, it could hide a library of that name).

    ``python -m`` put the server's working directory first on sys.path;
    the official stub (an embedded interpreter in isolated mode) has no
    such entry, so it goes: a file in that directory must not shadow a
    module either."""
    model_file, model_dir = msg["model_file"], msg["model_dir"]
    # (safe_path: -P, Python 3.11 and later, leaves that entry out.)
    if not getattr(sys.flags, "safe_path", False) and sys.path and sys.path[0] == os.getcwd():
        del sys.path[0]
    if model_dir not in sys.path:
        sys.path.append(model_dir)
    stem = os.path.splitext(os.path.basename(model_file))[0]
    name, package = stem, ""
    if not _is_backend_model(msg):
        parent, package = os.path.split(os.path.normpath(model_dir))
        if parent not in sys.path:
            sys.path.append(parent)
        _new_package(package, model_dir)
        name = f"{package}.{stem}"
    spec = importlib.util.spec_from_file_location(name, model_file)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {model_file}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    if package:
        setattr(sys.modules[package], stem, module)
    cls = getattr(module, "TritonPythonModel", None)
    if cls is None:
        raise AttributeError(f"{model_file} defines no class TritonPythonModel")
    return cls


def _new_package(name: str, path: str) -> None:
    """Registers the directory ``path`` as the package ``name``: a regular
    package if it has an __init__.py (run now), else a namespace package."""
    init = os.path.join(path, "__init__.py")
    if os.path.isfile(init):
        spec = importlib.util.spec_from_file_location(name, init, submodule_search_locations=[path])
    else:
        spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
        spec.submodule_search_locations = [path]
    if spec is None:
        raise ImportError(f"cannot import the directory {path} as package {name}")
    package = importlib.util.module_from_spec(spec)
    sys.modules[name] = package
    if spec.loader is not None:
        try:
            spec.loader.exec_module(package)
        except BaseException:
            sys.modules.pop(name, None)
            raise
