# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""A test host that plays the backend's side of the protocol.

It starts a real stub process (``python -m tritonpy.stub``) on a real
SOCK_SEQPACKET socket pair and speaks to it with the reference codec
(tests/protocol_ref.py), so the stub is tested without tritonserver.
"""

from __future__ import annotations

import array
import fcntl
import json
import mmap
import os
import re
import select
import socket
import struct
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import protocol_ref as P

FP32 = 11


def write_model(tmp_path: Path, source: str, name: str = "model.py") -> Path:
    """``source`` (dedented) as <tmp_path>/m/1/<name>; returns the version
    directory, what StubHost.handshake loads."""
    d = tmp_path / "m" / "1"
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_text(textwrap.dedent(source))
    return d


def f32(name: str, values: list[float]) -> dict:
    """An inline FP32 input tensor."""
    return P.inline(name, FP32, [len(values)], struct.pack(f"<{len(values)}f", *values))


class StubHost:
    def __init__(
        self, *, env: dict[str, str] | None = None, prefix: list[str] | None = None
    ) -> None:
        """`prefix`: a command the stub runs under (a profiler, say)."""
        self.sock, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        child_fd = child.fileno()
        self.proc = subprocess.Popen(
            [
                *(prefix or []),
                sys.executable,
                "-m",
                "tritonpy.stub",
                "--fd",
                str(child_fd),
                "--instance",
                "t_0",
            ],
            pass_fds=(child_fd,),
            env={**os.environ, **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        child.close()
        self.greeted = False  # HELLO already read (by auto_complete)
        self.stub_arenas: dict[int, mmap.mmap] = {}
        self.my_arenas: dict[int, tuple[int, mmap.mmap]] = {}
        self.logs: list[dict[str, Any]] = []

    # -- raw frames

    def send(self, frame: bytes, fds: tuple[int, ...] = ()) -> None:
        anc = (
            [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes())] if fds else []
        )
        self.sock.sendmsg([frame], anc)

    def recv(self, timeout: float = 30.0) -> dict[str, Any]:
        """The next frame that is not a LOG (those are kept in .logs); ARENA
        frames are mapped and returned too."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.sock], [], [], left)[0]:
                raise TimeoutError("no frame from the stub")
            data, anc, flags, _ = self.sock.recvmsg(P.MAX_FRAME + 1, socket.CMSG_SPACE(64))
            if not data:
                raise EOFError("the stub closed the socket")
            fds: list[int] = []
            for level, kind, raw in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    a = array.array("i")
                    a.frombytes(raw)
                    fds.extend(a)
            frame = P.decode(data)
            if frame["flags"] & P.FLAG_BODY_IN_ARENA:
                ref = frame["body"]
                raw = bytes(
                    self.stub_arenas[ref["arena_id"]][
                        ref["offset"] : ref["offset"] + ref["body_len"]
                    ]
                )
                frame["body"] = P.decode_body(P.TYPE_VALUES[frame["type"]], b"\0" * 24 + raw, 24)
                frame["arena_ref"] = ref
            if frame["type"] == "ARENA":
                assert len(fds) == 1
                st = os.fstat(fds[0])
                assert st.st_mode & 0o777 == 0o600, oct(st.st_mode)
                # Never resized, and its seals are final.
                assert fcntl.fcntl(fds[0], fcntl.F_GET_SEALS) == (
                    fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
                )
                self.stub_arenas[frame["body"]["arena_id"]] = mmap.mmap(
                    fds[0], frame["body"]["size"]
                )
                os.close(fds[0])
            else:
                assert not fds, f"{frame['type']} frame carried descriptors"
            if frame["type"] == "LOG":
                self.logs.append(frame["body"])
                continue
            return frame

    def recv_type(self, ftype: str, timeout: float = 30.0) -> dict[str, Any]:
        while True:
            f = self.recv(timeout)
            if f["type"] == ftype:
                return f
            if f["type"] != "ARENA":
                raise AssertionError(f"expected {ftype}, got {f}")

    def nothing_more(self, timeout: float = 30.0) -> None:
        """Two round trips: IS_READY, answered once the stub has read every
        frame before it, then another once the first is answered (by then
        the stub's loop has also run what it had scheduled for its next
        turn). Fails if anything but their READY (an ARENA or LOG aside)
        comes first: a state, not a window of time, shows that nothing
        followed what was received before."""
        for query in (0xFFFE, 0xFFFF):
            self.send(P.encode(P.IS_READY, {}, id=query))
            ready = self.recv_type("READY", timeout)
            assert ready["id"] == query, ready

    # -- conversation

    def load(self, tmp_path: Path, source: str, **handshake: Any) -> dict[str, Any]:
        """The model ``source`` written under ``tmp_path`` (write_model) and
        loaded: ``handshake`` with its version directory."""
        return self.handshake(write_model(tmp_path, source), **handshake)

    def handshake(
        self,
        model_dir: Path,
        *,
        model_file: str = "model.py",
        config: dict[str, Any] | None = None,
        settings: dict[str, Any] | None = None,
        log_levels: int = 0b0111,
        timeout: float = 30.0,
        then: tuple[bytes, ...] = (),
        sent: Callable[[], None] | None = None,
    ) -> dict[str, Any]:
        """LOG_LEVELS and INIT (after HELLO), and the frames ``then`` right
        behind them; ``sent()`` is called once they are all in the stub's
        socket; returns INIT_DONE's JSON. ``log_levels``: Triton's
        defaults (INFO, WARNING, ERROR) unless told."""
        if not self.greeted:
            hello = self.recv_type("HELLO", timeout)
            assert hello["body"]["json"]["protocol"] == 1
        cfg = config or {"name": "m"}
        args = {
            "model_config": json.dumps(cfg),
            "model_instance_kind": "CPU",
            "model_instance_name": "t_0",
            "model_instance_device_id": "0",
            "model_repository": str(model_dir.parent),
            "model_version": "1",
            "model_name": cfg["name"],
        }
        init = {
            "args": args,
            "model_file": str(model_dir / model_file),
            "model_dir": str(model_dir),
            "settings": settings or {},
        }
        self.send(P.encode(P.LOG_LEVELS, {"enabled": log_levels}))
        self.send(P.encode(P.INIT, {"json": init}))
        for frame in then:
            self.send(frame)
        if sent is not None:
            sent()
        return self.recv_type("INIT_DONE", timeout)["body"]["json"]

    def auto_complete(
        self, model_dir: Path, config: dict[str, Any], *, model_file: str = "model.py"
    ) -> dict[str, Any]:
        """HELLO, then AUTO_COMPLETE; returns AUTO_COMPLETE_DONE's JSON. A
        handshake() afterwards sends INIT to the same stub, as the backend
        does for a model's first instance."""
        if not self.greeted:
            assert self.recv_type("HELLO")["body"]["json"]["protocol"] == 1
            self.greeted = True
        msg = {
            "model_name": config.get("name", "m"),
            "config": json.dumps(config),
            "model_file": str(model_dir / model_file),
            "model_dir": str(model_dir),
            "settings": {},
        }
        self.send(P.encode(P.LOG_LEVELS, {"enabled": 0b0111}))
        self.send(P.encode(P.AUTO_COMPLETE, {"json": msg}))
        return self.recv_type("AUTO_COMPLETE_DONE")["body"]["json"]

    def new_arena(self, arena_id: int, size: int) -> mmap.mmap:
        fd = os.memfd_create(f"host-{arena_id}", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        os.ftruncate(fd, size)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)
        m = mmap.mmap(fd, size)
        self.send(P.encode(P.ARENA, {"arena_id": arena_id, "size": size}), (fd,))
        self.my_arenas[arena_id] = (fd, m)
        return m

    def execute(self, batch_id: int, requests: list[dict[str, Any]], **kw: Any) -> dict[str, Any]:
        self.send(P.encode(P.EXECUTE, {"requests": requests}, id=batch_id, **kw))
        frame = self.recv(kw.get("timeout", 60.0))
        while frame["type"] == "ARENA":
            frame = self.recv()
        if frame["type"] != "RESPONSES" or frame["id"] != 0:
            assert frame["id"] == batch_id, _brief(frame)
            return frame
        # A batch's answers end with an entry that ends the batch
        # (BATCH_END), in as many frames as they fill: shown as one frame
        # that ends the batch (BATCH_DONE), with "frames" counting them.
        entries, frames = list(frame["body"]["responses"]), 1
        while not (entries and entries[-1]["response_flags"] & P.RESP_BATCH_END):
            more = self.recv(kw.get("timeout", 60.0))
            if more["type"] == "ARENA":
                continue
            assert more["type"] == "RESPONSES" and more["id"] == 0, _brief(more)
            entries += more["body"]["responses"]
            frames += 1
        assert all(e["batch_id"] == batch_id for e in entries), _brief(frame)
        entries[-1]["response_flags"] &= ~P.RESP_BATCH_END
        return {
            **frame,
            "id": batch_id,
            "flags": frame["flags"] | P.FLAG_BATCH_DONE,
            "body": {**frame["body"], "responses": entries},
            "frames": frames,
        }

    def entries(self, until: Any, timeout: float = 30.0) -> list[dict[str, Any]]:
        """Collect RESPONSES entries (and EXECUTE_DONE frames, as
        {"execute_done": id, ...}) until ``until(collected)`` is true."""
        got: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        while not until(got):
            f = self.recv(max(0.01, deadline - time.monotonic()))
            if f["type"] == "RESPONSES":
                for e in f["body"]["responses"]:
                    got.append(e)
                    if e["response_flags"] & P.RESP_BATCH_END:
                        got.append({"batch_done": e["batch_id"]})
                if f["flags"] & P.FLAG_BATCH_DONE:
                    got.append({"batch_done": f["id"]})
            elif f["type"] == "EXECUTE_DONE":
                got.append({"execute_done": f["id"], **f["body"]})
            elif f["type"] != "ARENA":
                raise AssertionError(f"unexpected frame {f}")
        return got

    def tensor_bytes(self, t: dict[str, Any]) -> bytes:
        if t["location"] == 0:
            return bytes.fromhex(t["data_hex"])
        m = self.stub_arenas[t["arena_id"]]
        return bytes(m[t["offset"] : t["offset"] + t["byte_size"]])

    def wait(self, timeout: float = 30.0) -> int:
        return self.proc.wait(timeout)

    def close(self) -> None:
        try:
            self.sock.close()
        finally:
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            for s in (self.proc.stdout, self.proc.stderr):
                if s:
                    s.close()
            for fd, m in self.my_arenas.values():
                m.close()
                os.close(fd)


def _brief(frame: dict[str, Any]) -> str:
    """A frame for an assertion message, without its tensors' bytes."""
    return re.sub(r"'data_hex': '[0-9a-f]{64,}'", "'data_hex': ...", repr(frame))[:2000]
