# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Entry point of the stub process: ``python -m tritonpy.stub --fd N``.

The backend starts one per model instance and hands it one end of a
SOCK_SEQPACKET socket pair as descriptor N.
"""

from __future__ import annotations

import _signal
import asyncio
import os
import sys
from collections.abc import Callable

# What a sandboxed stub may read, and write, and the size of its scratch
# (tritonpy/stub/sandbox.py).
Confinement = tuple[list[str], list[str], int]


def _new_loop() -> asyncio.AbstractEventLoop:
    if os.environ.get("TRITONPY_LOOP", "uvloop") == "asyncio":
        return asyncio.new_event_loop()
    import uvloop

    return uvloop.new_event_loop()


def _restore_library_path() -> None:
    """An execution environment's stub starts with the environment's lib/
    first on LD_LIBRARY_PATH (the backend puts it there and names it in
    TRITONPY_EXEC_ENV_LIB). The dynamic loader has read it by now, so the
    environment's libraries still load; taken off the variable, as the
    official stub does, it does not reach the programs a model starts,
    which could pick the environment's libraries over their own."""
    lib = os.environ.pop("TRITONPY_EXEC_ENV_LIB", None)
    path = os.environ.get("LD_LIBRARY_PATH")
    if lib is None or path is None:
        return
    if path == lib:
        del os.environ["LD_LIBRARY_PATH"]
    elif path.startswith(lib + ":"):
        os.environ["LD_LIBRARY_PATH"] = path[len(lib) + 1 :]


def _die_with_server(lifeline: int) -> None:
    """Whatever a stub's model code is doing, the stub and what it started
    end with tritonserver (kill -9 or an exit timeout): a native thread of
    _lifetime waits, outside the GIL, for the server's lifeline (a pipe
    whose write end only the server holds) to hang up. Without one, the
    end of the socket is the only signal."""
    if lifeline < 0:
        return
    from tritonpy.stub import _lifetime

    _lifetime.watch_server(lifeline)


USAGE = """usage: python -m tritonpy.stub --fd FD [--instance NAME] [--server-lifeline FD]

tritonpy stub process: runs one model instance for the tritonpy Triton
backend. Started by the backend, not by hand.

  --fd FD          descriptor of this instance's SOCK_SEQPACKET socket
  --instance NAME  model instance name, used in messages
  --server-lifeline FD
                   the read end of a pipe that hangs up when tritonserver
                   ends: the stub and what it started end with it
  --sandbox-real-uid UID
                   (sandboxed stubs of a root server) the real uid to take
                   before anything else runs, kept for good
  --sandbox-tmp-bytes N
                   (sandboxed stubs) confine the stub's files before any
                   model code runs: a private scratch of N bytes, and
  --sandbox-read PATH, --sandbox-write PATH
                   (repeated) what it may read, and write, beyond what
                   every stub needs (tritonpy/stub/sandbox.py); then a
                   seccomp filter refuses the system calls a model has
                   no use for

python -m tritonpy.stub --template ... runs the stub template instead
(tritonpy/stub/template.py), which forks stubs.
"""


def parse_args(argv: list[str]) -> tuple[int, str, int, int, Confinement | None]:
    """The options the backend passes. (Not argparse: importing it
    costs every stub about 0.35 MiB of resident memory.)"""
    values = {
        "--fd": "",
        "--instance": "",
        "--server-lifeline": "-1",
        "--sandbox-real-uid": "-1",
        "--sandbox-tmp-bytes": "-1",
    }
    paths: dict[str, list[str]] = {"--sandbox-read": [], "--sandbox-write": []}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("-h", "--help"):
            sys.stdout.write(USAGE)
            sys.exit(0)
        key, eq, value = arg.partition("=")
        if key not in values and key not in paths:
            sys.exit(f"{USAGE}\nerror: unknown argument {arg!r}")
        if not eq:
            i += 1
            if i == len(argv):
                sys.exit(f"{USAGE}\nerror: {key} needs a value")
            value = argv[i]
        if key in paths:
            paths[key].append(value)
        else:
            values[key] = value
        i += 1
    numbers = {}
    for key in ("--fd", "--server-lifeline", "--sandbox-real-uid", "--sandbox-tmp-bytes"):
        try:
            numbers[key] = int(values[key])
        except ValueError:
            sys.exit(f"{USAGE}\nerror: {key} needs a number, not {values[key]!r}")
    tmp_bytes = numbers["--sandbox-tmp-bytes"]
    confinement = (
        (paths["--sandbox-read"], paths["--sandbox-write"], tmp_bytes) if tmp_bytes >= 0 else None
    )
    return (
        numbers["--fd"],
        values["--instance"],
        numbers["--server-lifeline"],
        numbers["--sandbox-real-uid"],
        confinement,
    )


