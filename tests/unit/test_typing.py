# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The installed model API carries its types (py.typed, .pyi of the
compiled modules): mypy checks a model against it, and an IDE's completion
engine (jedi) lists every public name of ``pb_utils.``."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import jedi
import triton_python_backend_utils

from tritonpy import pb_utils

MODELS = Path(__file__).resolve().parent / "typing_models"


def mypy(model: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """mypy --strict on a copy of ``model`` outside the source tree, so that
    only the installed packages can answer its imports."""
    exe = shutil.which("mypy", path=str(Path(sys.executable).parent))
    assert exe is not None, "mypy is installed by `make setup`"
    target = tmp_path / "model.py"
    shutil.copy(model, target)
    return subprocess.run(
        [
            exe,
            "--strict",
            "--no-incremental",
            "--config-file",
            "/dev/null",
            "--python-executable",
            sys.executable,
            str(target),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_installed_packages_are_typed() -> None:
    for name in ("triton_python_backend_utils", "tritonpy.pb_utils", "tritonpy.stub"):
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin is not None
        folder = Path(spec.origin).parent
        assert "site-packages" in str(folder), f"{name} is not the installed copy: {folder}"
        assert (folder / "py.typed").is_file(), f"{folder} has no py.typed"
    pb = Path(pb_utils.__file__).parent
    for compiled in ("_bytes", "_dlpack"):
        assert (pb / f"{compiled}.pyi").is_file()
    codec = importlib.util.find_spec("tritonpy.stub._codec")
    assert codec is not None and codec.origin is not None
    assert (Path(codec.origin).parent / "_codec.pyi").is_file()


def test_mypy_accepts_a_model_using_the_api(tmp_path: Path) -> None:
    out = mypy(MODELS / "good_model.py", tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr


def test_mypy_rejects_a_misuse(tmp_path: Path) -> None:
    out = mypy(MODELS / "bad_model.py", tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    assert (
        'error: Argument 1 to "send" of "InferenceResponseSender" has incompatible type '
        '"Tensor"; expected "InferenceResponse | None"  [arg-type]'
    ) in out.stdout, out.stdout
    assert "Found 1 error in 1 file" in out.stdout


def test_ide_completes_every_public_name() -> None:
    source = "import triton_python_backend_utils as pb_utils\npb_utils."
    script = jedi.Script(
        source,
        project=jedi.Project(str(MODELS)),
        environment=jedi.create_environment(sys.executable, safe=False),
    )
    names = {c.name for c in script.complete(2, len("pb_utils."))}
    assert set(triton_python_backend_utils.__all__) <= names, sorted(
        set(triton_python_backend_utils.__all__) - names
    )
    sender = (
        "import triton_python_backend_utils as pb_utils\n"
        "def f(r: pb_utils.InferenceRequest):\n    r.get_response_sender()."
    )
    got = {c.name for c in jedi.Script(sender).complete(3, len("    r.get_response_sender()."))}
    assert {"send", "is_cancelled"} <= got, got
