# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The stub template ("zygote"): ``python -m tritonpy.stub --template``.

The backend starts one per interpreter, environment, preload list and
sandbox (backend/src/process/stub_template.h), the way it starts a stub, but
isolated: ``python -s -c BOOT``, where BOOT drops the working directory
from ``sys.path`` before it runs this package's ``__main__``, so that no
directory a stub may write (the server's working directory, the user
site) is on the template's path. It imports the
stub's own modules and the ``stub-preload`` modules once, freezes the
garbage collector's view of them (``gc.freeze``: collections in the
forks do not touch, and so copy, their pages), tells the backend it is
ready, and then only forks stubs on request. A forked stub shares the
template's pages until it writes them, and is otherwise the stub an
exec'd one would be: its own process group, sandbox, environment,
descriptors and argv, reseeded random state (docs/hardening.md).

A shared template runs no model code; a model's own runs that model's
import and initialize_shared, no other. Each has one thread: every import is
checked for threads it left behind (a module that starts one makes the
template refuse, naming it: the backend then execs that model's stubs),
and so is every fork (a fork copies only the thread that calls it, and
the kernel refuses new user namespaces to a process with more).

The messages, one SOCK_SEQPACKET message each, JSON:
    template -> backend, once: {"ok": true} or {"ok": false, "error": "..."}
    backend -> template, first, to a model's own template only: {"model":
        {"model_file": "...", "model_dir": "..."}}: it imports the model
        file as a stub does (its auto-complete stub and its instances fork
        from that); answered as the first message
    backend -> template, to a model's own, once its config is final and
        before the first instance forks: {"shared": {...}}: it runs the
        class's initialize_shared(args) (args: initialize's less the
        instance's keys); answered as the first message
    backend -> template, to a shared template, for a model with no
        template of its own: {"imports": {"model_file": "...",
        "model_dir": "..."}}: which installed packages the model file
        imports before anything else (leading_imports.py) that this
        template has not imported and would import as the model's stub
        would; answered {"ok": true, "modules": [...]}, never refused. The
        backend then forks that model's stubs from the template whose
        preload list has them too.
    backend -> template: a fork request {"argv": [python, "-m",
        "tritonpy.stub", ...], "env": ["K=V", ...],
        "cwd": "...", "parent": pid, "sandbox": {...} or null,
        "targets": [3, 4], "null_stdin": false} with descriptors (the set-up's
        report pipe, its go pipe, then one per target). The child waits for
        a byte on the go pipe before it takes any other step: a child the
        backend gave up on (the template died before its reply) reads end of
        file and exits.
        A request whose argv is a template's (``[python, "-m",
        "tritonpy.stub", "--template", ...]``, never sandboxed) forks a
        model's own template instead of a stub: it serves as an exec'd one
        would, with what this template imported.
    template -> backend: {"pid": N}, {"errno": E} (the kernel refused the
        clone), or {"refused": "..."} (the backend execs this stub instead)
    backend -> template, to the template of sandboxed stubs, once a stub
        it forked is up:
        {"spare": {"maps": [[file, text], ...], "tmp_bytes": N}}: it clones
        the next sandboxed child ahead (the spare: new user, pid, mount, IPC and
        network namespaces), writes its ids' maps (the files of
        /proc/<pid>/, in order), and tells it {"ahead": {"tmp_bytes": N}}
        on its own socket pair: the spare then takes the sandbox's steps
        within its own namespaces and builds the part of its root every
        sandboxed stub has (sandbox.build_ahead; its scratch N bytes until
        its stub says otherwise), and waits for the fork request it will
        serve. Answered {"spare": N} (its pid, the backend's child to reap
        when it is not taken) or {"spare": 0} (none). A fork request with
        stub-sandbox-network=none goes to the spare, once: the reply is its
        pid, and the next spare is asked for once that stub is up.
