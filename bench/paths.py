# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""How a result file or a page of the bench names a path: never by the
folders of the machine that ran it. A work file (in bench's work folder) is
``<work>/name`` whatever form its path has (absolute, relative to the
checkout or to the current folder, through a link, another checkout's),
another file of the checkout is relative to it, one under the home folder
starts with ``~``. bench.run's failure reasons and bench.report's
published files both go through :func:`portable`."""

from __future__ import annotations

import os
import re
from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parent.parent
_WORK = Path(os.path.realpath(_CHECKOUT / "bench" / "work"))
# A path in a text: a run of characters that are none of the quotes,
# brackets and separators around it in a Python repr or a message.
_PATH_TOKEN = re.compile(r"""[^\s'"`()\[\]{},;:=<>]*/[^\s'"`()\[\]{},;:=<>]*""")
# The work folder of any checkout, in any form (another checkout's too).
_ANY_WORK = re.compile(r"(?:^|.*/)bench/work(?=/|$)")


def _inside(path: Path, root: Path) -> str | None:
    """``path`` relative to ``root`` (POSIX form), or None if it is not
    under it, either as written or with its links resolved."""
    for where in (Path(os.path.normpath(path)), Path(os.path.realpath(path))):
        if where.is_relative_to(root):
            return where.relative_to(root).as_posix()
    return None


def _portable_path(token: str) -> str:
    """``token`` as a published result names it; any other path (the
    system's, or one already relative) unchanged."""
    if _ANY_WORK.match(token):
        return _ANY_WORK.sub("<work>", token, count=1)
    path = Path(token)
    if path.is_absolute():
        bases = [path]
    else:  # relative to the current folder or to the checkout
        bases = [_CHECKOUT / path]
        # From inside work, any a/b (a ratio, a URL's tail) would be a work
        # file: there only ./ and ../ say that a path is meant.
        if _inside(Path.cwd(), _WORK) is None or token.startswith(("./", "../")):
            bases.insert(0, Path.cwd() / path)
    for base in bases:
        rel = _inside(base, _WORK)
        if rel is not None:
            return "<work>" if rel == "." else f"<work>/{rel}"
    if not path.is_absolute():
        return token
    rel = _inside(path, _CHECKOUT)
    if rel is not None:
        return rel
    rel = _inside(path, Path.home()) if Path.home() != Path("/") else None
    return token if rel is None else f"~/{rel}"


def portable(text: str) -> str:
    """``text`` with every path in it written as the module docstring says."""
    return _PATH_TOKEN.sub(lambda m: _portable_path(m.group()), text)
