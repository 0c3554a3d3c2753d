// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// Fuzz target for what the reader thread does with a stub's frame past the
// decoder: the steps of InstanceReader::Dispatch on the backend's real
// handlers, linked against a stand-in for tritonserver (fake_triton.cc).
//
//  - the body, inline or resolved in the stub's arenas (StubFrames);
//  - ARENA, once with each kind of descriptor (PeerArenas::Add): a sealed
//    or unsealed memfd, one smaller than announced, one grown after
//    sealing, a pipe, /dev/zero, a regular file, none or two. Once a
//    mapping is accepted the target tries to shrink the memfd and reads
//    the mapping's last byte: a mapping the stub can shrink is a SIGBUS
//    here, as in tritonserver;
//  - LOG, ERROR and METRIC (InstanceMetrics and the metric store; the
//    METRIC_DONE answer goes out on a real socket);
//  - RESPONSES: every output resolved as the batch table does
//    (ResolveOutputs), stub arenas (location 1) and the backend arena
//    space of the entry's batch (location 2); each resolved range is
//    checked to lie inside its arena or allocation and read, each output
//    is probed at the edge of its region (ProbeEdges), then the entry is
//    written as Triton responses (WriteEntry, FinishRequest);
//  - BLS_REQUEST, BLS_CANCEL, BLS_RELEASE and MODEL_CONTROL (Bls::OnFrame):
//    the input copy, then the request built and handed to the fake
//    server, which reads every input byte; then the fake server answers
//    it (FakeTritonCompletePending): responses whose outputs it asks of
//    the BLS allocator (heap or arena, by size) and fills, errors, the
//    final flag alone, then the release, through Bls's own callbacks.
//
// What it leaves out: BatchTable's own checks of batch ids and request
// indexes (every entry is taken as one of the fixture's batch, id 12, and
// written to a request of its own: fuzz_sequence.cc has them), the
// reader thread's loop, and BLS callbacks on two threads at once.
//
// Built with -fsanitize=address,undefined. The arenas are mmap'd, where
// ASan has no redzones: resolved ranges are checked by hand.
//
//   tritonpy_fuzz_dispatch <corpus-dir> [--seconds S] [--seed N]
// (fuzz_driver.h), or under libFuzzer with -DTRITONPY_LIBFUZZER.

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "bls/bls.h"
#include "fake_triton.h"
#include "fuzz_driver.h"
#include "instance/batch.h"
#include "instance/response_writer.h"
#include "instance/stub_frames.h"
#include "ipc/arena.h"
#include "ipc/channel.h"
#include "process/stub_supervisor.h"
#include "protocol/protocol.h"
#include "triton/metrics.h"

namespace tp = tritonpy::proto;
using tritonpy::Status;

// StubFrames asks the supervisor for the current channel only when it is
// given none; this target always gives one.
std::shared_ptr<tritonpy::Channel>
tritonpy::StubSupervisor::CurrentChannel()
{
  std::fprintf(stderr, "fuzz_dispatch: StubSupervisor is not part of it\n");
  std::abort();
}