"""

from __future__ import annotations

import ctypes
import fcntl
import gc
import importlib
import importlib.machinery
import importlib.util
import json
import os
import resource
import select
import site
import socket
import sys
from collections.abc import Callable
from typing import Any

from tritonpy.stub import _zygote

USAGE = """usage: python -m tritonpy.stub --template --fd FD --server-lifeline FD
       [--preload M,...] [--opening M,...] [--sandboxed 0|1] [--title-room SPACES]

tritonpy stub template: imports the stub, the preload modules and models'
opening imports once, then forks stubs on request. Started by the backend, not by hand.
"""

# What the stub imports before it runs a model: its entry point too
# (tritonpy/stub/main.py), which each fork would otherwise import anew.
_STUB_MODULES = (
    "asyncio",
    "uvloop",
    "tritonpy.pb_utils",
    "tritonpy.pb_utils._c_utils",
    "tritonpy.stub.main",
    "tritonpy.stub.runtime",
    "tritonpy.stub._lifetime",
)
_MAX_REQUEST = 1 << 20
_MAX_FDS = 8


def _threads() -> list[str]:
    """The names (comm) of this process's threads but the main one."""
    names = []
    for tid in os.listdir("/proc/self/task"):
        if int(tid) == os.getpid():
            continue
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                names.append(f.read().strip())
        except OSError:
            pass  # it ended meanwhile
    return names


class _Blas:
    """OpenBLAS starts its worker threads when numpy loads it. The template
    loads it with OPENBLAS_NUM_THREADS=1 (when the environment does not
    set it): no thread; each forked stub then asks OpenBLAS for as many
    threads as it would have started in that stub's environment.

    A new OpenBLAS worker spins for its thread timeout, about a tenth of a
    second of a CPU, before it sleeps. Started in every forked stub, that
    is most of the CPU a parallel start of many instances takes (and it
    keeps Triton's own threads off the CPU as the load completes). So the
    stub stops the pool again at once, as OpenBLAS's own handler does
    before a fork: OpenBLAS keeps the count and starts the threads at the
    first call that splits its work."""

    def __init__(self) -> None:
        self.limited = "OPENBLAS_NUM_THREADS" not in os.environ
        if self.limited:
            os.environ["OPENBLAS_NUM_THREADS"] = "1"
        # The same for OpenMP (torch's intra-op pool, MKL), whose pool a
        # model's initialize_shared may start in the template.
        self.omp_limited = "OMP_NUM_THREADS" not in os.environ
        if self.omp_limited:
            os.environ["OMP_NUM_THREADS"] = "1"
        # Each loaded OpenBLAS (numpy's, scipy's ...): its set_num_threads
        # and, where exported, its pool's shutdown.
        self.libraries: list[tuple[Callable[[int], Any], Callable[[], Any] | None]] = []

    def find(self) -> None:
        """After the imports: the loaded OpenBLAS libraries."""
        if not self.limited:
            return
        self.libraries = []
        for path in _loaded_libraries("openblas"):
            lib = ctypes.CDLL(path)
            for name in (
                "scipy_openblas_set_num_threads64_",
                "scipy_openblas_set_num_threads",
                "openblas_set_num_threads64_",
                "openblas_set_num_threads",
            ):
                fn = getattr(lib, name, None)
                if fn is not None:
                    fn.argtypes = [ctypes.c_int]
                    # Exported by OpenBLAS's pthread builds (its at-fork
                    # handler); where it is missing the pool stays started.
                    self.libraries.append((fn, getattr(lib, "blas_thread_shutdown_", None)))
                    break

    def restore(self) -> None:
        """In a forked stub, with its environment: OpenBLAS's own count
        (OPENBLAS_NUM_THREADS, GOTO_NUM_THREADS, OMP_NUM_THREADS, else the
        CPUs it may run on)."""
        if not self.libraries:
            return
        count = len(os.sched_getaffinity(0))
        for name in ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS"):
            try:
                wanted = int(os.environ.get(name, ""))
            except ValueError:
                continue
            if wanted > 0:
                count = min(count, wanted)
                break
        if count > 1:
            for set_threads, stop_threads in self.libraries:
                set_threads(count)
                if stop_threads is not None:
                    stop_threads()

    def restore_torch(self) -> None:
        """In a forked stub: torch's intra-op threads, as many as it would
        take in this stub's environment (OMP_NUM_THREADS, MKL_NUM_THREADS,
        else the CPUs it may run on), when the template limited them."""
        torch = sys.modules.get("torch")
        if not self.omp_limited or torch is None:
            return
        count = len(os.sched_getaffinity(0))
        for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            try:
                wanted = int(os.environ.get(name, ""))
            except ValueError:
                continue
            if wanted > 0:
                count = wanted
                break
        torch.set_num_threads(count)


