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
from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

ROOT = os.path.dirname(os.path.abspath(__file__))
DEBUG = os.environ.get("TRITONPY_DEBUG", "") not in ("", "0")
STUB_ONLY = os.environ.get("TRITONPY_STUB_ONLY", "") not in ("", "0")

EXTENSIONS = [
    "tritonpy.stub._codec",
    "tritonpy.stub._batch",
    "tritonpy.stub._engine",
    "tritonpy.stub._channel",
    "tritonpy.stub._bls_wire",
    "tritonpy.stub._lifetime",
    "tritonpy.stub._zygote",
    "tritonpy.pb_utils._bytes",
    "tritonpy.pb_utils._core",
    "tritonpy.pb_utils._seam",
    "tritonpy.pb_utils._dlpack",
]


class BuildPyFresh(build_py):
    def run(self) -> None:
        """Removes the modules an earlier build left in build/ that this one
        does not write (moved or deleted since): they would be installed
        again. Compiled modules are build_ext's and stay."""
        keep = set(self.get_outputs(include_bytecode=False))
        for package in self.packages:
            folder = os.path.join(self.build_lib, *package.split("."))
            for name in os.listdir(folder) if os.path.isdir(folder) else ():
                path = os.path.join(folder, name)
                if name.endswith((".py", ".pyi", ".pxd")) and path not in keep:
                    os.remove(path)
        super().run()


class BuildExtAndBackend(build_ext):
    def finalize_options(self) -> None:
        super().finalize_options()
        if not self.parallel:  # the extensions compile independently
            self.parallel = min(2, os.cpu_count() or 1)

    def run(self) -> None:
        self._cythonize()
        super().run()
        if not STUB_ONLY:
            self._build_backend()

    def _cythonize(self) -> None:
        """Turns the .pyx sources into C. ``cimport tritonpy.pb_utils._seam``
        (in stub/) finds _seam.pxd and _core.pxd in build_py's output, the
        package laid out as it installs; cythonize rebuilds a module whose
        cimported .pxd changed (build_py keeps the times)."""
        self.run_command("build_py")  # done already under `build`
        generated = cythonize(
            self.extensions,
            compiler_directives={"language_level": "3", "embedsignature": True},
            include_path=[self.build_lib],
            compile_time_env={"TRITONPY_DEBUG": DEBUG},
        )
        for ext, c in zip(self.extensions, generated, strict=True):
            assert ext.name == c.name, (ext.name, c.name)
            ext.sources = c.sources

    def _build_backend(self) -> None:
        cmake = shutil.which("cmake")
        if cmake is None:
            sys.exit("tritonpy: cmake is needed to build the backend (pip install cmake)")
        build_dir = os.path.join(ROOT, "build", "cmake")
        config = "Debug" if DEBUG else "Release"
        configure = [cmake, "-S", ROOT, "-B", build_dir, f"-DCMAKE_BUILD_TYPE={config}"]
        import nlohmann_json  # build requirement: the JSON library's headers

        configure.append(f"-DTRITONPY_JSON_INCLUDE={nlohmann_json.get_include()}")
        configure += shlex.split(os.environ.get("TRITONPY_CMAKE_ARGS", ""))
        # Always given: the CMake cache would keep an earlier debug build's ON.
        configure.append(f"-DTRITONPY_DEBUG={'ON' if DEBUG else 'OFF'}")
        subprocess.check_call(configure)
        subprocess.check_call([cmake, "--build", build_dir, "-j", str(min(2, os.cpu_count() or 1))])
        dest = os.path.join(self.build_lib, "tritonpy", "_backend")
        os.makedirs(dest, exist_ok=True)
        shutil.copy2(os.path.join(build_dir, "libtriton_tritonpy.so"), dest)


macros = [("TRITONPY_DEBUG", "1")] if DEBUG else []

setup(
    # Every folder under src/ is named as it is imported.
    packages=find_packages("src"),
    package_dir={"": "src"},
    # py.typed and the .pyi of the compiled modules: IDEs and mypy see the
    # model API's types in an installed tritonpy. The .pxd: cimports resolve
    # against build_py's output (BuildExtAndBackend._cythonize).
    package_data={
        "tritonpy": ["py.typed"],
        "tritonpy.pb_utils": ["py.typed", "*.pyi", "*.pxd"],
        "tritonpy.stub": ["py.typed", "*.pyi", "*.pxd"],
        "tritonpy.batching": ["py.typed"],
        "tritonpy.exec_env": ["py.typed"],
        "triton_python_backend_utils": ["py.typed"],
    },
    ext_modules=[
        Extension(
            name,
            ["src/" + name.replace(".", "/") + ".pyx"],
            define_macros=macros,
            # child_steps.h: the steps of a child of the server, which the
            # stub template (_zygote) shares with the backend.
            include_dirs=[os.path.join(ROOT, "backend", "src", "process")],
            # ... and is rebuilt when that header changes.
            depends=["backend/src/process/child_steps.h"],
            extra_compile_args=["-O2"] if not DEBUG else ["-O0", "-g"],
        )
        for name in EXTENSIONS
    ],
    cmdclass={"build_py": BuildPyFresh, "build_ext": BuildExtAndBackend},
    zip_safe=False,
)
