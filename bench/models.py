# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The bench model repository, generated per system.

tritonpy and the official backend run the very same ``model.py`` files; only
``backend:`` in ``config.pbtxt`` differs. The floor serves the same names
natively (``bench/floor/floor.cc``) and has no BLS model. The models must
run on numpy 1.26 (the official stub's interpreter) as well as numpy 2.
"""

from __future__ import annotations

import shutil
from pathlib import Path

BACKENDS = {"tritonpy": "tritonpy", "official": "python", "floor": "floor"}

# The inputs of one request to each model (name, datatype, shape, values),
# as the load generators send them (loads.json_body).
Inputs = list[tuple[str, str, list[int], list]]
ADD_SUB_INPUTS: Inputs = [
    ("INPUT0", "FP32", [4], [1, 2, 3, 4]),
    ("INPUT1", "FP32", [4], [1, 1, 1, 1]),
]
VEC_INPUT: Inputs = [("INPUT0", "FP32", [4], [1, 2, 3, 4])]
BATCHED_INPUT: Inputs = [("INPUT0", "FP32", [1, 4], [[1, 2, 3, 4]])]

ADD_SUB_PY = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            y = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
            responses.append(pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor("OUTPUT0", x + y), pb_utils.Tensor("OUTPUT1", x - y)]))
        return responses
"""

IDENTITY_PY = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor(
                    "OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())])
                for r in requests]
"""

ASYNC_SLEEP_PY = """
import asyncio

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    async def execute(self, requests):
        await asyncio.sleep(0.01)
        return [pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor(
                    "OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())])
                for r in requests]
"""

STREAM_PY = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
        for request in requests:
            sender = request.get_response_sender()
            n = int(pb_utils.get_input_tensor_by_name(request, "N").as_numpy().reshape(-1)[0])
            for i in range(n):
                sender.send(pb_utils.InferenceResponse(output_tensors=[
                    pb_utils.Tensor("TOKEN", np.array([i], dtype=np.int32))]),
                    flags=final if i == n - 1 else 0)
            if n <= 0:
                sender.send(flags=final)
        return None
"""

STREAM_ASYNC_PY = """
import asyncio

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    async def execute(self, requests):
        await asyncio.gather(*(self.stream(r) for r in requests))

    async def stream(self, request):
        final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
        sender = request.get_response_sender()
        n = int(pb_utils.get_input_tensor_by_name(request, "N").as_numpy().reshape(-1)[0])
        for i in range(n):
            sender.send(pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor("TOKEN", np.array([i], dtype=np.int32))]),
                flags=final if i == n - 1 else 0)
            await asyncio.sleep(0)  # the other streams' turn
        if n <= 0:
            sender.send(flags=final)
"""

BLS_PY = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            inner = pb_utils.InferenceRequest(
                model_name="add_sub", requested_output_names=["OUTPUT0", "OUTPUT1"],
                inputs=[pb_utils.get_input_tensor_by_name(request, "INPUT0"),
                        pb_utils.get_input_tensor_by_name(request, "INPUT1")]).exec()
            if inner.has_error():
                raise pb_utils.TritonModelException(inner.error().message())
            responses.append(pb_utils.InferenceResponse(output_tensors=[
                pb_utils.get_output_tensor_by_name(inner, "OUTPUT0"),
                pb_utils.get_output_tensor_by_name(inner, "OUTPUT1")]))
        return responses
"""

# vllm_backend's pattern with a stand-in engine: execute hands each request
# to an asyncio loop of the model's own thread and returns; on that loop an
# engine task takes STEP_S per decode step (as vLLM's engine loop awaits
# its model), then gives each active stream its token, and the streams'
# coroutines send them before the next step starts. Every response is sent
# from the model's own thread, none from execute, and a send that blocks
# delays the next step, as it does vLLM's. Inputs as genai-perf sends them
# for --backend vllm.
ENGINE_PY = """
import asyncio
import json
import threading

import numpy as np
import triton_python_backend_utils as pb_utils

STEP_S = 0.002  # the stand-in engine's time per decode step (a token)
FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


class TritonPythonModel:
    def initialize(self, args):
        self.loop = asyncio.new_event_loop()
        self.active = []  # the streams' queues
        self.work = asyncio.Event()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        asyncio.run_coroutine_threadsafe(self.engine(), self.loop)

    async def engine(self):
        while True:
            if not self.active:
                self.work.clear()
                await self.work.wait()
            await asyncio.sleep(STEP_S)
            for queue in self.active:
                queue.put_nowait(b"a")
            await asyncio.sleep(0)  # the streams send their tokens

    def execute(self, requests):
        for request in requests:
            asyncio.run_coroutine_threadsafe(self.generate(request), self.loop)
        return None

    async def generate(self, request):
        sender = request.get_response_sender()
        params = pb_utils.get_input_tensor_by_name(request, "sampling_parameters")
        n = 16
        if params is not None:
            n = int(json.loads(params.as_numpy().reshape(-1)[0]).get("max_tokens", n))
        queue = asyncio.Queue()
        self.active.append(queue)
        self.work.set()
        try:
            for i in range(n):
                token = await queue.get()
                sender.send(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor(
                    "text_output", np.array([token], dtype=object))]),
                    flags=FINAL if i == n - 1 else 0)
        finally:
            self.active.remove(queue)
        if n <= 0:
            sender.send(flags=FINAL)

    def finalize(self):
        self.loop.call_soon_threadsafe(self.loop.stop)
