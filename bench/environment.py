# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Set-up the suite does by itself: wrk, the C++ gRPC load generator,
matplotlib, the official Python backend from the nvidia-pytriton wheel (with
numpy and torch for the interpreter its stub embeds), and the native floor
backend.
Every step is idempotent."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from tritonpy import install as inst

ROOT = Path(__file__).resolve().parent.parent
FLOOR_SRC = ROOT / "bench" / "floor"
# The official stub embeds this interpreter's libpython in isolated mode.
STUB_PYTHON = "3.11"
SYSTEM_PYTHON = Path(f"/usr/bin/python{STUB_PYTHON}")
NUMPY_VENV = ROOT / ".venv" / "official-np"
# Named after the venv: checkouts side by side each keep their own line
# (one rewriting a shared file would take the other's torch away mid-run).
PTH = Path(
    f"/usr/local/lib/python{STUB_PYTHON}/dist-packages/"
    f"tritonpy-bench-{hashlib.sha1(str(NUMPY_VENV).encode()).hexdigest()[:8]}.pth"
)


# tritonserver arguments the official backend runs with: shared memory
# sized like tritonpy's default arena, so 16 MiB tensors need no growth.
OFFICIAL_ARGS = ("--backend-config=python,shm-default-byte-size=67108864",)


class SetupError(RuntimeError):
    pass


def log(msg: str) -> None:
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def _run(cmd: list[str], **kw) -> None:
    log("$ " + " ".join(cmd))
    subprocess.run(cmd, check=True, **kw)


def _apt_install(*packages: str) -> bool:
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return False
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    try:
        _run(["apt-get", "update", "-q"], env=env, stdout=subprocess.DEVNULL)
        _run(["apt-get", "install", "-y", "-q", *packages], env=env, stdout=subprocess.DEVNULL)
    except (OSError, subprocess.CalledProcessError) as e:
        log(f"apt-get install {' '.join(packages)} failed: {e}")
        return False
    return True


def ensure_wrk() -> str:
    found = shutil.which("wrk")
    if found:
        return found
    if os.geteuid() != 0:
        raise SetupError("wrk is missing and we are not root: run `apt-get install -y wrk`")
    _apt_install("wrk")
    found = shutil.which("wrk")
    if not found:
        raise SetupError("apt-get install wrk did not put wrk on PATH")
    return found


