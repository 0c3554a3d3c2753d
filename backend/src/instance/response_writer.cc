// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "instance/response_writer.h"

#include <cstring>

#include "instance/frontend_pacer.h"
#include "triton/params.h"
#include "triton/triton_util.h"
#include "util/clock.h"

namespace tritonpy {

namespace {

// Checks byte_size against the shape for fixed-size types.
Status
CheckByteSize(
    const std::string& model_name, const BatchRequest& req,
    const proto::Tensor& t)
{
  uint32_t elem = proto::DataTypeByteSize(t.dtype);
  if (elem == 0) return Status();  // BYTES: any size
  uint64_t count = 0;
  bool overflow = !proto::ElementCount(t.dims, &count);
  if (!overflow && count > UINT64_MAX / elem) overflow = true;
  if (overflow || count * elem != t.byte_size) {
    return Status::Internal(
        "tritonpy: model '" + model_name + "' request '" + req.id +
        "': output '" + t.name + "' has byte_size " +
        std::to_string(t.byte_size) + " but shape " + proto::ShapeText(t.dims) +
        (overflow ? " overflows" : " needs " + std::to_string(count * elem)));
  }
  return Status();
}

// Fills `response` with the outputs the request asked for.
Status
FillResponse(
    const std::string& model_name, const BatchRequest& req,
    const proto::Response& r, const std::vector<const uint8_t*>& data,
    TRITONBACKEND_Response* response)
{
  for (size_t i = 0; i < r.outputs.size(); ++i) {
    const proto::Tensor& t = r.outputs[i];
    if (req.requested_outputs.count(t.name) == 0) continue;
    TRITONPY_RETURN_IF_ERROR(CheckByteSize(model_name, req, t));
    TRITONBACKEND_Output* output = nullptr;
    TRITONPY_RETURN_IF_TRITON_ERROR(TRITONBACKEND_ResponseOutput(
        response, &output, t.name.c_str(),
        static_cast<TRITONSERVER_DataType>(t.dtype), t.dims.data(),
        static_cast<uint32_t>(t.dims.size())));
    void* buffer = nullptr;
    TRITONSERVER_MemoryType mem_type = TRITONSERVER_MEMORY_CPU;
    int64_t mem_id = 0;
    TRITONPY_RETURN_IF_TRITON_ERROR(TRITONBACKEND_OutputBuffer(
        output, &buffer, t.byte_size, &mem_type, &mem_id));
    if (t.byte_size == 0) continue;
    if (mem_type == TRITONSERVER_MEMORY_GPU || buffer == nullptr) {
      return Status::Unsupported(
          "tritonpy: model '" + model_name + "' request '" + req.id +
          "': output '" + t.name + "' got a GPU buffer; only CPU " +
          "outputs are supported yet");
    }
    memcpy(buffer, data[i], t.byte_size);
  }
  // The prefix is built only for an error: no string per response.
  Status s = SetResponseParameters(response, r.parameters);
  if (s.ok()) return s;
  return s.WithPrefix(
      "tritonpy: model '" + model_name + "' request '" + req.id + "': ");
}

TRITONSERVER_Error_Code
ClampErrorCode(uint32_t code)
{
  if (code > TRITONSERVER_ERROR_CANCELLED) return TRITONSERVER_ERROR_UNKNOWN;
  return static_cast<TRITONSERVER_Error_Code>(code);
}

Status
NewResponse(BatchRequest* req, TRITONBACKEND_Response** response)
{
  if (req->factory != nullptr) {
    return FromTriton(
        TRITONBACKEND_ResponseNewFromFactory(response, req->factory));
  }
  return FromTriton(TRITONBACKEND_ResponseNew(response, req->request));
}

void
NoteSendFailure(
    const BatchRequest& req, TRITONSERVER_Error* err, Status* send_error)
{
  Status s = FromTriton(err);
  if (send_error != nullptr) {
    *send_error = s;
    return;
  }
  TRITONPY_LOG_ERROR(
      "tritonpy: request '" + req.id +
      "': sending a response failed: " + s.message());
}

}  // namespace

namespace {

// The process's pacer, logging to Triton's log.
FrontEndPacer&
Pacer()
{
  static FrontEndPacer& pacer = []() -> FrontEndPacer& {
    FrontEndPacer& p = FrontEndPacer::Get();
    p.SetLog([](bool verbose, const std::string& message) {
      if (verbose) {
        TRITONPY_LOG_VERBOSE(message);
      } else {
        TRITONPY_LOG_INFO(message);
      }
    });
    return p;
  }();
  return pacer;
}

// Sends `response` (with `status` as its error, if any) with `flags`; or,
// when `hold`, keeps it in `req` for the final flag (BatchRequest::held).
void
Deliver(
    BatchRequest* req, TRITONBACKEND_Response* response, const Status& status,
    uint32_t flags, bool hold, Status* send_error)
{
  if (hold) {
    req->held = response;
    req->held_error = status;
    return;
  }
  if ((flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) != 0) {
    req->MarkResponded();
  }
  // Never faster than Triton's HTTP front end takes responses in: it
  // drops what overflows its queue (frontend_pacer.h).
  Pacer().BeforeSend();
  TRITONSERVER_Error* payload = ToTriton(status);
  TRITONSERVER_Error* err =
      TRITONBACKEND_ResponseSend(response, flags, payload);
  if (payload != nullptr) TRITONSERVER_ErrorDelete(payload);
  if (err != nullptr) {
    req->failed = true;
    NoteSendFailure(*req, err, send_error);
  }
}

// Sends the response `req` holds, with FINAL.
void
SendHeld(BatchRequest* req, Status* send_error)
{
  TRITONBACKEND_Response* response = req->held;
  req->held = nullptr;
  Deliver(
      req, response, req->held_error, TRITONSERVER_RESPONSE_COMPLETE_FINAL,
      false, send_error);
}

// An error response of `req` with `flags`, sent or held (see Deliver).
void
ErrorResponse(
    BatchRequest* req, const Status& status, uint32_t flags, bool hold,
    Status* send_error)
{
  req->failed = true;
  TRITONBACKEND_Response* response = nullptr;
  Status s = NewResponse(req, &response);
  if (!s.ok()) {
    if ((flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) != 0) {
      req->MarkResponded();
    }
    TRITONPY_LOG_ERROR(
        "tritonpy: request '" + req->id +
        "': cannot create an error response: " + s.message());
    return;
  }
  Deliver(req, response, status, flags, hold, send_error);
}

}  // namespace

void
SendErrorResponse(
    BatchRequest* req, const Status& status, uint32_t flags, Status* send_error)
{
  ErrorResponse(req, status, flags, false, send_error);
}

void
RespondWithError(BatchRequest* req, const Status& status)
{
  if (req->responded()) return;
  if (req->held != nullptr) {
    // The model's response stands (it sent it; only the final flag is
    // missing): it goes out now, and the reason is logged.
    TRITONPY_LOG_VERBOSE(
        "tritonpy: request '" + req->id +
        "': its response is sent without the model's final flag: " +
        status.message());
    SendHeld(req, nullptr);
    return;
  }
  SendErrorResponse(req, status, TRITONSERVER_RESPONSE_COMPLETE_FINAL);
}

void
ReportBatchStatistics(
    TRITONBACKEND_ModelInstance* instance, const Batch& batch,
    uint64_t exec_end_ns)
{
  if (batch.requests.empty()) return;
  uint64_t total_batch_size = 0;
  for (const BatchRequest& req : batch.requests) {
    total_batch_size += req.batch_size;
  }
  const uint64_t compute_end =
      batch.compute_end_ns != 0 ? batch.compute_end_ns : exec_end_ns;
  LogIfError(
      TRITONBACKEND_ModelInstanceReportBatchStatistics(
          instance, total_batch_size, batch.exec_start_ns,
          batch.compute_start_ns, compute_end, exec_end_ns),
      "reporting batch statistics failed");
}

void
FinishRequest(
    TRITONBACKEND_ModelInstance* instance, const std::string& model_name,
    const Batch& batch, BatchRequest* req, uint32_t release_flags)
{
  const uint64_t now = NowNs();
  const uint64_t compute_start =
      batch.compute_start_ns != 0 ? batch.compute_start_ns : now;
  LogIfError(
      TRITONBACKEND_ModelInstanceReportStatistics(
          instance, req->request, !req->failed, batch.exec_start_ns,
          compute_start, now, now),
      "reporting request statistics failed");
  TRITONSERVER_Error* err =
      TRITONBACKEND_RequestRelease(req->request, release_flags);
  if (err != nullptr) {
    Status why = FromTriton(err);
    TRITONPY_LOG_ERROR(
        "tritonpy: model '" + model_name + "' request '" + req->id +
        "': release failed: " + why.message());
    if (release_flags != TRITONSERVER_REQUEST_RELEASE_ALL) {
      RespondWithError(
          req, why.WithPrefix(
                   "tritonpy: model '" + model_name +
                   "': rescheduling the request failed: "));
      LogIfError(
          TRITONBACKEND_RequestRelease(
              req->request, TRITONSERVER_REQUEST_RELEASE_ALL),
          "releasing a request failed");
    }
  }
  if (req->held != nullptr) {  // not sent on any path: never leaked
    LogIfError(
        TRITONBACKEND_ResponseDelete(req->held), "deleting a response failed");
    req->held = nullptr;
  }
  if (req->factory != nullptr) {
    LogIfError(
        TRITONBACKEND_ResponseFactoryDelete(req->factory),
        "deleting a response factory failed");
    req->factory = nullptr;
  }
  req->state = RequestState::kComplete;
  req->request = nullptr;
}

namespace {

// The address of [offset, offset + size) of backend arena `arena_id`, if
// the range lies inside one allocation of `batch`.
Status
ResolveInBatch(
    const Batch& batch, const proto::ArenaRef& ref, uint64_t size,
    const uint8_t** out)
{
  for (const Allocation& a : batch.allocations) {
    if (a.arena_id != ref.arena_id || ref.offset < a.offset) continue;
    uint64_t skip = ref.offset - a.offset;
    // Written so that nothing can overflow: skip <= a.size first.
    if (skip > a.size || size > a.size - skip) continue;
    *out = a.ptr + skip;
    return Status();
  }
  return Status::InvalidArg(
      "tritonpy protocol violation: an output refers to backend arena " +
      std::to_string(ref.arena_id) + " range [" + std::to_string(ref.offset) +
      ", +" + std::to_string(size) + "), which is not inside batch " +
      std::to_string(batch.id) + "'s allocations");
}

}  // namespace

Status
ResolveOutputs(
    const proto::ResponsesBody& body, const PeerArenas& peers,
    const std::vector<std::shared_ptr<Batch>>& owners,
    std::vector<std::vector<const uint8_t*>>* data,
    std::vector<proto::ArenaRef>* to_release)
{
  data->resize(body.responses.size());
  for (auto& outputs : *data) outputs.clear();  // their capacity is kept
  for (size_t i = 0; i < body.responses.size(); ++i) {
    for (const proto::Tensor& t : body.responses[i].outputs) {
      const uint8_t* p = t.data;
      if (t.location == proto::kLocationArena) {
        TRITONPY_RETURN_IF_ERROR(
            peers.Resolve(t.ref.arena_id, t.ref.offset, t.byte_size, &p));
        to_release->push_back(t.ref);
      } else if (t.location == proto::kLocationReceiverArena) {
        TRITONPY_RETURN_IF_ERROR(
            ResolveInBatch(*owners[i], t.ref, t.byte_size, &p));
      }
      (*data)[i].push_back(p);
    }
  }
  return Status();
}

namespace {

// Sends the payload of `r` (outputs and parameters, or its error) as one
// response with `flags`, or holds it (`hold`, see BatchRequest::held).
void
SendPayload(
    const std::string& model_name, BatchRequest* req, const proto::Response& r,
    const std::vector<const uint8_t*>& data, uint32_t flags, bool hold,
    Status* send_error)
{
  if (r.has_error != 0) {
    ErrorResponse(
        req, Status::Error(ClampErrorCode(r.error_code), r.error_message),
        flags, hold, send_error);
    return;
  }
  TRITONBACKEND_Response* response = nullptr;
  Status s = NewResponse(req, &response);
  if (s.ok()) s = FillResponse(model_name, *req, r, data, response);
  if (!s.ok() && response == nullptr) {
    ErrorResponse(req, s, flags, hold, send_error);
    return;
  }
  if (!s.ok()) {
    // The response that failed to fill carries the error itself. Deleted
    // and replaced, it would leave behind what Triton's front end set up
    // for it when its outputs were allocated: a gRPC stream then sends an
    // empty message in its place and loses the final flag, so it never
    // ends (an output region too small for a decoupled model's outputs).
    req->failed = true;
  }
  Deliver(req, response, s, flags, hold, send_error);
}

// Sends the final flag alone, through the request's response factory (a
// default-mode request gets one only when it needs it).
void
SendFinalFlag(BatchRequest* req, Status* send_error)
{
  if (req->held != nullptr) {
    SendHeld(req, send_error);
    return;
  }
  req->MarkResponded();
  TRITONSERVER_Error* err = nullptr;
  if (req->factory == nullptr) {
    err = TRITONBACKEND_ResponseFactoryNew(&req->factory, req->request);
  }
  if (err == nullptr) {
    Pacer().BeforeSend();  // a stream's end is a command too
    err = TRITONBACKEND_ResponseFactorySendFlags(
        req->factory, TRITONSERVER_RESPONSE_COMPLETE_FINAL);
  }
  if (err != nullptr) NoteSendFailure(*req, err, send_error);
}

}  // namespace

EntryOutcome
WriteEntry(
    const std::string& model_name, bool decoupled, BatchRequest* req,
    const proto::Response& entry, const std::vector<const uint8_t*>& data,
    Status* send_error)
{
  const uint32_t f = entry.response_flags;
  const bool reschedule = (f & proto::kRespReschedule) != 0;
  const bool no_response = (f & proto::kRespNoResponse) != 0;
  const bool final = (f & proto::kRespFinal) != 0 && !reschedule;
  const uint32_t flags = final ? TRITONSERVER_RESPONSE_COMPLETE_FINAL : 0;
  if (!decoupled) {
    if (reschedule) {
      if (!no_response) {
        TRITONPY_LOG_VERBOSE(
            "tritonpy: model '" + model_name + "' request '" + req->id +
            "' is rescheduled; the response it carried is dropped");
      }
      return EntryOutcome::kReschedule;
    }
    if (no_response && !(final && req->answered)) {
      RespondWithError(
          req, Status::Internal(
                   "tritonpy: model '" + model_name +
                   "' returned no response for request '" + req->id + "'"));
      return EntryOutcome::kComplete;
    }
    if (req->held != nullptr && !no_response) {
      // An error after its one response (the stub's answer to a second
      // one): the first stands, as Triton passes a non-decoupled model's
      // first response only; it goes out now, and the error is logged.
      TRITONPY_LOG_VERBOSE(
          "tritonpy: model '" + model_name + "' request '" + req->id +
          "': a later response is dropped: " + entry.error_message);
      SendHeld(req, send_error);
      return EntryOutcome::kComplete;
    }
    // Its one response (the stub sees to that), or the final flag after it.
    if (!no_response) req->answered = true;
  }
  if (!no_response) {
    // A default-mode response without FINAL waits for the final flag.
    const bool hold = !decoupled && !final;
    SendPayload(model_name, req, entry, data, flags, hold, send_error);
  } else if (final) {
    SendFinalFlag(req, send_error);
  }
  if (reschedule) return EntryOutcome::kReschedule;
  return final ? EntryOutcome::kComplete : EntryOutcome::kOpen;
}

}  // namespace tritonpy
