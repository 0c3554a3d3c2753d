# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""A model of one instance, not sandboxed, has no stub template of its
own; its stub forks from a template that imported the installed packages
its model.py opens with, made for the second model that opens with the
same and shared by all that do (docs/performance.md). What the model does before an import keeps that
import in its own stub; so does a package that starts a thread, and so
does the sandbox."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.http as httpclient
from test_stub_fork import PRELOAD_DIR

from server import TritonServer, children, explicit, running

# The model: ``{opening}`` are its first lines. It says which process
# imported the marked package, which threads it has, and whether the
# pb_utils it imported is the stub's own.
MODEL = """{opening}
import json
import os
import sys

import numpy as np
import triton_python_backend_utils as pb_utils


def _threads():
    names = []
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{{tid}}/comm") as f:
            names.append(f.read().strip())
    return names


class TritonPythonModel:
    def execute(self, requests):
        # The marked package it imported, whichever.
        marked = next(
            (sys.modules[m] for m in ("marked", "weighted", "leased") if m in sys.modules), None
        )
        uses_api = sys.modules.get("uses_api")
        from tritonpy.pb_utils import _seam

        info = {{
            "pid": os.getpid(),
            "imported_by": getattr(marked, "IMPORTED_BY", None),
            "seen": getattr(marked, "SEEN", None),
            "omp": getattr(marked, "OMP", None),
            "argv": getattr(marked, "ARGV", None),
            "api_imported_by": getattr(uses_api, "IMPORTED_BY", None),
            "api_is_the_stub_s": getattr(uses_api, "API", None) is _seam.pb_utils,
            "threads": _threads(),
            "forked": "tritonpy.stub.template" in sys.modules,
            "pb_utils_is_the_stub_s": pb_utils is _seam.pb_utils,
        }}
        out = np.array([json.dumps(info).encode()], dtype=object)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("INFO", out)]) for _ in requests]
"""
CONFIG = """name: "{name}"
backend: "tritonpy"
max_batch_size: 0
input [ {{ name: "IN", data_type: TYPE_INT32, dims: [ 1 ] }} ]
output [ {{ name: "INFO", data_type: TYPE_STRING, dims: [ 1 ] }} ]
instance_group [ {{ count: 1, kind: KIND_CPU }} ]
{parameters}"""
# An installed package that says which process imported it, and what the
# environment said then.
MARKED = """import os
import sys

IMPORTED_BY = os.getpid()
SEEN = os.environ.get("OPENING_SEEN")
OMP = os.environ.get("OMP_NUM_THREADS")
ARGV = list(sys.argv)
"""
# An installed package that imports the API when it is imported.
USES_API = """import os

import triton_python_backend_utils

API = triton_python_backend_utils
IMPORTED_BY = os.getpid()
"""
# A model's own module that sets the environment when it is imported.
SETUP_ENV = """import os

os.environ["OPENING_SEEN"] = "1"
"""
OPENINGS = {
    # Three models that open with the same package (and the API's name,
    # which the stub gives its own module).
    "first_a": '"""A model."""\nimport marked\nimport triton_python_backend_utils as pb_utils',
    "first_b": "# another\nfrom marked import IMPORTED_BY\nimport numpy",
    "first_c": "import marked.sub",
    # A statement before the import: it is not an opening import.
    "late": 'import os\nos.environ["OPENING_SEEN"] = "1"\nimport marked',
    # Two whose own module comes first: what it does at import may matter
    # to the installed package after it.
    "local_a": "import setup_env\nimport marked",
    "local_b": "import setup_env\nimport marked",
    # Two that open with a package that imports the API.
    "api_a": "import uses_api",
    "api_b": "import uses_api",
    # Two that open with a package that starts a thread when imported.
    "threaded_a": "import starts_thread\nimport marked",
    "threaded_b": "import starts_thread\nimport marked",
    # Sandboxed: the template imports nothing for it.
    "boxed_first": "import marked",
    # Two of two instances each: their own templates fork from the
    # template of what they open with.
    "pair_a": "import weighted",
    "pair_b": "import weighted\nimport numpy",
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    work = tmp_path_factory.mktemp("opening_imports")
    site = work / "site"
    (site / "marked").mkdir(parents=True)
    (site / "marked" / "__init__.py").write_text(MARKED)
    (site / "marked" / "sub.py").write_text("")
    (site / "uses_api.py").write_text(USES_API)
    (site / "weighted.py").write_text(MARKED)
    repo = work / "repo"
    for name, opening in OPENINGS.items():
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "1" / "model.py").write_text(MODEL.format(opening=opening))
        if name.startswith("local"):
            (repo / name / "1" / "setup_env.py").write_text(SETUP_ENV)
        boxed = 'parameters { key: "stub_sandbox" value { string_value: "true" } }\n'
        parameters = boxed if name.startswith("boxed") else ""
        config = CONFIG.format(name=name, parameters=parameters)
        if name.startswith("pair"):
            config = config.replace("count: 1", "count: 2")
        (repo / name / "config.pbtxt").write_text(config)
    srv = TritonServer(
        repo,
        work,
        args=[f"--backend-config=tritonpy,stub-sandbox-read-paths={site}:{PRELOAD_DIR}"],
        prefix=["env", f"PYTHONPATH={site}:{PRELOAD_DIR}"],
    )
    with running(srv):
        yield srv


