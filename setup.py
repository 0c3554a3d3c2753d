# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Builds the stub's Cython extensions and the C++ backend library.

``pip install .`` runs CMake for backend/ and ships the resulting
libtriton_tritonpy.so inside the package (tritonpy/_backend/), so one
install holds everything ``tritonpy backend-dir`` needs.

Environment switches: TRITONPY_DEBUG=1 builds both sides with debug
checks; TRITONPY_CMAKE_ARGS adds arguments to the CMake configure step;
TRITONPY_STUB_ONLY=1 leaves the backend out (neither CMake nor a C++17
compiler is needed then): an installation that only runs stubs, such as an
execution environment, or the ``python-executable`` of a Python other than
the one the backend was installed from, needs no backend library.
"""

import os
import shlex
import shutil
import subprocess
import sys

from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))
DEBUG = os.environ.get("TRITONPY_DEBUG", "") not in ("", "0")
STUB_ONLY = os.environ.get("TRITONPY_STUB_ONLY", "") not in ("", "0")

EXTENSIONS = [
    ("tritonpy.stub._codec", "stub/_codec.pyx"),
    ("tritonpy.stub._batch", "stub/_batch.pyx"),
    ("tritonpy.stub._channel", "stub/_channel.pyx"),
    ("tritonpy.stub._bls_wire", "stub/_bls_wire.pyx"),
    ("tritonpy.pb_utils._bytes", "pb_utils/_bytes.pyx"),
    ("tritonpy.pb_utils._core", "pb_utils/_core.pyx"),
    ("tritonpy.pb_utils._dlpack", "pb_utils/_dlpack.pyx"),
]


class BuildExtAndBackend(build_ext):
    def finalize_options(self) -> None:
        super().finalize_options()
        if not self.parallel:  # the extensions compile independently
            self.parallel = min(2, os.cpu_count() or 1)

    def run(self) -> None:
        super().run()
        if not STUB_ONLY:
            self._build_backend()

    def _build_backend(self) -> None:
        cmake = shutil.which("cmake")
        if cmake is None:
            sys.exit("tritonpy: cmake is needed to build the backend (pip install cmake)")
        build_dir = os.path.join(ROOT, "build", "cmake")
        config = "Debug" if DEBUG else "Release"
        configure = [cmake, "-S", ROOT, "-B", build_dir, f"-DCMAKE_BUILD_TYPE={config}"]
        configure += shlex.split(os.environ.get("TRITONPY_CMAKE_ARGS", ""))
        # Always given: the CMake cache would keep an earlier debug build's ON.
        configure.append(f"-DTRITONPY_DEBUG={'ON' if DEBUG else 'OFF'}")
        subprocess.check_call(configure)
        subprocess.check_call([cmake, "--build", build_dir, "-j", str(min(2, os.cpu_count() or 1))])
        dest = os.path.join(self.build_lib, "tritonpy", "_backend")
        os.makedirs(dest, exist_ok=True)
        shutil.copy2(os.path.join(build_dir, "libtriton_tritonpy.so"), dest)


def cython_include_tree() -> str:
    """A tree where ``cimport tritonpy.pb_utils._core`` finds _core.pxd:
    the sources are not laid out as the packages they install as (see
    package_dir below). Made afresh each time; copies keep their times, so
    cythonize rebuilds a module that cimports a .pxd only when that .pxd
    changed."""
    top = os.path.join(ROOT, "build", "cython-include")
    shutil.rmtree(top, ignore_errors=True)  # no .pxd left over from a rename
    for package, folder in (("tritonpy", "tritonpy"), ("tritonpy.pb_utils", "pb_utils")):
        dest = os.path.join(top, *package.split("."))
        os.makedirs(dest, exist_ok=True)
        open(os.path.join(dest, "__init__.pxd"), "a").close()
        for name in os.listdir(os.path.join(ROOT, folder)):
            if name.endswith(".pxd"):
                shutil.copy2(os.path.join(ROOT, folder, name), dest)
    return top


directives = {"language_level": "3", "embedsignature": True}
macros = [("TRITONPY_DEBUG", "1")] if DEBUG else []
ext_modules = cythonize(
    [
        Extension(
            name,
            [path],
            define_macros=macros,
            extra_compile_args=["-O2"] if not DEBUG else ["-O0", "-g"],
        )
        for name, path in EXTENSIONS
    ],
    compiler_directives=directives,
    include_path=[cython_include_tree()],
    compile_time_env={"TRITONPY_DEBUG": DEBUG},
)

setup(
    packages=[
        "tritonpy",
        "tritonpy.stub",
        "tritonpy.pb_utils",
        "tritonpy.batching",
        "triton_python_backend_utils",
    ],
    package_dir={
        "tritonpy.stub": "stub",
        "tritonpy.pb_utils": "pb_utils",
        "tritonpy.batching": "batching",
        "triton_python_backend_utils": "compat/triton_python_backend_utils",
    },
    # py.typed and the .pyi of the compiled modules: IDEs and mypy see the
    # model API's types in an installed tritonpy.
    package_data={
        "tritonpy": ["py.typed"],
        "tritonpy.pb_utils": ["py.typed", "*.pyi"],
        "tritonpy.stub": ["py.typed", "*.pyi"],
        "tritonpy.batching": ["py.typed"],
        "triton_python_backend_utils": ["py.typed"],
    },
    ext_modules=ext_modules,
    cmdclass={"build_ext": BuildExtAndBackend},
    zip_safe=False,
)