def give_api_names() -> None:
    """Models import the official module names: they get ours (in a stub,
    and in a template before it imports anything a stub would)."""
    from tritonpy.pb_utils._seam import c_utils, pb_utils

    sys.modules.setdefault("triton_python_backend_utils", pb_utils)
    sys.modules.setdefault("c_python_backend_utils", c_utils)


def main(argv: list[str] | None = None, forked: Callable[[], None] | None = None) -> int:
    """``forked``: what a stub forked from the template does once its ids
    are its own, before anything else (template.py)."""
    argv = sys.argv[1:] if argv is None else argv
    fd, instance, lifeline, real_uid, confinement = parse_args(argv)
    if real_uid >= 0:
        from tritonpy.stub import _lifetime

        try:
            _lifetime.keep_real_uid(real_uid)
        except OSError as e:
            sys.exit(
                f"tritonpy stub {instance}: the stub sandbox could not be set up: {e.strerror}"
            )
    if forked is not None:
        forked()
    if confinement is not None:
        # Before any model code: from here on the stub reads what it
        # needs and writes only its scratch.
        from tritonpy.stub import _lifetime, sandbox

        try:
            sandbox.confine(*confinement)
            # Last, once the stub's own mounts are made: no kernel
            # interface a model has no use for (io_uring, bpf, keys, new
            # user namespaces, mounts, ...).
            _lifetime.refuse_syscalls()
        except OSError as e:
            sys.exit(
                f"tritonpy stub {instance}: the stub sandbox (stub-sandbox=true) "
                f"could not be set up: {e.strerror}"
            )
    _restore_library_path()
    # Model code sees the argv of the official stub's embedded interpreter,
    # [""]: unittest.main() or argparse with defaults find no stub options.
    sys.argv = [""]

    # Ctrl-C on a foreground tritonserver reaches the whole process group:
    # the server shuts down and finalizes us; dying first would fail requests.
    # (signal.signal is this call plus turning the old handler into an enum,
    # which for Python's default handler raises and catches a ValueError:
    # 0.15 ms in a forked stub, against 0.02.)
    _signal.signal(_signal.SIGINT, _signal.SIG_IGN)
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(line_buffering=True)  # print() reaches the log at once

    _die_with_server(lifeline)

    give_api_names()

    from tritonpy.stub.runtime import Stub

    loop = _new_loop()
    asyncio.set_event_loop(loop)
    stub = Stub(fd, instance or f"fd{fd}", loop)
    if confinement is not None:
        # The host's root, detached meanwhile (sandbox.own_root), is gone
        # before the stub says HELLO, and so before any model code.
        from tritonpy.stub import sandbox

        try:
            sandbox.finish()
        except OSError as e:
            sys.exit(
                f"tritonpy stub {instance}: the stub sandbox (stub-sandbox=true) "
                f"could not be set up: {e.strerror}"
            )
    stub.start()
    try:
        while True:
            try:
                loop.run_forever()
                break
            except (KeyboardInterrupt, SystemExit) as e:
                # Model code raised one of the two exceptions asyncio lets
                # out of the loop (in an async execute, a callback). A task
                # holds it and fails its batch once the loop runs on; the
                # stub serves on (leaving would strand every other request,
                # and a model's threads could keep a dead stub alive).
                if stub.exit_code is not None:
                    break  # the stub was on its way out anyway
                stub.stderr(f"model code raised {type(e).__name__} on the event loop; serving on")
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    # Leave at once: user threads must not keep a dead instance alive.
    os._exit(stub.exit_code or 0)


if __name__ == "__main__":
    sys.exit(main())