def info(srv: TritonServer, model: str) -> dict[str, Any]:
    c = httpclient.InferenceServerClient(srv.http_url, network_timeout=60)
    try:
        inp = httpclient.InferInput("IN", [1], "INT32")
        inp.set_data_from_numpy(np.array([0], np.int32))
        return dict(json.loads(c.infer(model, [inp]).as_numpy("INFO")[0]))
    finally:
        c.close()


def cmdline(pid: int) -> list[str]:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return [a.decode() for a in f.read().split(b"\0") if a]


def preload_of(pid: int) -> list[str]:
    """What the template ``pid`` imported for its stubs: its --preload
    and --opening lists."""
    argv = cmdline(pid)
    assert "--template" in argv, argv
    return [
        *argv[argv.index("--preload") + 1].split(","),
        *argv[argv.index("--opening") + 1].split(","),
    ]


def test_models_that_open_with_the_same_package_share_the_template_that_imported_it(
    server: TritonServer,
) -> None:
    seen = [info(server, name) for name in ("first_a", "first_b", "first_c")]
    for f in seen:
        assert f["forked"] and f["pb_utils_is_the_stub_s"], f
    # The first model file that asked imported it in its own stub, as it
    # would alone; the template was made for the second, and the third
    # forks from it too: one import for both.
    alone = [f for f in seen if f["imported_by"] == f["pid"]]
    shared = [f for f in seen if f["imported_by"] != f["pid"]]
    assert len(alone) == 1 and len(shared) == 2, seen
    template = shared[0]["imported_by"]
    assert shared[1]["imported_by"] == template, seen
    # It saw what the stub's own import would: the argv a model sees, and
    # the environment without the template's own thread limits.
    for f in seen:
        assert f["argv"] == [""] and f["omp"] == os.environ.get("OMP_NUM_THREADS"), f
    assert "marked" in preload_of(template), cmdline(template)
    # The API's name is not among the template's imports: the stub gives
    # it its own module.
    assert "triton_python_backend_utils" not in preload_of(template)
    assert re.search(r"opening imports 'marked'\) started, pid " + str(template), server.log()), (
        server.log()
    )


def test_what_a_model_does_before_an_import_keeps_it_in_the_model_s_stub(
    server: TritonServer,
) -> None:
    f = info(server, "late")
    assert f["forked"], f
    assert f["imported_by"] == f["pid"] and f["seen"] == "1", f


def test_a_model_s_own_module_before_an_installed_package_keeps_both_in_its_stub(
    server: TritonServer,
) -> None:
    for name in ("local_a", "local_b"):
        f = info(server, name)
        assert f["forked"] and f["imported_by"] == f["pid"] and f["seen"] == "1", f


def test_a_package_that_imports_the_api_gets_the_stub_s_own_module(server: TritonServer) -> None:
    seen = [info(server, name) for name in ("api_a", "api_b")]
    # The second imported it from a template.
    assert sorted(f["api_imported_by"] == f["pid"] for f in seen) == [False, True], seen
    for f in seen:
        assert f["api_is_the_stub_s"], f


def test_a_package_that_starts_a_thread_leaves_its_models_on_the_shared_template(
    server: TritonServer,
) -> None:
    refused = (
        "cannot fork stubs: importing 'starts_thread' started a thread (preload-thread): "
        "a template with threads cannot fork; the stubs of its models, and their own "
        "templates, fork from the template without their opening imports instead"
    )
    for name in ("threaded_a", "threaded_b"):
        f = info(server, name)
        # Forked from the shared template, it imported both itself.
        assert f["forked"] and f["imported_by"] == f["pid"], f
        assert "preload-thread" in f["threads"], f
    assert refused in server.log(), server.log()


