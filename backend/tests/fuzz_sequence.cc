// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// Fuzz target for what the reader does across frames: one input is a whole
// conversation with a stub, a sequence of steps on one instance's real
// BatchTable (and AdmissionGate, StubSupervisor, PeerArenas), linked
// against the stand-in for tritonserver (fake_triton.cc):
//
//  - a batch of the fuzz input's requests (fuzz_requests.h) is built by
//    BuildExecute, registered and adopted, as Execute and the reader do;
//  - ARENA: the stub announces a sealed memfd under a new id or under one
//    it already used (replacing an arena while outputs may refer to it);
//  - RESPONSES frames of entries for any batch id (known ones mostly) and
//    request index, with any flags (FINAL, BATCH_END, BATCH_DONE on the
//    frame), errors, parameters, and outputs inline, in a stub arena or in
//    the batch's own arena space;
//  - EXECUTE_DONE for any batch, ok or failed; a cancellation poll;
//  - a protocol violation or the end of the input ends the conversation:
//    FailAll, as the reader does when it kills the stub.
//
// Then every request must have been released exactly once, and, unless it
// was rescheduled, have got exactly one final response; nothing may be
// sent for a request after its final response; the batches' arena space
// must be free again. Built with -fsanitize=address,undefined.
//
//   tritonpy_fuzz_sequence <corpus-dir> [--seconds S] [--seed N]
// (fuzz_driver.h), or under libFuzzer with -DTRITONPY_LIBFUZZER.

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fake_triton.h"
#include "fuzz_driver.h"
#include "fuzz_input.h"
#include "fuzz_requests.h"
#include "instance/admission_gate.h"
#include "instance/batch.h"
#include "instance/batch_arenas.h"
#include "instance/batch_table.h"
#include "instance/execute_builder.h"
#include "instance/response_writer.h"
#include "ipc/arena.h"
#include "ipc/channel.h"
#include "model/model_state.h"
#include "process/stub_process.h"
#include "process/stub_supervisor.h"
#include "protocol/protocol.h"

namespace tp = tritonpy::proto;
using tritonpy::Status;
using tritonpy::fuzz::FuzzInput;

namespace {

constexpr uint64_t kStubArenaSize = 1 << 16;
constexpr int kMaxSteps = 48;

uint64_t g_conversations = 0;
uint64_t g_batches = 0;
uint64_t g_frames_ok = 0;
uint64_t g_violations = 0;
uint64_t g_arenas_replaced = 0;

[[noreturn]] void
Fail(const std::string& what)
{
  std::fprintf(stderr, "fuzz_sequence: %s\n", what.c_str());
  std::abort();
}

// One instance's reader state and the stub's end of its socket.
struct Conversation {
  explicit Conversation(bool decoupled)
      : model(Model(decoupled)),
        stub(
            "model 'fuzz' instance 'fuzz_0'", 0,
            [this](auto* p, auto* c, auto*) {
              int sv[2];
              if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) !=
                  0) {
                Fail("socketpair failed");
              }
              *c = std::make_shared<tritonpy::Channel>(sv[0]);
              stub_end = sv[1];
              *p = std::make_unique<tritonpy::StubProcess>();  // no process
              return Status();
            }),
        gate("model 'fuzz' instance 'fuzz_0'", &stub, 1 << 20, 1 << 20, 0),
        arenas(1 << 20),
        table(model, nullptr, &stub, &gate, &arenas)
  {
    if (!stub.Start().ok()) Fail("the stub supervisor did not start");
  }
  ~Conversation()
  {
    for (auto& [id, fd] : stub_fds) close(fd);
    if (stub_end >= 0) close(stub_end);
  }

  static tritonpy::ModelState* Model(bool decoupled)
  {
    static tritonpy::ModelState* models[2] = {
        tritonpy::ModelStateTestPeer::Make(0, false),
        tritonpy::ModelStateTestPeer::Make(0, true)};
    return models[decoupled ? 1 : 0];
  }

  tritonpy::ModelState* model;
  int stub_end = -1;
  tritonpy::StubSupervisor stub;
  tritonpy::AdmissionGate gate;
  tritonpy::BatchArenas arenas;
  tritonpy::BatchTable table;
  tritonpy::PeerArenas peers;
  std::map<uint32_t, int> stub_fds;  // the stub's copies of its arenas
  std::vector<std::unique_ptr<TRITONBACKEND_Request>> requests;
  std::vector<std::shared_ptr<tritonpy::Batch>> batches;  // ever registered
  uint64_t next_batch = 1;
};

// A request of one small INT32 input.
std::unique_ptr<TRITONBACKEND_Request>
SmallRequest(FuzzInput* in)
{
  auto req = std::make_unique<TRITONBACKEND_Request>();
  req->id = in->Bytes(in->U8() % 8);
  auto input = std::make_unique<TRITONBACKEND_Input>();
  input->name = "IN";
  input->dtype = TRITONSERVER_TYPE_INT32;
  const int64_t n = in->U8() % 4;
  input->shape = {n};
  input->byte_size = static_cast<uint64_t>(n) * 4;
  input->buffers.emplace_back(input->byte_size, in->U8());
  req->inputs.push_back(std::move(input));
  return req;
}

