# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""The model API under the name models import: ``import triton_python_backend_utils as pb_utils``.

Inside a tritonpy stub this name is the very module ``tritonpy.pb_utils``;
installed, this file lets IDEs and type checkers see the same API.
"""

from tritonpy.pb_utils import *  # noqa: F401,F403
from tritonpy.pb_utils import __all__  # noqa: F401
