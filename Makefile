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

SOURCES := $(shell find cli stub pb_utils compat backend -type f \
             \( -name '*.py' -o -name '*.pyx' -o -name '*.pxd' -o -name '*.pyi' \
                -o -name '*.cc' -o -name '*.h' -o -name '*.map' -o -name '*.txt' \) 2>/dev/null) \
           CMakeLists.txt setup.py pyproject.toml

.PHONY: setup serve test test-unit bench bench-smoke clean help

help:
	@sed -n '4,10p' Makefile

$(PY):
	$(PYTHON) -m venv $(VENV)

$(VENV)/.deps: pyproject.toml | $(PY)
	$(PIP) install -q "setuptools>=68" wheel "Cython>=3.0" "numpy>=1.24" "uvloop>=0.19" \
	    "pytest>=8" "pytest-timeout>=2.3" "tritonclient[http,grpc]>=2.51" "ml_dtypes>=0.4" "hypothesis>=6" "ruff>=0.6"
	@command -v cmake >/dev/null || $(PIP) install -q cmake
	touch $@

$(VENV)/.frameworks: examples/requirements.txt | $(VENV)/.deps
	$(PIP) install -q -r examples/requirements.txt
	touch $@

$(VENV)/.installed: $(VENV)/.deps $(SOURCES)
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

clean:
	rm -rf $(VENV) build dist *.egg-info
