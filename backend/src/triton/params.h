// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// Request and response parameters between Triton and the wire. On the wire
// (docs/protocol.md) the parameters of a request or a response are the text
// of one JSON object, "" when there are none. Values are strings, bools,
// integers (int64) and doubles; Triton's BYTES parameters have no JSON form
// and are left out. A JSON integer outside int64 becomes a double.
//
// The four crossings, each used by one caller:
//   request given to execute()  Triton -> JSON   execute_builder.cc
//   model's response            JSON -> Triton   response_writer.cc
//   BLS request                 JSON -> Triton   bls_request.cc
//   BLS response                Triton -> JSON   bls.cc
#pragma once

#include <string>

#include "triton_c_api/triton_api.h"
#include "triton_c_api/triton_infer_api.h"
#include "util/error.h"

namespace tritonpy {

// The parameters of `request`, as JSON text ("" when it has none).
Status RequestParametersToJson(
    TRITONBACKEND_Request* request, std::string* out);

// The parameters of a BLS response, as JSON text ("" when it has none).
Status BlsResponseParametersToJson(
    TRITONSERVER_InferenceResponse* response, std::string* out);

// Sets the parameters in `text` (JSON, "" for none) on a model's response.
Status SetResponseParameters(
    TRITONBACKEND_Response* response, const std::string& text);

// Sets the parameters in `text` (JSON, "" for none) on a BLS request.
Status SetBlsRequestParameters(
    TRITONSERVER_InferenceRequest* request, const std::string& text);

}  // namespace tritonpy