def _loaded_libraries(*names: str) -> list[str]:
    """The paths of the shared libraries mapped in this process whose
    path holds one of ``names``, sorted."""
    with open("/proc/self/maps") as f:
        paths = {line.split()[-1] for line in f if ".so" in line and any(n in line for n in names)}
    return sorted(paths)


def _thread_refusal(step: str) -> str:
    """Why the template cannot fork after ``step``: the threads it left
    running; "" when none."""
    threads = _threads()
    if not threads:
        return ""
    return f"{step} started a thread ({', '.join(threads)}): a template with threads cannot fork"


def _warm(preload: list[str], opening: list[str], blas: _Blas, sandboxed: bool) -> str:
    """Imports the stub's modules and ``preload`` (and, for sandboxed
    stubs, the sandbox's, prepared), then ``opening``, models' opening
    imports, as the model's stub would import them; "" or why the
    template cannot serve."""
    why = _zygote.can_fork()
    if why:
        return why
    # The API's names are the stub's own modules for whatever imports them
    # here, as in a stub.
    from tritonpy.stub.main import give_api_names

    give_api_names()
    own = (*_STUB_MODULES, "tritonpy.stub.sandbox") if sandboxed else _STUB_MODULES
    for name in (*own, *preload):
        why = _import(name)
        if why:
            return why
    if opening:
        # With the argv a model sees, and OpenMP's thread count as the
        # stub's environment has it (an OpenMP runtime reads it when it is
        # loaded, and starts no thread before its first parallel region).
        # OpenBLAS starts its pool as it is loaded: it stays at one thread
        # here, and each stub sets every OpenBLAS's count back (_Blas).
        argv, sys.argv = sys.argv, [""]
        omp = os.environ.pop("OMP_NUM_THREADS") if blas.omp_limited else None
        try:
            for name in opening:
                why = _import(name)
                if why:
                    return why
        finally:
            sys.argv = argv
            if omp is not None:
                os.environ["OMP_NUM_THREADS"] = omp
    blas.find()
    if sandboxed:
        from tritonpy.stub import sandbox

        sandbox.prepare()
    return ""


def _import(name: str) -> str:
    """Imports ``name``; "" or why a template cannot fork after it."""
    try:
        importlib.import_module(name)
    except BaseException as e:  # noqa: BLE001 - any failure refuses, naming the module
        return f"importing {name!r} failed: {type(e).__name__}: {e}"
    return _thread_refusal(f"importing {name!r}")


def _import_model(spec: dict[str, Any], blas: _Blas) -> str:
    """A model's own template: imports the model file as the stub would,
    once for its auto-complete stub and its instances; "" or why the
    template cannot serve (its stubs are then exec'd, and each imports the
    model itself)."""
    from tritonpy.stub import runtime

    sys.argv = [""]  # as a stub's model sees it
    try:
        cls = runtime.load_model_class(spec)
    except BaseException as e:  # noqa: BLE001 - any failure refuses, naming the step
        return f"importing {spec['model_file']} failed: {type(e).__name__}: {e}"
    why = _thread_refusal(f"importing {spec['model_file']}")
    if why:
        return why
    blas.find()  # the model may have loaded OpenBLAS
    # Its stubs use this class. The auto-complete stub forks before
    # initialize_shared ran, and is stopped after it: every instance
    # forks after it (the backend sends "shared" first).
    runtime.PREPARED = (spec["model_file"], cls)
    return ""