// Execute's part: builds, registers and (as the reader) adopts a batch.
void
NewBatch(Conversation* c, FuzzInput* in)
{
  auto batch = std::make_shared<tritonpy::Batch>();
  batch->id = c->next_batch++;
  batch->decoupled = c->model->decoupled();
  std::vector<TRITONBACKEND_Request*> raw;
  for (size_t n = 1 + in->U8() % 3; n > 0; --n) {
    // Mostly small requests: the input is for the frames that follow.
    c->requests.push_back(
        in->U8() % 8 == 7 ? tritonpy::fuzz::MakeRequest(in) : SmallRequest(in));
    c->requests.back()->cancelled = in->U8() % 4 == 0;
    raw.push_back(c->requests.back().get());
  }
  std::vector<uint8_t> frame;
  Status s;
  {
    tritonpy::MutexLock lock(&c->arenas.mu);
    s = tritonpy::BuildExecute(
        *c->model, raw.data(), static_cast<uint32_t>(raw.size()),
        &c->arenas.allocator, batch.get(), &frame);
  }
  for (tritonpy::BatchRequest& req : batch->requests) {
    if (!req.responded()) continue;
    tritonpy::FinishRequest(
        nullptr, "fuzz", *batch, &req, TRITONSERVER_REQUEST_RELEASE_ALL);
  }
  if (!s.ok() || batch->wire_index.empty()) {
    for (tritonpy::BatchRequest& req : batch->requests) {
      if (req.complete()) continue;
      tritonpy::RespondWithError(&req, s);
      tritonpy::FinishRequest(
          nullptr, "fuzz", *batch, &req, TRITONSERVER_REQUEST_RELEASE_ALL);
    }
    c->arenas.Free(batch.get());
    return;
  }
  batch->open = batch->wire_index.size();
  for (const tritonpy::Allocation& a : batch->allocations) {
    batch->arena_bytes += a.size;
  }
  std::shared_ptr<tritonpy::Channel> channel = c->stub.CurrentChannel();
  if (!c->gate.Register(batch, channel)) Fail("the gate refused a batch");
  c->table.Adopt();
  c->batches.push_back(batch);
  ++g_batches;
}

// ARENA: a sealed memfd under a new id, or under one the stub used before.
Status
Arena(Conversation* c, FuzzInput* in)
{
  uint32_t id = 1 + in->U8() % 4;
  int fd = memfd_create("fuzz-seq", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0 || ftruncate(fd, kStubArenaSize) != 0 ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0) {
    Fail("memfd");
  }
  void* p = mmap(nullptr, kStubArenaSize, PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) Fail("mmap");
  std::memset(p, in->U8(), kStubArenaSize);
  munmap(p, kStubArenaSize);
  if (c->stub_fds.count(id) != 0) ++g_arenas_replaced;
  Status s = c->peers.Add(id, dup(fd), kStubArenaSize);
  auto old = c->stub_fds.find(id);
  if (old != c->stub_fds.end()) close(old->second);
  c->stub_fds[id] = fd;
  return s;
}

// A RESPONSES frame's entry for a known batch (mostly) or any id.
tp::Response
Entry(Conversation* c, FuzzInput* in, std::vector<std::string>* keep)
{
  tp::Response r;
  const uint8_t pick = in->U8();
  if (!c->batches.empty() && pick % 16 != 15) {
    const auto& batch = c->batches[pick % c->batches.size()];
    r.batch_id = batch->id;
    const size_t n = batch->wire_index.size();
    r.request_index = in->U8() % (pick % 8 == 7 ? n + 1 : n);
  } else {
    r.batch_id = in->U64();
    r.request_index = in->U32();
  }
  const uint32_t flags[] = {
      tp::kRespFinal, 0, tp::kRespFinal | tp::kRespBatchEnd, tp::kRespBatchEnd};
  const uint8_t f = in->U8();
  r.response_flags = f % 16 == 15   ? in->U32()
                     : f % 16 == 14 ? tp::kRespFinal | tp::kRespReschedule
                                    : flags[f % 4];
  if (in->U8() % 4 == 3) {
    r.has_error = 1;
    r.error_code = in->U8() % 12;
    r.error_message = in->Bytes(in->U8());
    return r;
  }
  for (size_t n = in->U8() % 3; n > 0; --n) {
    tp::Tensor t;
    t.name = in->Bytes(in->U8() % 12);
    t.dtype = 1 + in->U8() % 13;
    t.dims = {static_cast<int64_t>(in->U8())};
    t.byte_size = in->U8() % 8 == 0 ? in->U64() : in->U8();
    switch (in->U8() % 8) {
      case 5:
      case 6:  // a stub arena
        t.location = tp::kLocationArena;
        t.ref.arena_id = 1 + in->U8() % 5;
        t.ref.offset = in->U8() % 8 != 0 ? in->U16() : in->U64();
        break;
      case 7: {  // the batch's own space
        t.location = tp::kLocationReceiverArena;
        t.ref.arena_id = 1 + in->U8() % 3;
        t.ref.offset = in->U32() % (4 << 20);
        break;
      }
      default:  // inline
        keep->push_back(in->Bytes(t.byte_size));
        t.byte_size = keep->back().size();
        t.location = tp::kLocationInline;
        t.data = reinterpret_cast<const uint8_t*>(keep->back().data());
    }
    r.outputs.push_back(std::move(t));
  }
  return r;
}

