# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
#
#   make serve   set everything up, then serve examples/model_repository
#                (HTTP 8000, gRPC 8001, metrics 8002) until Ctrl-C
#   make test    set everything up, then run the whole test suite
#   make bench   set everything up, then benchmark tritonpy against the official
#                Python backend and a native floor (< 20 min); writes
#                bench/results/ and docs/benchmarks.md (BENCH_ARGS=... to tune)
#   make bench-smoke  a tiny end-to-end run of the benchmark suite
#   make format  rewrite the tree with ruff (imports, format) and clang-format
#
# TRITONPY_DEBUG=1 (e.g. TRITONPY_DEBUG=1 make test) builds both sides with
# debug checks and turns on the resource counters (docs/configuration.md).
#
# Set-up is idempotent: a virtualenv in .venv with tritonpy installed from
# this tree (Cython extensions and the C++ backend built on the way), and the
# tritonserver of the nvidia-pytriton wheel in .venv/tritonserver, installed
# without its Python dependencies so its numpy<2 pin stays out. PyTorch and
# JAX (CPU builds, pinned in examples/requirements.txt) are installed for the
# pytorch/jax examples and the DLPack interop tests.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check
PYTRITON := nvidia-pytriton==0.7.0
PYTEST_ARGS ?=

SOURCES := $(shell find tritonpy stub pb_utils batching compat backend -type f \
             \( -name '*.py' -o -name '*.pyx' -o -name '*.pxd' -o -name '*.pxi' -o -name '*.pyi' \
                -o -name '*.cc' -o -name '*.h' -o -name '*.map' -o -name '*.txt' \) 2>/dev/null) \
           CMakeLists.txt setup.py pyproject.toml

.PHONY: setup serve test test-unit bench bench-smoke format clean help FORCE

help:
	@sed -n '4,15p' Makefile

# The build mode (TRITONPY_DEBUG) is part of what is installed: switching it
# rebuilds.
BUILD_MODE := debug=$(if $(filter-out 0,$(TRITONPY_DEBUG)),1,0)
$(VENV)/.build-mode: FORCE | $(PY)
	@[ "$$(cat $@ 2>/dev/null)" = "$(BUILD_MODE)" ] || echo "$(BUILD_MODE)" > $@

$(PY):
	$(PYTHON) -m venv $(VENV)

$(VENV)/.deps: pyproject.toml | $(PY)
	$(PIP) install -q "setuptools>=68" wheel "Cython>=3.0" "nlohmann-json>=3.11" "numpy>=1.24" "uvloop>=0.19" \
	    "pytest>=8" "pytest-timeout>=2.3" "tritonclient[http,grpc]>=2.51" "ml_dtypes>=0.4" "hypothesis>=6" "ruff>=0.6" \
	    "mypy>=1.10" "codespell>=2.3" "clang-format>=23.1,<24" "pyyaml>=6" "jedi>=0.19"
	@command -v cmake >/dev/null || $(PIP) install -q cmake
	touch $@

$(VENV)/.frameworks: examples/requirements.txt | $(VENV)/.deps
	$(PIP) install -q -r examples/requirements.txt
	touch $@

$(VENV)/.installed: $(VENV)/.deps $(VENV)/.build-mode $(SOURCES)
	PATH="$(abspath $(VENV))/bin:$$PATH" $(PIP) install -q --no-build-isolation --no-deps .
	touch $@

$(VENV)/.server: | $(PY)
	$(PIP) install -q --no-deps --target $(VENV)/tritonserver $(PYTRITON)
	touch $@

setup: $(VENV)/.installed $(VENV)/.server $(VENV)/.frameworks

serve: setup
	$(VENV)/bin/tritonpy serve examples/model_repository

test: setup
	$(VENV)/bin/pytest $(PYTEST_ARGS)

test-unit: setup
	$(VENV)/bin/pytest tests/unit tests/stub $(PYTEST_ARGS)

bench: setup
	$(PY) -m bench --publish --command "make bench" $(BENCH_ARGS)

bench-smoke: setup
	$(PY) -m bench --smoke $(BENCH_ARGS)

format: $(VENV)/.deps
	$(VENV)/bin/ruff check --select I --fix -q .
	$(VENV)/bin/ruff format -q .
	$(PY) tools/checks.py clang-format --fix

clean:
	rm -rf $(VENV) build dist *.egg-info

# Lock annotations: the backend compiled by clang with -Wthread-safety
# (-Werror), so that every GUARDED_BY / REQUIRES in backend/src is checked;
# `make test` runs it. Installs Debian's clang when clang++ is missing
# (root, or sudo). Compile only, in its own build directory; the include
# paths are the normal build's (CMakeLists.txt).
CLANGXX ?= clang++
THREAD_SAFETY_DIR := build/thread-safety
.PHONY: thread-safety
thread-safety: $(VENV)/.deps
	@command -v $(CLANGXX) >/dev/null || { \
	    SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	    $$SUDO apt-get install -y clang || { $$SUDO apt-get update && $$SUDO apt-get install -y clang; }; }
	PATH="$(abspath $(VENV))/bin:$$PATH" cmake -S . -B $(THREAD_SAFETY_DIR) \
	    -DCMAKE_CXX_COMPILER=$(CLANGXX) -DTRITONPY_THREAD_SAFETY=ON -DTRITONPY_BUILD_TESTS=OFF \
	    -DTRITONPY_JSON_INCLUDE="$$($(PY) -c 'import nlohmann_json; print(nlohmann_json.get_include())')" >/dev/null
	PATH="$(abspath $(VENV))/bin:$$PATH" cmake --build $(THREAD_SAFETY_DIR) -j2 --target triton_tritonpy
test: thread-safety