def _learnable(spec: dict[str, Any], path: _Path) -> list[str]:
    """The packages ``spec``'s model file opens with that a template may
    import for its stubs: installed, found on this template's path as a
    regular package or module, and not found first where the stub's path
    looks before it (the user site, which the template lacks) nor
    shadowed by the model's package (named after its version directory).
    Names imported here already (the API's among them, _warm) and the
    standard library's are passed over (the stub has or makes them as
    well); any other name (the model's own module, one in the user site)
    ends the list, since what it does at import may matter to the imports
    after it."""
    from tritonpy.stub.leading_imports import MAX_SOURCE, leading_imports

    try:
        with open(spec["model_file"], "rb") as f:
            names = leading_imports(f.read(MAX_SOURCE + 1))
    except Exception:  # noqa: BLE001 - a file it cannot read names nothing
        return []
    package = os.path.basename(os.path.normpath(spec.get("model_dir") or "/"))
    user = site.getusersitepackages() if path.user_site else ""
    out = []
    for name in names:
        if name in sys.modules or name in sys.stdlib_module_names:
            continue
        try:
            shadowed = name == package or (
                bool(user) and importlib.machinery.PathFinder.find_spec(name, [user]) is not None
            )
            found = None if shadowed else importlib.util.find_spec(name)
        except Exception:  # noqa: BLE001 - a finder that fails finds nothing
            found = None
        # A namespace package (no origin) may gain parts from a model's
        # directories on the stub's path.
        if found is None or found.origin is None:
            break
        out.append(name)
    return out


def _share(args: dict[str, Any], blas: _Blas) -> str:
    """Once the model's config is final: the class's
    ``initialize_shared(args)``, once, for every instance forked after it
    to inherit; "" or why the template cannot serve."""
    from tritonpy.stub import runtime

    if runtime.PREPARED is None:
        return "initialize_shared asked before the model was imported"
    cls = runtime.PREPARED[1]
    if callable(getattr(cls, "initialize_shared", None)):
        try:
            cls.initialize_shared(runtime.shared_args(args))
        except BaseException as e:  # noqa: BLE001 - any failure refuses, naming the step
            return f"initialize_shared failed: {type(e).__name__}: {e}"
        why = _thread_refusal("initialize_shared")
        if why:
            return why
        blas.find()
    return ""


def _send(sock: socket.socket, message: dict[str, Any]) -> None:
    sock.send(json.dumps(message).encode())