"""

_ADD_SUB_IO = """input [
  { name: "INPUT0", data_type: TYPE_FP32, dims: [ 4 ] },
  { name: "INPUT1", data_type: TYPE_FP32, dims: [ 4 ] }
]
output [
  { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ 4 ] },
  { name: "OUTPUT1", data_type: TYPE_FP32, dims: [ 4 ] }
]"""

_STREAM_CONFIG = """max_batch_size: 0
model_transaction_policy { decoupled: true }
input [ { name: "N", data_type: TYPE_INT32, dims: [ 1 ] } ]
output [ { name: "TOKEN", data_type: TYPE_INT32, dims: [ 1 ] } ]"""

# The inputs vllm_backend's model takes (and genai-perf sends).
_VLLM_IO = """max_batch_size: 0
model_transaction_policy { decoupled: true }
input [
  { name: "text_input", data_type: TYPE_STRING, dims: [ 1 ] },
  { name: "stream", data_type: TYPE_BOOL, dims: [ 1 ], optional: true },
  { name: "sampling_parameters", data_type: TYPE_STRING, dims: [ 1 ], optional: true },
  { name: "exclude_input_in_output", data_type: TYPE_BOOL, dims: [ 1 ], optional: true }
]
output [ { name: "text_output", data_type: TYPE_STRING, dims: [ -1 ] } ]"""

# name -> (model.py source or None for floor-only, config body after backend)
MODELS: dict[str, tuple[str, str]] = {
    "add_sub": (ADD_SUB_PY, "max_batch_size: 0\n" + _ADD_SUB_IO),
    "load_probe": (ADD_SUB_PY, "max_batch_size: 0\n" + _ADD_SUB_IO),
    # load_probe under the stub sandbox, which a model may turn on for
    # itself (docs/hardening.md); tritonpy only.
    "load_probe_sandboxed": (
        ADD_SUB_PY,
        "max_batch_size: 0\n"
        + _ADD_SUB_IO
        + '\nparameters { key: "stub_sandbox" value { string_value: "true" } }',
    ),
    "identity": (
        IDENTITY_PY,
        """max_batch_size: 0
input [ { name: "INPUT0", data_type: TYPE_UINT8, dims: [ -1 ] } ]
output [ { name: "OUTPUT0", data_type: TYPE_UINT8, dims: [ -1 ] } ]""",
    ),
    "batched": (
        IDENTITY_PY,
        """max_batch_size: 64
dynamic_batching { max_queue_delay_microseconds: 100 }
input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ 4 ] } ]
output [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ 4 ] } ]""",
    ),
    "async_sleep": (
        ASYNC_SLEEP_PY,
        """max_batch_size: 0
input [ { name: "INPUT0", data_type: TYPE_FP32, dims: [ 4 ] } ]
output [ { name: "OUTPUT0", data_type: TYPE_FP32, dims: [ 4 ] } ]""",
    ),
    "stream": (
        STREAM_PY,
        _STREAM_CONFIG,
    ),
    "stream_async": (
        STREAM_ASYNC_PY,
        _STREAM_CONFIG,
    ),
    "bls": (BLS_PY, "max_batch_size: 0\n" + _ADD_SUB_IO),
    "engine": (ENGINE_PY, _VLLM_IO),
}

# Example models served as they ship (model.py and config.pbtxt; only
# ``backend:`` differs). The official backend gets a copy of
# tritonpy.batching in the version directory (docs/llm-serving.md).
ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = {"llm": ROOT / "examples" / "llm"}

# Models the floor cannot serve natively (BLS would need the whole
# TRITONSERVER in-process inference API; llm's floor is the model without a
# server, bench/llm_floor.py).
FLOOR_MISSING = {"bls", "llm", "engine"}
# Loaded on demand by the load-time scenarios, not at server start.
ON_DEMAND = {"load_probe", "load_probe_sandboxed"}
# Models of tritonpy alone.
TRITONPY_ONLY = {"load_probe_sandboxed"}


def models_for(system: str) -> list[str]:
    return [
        m
        for m in [*MODELS, *EXAMPLES]
        if not (system == "floor" and m in FLOOR_MISSING)
        and not (system != "tritonpy" and m in TRITONPY_ONLY)
    ]


def _write_example(dest: Path, name: str, system: str) -> None:
    src = EXAMPLES[name]
    version = dest / name / "1"
    version.mkdir(parents=True, exist_ok=True)
    shutil.copy2(src / "model.py", version / "model.py")
    config = (src / "config.pbtxt").read_text()
    (dest / name / "config.pbtxt").write_text(
        config.replace('backend: "tritonpy"', f'backend: "{BACKENDS[system]}"')
    )
    if system == "official":
        package = version / "tritonpy"
        shutil.rmtree(package, ignore_errors=True)
        package.mkdir()
        (package / "__init__.py").write_text("")
        shutil.copytree(
            ROOT / "src" / "tritonpy" / "batching",
            package / "batching",
            ignore=shutil.ignore_patterns("__pycache__"),
        )


def write_repository(dest: Path, system: str) -> Path:
    """Write the repository for ``system`` (tritonpy, official or floor)."""
    backend = BACKENDS[system]
    dest.mkdir(parents=True, exist_ok=True)
    header = "# SPDX-License-Identifier: BSD-3-Clause\n# Copyright (c) The tritonpy authors.\n"
    for name in models_for(system):
        if name in EXAMPLES:
            _write_example(dest, name, system)
            continue
        source, body = MODELS[name]
        model = dest / name
        (model / "1").mkdir(parents=True, exist_ok=True)
        if system != "floor":
            (model / "1" / "model.py").write_text(header + source)
        (model / "config.pbtxt").write_text(
            f'name: "{name}"\nbackend: "{backend}"\n{body}\n'
            "instance_group [ { kind: KIND_CPU, count: 1 } ]\n"
        )
    return dest