namespace {

// The stub's arenas 1 and 2, as an ARENA frame announced them.
constexpr uint64_t kPeerArenaSize = 1 << 16;
// The backend arena of the fixture's batch, and the batch's allocations in
// it: [0, 64), [64, 4096), [4096, 4096 + 1 MiB) (the golden RESPONSES
// frame with location-2 outputs refers to the last two).
constexpr uint64_t kBackendArenaSize = 4 << 20;
constexpr uint64_t kBatchId = 12;
const uint64_t kBatchAllocations[] = {64, 4096 - 64, 1 << 20};
// Largest memfd made for an ARENA frame (sparse: nothing is written).
constexpr uint64_t kMaxMemfd = 64 << 20;

[[noreturn]] void
Fail(const std::string& what)
{
  std::fprintf(stderr, "fuzz_dispatch: %s\n", what.c_str());
  std::abort();
}

struct Fixture {
  // The backend's default limits (stub-max-arenas, ...).
  tritonpy::StubLimits limits;
  tritonpy::MetricStore store;
  tritonpy::InstanceMetrics metrics{&store, "model 'fuzz' instance 'fuzz_0'"};
  tritonpy::StubFrames frames{"model 'fuzz'", &metrics, nullptr, limits};
  std::vector<std::unique_ptr<tritonpy::MappedArena>> stub_arenas;
  tritonpy::ArenaAllocator backend{kBackendArenaSize};
  std::shared_ptr<tritonpy::Batch> batch = std::make_shared<tritonpy::Batch>();
  std::unique_ptr<tritonpy::Bls> bls;
  std::shared_ptr<tritonpy::Channel> channel;
  int stub_end = -1;  // the stub's end of the socket, drained after each input
};

Fixture& Fx();

// How far inputs got.
uint64_t g_headers_ok = 0;
uint64_t g_handled_ok = 0;
uint64_t g_arenas_added = 0;
uint64_t g_outputs_resolved = 0;
uint64_t g_bls_frames_ok = 0;
uint64_t g_bls_responses = 0;
volatile unsigned g_sink;

// A memfd of `size` bytes, sealed against shrinking when `seal`.
int
Memfd(uint64_t size, bool seal)
{
  int fd = memfd_create("fuzz-arena", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) Fail("memfd_create failed");
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) Fail("ftruncate failed");
  if (seal && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) != 0) Fail("seal failed");
  return fd;
}

// The descriptors an ARENA frame carries, of kind `kind` (0 to
// kDescriptorKinds - 1), sized from the body's announced size.
constexpr int kDescriptorKinds = 9;
std::vector<int>
ArenaDescriptors(int kind, const uint8_t* body, uint32_t body_len)
{
  tp::ArenaBody a;
  uint64_t announced =
      tp::DecodeArena(body, body_len, &a).ok() ? a.size : kPeerArenaSize;
  uint64_t size = announced < kMaxMemfd ? announced : kMaxMemfd;
  switch (kind) {
    case 0:
      return {Memfd(size, true)};
    case 1:
      return {Memfd(size, false)};  // the stub can shrink it later
    case 2:
      return {Memfd(size > 0 ? size - 1 : 0, true)};  // smaller than said
    case 3: {
      int p[2];
      if (pipe2(p, O_CLOEXEC) != 0) Fail("pipe2 failed");
      close(p[1]);
      return {p[0]};
    }
    case 4: {
      int fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);
      if (fd < 0) Fail("cannot open /dev/zero");
      return {fd};
    }
    case 5: {  // a regular (unlinked) file, not a memfd
      int fd = open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
      if (fd < 0) return {Memfd(size, true)};
      if (ftruncate(fd, static_cast<off_t>(size)) != 0) Fail("ftruncate");
      return {fd};
    }
    case 6:
      return {};
    case 7:
      return {Memfd(size, true), Memfd(size, true)};
    default: {  // sealed, then grown past what was announced
      int fd = Memfd(size, true);
      if (ftruncate(fd, static_cast<off_t>(size + 4096)) != 0) Fail("grow");
      return {fd};
    }
  }
}

// A range a resolver handed out must lie inside [base, base + size).
void
CheckInside(
    const uint8_t* p, uint64_t len, const uint8_t* base, uint64_t size,
    const char* what)
{
  if (p < base || len > size || static_cast<uint64_t>(p - base) > size - len) {
    Fail(std::string(what) + " resolved a range outside its memory");
  }
}

unsigned
Read(const uint8_t* p, uint64_t len)
{
  unsigned sum = 0;
  for (uint64_t i = 0; i < len; ++i) sum += p[i];
  return sum;
}

// After an accepted ARENA: the stub tries to shrink the memfd it sent,
// then the backend reads the last byte it mapped.
void
ShrinkAndRead(
    const tritonpy::PeerArenas& peers, uint32_t id, uint64_t size,
    int stub_copy)
{
  struct stat st;
  if (fstat(stub_copy, &st) != 0 || static_cast<uint64_t>(st.st_size) < size) {
    Fail("an arena smaller than announced was mapped");
  }
  (void)!ftruncate(stub_copy, 0);  // refused when sealed
  const uint8_t* base = nullptr;
  if (!peers.Resolve(id, 0, size, &base).ok()) Fail("added arena unknown");
  g_sink = base[0] + base[size - 1];  // SIGBUS if the memfd shrank
}