def _retitle(argv: list[str]) -> None:
    """Makes /proc/self/cmdline (what ps and the server's tools read) the
    command line of an exec'd stub, ``<python> -m tritonpy.stub --fd 3
    --instance NAME ...``, by rewriting the argv area the kernel reads it
    from. A longer one runs on into the environment strings' area, which
    the kernel then shows as one string up to its first NUL (as for
    setproctitle); the environment itself was replaced before, so nothing
    reads that area any more. The backend gives the template's command
    line room for stubs' (--title-room); the template hides it at start."""
    with open("/proc/self/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # Fields 48 to 51 of proc(5); the first after the name is field 3.
    arg_start, arg_end, _, env_end = (int(v) for v in fields[45:49])
    if not (0 < arg_start < arg_end <= env_end):
        return
    line = [os.fsencode(a) for a in argv]
    data = b"\0".join(line) + b"\0"
    if len(data) <= arg_end - arg_start:
        data += b"\0" * (arg_end - arg_start - len(data))
    else:
        data = b" ".join(line)[: env_end - arg_start - 1] + b"\0"
    ctypes.memmove(arg_start, data, len(data))


class _Path:
    """The ``sys.path`` an exec'd stub (``python -m tritonpy.stub``) would
    start with, which the template's lacks: the working directory in
    front, and the user site-packages where site.py would add them (the
    template runs with ``-s``). A model's own template imported the model:
    its stubs then have the path the stub's import left (the model's
    directories; no working directory, which the stub drops)."""

    def __init__(self) -> None:
        self.base = list(sys.path)
        self.prepared = False
        self.user_site = False
        if sys.prefix == sys.base_prefix:
            self.user_site = True
        else:  # a virtual environment: only with the system's site-packages
            try:
                with open(os.path.join(sys.prefix, "pyvenv.cfg")) as f:
                    for line in f:
                        key, _, value = line.partition("=")
                        if key.strip().lower() == "include-system-site-packages":
                            self.user_site = value.strip().lower() == "true"
            except OSError:
                pass

    def apply(self, cwd: str, reach: Callable[[str], bool] = os.path.isdir) -> None:
        """In the forked stub, once its environment is its own. ``reach``:
        whether a directory is there (for a spare's root built ahead,
        sandbox.reach)."""
        sys.path[:] = self.base
        if not self.prepared and not (
            sys.version_info >= (3, 11) and os.environ.get("PYTHONSAFEPATH")
        ):
            sys.path.insert(0, cwd)
        if not (
            self.user_site
            and not os.environ.get("PYTHONNOUSERSITE")
            and os.getuid() == os.geteuid()
            and os.getgid() == os.getegid()
        ):
            return
        site.USER_BASE = site.USER_SITE = None  # computed again from this environment
        user = site.getusersitepackages()
        if not reach(user):
            return
        before = list(sys.path)
        site.ENABLE_USER_SITE = True
        site.addsitedir(user)
        added = sys.path[len(before) :]
        system = set(site.getsitepackages())
        at = next((i for i, p in enumerate(before) if p in system), len(before))
        sys.path[:] = before[:at] + added + before[at:]


def _set_environ(entries: list[str]) -> None:
    """Makes os.environ the "KEY=VALUE" ``entries``, changing only what
    differs from the template's (mostly the same: the template started
    with the stubs' environment). Each change is a setenv or unsetenv,
    whose first ones after the fork cost copies of the pages they touch."""
    wanted = dict(entry.split("=", 1) for entry in entries if "=" in entry)
    for key in [key for key in os.environ if key not in wanted]:
        del os.environ[key]
    for key, value in wanted.items():
        if os.environ.get(key) != value:
            os.environ[key] = value


def _become_stub(
    sock: socket.socket, request: dict[str, Any], path: _Path, blas: _Blas, ahead: bool = False
) -> None:
    """In the forked child: the stub an exec'd one would be, then its main.
    ``ahead``: a spare, whose root is built already (its working directory
    is then entered by sandbox.confine, once its root holds what it may
    read). Never returns."""

    def run() -> int:
        _leave(sock, request)
        if ahead:
            from tritonpy.stub import sandbox

            assert sandbox.AHEAD is not None
            sandbox.AHEAD.cwd = request["cwd"]
            path.apply(request["cwd"], sandbox.reach)
        else:
            os.chdir(request["cwd"])
            path.apply(request["cwd"])
        argv = request["argv"]
        _retitle(argv)
        from tritonpy.stub.main import main

        return main(argv[3:], forked=lambda: _reseed(blas))

    _run_child(run)


def _become_template(sock: socket.socket, request: dict[str, Any]) -> None:
    """In the forked child: a model's own template (``-m tritonpy.stub
    --template ...``), as an exec'd one would be but with what this
    template imported, and its path (no working directory). Never
    returns."""

    def run() -> int:
        _leave(sock, request)
        os.chdir(request["cwd"])
        _reseed_random()
        if "OMP_NUM_THREADS" not in os.environ:
            _one_openmp_thread()
        sys.argv[1:] = request["argv"][3:]
        return serve(request["argv"][4:])

    _run_child(run)


def _one_openmp_thread() -> None:
    """In a template forked from one that loaded an OpenMP runtime with the
    stubs' thread count (its models' opening imports): parallel regions run
    on one thread, as in a template that loaded it with OMP_NUM_THREADS=1
    (a region on more would start threads, which refuse the template)."""
    for path in _loaded_libraries("libgomp", "libiomp", "libomp"):
        set_threads = getattr(ctypes.CDLL(path), "omp_set_num_threads", None)
        if set_threads is not None:
            set_threads.argtypes = [ctypes.c_int]
            set_threads(1)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


def _leave(sock: socket.socket, request: dict[str, Any]) -> None:
    """A forked child's first steps: this template's sockets are not its
    own (the steps closed them, and their numbers are reused), and its
    environment and command line are the request's."""
    sock.detach()
    if _spare is not None:
        _spare.sock.detach()
    _set_environ(request["env"])
    sys.orig_argv[:] = request["argv"]


def _run_child(run: Callable[[], int]) -> None:
    """Runs a forked child's ``run`` and exits with its status, as the
    interpreter ends an exec'd process. Never returns."""
    code = 1
    try:
        code = run()
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            code = e.code or 0
        else:
            sys.stderr.write(f"{e.code}\n")
    except BaseException:  # noqa: BLE001 - printed as the interpreter would
        sys.excepthook(*sys.exc_info())
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _reseed(blas: _Blas) -> None:
    """What a fresh interpreter would have done at import, once the stub's
    ids are its own (OpenBLAS's threads are then the stub's, not root's).
    ``random`` was reseeded by its at-fork hook; what a fork copies and
    cannot renew is listed in docs/hardening.md."""
    blas.restore()
    blas.restore_torch()
    _reseed_random()


def _reseed_random() -> None:
    """The random state a forked child must not share with its siblings
    (a stub, or a model's template forked from another template)."""
    numpy_random = sys.modules.get("numpy.random")
    if numpy_random is not None:
        numpy_random.seed()  # the legacy global RandomState, seeded by a fresh import
    process = sys.modules.get("multiprocessing.process")
    if process is not None:
        # Drawn at import: a stub's managers and listeners must not accept
        # another stub's key.
        process.current_process().authkey = os.urandom(32)


class _Spare:
    """The sandboxed child cloned ahead of its fork request: a child of
    the server (CLONE_PARENT) in namespaces of its own, holding nothing
    but its end of a socket pair until a request comes."""

    def __init__(self, pid: int, sock: socket.socket) -> None:
        self.pid = pid
        self.sock = sock


_spare: _Spare | None = None
# The template's command line, as ps shows it (serve); a spare's adds --spare.
_TITLE: list[str] = []
# Whether this template forks sandboxed stubs (--sandboxed).
_SANDBOXED = False


def _map_ids(pid: int, maps: list[list[str]]) -> bool:
    """Writes the spare's id maps (``maps``: [file, text] pairs the backend
    sent, in order) to /proc/<pid>/; False if the kernel refused one."""
    try:
        for name, text in maps:
            if name not in ("setgroups", "uid_map", "gid_map"):
                return False
            fd = os.open(f"/proc/{pid}/{name}", os.O_WRONLY | os.O_CLOEXEC)
            try:
                os.write(fd, text.encode())
            finally:
                os.close(fd)
    except OSError:
        return False
    return True


def _make_spare(
    sock: socket.socket, path: _Path, blas: _Blas, max_fd: int, ask: dict[str, Any]
) -> int:
    """The spare's pid (cloned now if there is none), or 0. ``ask``: its
    ids' maps, which this process writes (the spare then enters its
    namespaces and builds its root ahead), and its scratch's size."""
    global _spare
    if _spare is not None:
        return _spare.pid
    if _threads():
        return 0
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        pid = _zygote.clone_spare()
    except OSError:
        ours.close()
        theirs.close()
        return 0
    if pid == 0:
        _serve_spare(theirs, sock, path, blas, max_fd)
    theirs.close()
    tmp_bytes = ask.get("tmp_bytes")
    if not (_map_ids(pid, ask.get("maps", [])) and isinstance(tmp_bytes, int)):
        # Its end of the socket hangs up: it exits, and the backend, told
        # its pid, reaps it.
        ours.close()
        return pid
    try:
        _send(ours, {"ahead": {"tmp_bytes": tmp_bytes}})
    except OSError:  # it died
        ours.close()
        return pid
    _spare = _Spare(pid, ours)
    return pid


def _build_ahead(own: socket.socket) -> tuple[tuple[int, int], int]:
    """In the spare, once its ids are mapped (the template's first
    message): the sandbox's steps within its own namespaces, then the
    common part of its root and of its Landlock ruleset. What ``enter``
    returned, and the ruleset's descriptor (-1: none), for take_steps."""
    message = own.recv(_MAX_REQUEST)
    if not message:
        os._exit(0)
    tmp_bytes = json.loads(message)["ahead"]["tmp_bytes"]
    entered = _zygote.enter()
    if entered[0] >= 0:
        return entered, -1
    from tritonpy.stub import sandbox

    sandbox.build_ahead(tmp_bytes)
    assert sandbox.AHEAD is not None
    return entered, sandbox.AHEAD.ruleset


def _serve_spare(
    own: socket.socket, sock: socket.socket, path: _Path, blas: _Blas, max_fd: int
) -> None:
    """In the spare: waits, holding no descriptor of the template's, for
    its ids to be mapped, builds what every sandboxed stub's root has, and
    waits for the one fork request it serves; then the other steps and
    the stub, as a forked child. Exits when the template hangs up first.
    Never returns."""
    try:
        _retitle([*_TITLE, "--spare"])
        keep = own.fileno()
        os.closerange(3, keep)
        os.closerange(keep + 1, max_fd)
        entered, ruleset = _build_ahead(own)
        message, received, _, _ = socket.recv_fds(own, _MAX_REQUEST, _MAX_FDS)
        if not message:
            os._exit(0)
        # Above the stub's descriptors (3 and 4 are free here): placing
        # those must not overwrite the set-up's pipes.
        fds = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 16) for fd in received]
        for fd in received:
            os.close(fd)
        request = json.loads(message)
        sandbox = request["sandbox"]
        _zygote.take_steps(
            fds[0],
            fds[1],
            request["parent"],
            sandbox["max_processes"],
            sandbox["address_space"],
            list(zip(fds[2:], request["targets"], strict=True)),
            bool(request.get("null_stdin")),
            max_fd,
            entered,
            ruleset,
        )
        own.detach()  # closed by the steps
    except BaseException:  # noqa: BLE001 - the backend sees the stub end before its HELLO
        os._exit(1)
    _become_stub(sock, request, path, blas, ahead=entered[0] < 0)


