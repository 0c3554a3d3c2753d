# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The harness that the integration tests and the benchmark suite share: a
real tritonserver on free local ports, and what /proc says about it. Shipped
with the package (as asyncpg ships its ``_testbase``) so that both import it
by name; nothing in tritonpy itself imports it."""