void
OnArena(const tp::FrameView& f, const uint8_t* body)
{
  // Every kind of descriptor, each to a stub of its own: the fixture's
  // arenas stay as they are.
  Fixture& fx = Fx();
  for (int kind = 0; kind < kDescriptorKinds; ++kind) {
    tritonpy::StubFrames frames(
        "model 'fuzz'", &fx.metrics, nullptr, fx.limits);
    std::vector<int> fds = ArenaDescriptors(kind, body, f.body_len);
    int stub_copy = fds.empty() ? -1 : dup(fds[0]);
    bool handled = false;
    Status s = frames.HandleCommon(f, body, &fds, fx.channel.get(), &handled);
    tritonpy::CloseAll(&fds);
    tp::ArenaBody a;
    if (s.ok() && tp::DecodeArena(body, f.body_len, &a).ok()) {
      ++g_arenas_added;
      if (stub_copy < 0) Fail("an ARENA frame without a descriptor was taken");
      ShrinkAndRead(frames.peers(), a.arena_id, a.size, stub_copy);
    }
    if (stub_copy >= 0) close(stub_copy);
  }
}

// Each arena output of `rb` again, alone, with the largest size its
// region (the stub arena, or the batch allocation its offset is in) holds
// from its offset, and with one byte more: the first must resolve inside
// the region, the second must be refused. Mutations seldom land on these
// edges; the golden frames' outputs reach them at once.
void
ProbeEdges(const tp::ResponsesBody& rb)
{
  Fixture& fx = Fx();
  for (const tp::Response& r : rb.responses) {
    for (const tp::Tensor& t : r.outputs) {
      const uint8_t* region = nullptr;
      uint64_t region_size = 0;
      uint64_t skip = 0;  // from the region's start to the offset
      if (t.location == tp::kLocationArena) {
        if (!fx.frames.peers().Resolve(t.ref.arena_id, 0, 0, &region).ok() ||
            t.ref.offset > kPeerArenaSize) {
          continue;
        }
        region_size = kPeerArenaSize;
        skip = t.ref.offset;
      } else if (t.location == tp::kLocationReceiverArena) {
        for (const tritonpy::Allocation& a : fx.batch->allocations) {
          if (a.arena_id == t.ref.arena_id && t.ref.offset >= a.offset &&
              t.ref.offset - a.offset < a.size) {
            region = a.ptr;
            region_size = a.size;
            skip = t.ref.offset - a.offset;
          }
        }
        if (region == nullptr) continue;
      } else {
        continue;
      }
      const uint64_t edge = region_size - skip;
      for (uint64_t size : {edge, edge + 1}) {
        tp::ResponsesBody one;
        one.responses.push_back(r);
        one.responses[0].outputs.assign(1, t);
        one.responses[0].outputs[0].byte_size = size;
        std::vector<std::shared_ptr<tritonpy::Batch>> owners(1, fx.batch);
        std::vector<std::vector<const uint8_t*>> data;
        std::vector<tp::ArenaRef> release;
        Status s = tritonpy::ResolveOutputs(
            one, fx.frames.peers(), owners, &data, &release);
        if (size == edge) {
          if (!s.ok()) Fail("a range that fits its region was refused");
          CheckInside(data[0][0], size, region, region_size, "an edge probe");
          if (size > 0) g_sink = data[0][0][size - 1];
        } else if (s.ok()) {
          Fail("a range one byte past its region was accepted");
        }
      }
    }
  }
}

