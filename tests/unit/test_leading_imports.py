# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""What a model file opens with (tritonpy/stub/leading_imports.py): the
imports a stub template may run for the model's stubs, and nothing a
statement before them could change."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tritonpy.stub.leading_imports import MAX_NAMES, MAX_SOURCE, leading_imports

CASES = [
    # The usual model file.
    (
        b'"""A model."""\n\nfrom __future__ import annotations\n\nimport json\n'
        b"import numpy as np\nimport torch.nn.functional as F\n"
        b"from transformers import (AutoModel,\n    AutoTokenizer)\n\n"
        b"import triton_python_backend_utils as pb_utils\n\n\nclass TritonPythonModel:\n"
        b"    pass\n",
        ["json", "numpy", "torch", "transformers", "triton_python_backend_utils"],
    ),
    # Each name once, in the order it first comes.
    (b"import b, a\nimport a.x\nfrom b.y import z\n", ["b", "a"]),
    # A statement before an import ends the opening.
    (b'import os\nos.environ["HF_HOME"] = "/data"\nimport transformers\n', ["os"]),
    (b'import os; os.environ["A"] = "1"; import torch\n', ["os"]),
    (b"import sys\nsys.path.insert(0, '/x')\nimport mine\n", ["sys"]),
    # So does a relative import (the model's own code runs first).
    (b"from . import helper\nimport torch\n", []),
    (b"from .helper import f\nimport torch\n", []),
    # And every compound statement, and a decorator.
    (b"try:\n    import torch\nexcept ImportError:\n    torch = None\n", []),
    (b"import a\nif True:\n    import b\n", ["a"]),
    (b"import a\nwith x:\n    pass\nimport b\n", ["a"]),
    (b"import a\n@decorator\ndef f():\n    pass\n", ["a"]),
    (b"import a\nclass M:\n    pass\nimport b\n", ["a"]),
    (b"import a\nasync def f():\n    pass\n", ["a"]),
    # A docstring only first; a string later is a statement.
    (b'import a\n"""not a docstring"""\nimport b\n', ["a"]),
    # Comments, blank lines and an encoding cookie.
    (b"# -*- coding: latin-1 -*-\n# \xe9t\xe9\n\n\nimport a  # why\n", ["a"]),
    (b"\xef\xbb\xbfimport a\n", ["a"]),
    # A continued line.
    (b"import a, \\\n    b\nx = 1\n", ["a", "b"]),
    # Line ends as the import system reads them: a lone CR ends a line,
    # inside a comment too.
    (b"import a\r\nimport b\r\nx = 1\r\nimport c\r\n", ["a", "b"]),
    (b"import a\n# c\rimport_ = 1\nimport b\n", ["a"]),
    (b"import os\n# c\ros.environ['X'] = '1'\nimport torch\n", ["os"]),
    # Form feeds and tabs between statements.
    (b"import a\n\x0c\nimport\tb\n", ["a", "b"]),
    # Files that do not read open with nothing.
    (b"import (\n", []),
    (b"import a\nimport b c\n", []),
    (b"\xff\xfe\x00", []),
    (b"", []),
    (b"x = 1\n", []),
]


@pytest.mark.parametrize(("source", "expected"), CASES)
def test_the_opening_imports_of_a_file(source: bytes, expected: list[str]) -> None:
    assert leading_imports(source) == expected


def test_a_file_past_the_limit_is_read_to_the_limit() -> None:
    # A statement cut by the limit is not read.
    assert leading_imports(b"import a\n" + b"import " + b"x" * MAX_SOURCE + b"\n") == ["a"]
    # A long file whose opening fits: its opening.
    assert leading_imports(b"import a\nx = 1\n" + b"#" * (2 * MAX_SOURCE)) == ["a"]


def test_the_number_of_statements_and_names_read_is_bounded() -> None:
    many = b"".join(f"import m{i}\n".encode() for i in range(10_000))
    assert len(leading_imports(many)) <= MAX_NAMES
    # One statement of very many names: read to the bound, quickly.
    names = [f"m{i}" for i in range(120_000)]
    wide = ("import " + ", ".join(names) + "\n").encode()
    assert leading_imports(wide) == names[:MAX_NAMES]


def test_deeply_nested_input_opens_with_nothing() -> None:
    # The parser's own stack gives out (a MemoryError in CPython), or it
    # refuses the nesting: a file that does not compile opens with nothing.
    assert leading_imports(b"x = " + b"-" * 20_000 + b"1\n") == []
    assert leading_imports(b"import a\nx = " + b"(" * 5_000 + b")" * 5_000 + b"\n") == []


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=400))
def test_any_bytes_give_names_and_never_raise(source: bytes) -> None:
    for name in leading_imports(source):
        assert name.isidentifier(), name


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from(["import a", "import b.c", "from d import e", "x = 1", "if x:\n  y"])),
)
def test_the_opening_stops_at_the_first_statement_of_another_kind(lines: list[str]) -> None:
    opening = []
    for line in lines:
        if not line.startswith(("import", "from")):
            break
        top = line.split()[1].split(".")[0]
        if top not in opening:
            opening.append(top)
    assert leading_imports(("\n".join(lines) + "\n").encode()) == opening
