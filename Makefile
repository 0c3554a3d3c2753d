# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
#
#   make serve   set everything up, then serve examples/model_repository
#                (HTTP 8000, gRPC 8001, metrics 8002) until Ctrl-C
#   make test    set everything up, then run the whole test suite
#   make bench   set everything up, then benchmark tritonpy against the official
#                Python backend and a native floor (30-60 min); writes
#                bench/results/ and docs/benchmarks.md (BENCH_ARGS=... to tune)
#   make bench-smoke  a tiny end-to-end run of the benchmark suite
#   make fuzz    coverage-guided fuzzing of the backend's frame handling with
#                libFuzzer (clang), FUZZ_SECONDS (120) per target, then
#                random hostile requests to a live server as long
#   make format  rewrite the tree with ruff (imports, format) and clang-format
#   make wire    rewrite what is generated from the wire format's constants
#                (docs/protocol.toml: C++ and Cython headers, tables, ...)
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

SOURCES := $(shell find src backend -type f \
             \( -name '*.py' -o -name '*.pyx' -o -name '*.pxd' -o -name '*.pxi' -o -name '*.pyi' \
                -o -name '*.cc' -o -name '*.h' -o -name '*.map' -o -name '*.txt' \) 2>/dev/null) \
           CMakeLists.txt setup.py pyproject.toml

.PHONY: setup serve test test-unit bench bench-smoke format wire clean help FORCE

help:
	@sed -n '4,20p' Makefile

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
	    "mypy>=1.10" "codespell>=2.3" "clang-format>=23.1,<24" "pyyaml>=6" "jedi>=0.19" "httptools>=0.6"
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
	$(PY) -m pytest $(PYTEST_ARGS)

test-unit: setup
	$(PY) -m pytest tests/unit tests/stub $(PYTEST_ARGS)

# The field's own load generators (bench/field.py), in a venv of their
# own since genai-perf pins many packages: perf_analyzer from the
# tritonclient 2.51.0 wheel, which loads libcudart.so.12 (PyPI's
# nvidia-cuda-runtime-cu12; no GPU needed) and Debian's libb64, and
# genai-perf 0.0.8, the release beside Triton 2.51. `make test` needs none
# of it; bench-smoke skips their scenarios while they are missing.
FIELD_VENV := .venv-genai
FIELD_TOOLS := genai-perf==0.0.8 "tritonclient[all]==2.51.0" "nvidia-cuda-runtime-cu12>=12.1,<13" \
    "transformers>=4.40,<5"
$(FIELD_VENV)/.installed: Makefile
	@[ -e /usr/lib/x86_64-linux-gnu/libb64.so.0d ] || ldconfig -p | grep -q 'libb64\.so\.0d' || { \
	    SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	    $$SUDO apt-get install -y libb64-0d || { $$SUDO apt-get update && $$SUDO apt-get install -y libb64-0d; }; }
	[ -x $(FIELD_VENV)/bin/python ] || $(PYTHON) -m venv $(FIELD_VENV)
	$(FIELD_VENV)/bin/python -m pip --disable-pip-version-check install -q $(FIELD_TOOLS)
	touch $@
.PHONY: bench-tools
bench-tools: $(FIELD_VENV)/.installed

bench: setup bench-tools
	$(PY) -m bench --publish --command "make bench" $(BENCH_ARGS)

bench-smoke: setup
	$(PY) -m bench --smoke $(BENCH_ARGS)

format: $(VENV)/.deps
	$(VENV)/bin/ruff check --select I --fix -q .
	$(VENV)/bin/ruff format -q .
	$(PY) tools/checks.py clang-format --fix

# tomllib: Python 3.11 or later. tests/unit/test_wire_spec.py fails while a
# generated file differs from the spec.
wire:
	$(PYTHON) tools/gen_wire.py

clean:
	rm -rf $(VENV) $(FIELD_VENV) build dist *.egg-info

# Lock annotations: the backend compiled by clang with -Wthread-safety
# (-Werror), so that every GUARDED_BY / REQUIRES in backend/src is checked;
# `make test` runs it. Installs Debian's clang when clang++ is missing
# (root, or sudo). Compile only, in its own build directory; the include
# paths are the normal build's (CMakeLists.txt).
CLANGXX ?= clang++
THREAD_SAFETY_DIR := build/thread-safety
# Debian's clang, installed when missing (root, or sudo).
define ENSURE_CLANG
@command -v $(CLANGXX) >/dev/null || { \
    SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
    $$SUDO apt-get install -y clang || { $$SUDO apt-get update && $$SUDO apt-get install -y clang; }; }
endef
JSON_INCLUDE = $$($(PY) -c 'import nlohmann_json; print(nlohmann_json.get_include())')
.PHONY: thread-safety
thread-safety: $(VENV)/.deps
	$(ENSURE_CLANG)
	PATH="$(abspath $(VENV))/bin:$$PATH" cmake -S . -B $(THREAD_SAFETY_DIR) \
	    -DCMAKE_CXX_COMPILER=$(CLANGXX) -DTRITONPY_THREAD_SAFETY=ON -DTRITONPY_BUILD_TESTS=OFF \
	    -DTRITONPY_JSON_INCLUDE="$(JSON_INCLUDE)" >/dev/null
	PATH="$(abspath $(VENV))/bin:$$PATH" cmake --build $(THREAD_SAFETY_DIR) -j2 --target triton_tritonpy
