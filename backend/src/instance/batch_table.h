// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// BatchTable: the batches in flight of one instance, owned by its reader
// thread (every method runs there). It adopts the batches Execute
// registered (AdmissionGate), turns RESPONSES and EXECUTE_DONE into Triton
// responses and releases, ends each batch once execute() returned and
// every request is complete, pushes cancellations to the stub, and fails
// everything when the stub goes away.
//
// One request's path: Execute registers its batch -> Adopt ->
// OnResponses (WriteEntry, response_writer.h) -> Complete (FinishRequest)
// -> OnExecuteDone -> MaybeEnd (statistics, arena space, kEnded).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "instance/admission_gate.h"
#include "instance/batch.h"
#include "instance/batch_arenas.h"
#include "ipc/arena.h"
#include "model/model_state.h"
#include "process/stub_supervisor.h"
#include "protocol/protocol.h"
#include "triton_c_api/triton_api.h"
#include "util/error.h"

namespace tritonpy {

class BatchTable {
 public:
  BatchTable(
      ModelState* model, TRITONBACKEND_ModelInstance* instance,
      StubSupervisor* stub, AdmissionGate* gate, BatchArenas* arenas);

  // Takes the batches Execute registered since the last call.
  void Adopt();
  // A RESPONSES frame: validated whole first (a bad frame sends nothing
  // and is a protocol violation), then every entry written. Stub arena
  // references to give back are appended to `release`.
  Status OnResponses(
      const proto::FrameView& f, const uint8_t* body, const PeerArenas& peers,
      std::vector<proto::ArenaRef>* release);
  // EXECUTE_DONE (or BATCH_DONE, a BATCH_END entry): the model's execute()
  // returned for `batch_id`; a failed `status` fails its open requests.
  Status OnExecuteDone(uint64_t batch_id, const Status& status);
  // Fails and ends every batch in flight (stub death, unload).
  void FailAll(const Status& status);
  // Pushes newly cancelled requests to the stub, at most every kPollMs
  // unless `force`.
  void PollCancellation(bool force);
  // Why the stub must be killed now: a batch whose execute() outran the
  // model's execute timeout; else "".
  std::string OverExecuteTimeout() const;
  // The trace of request `index` (EXECUTE position) of batch `batch_id`
  // while that request is open; else null.
  TRITONSERVER_InferenceTrace* OpenRequestTrace(
      uint64_t batch_id, uint32_t index);

  size_t open_requests() const { return open_requests_; }
  size_t size() const { return batches_.size(); }
  uint64_t adopted_total() const { return adopted_batches_; }

  // Cancellation poll period while requests are in flight.
  static constexpr int kPollMs = 10;

 private:
  // Ends `req` (FinishRequest) with `release_flags` and counts it.
  void Complete(Batch* batch, BatchRequest* req, uint32_t release_flags);
  // Fails every open request of `batch` with `status` (a final error
  // response each, then release).
  void FailOpenRequests(Batch* batch, const Status& status);
  // Ends `batch` once execute returned and every request is complete.
  void MaybeEnd(const std::shared_ptr<Batch>& batch);

  ModelState* const model_;
  TRITONBACKEND_ModelInstance* const instance_;
  StubSupervisor* const stub_;
  AdmissionGate* const gate_;
  BatchArenas* const arenas_;

  std::map<uint64_t, std::shared_ptr<Batch>> batches_;  // by id: in order
  // OnResponses's working state, kept between frames for its allocations.
  struct ResponsesScratch {
    proto::ResponsesBody body;
    std::vector<std::shared_ptr<Batch>> owners;
    std::vector<std::vector<const uint8_t*>> data;
    std::vector<uint64_t> ending;  // batches ended by an entry (BATCH_END)
    // After each frame: no batch is kept alive from here, and what an
    // unusually large frame grew is given back.
    void Tidy()
    {
      owners.clear();
      ending.clear();
      if (body.responses.capacity() > kKeptEntries) {
        std::vector<uint64_t>().swap(ending);
        std::vector<proto::Response>().swap(body.responses);
        std::vector<std::shared_ptr<Batch>>().swap(owners);
        std::vector<std::vector<const uint8_t*>>().swap(data);
      }
    }
    static constexpr size_t kKeptEntries = 4096;
  };
  ResponsesScratch scratch_;
  std::vector<std::shared_ptr<Batch>> adopted_;  // Adopt's, empty between
  size_t open_requests_ = 0;
  uint64_t adopted_batches_ = 0;  // counted for the debug line only
  Clock::time_point last_cancel_poll_;
};

}  // namespace tritonpy
