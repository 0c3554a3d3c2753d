# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The ``tritonpy`` command."""

from __future__ import annotations

import argparse
import os
import sys

from tritonpy import __version__
from tritonpy import install as inst


def _serve(args: argparse.Namespace) -> int:
    server = inst.tritonserver()
    backends = inst.backend_dir(args.backend_dir)
    extra = list(args.server_args)
    if extra and extra[0] == "--":
        extra = extra[1:]
    cmd = [
        str(server),
        f"--model-repository={os.path.abspath(args.repo)}",
        f"--backend-directory={backends}",
        *extra,
    ]
    print("tritonpy: " + " ".join(cmd), file=sys.stderr, flush=True)
    os.execv(cmd[0], cmd)
    return 0  # not reached


def _backend_dir(args: argparse.Namespace) -> int:
    print(inst.backend_dir(args.dir))
    return 0


def _install(args: argparse.Namespace) -> int:
    dest = inst.install(args.dir, args.name, args.python)
    print(dest)
    if args.name == "python":
        print(
            'tritonpy now answers to backend: "python" in this directory; the official '
            "Python backend was replaced",
            file=sys.stderr,
        )
    return 0


def _new(args: argparse.Namespace) -> int:
    from tritonpy import scaffold

    try:
        root = scaffold.create(
            args.name,
            args.dir,
            decoupled=args.decoupled,
            use_async=args.use_async,
            batching=args.batching,
            backend=args.backend,
        )
    except (scaffold.ScaffoldError, OSError) as e:
        print(f"tritonpy: {e}", file=sys.stderr)
        return 2
    print(root)
    return 0


def _server_path(args: argparse.Namespace) -> int:
    print(inst.tritonserver())
    return 0


def _find_bench_root() -> str | None:
    """The source tree holding bench/: $TRITONPY_SOURCE, else the current
    directory or one of its parents (the suite is not part of the wheel)."""
    candidates = [os.environ.get("TRITONPY_SOURCE", "")]
    here = os.path.abspath(os.getcwd())
    while True:
        candidates.append(here)
        parent = os.path.dirname(here)
        if parent == here:
            break
        here = parent
    for c in candidates:
        if c and os.path.isfile(os.path.join(c, "bench", "run.py")):
            return c
    return None


def _bench(argv: list[str]) -> int:
    root = _find_bench_root()
    if root is None:
        print(
            "tritonpy: the benchmark suite lives in the source tree (bench/): run this "
            "from a tritonpy checkout or set TRITONPY_SOURCE to one",
            file=sys.stderr,
        )
        return 2
    import subprocess

    cmd = [sys.executable, "-m", "bench", "--command", "tritonpy bench " + " ".join(argv), *argv]
    return subprocess.call(cmd, cwd=root)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tritonpy",
        description="tritonpy: a fast Python backend for Triton Inference Server. "
        "Serves model.py + config.pbtxt repositories unchanged.",
    )
    p.add_argument("--version", action="version", version=f"tritonpy {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    s = sub.add_parser(
        "serve",
        help="run tritonserver on a model repository with tritonpy",
        description="Run tritonserver on REPO with a backend directory that holds tritonpy "
        "as 'tritonpy' and as the drop-in 'python'. Arguments after -- go to "
        "tritonserver unchanged (e.g. -- --http-port 9000 --log-verbose 1).",
    )
    s.add_argument("repo", help="model repository directory")
    s.add_argument(
        "--backend-dir",
        default=None,
        help="where to assemble the backend directory (default: see backend-dir)",
    )
    s.add_argument(
        "server_args", nargs=argparse.REMAINDER, help="-- followed by tritonserver arguments"
    )
    s.set_defaults(func=_serve)

    b = sub.add_parser(
        "backend-dir",
        help="print a ready --backend-directory",
        description="Assemble (or refresh) a backend directory holding tritonpy as "
        "'tritonpy' and 'python', and print its path, for "
        "tritonserver --backend-directory=$(tritonpy backend-dir).",
    )
    b.add_argument(
        "--dir",
        default=None,
        help="directory to use (default: $TRITONPY_BACKEND_DIR, else <prefix>/tritonpy-backends)",
    )
    b.set_defaults(func=_backend_dir)

    i = sub.add_parser(
        "install",
        help="install tritonpy into an existing Triton backends directory",
        description="Install the backend into DIR/NAME (e.g. DIR=/opt/tritonserver/backends "
        "in the NGC container). NAME 'tritonpy' (default) serves models with "
        "backend: \"tritonpy\"; NAME 'python' replaces the official Python backend.",
    )
    i.add_argument("dir", help="Triton's backends directory")
    i.add_argument("--as", dest="name", default="tritonpy", help="backend name (default tritonpy)")
    i.add_argument(
        "--python", default=None, help="interpreter that runs the stub (default: this one)"
    )
    i.set_defaults(func=_install)

    sub.add_parser(
        "bench",
        help="run the benchmark suite (tritonpy vs the official backend vs a native floor)",
        description="Run the benchmark suite of a tritonpy source tree (the current directory "
        "or $TRITONPY_SOURCE); arguments go to it: tritonpy bench --help.",
        add_help=False,
    )

    n = sub.add_parser(
        "new",
        help="scaffold a model folder (config.pbtxt + 1/model.py)",
        description="Write DIR/NAME/config.pbtxt and DIR/NAME/1/model.py: a model that "
        "serves as generated (INPUT0 FP32 in, OUTPUT0 = INPUT0 * 2 out; "
        "decoupled: one response per element, then the final flag).",
    )
    n.add_argument("name", help="model name (the folder's name)")
    n.add_argument("--decoupled", action="store_true", help="a streaming (decoupled) model")
    n.add_argument(
        "--async",
        dest="use_async",
        action="store_true",
        help="async def execute (many batches in flight per instance)",
    )
    n.add_argument(
        "--batching", action="store_true", help="max_batch_size 8 and Triton's dynamic batcher"
    )
    n.add_argument("--dir", default=".", help="model repository to write into (default .)")
    n.add_argument(
        "--backend",
        default="tritonpy",
        help="backend named in config.pbtxt (default tritonpy; 'python' for the drop-in name)",
    )
    n.set_defaults(func=_new)

    w = sub.add_parser(
        "server-path",
        help="print the tritonserver that serve would run",
        description="Print the tritonserver binary that 'tritonpy serve' runs.",
    )
    w.set_defaults(func=_server_path)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["bench"]:  # everything after it belongs to the suite's own parser
        return _bench(argv[1:])
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except inst.InstallError as e:
        print(f"tritonpy: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