test: thread-safety

# Coverage-guided fuzzing (docs/hardening.md, "Fuzzing"): the backend's fuzz
# targets (backend/tests/fuzz_*.cc) built by clang with libFuzzer, ASan and
# UBSan, each run for FUZZ_SECONDS from the golden frames and its corpus
# in build/fuzz/corpus/<target> (kept between runs). FUZZ_SEED=N replays a
# run's seed (libFuzzer prints it: "Seed: N"). A failing input is written
# to build/fuzz/<target>-crash-* (or -leak-, -oom-, -timeout-); replay it
# with build/fuzz/<target> <file>. `make test` runs each for a few seconds
# with seed 1 and no kept corpus.
FUZZ_SECONDS ?= 120
FUZZ_SEED ?=
FUZZ_CORPUS ?= $(FUZZ_DIR)/corpus
FUZZ_DIR := build/fuzz
FUZZ_TARGETS := tritonpy_fuzz_protocol tritonpy_fuzz_dispatch tritonpy_fuzz_execute \
    tritonpy_fuzz_sequence
# Then hostile requests to a live server (tests/integration/
# fuzz_hostile_clients.py) for FUZZ_CLIENT_SECONDS; 0 skips them.
FUZZ_CLIENT_SECONDS ?= $(FUZZ_SECONDS)
# libFuzzer is in Debian's libclang-rt-N-dev, which clang only recommends:
# installed when a fuzz target cannot be linked (apt set not to install
# recommended packages, as in many container images).
define ENSURE_LIBFUZZER
@mkdir -p $(FUZZ_DIR) && printf 'extern "C" int LLVMFuzzerTestOneInput(const char *, unsigned long) { return 0; }\n' \
    | $(CLANGXX) -fsanitize=fuzzer -x c++ - -o $(FUZZ_DIR)/libfuzzer-probe 2>/dev/null || { \
    RT=libclang-rt-$$($(CLANGXX) -dumpversion | cut -d. -f1)-dev; \
    SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
    $$SUDO apt-get install -y $$RT || { $$SUDO apt-get update && $$SUDO apt-get install -y $$RT; }; }
endef
.PHONY: fuzz
fuzz: $(VENV)/.deps
	$(ENSURE_CLANG)
	$(ENSURE_LIBFUZZER)
	PATH="$(abspath $(VENV))/bin:$$PATH" cmake -S . -B $(FUZZ_DIR) \
	    -DCMAKE_CXX_COMPILER=$(CLANGXX) -DTRITONPY_LIBFUZZER=ON -DTRITONPY_BUILD_TESTS=OFF \
	    -DTRITONPY_JSON_INCLUDE="$(JSON_INCLUDE)" >/dev/null
	PATH="$(abspath $(VENV))/bin:$$PATH" cmake --build $(FUZZ_DIR) -j2 --target $(FUZZ_TARGETS)
	@for t in $(FUZZ_TARGETS); do \
	    corpus=$(FUZZ_CORPUS)/$$t; $(if $(FUZZ_FRESH),rm -rf $$corpus;) mkdir -p $$corpus; \
	    echo "fuzz: $$t for $(FUZZ_SECONDS) s"; \
	    ASAN_OPTIONS=detect_leaks=1 $(FUZZ_DIR)/$$t -max_total_time=$(FUZZ_SECONDS) \
	        -timeout=20 -rss_limit_mb=2048 -print_final_stats=1 \
	        $(if $(FUZZ_SEED),-seed=$(FUZZ_SEED)) -artifact_prefix=$(FUZZ_DIR)/$$t- \
	        $$corpus tests/golden 2>$(FUZZ_DIR)/$$t.log \
	    || { tail -n 60 $(FUZZ_DIR)/$$t.log; echo "fuzz: $$t failed (log: $(FUZZ_DIR)/$$t.log)"; exit 1; }; \
	    grep -E '^(INFO: Seed|stat::number_of_executed_units|stat::peak_rss)' $(FUZZ_DIR)/$$t.log; \
	done
	@if [ "$(FUZZ_CLIENT_SECONDS)" != 0 ]; then \
	    $(MAKE) --no-print-directory setup && \
	    TRITONPY_CLIENT_FUZZ_SECONDS=$(FUZZ_CLIENT_SECONDS) $(if $(FUZZ_SEED),TRITONPY_FUZZ_SEED=$(FUZZ_SEED)) \
	    $(PY) -m pytest tests/integration/fuzz_hostile_clients.py -q -s -p no:cacheprovider; \
	fi
test: fuzz
test: FUZZ_SECONDS = 5
test: FUZZ_SEED = 1
test: FUZZ_CORPUS = $(FUZZ_DIR)/test-corpus
test: FUZZ_FRESH = 1
test: FUZZ_CLIENT_SECONDS = 0