// RESPONSES: the outputs resolved as BatchTable::OnResponses does.
Status
OnResponses(
    const tp::FrameView& f, const uint8_t* body,
    std::vector<tp::ArenaRef>* release)
{
  Fixture& fx = Fx();
  tp::ResponsesBody rb;
  TRITONPY_RETURN_IF_ERROR(tp::DecodeResponses(body, f.body_len, &rb));
  std::vector<std::shared_ptr<tritonpy::Batch>> owners(
      rb.responses.size(), fx.batch);
  std::vector<std::vector<const uint8_t*>> data;
  TRITONPY_RETURN_IF_ERROR(
      tritonpy::ResolveOutputs(rb, fx.frames.peers(), owners, &data, release));
  ProbeEdges(rb);
  unsigned sum = 0;
  for (size_t i = 0; i < rb.responses.size(); ++i) {
    const auto& outputs = rb.responses[i].outputs;
    if (data[i].size() != outputs.size()) Fail("outputs lost in resolving");
    for (size_t j = 0; j < outputs.size(); ++j) {
      const tp::Tensor& t = outputs[j];
      const uint8_t* p = data[i][j];
      if (t.location == tp::kLocationArena) {
        const uint8_t* base = nullptr;
        if (!fx.frames.peers().Resolve(t.ref.arena_id, 0, 0, &base).ok()) {
          Fail("output in an unknown stub arena resolved");
        }
        CheckInside(p, t.byte_size, base, kPeerArenaSize, "stub arena output");
      } else if (t.location == tp::kLocationReceiverArena) {
        bool inside = false;
        for (const tritonpy::Allocation& a : fx.batch->allocations) {
          inside = inside ||
                   (a.arena_id == t.ref.arena_id && p >= a.ptr &&
                    t.byte_size <= a.size &&
                    static_cast<uint64_t>(p - a.ptr) <= a.size - t.byte_size);
        }
        if (!inside) Fail("location-2 output outside the batch's allocations");
      }
      if (p != nullptr) sum += Read(p, t.byte_size);
      ++g_outputs_resolved;
    }
  }
  g_sink = sum;
  // Each entry written as Triton responses of a request of its own (the
  // fake server's output buffers are heap blocks of the size asked for);
  // the frame's id picks the decoupled mode.
  static TRITONBACKEND_Request fake_request;
  const bool decoupled = (f.id & 1) != 0;
  for (size_t i = 0; i < rb.responses.size(); ++i) {
    tritonpy::BatchRequest req;
    req.request = &fake_request;
    req.id = "fuzz";
    for (const tp::Tensor& t : rb.responses[i].outputs) {
      req.requested_outputs.insert(t.name);
    }
    if (decoupled && TRITONBACKEND_ResponseFactoryNew(
                         &req.factory, req.request) != nullptr) {
      Fail("fake response factory");
    }
    Status send_error;
    (void)tritonpy::WriteEntry(
        "fuzz", decoupled, &req, rb.responses[i], data[i], &send_error);
    tritonpy::FinishRequest(
        nullptr, "fuzz", *fx.batch, &req, TRITONSERVER_REQUEST_RELEASE_ALL);
  }
  return Status();
}

// InstanceReader::Dispatch, step by step, on the fixture.
Status
Dispatch(const uint8_t* msg, size_t len)
{
  Fixture& fx = Fx();
  tp::FrameView f;
  TRITONPY_RETURN_IF_ERROR(tp::DecodeHeader(msg, len, &f));
  ++g_headers_ok;
  const uint8_t* body = nullptr;
  TRITONPY_RETURN_IF_ERROR(fx.frames.ResolveBody(f, &body));
  if (f.type == tp::FrameType::kArena) {
    OnArena(f, body);
    return Status();
  }
  std::vector<int> fds;
  bool handled = false;
  TRITONPY_RETURN_IF_ERROR(
      fx.frames.HandleCommon(f, body, &fds, fx.channel.get(), &handled));
  if (handled) return Status();
  std::vector<tp::ArenaRef> release;
  if (f.body_in_arena) release.push_back(f.body_ref);
  switch (f.type) {
    case tp::FrameType::kResponses:
      TRITONPY_RETURN_IF_ERROR(OnResponses(f, body, &release));
      break;
    case tp::FrameType::kBlsRequest:
    case tp::FrameType::kBlsCancel:
    case tp::FrameType::kBlsRelease:
    case tp::FrameType::kModelControl:
      TRITONPY_RETURN_IF_ERROR(fx.bls->OnFrame(
          f, body, fx.frames.peers(), fx.channel, &release,
          [](uint64_t, uint32_t) { return nullptr; }));
      ++g_bls_frames_ok;
      break;
    case tp::FrameType::kExecuteDone: {
      tp::ExecuteDoneBody done;
      TRITONPY_RETURN_IF_ERROR(tp::DecodeExecuteDone(body, f.body_len, &done));
      break;
    }
    case tp::FrameType::kReady: {
      tp::ReadyBody ready;
      TRITONPY_RETURN_IF_ERROR(tp::DecodeReady(body, f.body_len, &ready));
      break;
    }
    case tp::FrameType::kRelease: {
      tp::ReleaseBody rb;
      TRITONPY_RETURN_IF_ERROR(tp::DecodeRelease(body, f.body_len, &rb));
      break;
    }
    default:
      return tritonpy::Violation("unexpected frame");
  }
  // Every reference handed back lies in a stub arena.
  for (const tp::ArenaRef& r : release) {
    const uint8_t* p = nullptr;
    if (!fx.frames.peers().Resolve(r.arena_id, r.offset, 0, &p).ok()) {
      Fail("a release names memory outside the stub's arenas");
    }
  }
  return Status();
}