def test_a_sandboxed_model_s_opening_imports_stay_in_its_sandbox(server: TritonServer) -> None:
    f = info(server, "boxed_first")
    # pid 1 of its own pid namespace imported it.
    assert f["pid"] == 1 and f["imported_by"] == 1, f
    templates = children(server.proc.pid, templates=True)
    boxed = [t for t in templates if cmdline(t)[cmdline(t).index("--sandboxed") + 1] == "1"]
    assert boxed, [cmdline(t) for t in templates]
    for t in boxed:
        assert "marked" not in preload_of(t), cmdline(t)


def test_models_of_many_instances_share_the_template_of_what_they_open_with(
    server: TritonServer,
) -> None:
    seen = {name: info(server, name) for name in ("pair_a", "pair_b")}
    log = server.log()
    own = {}
    for name, f in seen.items():
        # Each model's own template imported its model file, and was
        # forked itself: its stubs did not import the package.
        assert f["forked"] and f["imported_by"] != f["pid"], f
        found = re.findall(
            rf"model '{name}' version 1 #\d+\) started, pid (\d+), forked from the stub "
            r"template \(([^)]*)\)",
            log,
        )
        assert len(found) == 1, log
        own[name] = (int(found[0][0]), found[0][1])
    # The first model file that asked forked its template from the shared
    # one and imported the package there; the template made for the
    # second imported it once, for the second's template and its stubs.
    by_own = [n for n in seen if seen[n]["imported_by"] == own[n][0]]
    by_shared = [n for n in seen if seen[n]["imported_by"] != own[n][0]]
    assert len(by_own) == 1 and len(by_shared) == 1, (seen, own)
    assert "opening imports" not in own[by_own[0]][1], own
    assert "opening imports 'weighted'" in own[by_shared[0]][1], own
    learned = seen[by_shared[0]]["imported_by"]
    assert "weighted" in preload_of(learned), cmdline(learned)
    assert re.search(r"opening imports 'weighted'\) started, pid " + str(learned), log), log


def leased_server(work: Path, models: dict[str, tuple[str, str]]) -> TritonServer:
    """A server in explicit model control of ``models``: name -> (the
    opening lines of its model.py, its config's parameters), with the
    marked package ``leased`` installed."""
    site = work / "site"
    site.mkdir()
    (site / "leased.py").write_text(MARKED)
    repo = work / "repo"
    for name, (opening, parameters) in models.items():
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "1" / "model.py").write_text(MODEL.format(opening=opening))
        (repo / name / "config.pbtxt").write_text(CONFIG.format(name=name, parameters=parameters))
    return TritonServer(repo, work, args=explicit([]), prefix=["env", f"PYTHONPATH={site}"])


def test_a_template_of_opening_imports_ends_with_the_last_model_that_forks_from_it(
    tmp_path: Path,
) -> None:
    names = ("lease_a", "lease_b", "lease_c")
    srv = leased_server(tmp_path, dict.fromkeys(names, ("import leased", "")))
    ended = "ended: no loaded model forks from it"
    with running(srv):
        c = httpclient.InferenceServerClient(srv.http_url, network_timeout=120)
        try:
            for name in names:
                c.load_model(name)
            seen = {name: info(srv, name) for name in names}
            # The first imported it in its own stub; the template made for
            # the second serves the third too.
            assert seen["lease_a"]["imported_by"] == seen["lease_a"]["pid"], seen
            template = seen["lease_b"]["imported_by"]
            assert seen["lease_c"]["imported_by"] == template != seen["lease_b"]["pid"], seen
            # One model that forked from it is still loaded: it runs on.
            at = srv.log_size()
            c.unload_model("lease_b")
            assert srv.wait_log("successfully unloaded 'lease_b'", timeout=60, after=at)
            assert template in children(srv.proc.pid, templates=True)
            assert ended not in srv.log()
            # The last one: it ends, and the model of the shared template
            # serves on.
            c.unload_model("lease_c")
            assert srv.wait_log(ended, timeout=60, after=at), srv.log()[-3000:]
            assert template not in children(srv.proc.pid, templates=True)
            assert re.search(rf"opening imports 'leased'\) pid {template} {ended}", srv.log())
            assert info(srv, "lease_a")["imported_by"] == seen["lease_a"]["pid"]
            # Models that open with it again start a template again, for
            # the second of them.
            for name in ("lease_b", "lease_c"):
                c.load_model(name)
            again = {name: info(srv, name) for name in ("lease_b", "lease_c")}
            assert again["lease_b"]["imported_by"] == again["lease_b"]["pid"], again
            renewed = again["lease_c"]["imported_by"]
            assert renewed not in (template, again["lease_c"]["pid"]), again
            assert renewed in children(srv.proc.pid, templates=True)
        finally:
            c.close()
