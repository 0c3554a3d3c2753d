# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The packages a model file imports before it does anything else.

A stub template may import these on behalf of the model's stubs before it
forks them (template.py, docs/performance.md): they are what the model
would import first anyway, so importing them earlier, in the template,
changes nothing the model can see, and every stub forked from that
template shares their pages.

Only the opening run of plain ``import x`` and ``from x import y``
statements counts (after the docstring and ``from __future__`` imports).
The first statement of any other kind ends it, because what follows may
depend on it: ``os.environ[...] = ...`` before ``import torch``, a
``sys.path`` change, a relative import of the model's own code, a
``try``/``if`` around an import. The file is read with the tokenizer, one
statement at a time, and never run; a file that does not read is taken
to open with nothing."""

from __future__ import annotations

import ast
import io
import tokenize
from collections.abc import Iterator

# What is read of a file at most: the opening imports of any real model
# are a few hundred bytes.
MAX_SOURCE = 1 << 20
MAX_STATEMENTS = 256
# No model opens with more packages than this; past it, what is read
# ends.
MAX_NAMES = 64


def leading_imports(source: bytes) -> list[str]:
    """The top-level package names the opening imports of ``source`` name
    (``torch`` for ``import torch.nn as nn``), each once, in the order
    they first appear."""
    if len(source) > MAX_SOURCE:
        # The lines that fit whole.
        source = source[: source.rfind(b"\n", 0, MAX_SOURCE) + 1]
    # Line ends as the import system reads them (universal newlines): a
    # lone CR ends a line for the compiler, whatever a tokenizer makes of
    # it.
    source = source.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    names: list[str] = []
    try:
        for i, statement in enumerate(_opening_statements(source)):
            if i == 0 and _is_docstring(statement):
                continue
            if isinstance(statement, ast.ImportFrom) and statement.module == "__future__":
                continue
            if isinstance(statement, ast.Import):
                found = [alias.name for alias in statement.names]
            elif isinstance(statement, ast.ImportFrom) and statement.level == 0:
                found = [statement.module or ""]
            else:
                break
            for name in found:
                top = name.partition(".")[0]
                if top and top not in names:
                    if len(names) == MAX_NAMES:
                        return names
                    names.append(top)
    except (
        SyntaxError,
        ValueError,
        LookupError,
        tokenize.TokenError,
        RecursionError,
        MemoryError,  # the parser's stack, on deeply nested input
    ):
        return []
    return names


def _is_docstring(statement: ast.stmt) -> bool:
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Constant)
        and isinstance(statement.value.value, str)
    )


def _opening_statements(source: bytes) -> Iterator[ast.stmt]:
    """The statements of ``source`` from the top, parsed one logical line
    at a time, until a line that is not a simple statement (an indented
    block, a decorator, a compound statement's header)."""
    encoding, _ = tokenize.detect_encoding(io.BytesIO(source).readline)
    # Split where the tokenizer counts lines (at "\n" only).
    lines = io.StringIO(source.decode(encoding), newline="\n").readlines()
    start = None
    count = 0
    for token in tokenize.tokenize(io.BytesIO(source).readline):
        if token.type in (tokenize.ENCODING, tokenize.NL, tokenize.COMMENT):
            continue
        if token.type in (tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER):
            return
        if start is None:
            if token.type == tokenize.OP and token.string == "@":
                return  # a decorator: a definition follows
            if token.type == tokenize.NAME and token.string in _COMPOUND:
                return
            start = token.start[0]
        if token.type == tokenize.NEWLINE:
            text = "".join(lines[start - 1 : token.end[0]])
            start = None
            count += 1
            if count > MAX_STATEMENTS:
                return
            yield from ast.parse(text).body


# Keywords that open a compound statement: its body is indented, so its
# header alone is no statement, and nothing after it is opening.
_COMPOUND = frozenset(("if", "try", "for", "while", "with", "def", "class", "async", "match"))
