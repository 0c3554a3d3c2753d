# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Entry point of the stub process: ``python -m tritonpy.stub --fd N``.

The backend starts one per model instance and hands it one end of a
SOCK_SEQPACKET socket pair as descriptor N.
"""

from __future__ import annotations

import asyncio
import os
import select
import signal
import sys
import threading
import time

# After tritonserver is gone, how long a stub may take to end on its own
# (EOF on its socket) before it is killed.
PARENT_GONE_GRACE = 2.0


def _new_loop() -> asyncio.AbstractEventLoop:
    if os.environ.get("TRITONPY_LOOP", "uvloop") == "asyncio":
        return asyncio.new_event_loop()
    import uvloop

    return uvloop.new_event_loop()


def _die_with_parent() -> None:
    """A stub stuck in a model's code never reads the EOF of its socket:
    a thread waiting on a pidfd of tritonserver kills the stub when the
    server is gone (kill -9 or an exit timeout), so no stub outlives it."""
    ppid = os.getppid()
    try:
        pidfd = os.pidfd_open(ppid)
    except (AttributeError, OSError):
        return  # kernels before 5.3: EOF is the only signal
    if os.getppid() != ppid:  # the server died before we watched it
        os._exit(1)

    def watch() -> None:
        select.select([pidfd], [], [])  # readable once the server has exited
        time.sleep(PARENT_GONE_GRACE)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="tritonpy-server-watch", daemon=True).start()


USAGE = """usage: python -m tritonpy.stub --fd FD [--instance NAME]

tritonpy stub process: runs one model instance for the tritonpy Triton
backend. Started by the backend, not by hand.

  --fd FD          descriptor of this instance's SOCK_SEQPACKET socket
  --instance NAME  model instance name, used in messages
"""


def parse_args(argv: list[str]) -> tuple[int, str]:
    """The two options the backend passes. (Not argparse: importing it
    costs every stub about 0.35 MiB of resident memory.)"""
    values = {"--fd": "", "--instance": ""}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("-h", "--help"):
            sys.stdout.write(USAGE)
            sys.exit(0)
        key, eq, value = arg.partition("=")
        if key not in values:
            sys.exit(f"{USAGE}\nerror: unknown argument {arg!r}")
        if not eq:
            i += 1
            if i == len(argv):
                sys.exit(f"{USAGE}\nerror: {key} needs a value")
            value = argv[i]
        values[key] = value
        i += 1
    try:
        fd = int(values["--fd"])
    except ValueError:
        sys.exit(f"{USAGE}\nerror: --fd needs a descriptor number, not {values['--fd']!r}")
    return fd, values["--instance"]


def main(argv: list[str] | None = None) -> int:
    fd, instance = parse_args(sys.argv[1:] if argv is None else argv)
    # Model code sees the argv of the official stub's embedded interpreter,
    # [""]: unittest.main() or argparse with defaults find no stub options.
    sys.argv = [""]

    # Ctrl-C on a foreground tritonserver reaches the whole process group:
    # the server shuts down and finalizes us; dying first would fail requests.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(sys.stdout, "reconfigure"):
        sys.stdout.reconfigure(line_buffering=True)  # print() reaches the log at once

    _die_with_parent()

    # Models import the official module name; give them ours.
    from tritonpy import pb_utils

    sys.modules.setdefault("triton_python_backend_utils", pb_utils)
    from tritonpy.pb_utils import _c_utils

    sys.modules.setdefault("c_python_backend_utils", _c_utils)

    from tritonpy.stub.runtime import Stub

    loop = _new_loop()
    asyncio.set_event_loop(loop)
    stub = Stub(fd, instance or f"fd{fd}", loop)
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
