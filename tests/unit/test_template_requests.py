# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""A stub template forks a model's own template only for plain stubs: a
request for one is refused by the template of sandboxed stubs, and when it
asks for a sandbox (what one kind of stub leaves in a template the other
must not see). Each case runs in an interpreter of its own, with one
thread, as a template has."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

PROBE = """
import json, os, sys
from tritonpy.stub import template

template._SANDBOXED = sys.argv[1] == "1"
sandbox = {"max_processes": 8, "address_space": 0} if sys.argv[2] == "1" else None
request = {
    "argv": [sys.executable, "-m", "tritonpy.stub", "--template", "--fd", "3"],
    "env": [], "cwd": "/", "parent": os.getpid(), "sandbox": sandbox,
    "targets": [3, 4], "null_stdin": True,
}
fds = [os.open(os.devnull, os.O_RDONLY) for _ in range(4)]
print(json.dumps(template._fork(None, request, fds, None, None, 1024)))
"""


@pytest.mark.parametrize(
    ("template_sandboxed", "request_sandboxed"),
    [("1", "0"), ("0", "1"), ("1", "1")],
    ids=["from-the-sandboxed-template", "asking-for-a-sandbox", "both"],
)
def test_a_template_is_never_forked_for_sandboxed_stubs(
    template_sandboxed: str, request_sandboxed: str
) -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, template_sandboxed, request_sandboxed],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    reply = json.loads(out.stdout.strip().splitlines()[-1])
    assert reply == {"refused": "a template is not forked for sandboxed stubs"}, out