// Whatever the backend answered (METRIC_DONE, BLS_RESPONSE, ...): read and
// dropped, as a stub would.
void
DrainStub()
{
  std::vector<uint8_t> buf(tp::kMaxFrame);
  while (recv(Fx().stub_end, buf.data(), buf.size(), MSG_DONTWAIT) >= 0) {}
}

Fixture&
Fx()
{
  static Fixture* fx = [] {
    auto* x = new Fixture();  // never destroyed: lives until exit
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
      Fail("socketpair failed");
    }
    x->channel = std::make_shared<tritonpy::Channel>(sv[0]);
    x->stub_end = sv[1];
    x->bls.reset(new tritonpy::Bls(
        nullptr, "model 'fuzz'", 1 << 20, /*model_control=*/true));
    // The stub's arenas, announced through ARENA frames.
    for (uint32_t id = 1; id <= 2; ++id) {
      std::unique_ptr<tritonpy::MappedArena> arena;
      if (!tritonpy::MappedArena::Create(id, kPeerArenaSize, &arena).ok()) {
        Fail("stub arena");
      }
      for (uint64_t i = 0; i < kPeerArenaSize; ++i) {
        arena->base()[i] = static_cast<uint8_t>(i * 131 + id);
      }
      auto frame = tp::MakeFrame(
          tp::FrameType::kArena, 0, 0, [&](std::vector<uint8_t>* out) {
            tp::EncodeArena({id, kPeerArenaSize}, out);
          });
      tp::FrameView f;
      bool handled = false;
      std::vector<int> fds{dup(arena->fd())};
      if (!tp::DecodeHeader(frame.data(), frame.size(), &f).ok() ||
          !x->frames.HandleCommon(f, f.body, &fds, nullptr, &handled).ok()) {
        Fail("announcing the stub's arenas failed");
      }
      x->stub_arenas.push_back(std::move(arena));
    }
    // The fixture's batch and its backend arena space.
    x->batch->id = kBatchId;
    for (uint64_t size : kBatchAllocations) {
      tritonpy::Allocation a;
      if (!x->backend.Allocate(size, &a).ok()) Fail("backend arena");
      for (uint64_t i = 0; i < a.size; ++i) a.ptr[i] = static_cast<uint8_t>(i);
      x->batch->allocations.push_back(a);
    }
    return x;
  }();
  return *fx;
}

}  // namespace

extern "C" int
LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
  Fx();
  // The reader receives into a buffer of exactly the message's length.
  std::vector<uint8_t> msg(data, data + size);
  if (Dispatch(msg.data(), msg.size()).ok()) ++g_handled_ok;
  // The BLS requests the frame submitted are answered, as the input says.
  g_bls_responses += FakeTritonCompletePending(data, size);
  DrainStub();
  return 0;
}

#ifndef TRITONPY_LIBFUZZER
std::string
tritonpy::fuzz::FuzzCounters()
{
  return std::to_string(g_headers_ok) + " valid headers, " +
         std::to_string(g_handled_ok) + " frames handled, " +
         std::to_string(g_arenas_added) + " arenas added, " +
         std::to_string(g_outputs_resolved) + " outputs resolved, " +
         std::to_string(g_bls_frames_ok) + " BLS frames handled, " +
         std::to_string(g_bls_responses) + " BLS responses";
}

int
main(int argc, char** argv)
{
  return tritonpy::fuzz::FuzzMain(argc, argv);
}
#endif  // TRITONPY_LIBFUZZER
