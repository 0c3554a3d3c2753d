# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""A stub template made for a model's own settings (its stub_preload)
runs while a loaded model uses it, and ends with the last one; the
template of the backend's own settings runs on (docs/configuration.md,
stub-fork)."""

from __future__ import annotations

import re
from pathlib import Path

import tritonclient.http as httpclient
from test_opening_imports import info, leased_server

from server import children, running

ENDED = "ended: no loaded model forks from it"
PRELOAD = 'parameters { key: "stub_preload" value { string_value: "leased" } }'
# Sandbox limits without a sandbox (the backend's is off): nothing that
# keys a template apart.
LIMITS = 'parameters { key: "stub_sandbox_max_processes" value { string_value: "64" } }'


def test_a_template_of_a_model_s_own_preload_ends_with_the_last_model_that_uses_it(
    tmp_path: Path,
) -> None:
    # Two models that name the same module for their template, and two
    # with the backend's settings. None imports it in model.py.
    models = {
        "own_a": ("", PRELOAD),
        "own_b": ("", PRELOAD),
        "plain": ("", ""),
        "limits": ("", LIMITS),
    }
    srv = leased_server(tmp_path, models)
    with running(srv):
        c = httpclient.InferenceServerClient(srv.http_url, network_timeout=120)
        try:
            c.load_model("plain")
            plain = info(srv, "plain")
            assert plain["forked"] and plain["imported_by"] is None, plain
            shared = set(children(srv.proc.pid, templates=True))
            assert len(shared) == 1, shared
            # A model of the same settings comes and goes: the backend's
            # template stays.
            at = srv.log_size()
            c.load_model("limits")
            assert info(srv, "limits")["forked"]
            c.unload_model("limits")
            assert srv.wait_log("successfully unloaded 'limits'", timeout=60, after=at)
            assert ENDED not in srv.log()[at:]
            assert set(children(srv.proc.pid, templates=True)) == shared
            for name in ("own_a", "own_b"):
                c.load_model(name)
            seen = {name: info(srv, name) for name in ("own_a", "own_b")}
            # Both stubs forked from one template that imported the module.
            template = seen["own_a"]["imported_by"]
            assert seen["own_b"]["imported_by"] == template, seen
            assert template not in (seen["own_a"]["pid"], seen["own_b"]["pid"]), seen
            assert set(children(srv.proc.pid, templates=True)) == shared | {template}
            # One model that uses it is still loaded: it runs on.
            at = srv.log_size()
            c.unload_model("own_a")
            assert srv.wait_log("successfully unloaded 'own_a'", timeout=60, after=at)
            assert template in children(srv.proc.pid, templates=True)
            assert ENDED not in srv.log()[at:]
            # The last one: it ends; its stubs and the backend's template
            # stay.
            c.unload_model("own_b")
            assert srv.wait_log(ENDED, timeout=60, after=at), srv.log()[-3000:]
            assert re.search(rf"preload 'numpy,leased'\) pid {template} {ENDED}", srv.log())
            assert set(children(srv.proc.pid, templates=True)) == shared
            assert info(srv, "plain")["pid"] == plain["pid"]
            # A model that names it again gets a template again.
            c.load_model("own_a")
            again = info(srv, "own_a")
            assert again["imported_by"] not in (template, again["pid"], None), again
            assert set(children(srv.proc.pid, templates=True)) == shared | {again["imported_by"]}
        finally:
            c.close()