// A RESPONSES frame through BatchTable::OnResponses, as the reader hands
// it over (inline: no arena body).
Status
Responses(Conversation* c, FuzzInput* in)
{
  tp::ResponsesBody body;
  std::vector<std::string> keep;  // inline outputs' bytes
  keep.reserve(16);
  for (size_t n = 1 + in->U8() % 4; n > 0; --n) {
    body.responses.push_back(Entry(c, in, &keep));
  }
  uint16_t flags = in->U8() % 4 == 3 ? tp::kFlagBatchDone : 0;
  uint64_t id = c->batches.empty() ? in->U8() : c->batches.back()->id;
  auto frame = tp::MakeFrame(
      tp::FrameType::kResponses, flags, flags != 0 ? id : 0,
      [&](std::vector<uint8_t>* out) { tp::EncodeResponses(body, out); });
  if (frame.size() > tp::kMaxFrame) return Status();
  tp::FrameView f;
  if (!tp::DecodeHeader(frame.data(), frame.size(), &f).ok()) {
    Fail("an encoded RESPONSES frame does not decode");
  }
  std::vector<tp::ArenaRef> release;
  return c->table.OnResponses(f, f.body, c->peers, &release);
}

// What the stub answers to (CANCEL frames, SEND_ERROR): read and dropped.
void
Drain(Conversation* c)
{
  std::vector<uint8_t> buf(tp::kMaxFrame);
  while (recv(c->stub_end, buf.data(), buf.size(), MSG_DONTWAIT) >= 0) {}
}

void
CheckEnd(const Conversation& c)
{
  for (const auto& r : c.requests) {
    if (r->releases != 1) {
      Fail("a request was released " + std::to_string(r->releases) + " times");
    }
    const bool rescheduled =
        (r->release_flags & TRITONSERVER_REQUEST_RELEASE_RESCHEDULE) != 0;
    if (!rescheduled && r->final_flags != 1) {
      Fail(
          "a request got " + std::to_string(r->final_flags) +
          " final responses");
    }
    if (r->sends_after_final != 0) Fail("a response followed a final one");
  }
  tritonpy::MutexLock lock(const_cast<tritonpy::Mutex*>(&c.arenas.mu));
  if (c.arenas.allocator.allocated_bytes() != 0) {
    Fail("arena space of ended batches was not freed");
  }
}

}  // namespace

extern "C" int
LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
  FuzzInput in(data, size);
  Conversation c((in.U8() & 1) != 0);
  ++g_conversations;
  Status s;
  for (int step = 0; step < kMaxSteps && s.ok() && !in.empty(); ++step) {
    if (c.batches.empty()) {
      NewBatch(&c, &in);
      continue;
    }
    // Zero bytes (common in the golden frames) choose responses.
    switch (in.U8() % 8) {
      case 4:
        NewBatch(&c, &in);
        break;
      case 5:
        s = Arena(&c, &in);
        break;
      case 6: {
        const auto& b = c.batches[in.U8() % c.batches.size()];
        const bool ok = in.U8() % 4 != 3;
        s = c.table.OnExecuteDone(
            b->id, ok ? Status() : Status::Internal("execute() raised"));
        break;
      }
      case 7:
        c.table.PollCancellation(true);
        break;
      default:
        s = Responses(&c, &in);
        if (s.ok()) ++g_frames_ok;
    }
    Drain(&c);
  }
  if (!s.ok()) ++g_violations;
  // The stub is killed (or the conversation ends): the reader fails the
  // rest.
  c.table.FailAll(s.ok() ? Status::Unavailable("the stub went away") : s);
  CheckEnd(c);
  return 0;
}

#ifndef TRITONPY_LIBFUZZER
std::string
tritonpy::fuzz::FuzzCounters()
{
  return std::to_string(g_conversations) + " conversations, " +
         std::to_string(g_batches) + " batches, " +
         std::to_string(g_frames_ok) + " frames taken, " +
         std::to_string(g_violations) + " violations, " +
         std::to_string(g_arenas_replaced) + " arenas replaced";
}

int
main(int argc, char** argv)
{
  return tritonpy::fuzz::FuzzMain(argc, argv);
}
#endif  // TRITONPY_LIBFUZZER
