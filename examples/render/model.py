# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
"""render: draws a grayscale test image of the requested size (SIZE =
[height, width]) into IMAGE, a diagonal ramp from 0 at the top left to 255
at the bottom right.

On tritonpy the model draws straight into the response's shared memory:
``pb_utils.Tensor.empty`` hands it an array that already lives where the
backend reads outputs, so a large image leaves without a copy. The official
backend has no ``Tensor.empty``: there the model draws into an ordinary
array and hands it over, which is copied once, as usual.
"""

import numpy as np
import triton_python_backend_utils as pb_utils

MAX_PIXELS = 64 << 20


def draw(pixels):
    """The ramp: row and column each add up to half of the range."""
    height, width = pixels.shape
    rows = np.linspace(0.0, 127.5, height, dtype=np.float32)[:, None]
    cols = np.linspace(0.0, 127.5, width, dtype=np.float32)[None, :]
    np.add(rows, cols, out=pixels, casting="unsafe")


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            height, width = (
                int(v) for v in pb_utils.get_input_tensor_by_name(request, "SIZE").as_numpy()
            )
            if not (height >= 0 and width >= 0 and height * width <= MAX_PIXELS):
                message = (
                    f"render: request '{request.request_id()}': SIZE {height}x{width} is "
                    f"not between 0x0 and {MAX_PIXELS} pixels"
                )
                error = pb_utils.TritonError(message, pb_utils.TritonError.INVALID_ARG)
                responses.append(pb_utils.InferenceResponse(error=error))
                continue
            if hasattr(pb_utils.Tensor, "empty"):  # tritonpy: draw in place
                image = pb_utils.Tensor.empty("IMAGE", [height, width], np.uint8)
                draw(image.as_numpy())
            else:  # the official backend: draw, then hand the array over
                pixels = np.empty((height, width), np.uint8)
                draw(pixels)
                image = pb_utils.Tensor("IMAGE", pixels)
            responses.append(pb_utils.InferenceResponse([image]))
        return responses