def _asks_template(request: dict[str, Any]) -> bool:
    """Whether a fork request is for a model's own template (its argv is
    ``python -m tritonpy.stub --template ...``), not for a stub."""
    return bool(request["argv"][3:4] == ["--template"])


def _give_spare(message: bytes, request: dict[str, Any], fds: list[int]) -> dict[str, Any] | None:
    """A request of the spare's kind given to it: the reply, or None when
    there is no spare for it (or it is gone)."""
    global _spare
    sandbox = request.get("sandbox")
    if _spare is None or not sandbox or not sandbox.get("own_network", True):
        return None
    if len(fds) != 2 + len(request["targets"]) or request["argv"][1:3] != ["-m", "tritonpy.stub"]:
        return None  # refused by _fork
    if _asks_template(request):
        return None  # likewise: a template is never forked for sandboxed stubs
    spare, _spare = _spare, None
    try:
        socket.send_fds(spare.sock, [message], fds)
    except OSError:
        return None  # it died: the backend reaps it
    finally:
        spare.sock.close()
    return {"pid": spare.pid}


def _fork(
    sock: socket.socket,
    request: dict[str, Any],
    fds: list[int],
    path: _Path,
    blas: _Blas,
    max_fd: int,
) -> dict[str, Any]:
    threads = _threads()
    if threads:
        return {"refused": f"the template has threads ({', '.join(threads)})"}
    sandbox = request.get("sandbox")
    setup = 2  # the report and go pipes
    targets = request["targets"]
    if len(fds) != setup + len(targets) or request["argv"][1:3] != ["-m", "tritonpy.stub"]:
        return {"refused": f"the request carried {len(fds)} descriptors"}
    # A model's own template: never sandboxed, nor forked from the
    # template of sandboxed stubs (what one kind of stub leaves in a
    # template the other must not see).
    template = _asks_template(request)
    if template and (sandbox or _SANDBOXED):
        return {"refused": "a template is not forked for sandboxed stubs"}
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        pid = _zygote.fork_stub(
            fds[0],
            fds[1],
            request["parent"],
            bool(sandbox),
            sandbox["max_processes"] if sandbox else 0,
            sandbox["address_space"] if sandbox else 0,
            list(zip(fds[setup:], targets, strict=True)),
            bool(request.get("null_stdin")),
            max_fd,
            own_network=bool(sandbox and sandbox.get("own_network", True)),
        )
    except OSError as e:
        return {"errno": e.errno or 0}
    if pid == 0:
        if template:
            _become_template(sock, request)
        _become_stub(sock, request, path, blas)
    return {"pid": pid}


