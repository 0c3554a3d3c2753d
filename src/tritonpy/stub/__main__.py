# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
import sys


def _run() -> int:
    if sys.argv[1:2] == ["--template"]:
        # The stub template (template.py), which forks stubs: it imports
        # main for them, so main does not import it back.
        from tritonpy.stub.template import serve

        return serve(sys.argv[2:])
    from tritonpy.stub.main import main

    return main()


sys.exit(_run())
