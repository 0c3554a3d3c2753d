// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "bls/bls_request.h"

#include <cstring>
#include <string>

#include "triton/params.h"
#include "triton/triton_util.h"

namespace tritonpy {

Status
PlanBlsInputs(
    uint64_t call_id, const proto::Request& q, const PeerArenas& peers,
    std::vector<proto::ArenaRef>* release, BlsInputPlan* plan)
{
  const uint64_t most = peers.limits().max_arena_bytes;
  plan->src.assign(q.inputs.size(), nullptr);
  plan->offsets.assign(q.inputs.size(), 0);
  plan->total = 0;
  for (size_t i = 0; i < q.inputs.size(); ++i) {
    const proto::Tensor& t = q.inputs[i];
    if (t.location == proto::kLocationArena) {
      TRITONPY_RETURN_IF_ERROR(peers.Resolve(
          t.ref.arena_id, t.ref.offset, t.byte_size, &plan->src[i]));
      release->push_back(t.ref);
    } else {
      plan->src[i] = t.data;
    }
    plan->offsets[i] = plan->total;
    // total <= most <= 2^56 holds throughout, so nothing here wraps.
    const bool fits = t.byte_size <= most &&
                      (t.byte_size + 63) / 64 * 64 <= most - plan->total;
    if (!fits) {
      return Violation(
          "the inputs of BLS call " + std::to_string(call_id) +
          " add up to more than stub-max-arena-bytes=" + std::to_string(most) +
          " (input " + std::to_string(i) + " of " +
          std::to_string(t.byte_size) + " bytes)");
    }
    plan->total += (t.byte_size + 63) / 64 * 64;
  }
  return Status();
}

void
CopyBlsInputs(
    const proto::Request& q, const BlsInputPlan& plan, uint8_t* copy,
    std::vector<const uint8_t*>* data)
{
  data->assign(q.inputs.size(), nullptr);
  for (size_t i = 0; i < q.inputs.size(); ++i) {
    const proto::Tensor& t = q.inputs[i];
    if (t.byte_size > 0) {
      std::memcpy(copy + plan.offsets[i], plan.src[i], t.byte_size);
    }
    (*data)[i] = copy + plan.offsets[i];
  }
}

Status
BuildBlsRequest(
    TRITONSERVER_InferenceRequest* req, const proto::Request& q,
    const std::vector<const uint8_t*>& data)
{
  if (!q.request_id.empty()) {
    TRITONPY_RETURN_IF_TRITON_ERROR(
        TRITONSERVER_InferenceRequestSetId(req, q.request_id.c_str()));
  }
  if (q.correlation_kind == 1) {
    TRITONPY_RETURN_IF_TRITON_ERROR(
        TRITONSERVER_InferenceRequestSetCorrelationId(req, q.correlation_u64));
  } else if (q.correlation_kind == 2) {
    TRITONPY_RETURN_IF_TRITON_ERROR(
        TRITONSERVER_InferenceRequestSetCorrelationIdString(
            req, q.correlation_str.c_str()));
  }
  TRITONPY_RETURN_IF_TRITON_ERROR(
      TRITONSERVER_InferenceRequestSetFlags(req, q.flags));
  if (q.timeout_us > 0) {
    TRITONPY_RETURN_IF_TRITON_ERROR(
        TRITONSERVER_InferenceRequestSetTimeoutMicroseconds(req, q.timeout_us));
  }
  TRITONPY_RETURN_IF_ERROR(SetBlsRequestParameters(req, q.parameters));
  for (size_t i = 0; i < q.inputs.size(); ++i) {
    const proto::Tensor& t = q.inputs[i];
    TRITONPY_RETURN_IF_TRITON_ERROR(TRITONSERVER_InferenceRequestAddInput(
        req, t.name.c_str(), static_cast<TRITONSERVER_DataType>(t.dtype),
        t.dims.data(), t.dims.size()));
    TRITONPY_RETURN_IF_TRITON_ERROR(
        TRITONSERVER_InferenceRequestAppendInputData(
            req, t.name.c_str(), data[i], t.byte_size, TRITONSERVER_MEMORY_CPU,
            0));
  }
  for (const std::string& name : q.requested_outputs) {
    TRITONPY_RETURN_IF_TRITON_ERROR(
        TRITONSERVER_InferenceRequestAddRequestedOutput(req, name.c_str()));
  }
  return Status();
}

}  // namespace tritonpy
