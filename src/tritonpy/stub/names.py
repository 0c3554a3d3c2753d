# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The names a stub's messages give: its instance and its model."""

from __future__ import annotations


class ModelNames:
    """One record that the stub's parts share: the runtime sets it from the
    backend's AUTO_COMPLETE and INIT (until then both are the instance name
    the stub was started with); the others read it when they write a
    message."""

    __slots__ = ("instance", "model")

    def __init__(self, instance: str) -> None:
        self.instance = instance
        self.model = instance
