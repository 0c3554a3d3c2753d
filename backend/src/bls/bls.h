// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// Business logic scripting and the model loading API, backend side
// (docs/protocol.md, "Business logic scripting" and "MODEL_CONTROL").
//
// A BLS_REQUEST from the stub becomes a TRITONSERVER_InferenceRequest run
// with TRITONSERVER_ServerInferAsync. Inputs are copied into memory the
// call owns (the stub's arena space and the frame are returned at once).
// Outputs are written by Triton straight into the backend's *BLS arenas*
// through a TRITONSERVER_ResponseAllocator (small ones into call-owned heap
// memory, sent inline); every response becomes one BLS_RESPONSE, and the
// stub returns arena space with BLS_RELEASE once its Python objects are
// gone. MODEL_CONTROL frames go to the instance's ModelControlWorker
// (model_control.h).
//
// Caps (StubLimits): a BLS call past stub-max-bls-calls calls in flight,
// or whose input copies would take the BLS data held for the stub past
// stub-max-bls-bytes, fails with an error response naming the key; so
// does an output that would (the call's response carries the error). The
// stub is not killed: an honest model can meet a cap.
//
// Threads: OnFrame and OnStubGone are called by the instance's reader
// thread; Triton's threads run the allocator, response and release
// callbacks (bls_response.cc). Everything those callbacks touch lives in a
// shared core (bls_core.h) that each call keeps alive, so a call that
// outlives its instance (finalized with a fire-and-forget call in flight)
// never touches freed memory.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bls/model_control.h"
#include "ipc/arena.h"
#include "ipc/channel.h"
#include "protocol/protocol.h"
#include "triton_c_api/triton_api.h"
#include "triton_c_api/triton_infer_api.h"
#include "util/error.h"

namespace tritonpy {

class BlsCore;
struct BlsCall;

class Bls {
 public:
  // `describe` names the model and instance in messages.
  // `model_control`: whether MODEL_CONTROL may load and unload models
  // (stub-model-control; is_ready is always answered). `limits`: the BLS
  // caps (max_bls_calls, max_bls_bytes). `room`: what the stub can map of
  // the BLS arenas and the batch arenas together (arena.h). `sandboxed`:
  // the model loading API of a sandboxed stub (SandboxedControl).
  // `usage`: what the stub's other Bls objects (those of the processes it
  // forked) count against the same caps; null: this one's alone.
  // `control`: another Bls's model-control worker that this one's
  // MODEL_CONTROL frames go to (a forked child's go to its stub's: one
  // worker per instance); null: a worker of its own.
  Bls(TRITONSERVER_Server* server, std::string describe,
      uint64_t arena_byte_size, bool model_control,
      const StubLimits& limits = StubLimits(),
      std::shared_ptr<ArenaRoom> room = nullptr,
      SandboxedControl sandboxed = SandboxedControl(),
      std::shared_ptr<StubUsage> usage = nullptr, Bls* control = nullptr);
  // Cancels every call in flight, waits (bounded) for Triton to finish
  // them, and joins the model-control worker.
  ~Bls();
  Bls(const Bls&) = delete;
  Bls& operator=(const Bls&) = delete;

  // Reader thread. Handles BLS_REQUEST, BLS_CANCEL, BLS_RELEASE and
  // MODEL_CONTROL from the stub reachable through `channel`; stub arena
  // space the frame used (inputs) is appended to `release`. A failed
  // Status is a protocol violation; every other failure is answered to the
  // stub as an error response.
  // `trace_of(batch_id, request_index)`: the trace of that request given to
  // execute() while it is still open, else null; a BLS_REQUEST that names
  // one runs under a child of that trace.
  using TraceOf =
      std::function<TRITONSERVER_InferenceTrace*(uint64_t, uint32_t)>;
  Status OnFrame(
      const proto::FrameView& f, const uint8_t* body, const PeerArenas& peers,
      const std::shared_ptr<Channel>& channel,
      std::vector<proto::ArenaRef>* release, const TraceOf& trace_of);

  // Reader thread, when the stub is gone: cancels its calls in flight and
  // frees every BLS allocation it held. Responses still to come are
  // dropped (their channel is closed).
  void OnStubGone();

  // Resource counters (TRITONPY_DEBUG=1): calls in flight, and bytes of the
  // BLS arenas held (outputs handed to the stub and not yet released).
  void DebugCounters(uint64_t* calls, uint64_t* arena_bytes) const;
  // How often a call over a cap waited for answered calls' releases.
  uint64_t ReleaseWaits() const;

 private:
  // The handlers of OnFrame, by frame type.
  Status OnRelease(const proto::FrameView& f, const uint8_t* body);
  Status OnCancel(const proto::FrameView& f, const uint8_t* body);
  Status OnModelControl(
      const proto::FrameView& f, const uint8_t* body,
      const std::shared_ptr<Channel>& channel);
  Status OnRequest(
      const proto::FrameView& f, const uint8_t* body, const PeerArenas& peers,
      const std::shared_ptr<Channel>& channel,
      std::vector<proto::ArenaRef>* release, const TraceOf& trace_of);
  // Runs `call` on Triton: the request `rb` names, with the input bytes at
  // `data`. A failure is answered to the stub as the call's response.
  void Run(
      const std::shared_ptr<BlsCall>& call, const proto::BlsRequestBody& rb,
      const std::vector<const uint8_t*>& data, const TraceOf& trace_of);

  const bool model_control_;  // stub-model-control
  // Whether a sandboxed stub's loads and unloads are refused at once.
  const bool sandbox_refuses_;
  std::shared_ptr<BlsCore> core_;
  ModelControlWorker own_control_;  // unused when another's is borrowed
  ModelControlWorker* const control_;
};

}  // namespace tritonpy
