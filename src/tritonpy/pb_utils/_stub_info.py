# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""What a model can ask about the stub serving it: ``get_model_dir()``,
and the shared memory of ``c_python_backend_utils.shared_memory``."""

from __future__ import annotations

from . import _host

__all__ = ["get_model_dir", "SharedMemory", "shared_memory"]

_NO_STUB = "pb_utils.get_model_dir() answers only in a model served by a tritonpy stub"


def get_model_dir() -> str:
    """The model's version directory, ``<repository>/<model>/<version>``,
    as the official backend gives it: where ``model.py`` and its files are,
    and for a Python-based backend (whose code is backends/<name>/model.py)
    where the model's own files are."""
    return _host.need(_NO_STUB).model_dir()


class SharedMemory:
    """The shared memory of this stub, as the official stub's
    ``c_python_backend_utils.shared_memory`` shows it (a test hook there)."""

    __slots__ = ()

    def free_memory(self) -> int:
        """Bytes not in use in the shared-memory arenas this stub has made
        for the tensors it sends (outputs and BLS inputs too large to
        travel inside a message). Arenas are made on demand and grow, so
        this is no limit: a stub that has sent no large tensor yet has
        none (0), a restarted one starts again from there. 0 outside a
        stub."""
        host = _host.attached()
        return host.arenas.free_bytes if host is not None else 0


shared_memory = SharedMemory()
