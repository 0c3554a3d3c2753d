# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""tritonpy: a fast Python backend for Triton Inference Server."""

from pkgutil import extend_path

# In a checkout this folder holds only the package root (the CLI and the
# install helpers): tritonpy.stub and tritonpy.pb_utils are the folders stub/
# and pb_utils/, and the compiled modules and the backend library exist only
# where tritonpy is installed. A process started in a checkout's top folder
# (`python -m bench`, or a tritonserver there whose stubs run `python -m
# tritonpy.stub`) imports this folder as tritonpy; the installed tritonpy is
# searched after it, so those come from the installation.
__path__ = extend_path(__path__, __name__)

__version__ = "0.1.0"