def _grpcpp_flags() -> list[str] | None:
    try:
        out = subprocess.run(
            ["pkg-config", "--cflags", "--libs", "grpc++"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.split()


def ensure_grpc_client(work: Path) -> str | None:
    """The C++ gRPC load generator (bench/grpc_load.cc), built against
    Debian's gRPC (libgrpc++-dev, installed when missing and we are root).
    None, with the reason logged, when it cannot be had: the suite then
    uses bench/grpc_load.py, which costs more CPU per call than the server
    and so understates the faster systems."""
    src = ROOT / "bench" / "grpc_load.cc"
    binary = work / "grpc_load"
    if binary.is_file() and binary.stat().st_mtime >= src.stat().st_mtime:
        return str(binary)
    flags = _grpcpp_flags()
    if flags is None and _apt_install("libgrpc++-dev", "pkg-config"):
        flags = _grpcpp_flags()
    if flags is None:
        log("no gRPC C++ library (libgrpc++-dev): gRPC scenarios use bench/grpc_load.py")
        return None
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        log("no C++ compiler: gRPC scenarios use bench/grpc_load.py")
        return None
    log(f"building {binary} from bench/grpc_load.cc")
    try:
        subprocess.run([cxx, "-O2", "-std=c++17", "-o", str(binary), str(src), *flags], check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        log(f"building bench/grpc_load.cc failed ({e}): gRPC scenarios use bench/grpc_load.py")
        return None
    return str(binary)


def ensure_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401

        return True
    except ImportError:
        pass
    try:
        _run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                "matplotlib>=3.7",
            ]
        )
        import matplotlib  # noqa: F401,F811

        return True
    except (subprocess.CalledProcessError, ImportError) as e:
        log(f"matplotlib unavailable ({e}): no plots")
        return False


def server_dir() -> Path:
    """The wheel's tritonserver tree (pytriton/tritonserver)."""
    return inst.tritonserver().resolve().parent.parent


def _torch_pin() -> str:
    for line in (ROOT / "examples" / "requirements.txt").read_text().splitlines():
        if line.startswith("torch=="):
            return line.strip()
    raise SetupError("examples/requirements.txt pins no torch")


def ensure_stub_numpy() -> None:
    """Make numpy (<2, as the wheel expects) and torch (for the llm example)
    importable by the system Python the official stub embeds: a venv of our
    own plus a .pth naming it."""
    if not SYSTEM_PYTHON.is_file():
        raise SetupError(f"{SYSTEM_PYTHON} is missing: the official stub embeds it")
    vpy = NUMPY_VENV / "bin" / "python"
    if not vpy.is_file():
        _run([str(SYSTEM_PYTHON), "-m", "venv", str(NUMPY_VENV)])
    probe = subprocess.run(
        [str(vpy), "-c", "import numpy, torch"],
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        # torch for the llm example, at the examples' pin (a CPU build).
        _run(
            [
                str(vpy),
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                "numpy<2",
                _torch_pin(),
            ]
        )
    site = subprocess.run(
        [str(vpy), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    if not PTH.is_file() or PTH.read_text().strip() != site:
        try:
            PTH.parent.mkdir(parents=True, exist_ok=True)
            PTH.write_text(site + "\n")
        except OSError as e:
            raise SetupError(
                f"cannot write {PTH} ({e}): the official stub (system Python {STUB_PYTHON}, "
                f"isolated mode) needs numpy; as root, write one line '{site}' into it"
            ) from e
    check = subprocess.run(
        [str(SYSTEM_PYTHON), "-I", "-c", "import numpy, torch"], capture_output=True
    )
    if check.returncode != 0:
        raise SetupError(
            f"{SYSTEM_PYTHON} -I still cannot import numpy and torch after writing {PTH}"
        )


def official_backend_dir(work: Path) -> tuple[Path, dict[str, str]]:
    """A backend directory with the official Python backend of the wheel,
    and the environment its stub needs."""
    ensure_stub_numpy()
    srv = server_dir()
    dest = work / "backends-official" / "python"
    dest.mkdir(parents=True, exist_ok=True)
    for f in (srv / "backends" / "python").iterdir():
        if f.is_file():
            shutil.copy2(f, dest / f.name)
    stub = srv / "python_backend_stubs" / STUB_PYTHON / "triton_python_backend_stub"
    if not stub.is_file():
        raise SetupError(f"no official stub for Python {STUB_PYTHON} at {stub}")
    shutil.copy2(stub, dest / stub.name)
    libs = srv.parent.parent / "nvidia_pytriton.libs"
    return dest.parent, {"LD_LIBRARY_PATH": str(libs.resolve())}


def floor_backend_dir(work: Path) -> Path:
    """Build bench/floor with the system cmake and g++ (once per change)."""
    build = work / "floor-build"
    lib = build / "libtriton_floor.so"
    newest = max(f.stat().st_mtime for f in FLOOR_SRC.iterdir())
    if not lib.is_file() or lib.stat().st_mtime < newest:
        cmake = shutil.which("cmake")
        if not cmake:
            raise SetupError("cmake is missing: the floor backend is built with it")
        _run(
            [cmake, "-S", str(FLOOR_SRC), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release"],
            stdout=subprocess.DEVNULL,
        )
        _run([cmake, "--build", str(build), "-j", "2"], stdout=subprocess.DEVNULL)
    dest = work / "backends-floor" / "floor"
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy2(lib, dest / lib.name)
    return dest.parent


def tritonpy_backend_dir(work: Path) -> Path:
    return inst.backend_dir(work / "backends-tritonpy")


def system_backend_dir(system: str, work: Path) -> tuple[Path, dict[str, str]]:
    """The backend directory of ``system`` (tritonpy, official or floor) and
    the environment its server needs."""
    if system == "official":
        return official_backend_dir(work)
    if system == "floor":
        return floor_backend_dir(work), {}
    return tritonpy_backend_dir(work), {}
