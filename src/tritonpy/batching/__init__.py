# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""Batching for ``async def execute`` models, in pure asyncio: it needs
nothing from tritonpy's stub, so a model using it also runs on the
official Python backend (copy this package beside the model there).

- :class:`ContinuousBatcher` runs one step function over every active
  stream: streams join at the next step and leave the moment they end or
  are cancelled (continuous batching, as LLM servers do it).
- :func:`batched` gathers concurrent calls of an async function into one
  call on a list (request-level micro-batching).

See docs/llm-serving.md.
"""

from ._continuous import ContinuousBatcher, Sequence
from ._micro import batched

__all__ = ["ContinuousBatcher", "Sequence", "batched"]