def serve(argv: list[str]) -> int:
    values = {
        "--fd": "",
        "--server-lifeline": "",
        "--preload": "",
        "--opening": "",
        "--sandboxed": "0",
        "--title-room": "",
    }
    for i in range(0, len(argv) - 1, 2):
        if argv[i] not in values:
            sys.exit(f"{USAGE}\nerror: unknown argument {argv[i]!r}")
        values[argv[i]] = argv[i + 1]
    try:
        fd = int(values["--fd"])
        lifeline = int(values["--server-lifeline"])
    except ValueError:
        sys.exit(f"{USAGE}\nerror: --fd and --server-lifeline need numbers")
    global _SANDBOXED
    _SANDBOXED = values["--sandboxed"] == "1"
    path = _Path()
    # What it runs as, without the boot code and the room for stubs' titles.
    own = [sys.orig_argv[0], "-s", "-m", "tritonpy.stub", *sys.argv[1:]]
    _TITLE[:] = own[: own.index("--title-room")] if "--title-room" in own else own
    _retitle(_TITLE)
    blas = _Blas()
    sock = socket.socket(fileno=fd)
    why = _warm(
        [m for m in values["--preload"].split(",") if m],
        [m for m in values["--opening"].split(",") if m],
        blas,
        _SANDBOXED,
    )
    if why:
        _send(sock, {"ok": False, "error": why})
        return 1
    # (The thread limits stay in the template's environment, for a model it
    # may import: a stub gets its own environment.)
    gc.collect()
    gc.freeze()
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    max_fd = soft if 0 < soft < (1 << 20) else 65536
    _send(sock, {"ok": True})
    _zygote.clear_death_signal()
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    poller.register(lifeline, select.POLLIN)
    while True:
        ready = dict(poller.poll())
        if lifeline in ready:
            return 0  # the server is gone
        try:
            message, fds, _, _ = socket.recv_fds(sock, _MAX_REQUEST, _MAX_FDS)
        except InterruptedError:
            continue
        if not message:
            return 0  # the backend closed the socket
        reply: dict[str, Any]
        try:
            request = json.loads(message)
            step = None
            if "model" in request and not path.prepared:
                why = _import_model(request["model"], blas)
                path.base, path.prepared = list(sys.path), True
                step = why
            elif "shared" in request:
                step = _share(request["shared"], blas)
            elif "spare" in request:
                ask = request["spare"] if isinstance(request["spare"], dict) else {}
                reply = {"spare": _make_spare(sock, path, blas, max_fd, ask)}
            elif "imports" in request:
                reply = {"ok": True, "modules": _learnable(request["imports"], path)}
            if step is not None:
                if step:
                    _send(sock, {"ok": False, "error": step})
                    return 1
                gc.collect()
                gc.freeze()
                reply = {"ok": True}
            elif "spare" not in request and "imports" not in request:
                given = _give_spare(message, request, fds)
                reply = given or _fork(sock, request, fds, path, blas, max_fd)
        except (ValueError, KeyError, TypeError) as e:
            reply = {"refused": f"bad request: {e}"}
        finally:
            for received in fds:
                os.close(received)
        _send(sock, reply)
