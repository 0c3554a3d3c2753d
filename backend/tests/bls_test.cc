// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// Tests of the backend's BLS bookkeeping (bls.cc) against the stand-in for
// tritonserver (fake_triton.cc), built with ASan and UBSan: the test plays
// Triton's side of each call (its response and release callbacks) from
// threads of its own.
//
//  - the final response and the request release of one call arrive on two
//    threads, the response while the release callback is half done, and
//    both at once: the call is freed exactly once, by whichever callback
//    reports last, never while the other still uses it (ASan reports a
//    use after free otherwise);
//  - the caps on calls in flight and on the bytes held for them
//    (stub-max-bls-calls, stub-max-bls-bytes): a call past one gets an
//    error response naming the key, and calls start again once others
//    ended.

#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bls/bls.h"
#include "bls/model_control.h"
#include "check.h"
#include "fake_triton.h"
#include "ipc/arena.h"
#include "ipc/channel.h"
#include "protocol/protocol.h"

namespace tp = tritonpy::proto;
using tritonpy::Status;

namespace {

using tritonpy_test::failures;

// A Bls on a socket whose other end plays the stub.
struct Fixture {
  explicit Fixture(const tritonpy::StubLimits& limits = {}) : peers(limits)
  {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
      perror("socketpair");
      std::abort();
    }
    channel = std::make_shared<tritonpy::Channel>(sv[0]);
    stub_end = sv[1];
    bls = std::make_unique<tritonpy::Bls>(
        nullptr, "model 'test' instance 'test_0'", 1 << 20,
        /*model_control=*/false, limits);
  }
  ~Fixture()
  {
    bls.reset();
    close(stub_end);
  }

  // The stub sends BLS_REQUEST `id` to model "callee" with one inline
  // input of `input_bytes` bytes.
  Status Request(uint64_t id, size_t input_bytes)
  {
    std::vector<uint8_t> data(input_bytes, 7);
    tp::BlsRequestBody b;
    b.model_name = "callee";
    tp::Tensor t;
    t.name = "INPUT0";
    t.dtype = 2;  // UINT8
    t.dims = {static_cast<int64_t>(input_bytes)};
    t.byte_size = input_bytes;
    t.data = data.data();
    b.request.inputs.push_back(t);
    auto frame = tp::MakeFrame(
        tp::FrameType::kBlsRequest, 0, id,
        [&](std::vector<uint8_t>* out) { tp::EncodeBlsRequest(b, out); });
    tp::FrameView f;
    Status s = tp::DecodeHeader(frame.data(), frame.size(), &f);
    if (!s.ok()) return s;
    std::vector<tp::ArenaRef> release;
    return bls->OnFrame(
        f, f.body, peers, channel, &release,
        [](uint64_t, uint32_t) { return nullptr; });
  }

  // Reads what the backend sent the stub so far; returns the BLS_RESPONSE
  // bodies.
  std::vector<tp::BlsResponseBody> Drain()
  {
    std::vector<tp::BlsResponseBody> out;
    std::vector<uint8_t> buf(tp::kMaxFrame);
    while (true) {
      ssize_t n = recv(stub_end, buf.data(), buf.size(), MSG_DONTWAIT);
      if (n <= 0) return out;
      tp::FrameView f;
      if (!tp::DecodeHeader(buf.data(), n, &f).ok()) continue;
      if (f.type != tp::FrameType::kBlsResponse) continue;
      tp::BlsResponseBody r;
      if (tp::DecodeBlsResponse(f.body, f.body_len, &r).ok()) {
        out.push_back(std::move(r));
      }
    }
  }

  uint64_t CallsInFlight()
  {
    uint64_t calls = 0, bytes = 0;
    bls->DebugCounters(&calls, &bytes);
    return calls;
  }

  tritonpy::PeerArenas peers;
  std::shared_ptr<tritonpy::Channel> channel;
  int stub_end = -1;
  std::unique_ptr<tritonpy::Bls> bls;
};

void
FinalResponse(const fake_triton::Started& c)
{
  c.response_fn(
      nullptr, TRITONSERVER_RESPONSE_COMPLETE_FINAL, c.response_userp);
}

void
ReleaseRequest(const fake_triton::Started& c)
{
  c.release_fn(c.request, TRITONSERVER_REQUEST_RELEASE_ALL, c.release_userp);
}

// Starts call `id` and returns what Triton was handed (request null when
// it was not started).
fake_triton::Started
Start(Fixture* fx, uint64_t id, size_t input_bytes = 16)
{
  Status s = fx->Request(id, input_bytes);
  std::vector<fake_triton::Started> started = fake_triton::TakeStarted();
  CHECK(s.ok() && started.size() == 1);
  return started.size() == 1 ? started[0] : fake_triton::Started();
}

// Counts the final BLS_RESPONSEs without error the stub got.
int
Finals(Fixture* fx)
{
  int n = 0;
  for (const auto& r : fx->Drain()) {
    n += r.response_flags == tp::kRespFinal && r.has_error == 0;
  }
  return n;
}

// The final response arrives on another thread while the release callback
// is in the middle of its work (inside TRITONSERVER_InferenceRequestDelete):
// the callback that reports last frees the call, and the other has
// stopped touching it by then.
void
TestFinalResponseDuringRelease()
{
  Fixture fx;
  fake_triton::AcceptInferences(true);
  fake_triton::Started call = Start(&fx, 1);
  fake_triton::AcceptInferences(false);
  if (call.request == nullptr) return;
  fake_triton::OnNextRequestDelete([call] {
    std::thread triton_thread(FinalResponse, call);
    triton_thread.join();
  });
  ReleaseRequest(call);
  CHECK(Finals(&fx) == 1);
  CHECK(fx.CallsInFlight() == 0);
}

// The two callbacks of many calls, each pair on two threads started
// together: every call gets one final response and leaves the table.
void
TestFinalResponseAndReleaseTogether()
{
  Fixture fx;
  constexpr int kCalls = 300;
  int finals = 0;
  for (int i = 1; i <= kCalls; ++i) {
    fake_triton::AcceptInferences(true);
    fake_triton::Started call = Start(&fx, i);
    fake_triton::AcceptInferences(false);
    if (call.request == nullptr) break;
    std::mutex mu;
    std::condition_variable cv;
    bool go = false;
    auto run = [&](void (*callback)(const fake_triton::Started&)) {
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return go; });
      }
      callback(call);
    };
    std::thread a(run, FinalResponse);
    std::thread b(run, ReleaseRequest);
    {
      std::lock_guard<std::mutex> lock(mu);
      go = true;
    }
    cv.notify_all();
    a.join();
    b.join();
    finals += Finals(&fx);
  }
  CHECK(finals == kCalls);
  CHECK(fx.CallsInFlight() == 0);
}

// Sends call `id`, which must be refused: answered at once with one error
// response and never handed to Triton. Returns the error's text.
std::string
Refused(Fixture* fx, uint64_t id, size_t input_bytes)
{
  CHECK(fx->Request(id, input_bytes).ok());
  CHECK(fake_triton::TakeStarted().empty());
  std::vector<tp::BlsResponseBody> got = fx->Drain();
  CHECK(got.size() == 1);
  if (got.size() != 1) return "";
  CHECK(got[0].response_flags == tp::kRespFinal && got[0].has_error == 1);
  CHECK(got[0].error_code == TRITONSERVER_ERROR_UNAVAILABLE);
  return got[0].error_message;
}

// Ends a started call as Triton would.
void
End(Fixture* fx, const fake_triton::Started& call)
{
  FinalResponse(call);
  ReleaseRequest(call);
  CHECK(Finals(fx) == 1);
}

void
TestCallCap()
{
  tritonpy::StubLimits limits;
  limits.max_bls_calls = 2;
  Fixture fx(limits);
  fake_triton::AcceptInferences(true);
  fake_triton::Started a = Start(&fx, 1);
  fake_triton::Started b = Start(&fx, 2);
  // The third is answered at once and never reaches Triton.
  const std::string why = Refused(&fx, 3, 16);
  CHECK(
      why.find(
          "model 'test' instance 'test_0': BLS request to model "
          "'callee' refused: 2 BLS calls of this instance are in "
          "flight, the most stub-max-bls-calls=2 allows") != std::string::npos);
  CHECK(fx.CallsInFlight() == 2);
  // Once one ended, a new one starts.
  if (a.request != nullptr) End(&fx, a);
  fake_triton::Started c = Start(&fx, 3);
  fake_triton::AcceptInferences(false);
  if (b.request != nullptr) End(&fx, b);
  if (c.request != nullptr) End(&fx, c);
  CHECK(fx.CallsInFlight() == 0);
}

void
TestByteCap()
{
  tritonpy::StubLimits limits;
  limits.max_bls_bytes = 8192;
  Fixture fx(limits);
  fake_triton::AcceptInferences(true);
  fake_triton::Started a = Start(&fx, 1, 4096);
  // 4160 bytes once aligned: too many.
  const std::string why = Refused(&fx, 2, 4097);
  CHECK(
      why.find(
          "its 4160 input bytes would take the BLS data held for this "
          "instance (4096 bytes) past stub-max-bls-bytes=8192") !=
      std::string::npos);
  // One call alone larger than the cap is refused the same way.
  CHECK(
      Refused(&fx, 3, 9000).find("past stub-max-bls-bytes=8192") !=
      std::string::npos);
  // The bytes come back with the call.
  if (a.request != nullptr) End(&fx, a);
  fake_triton::Started b = Start(&fx, 4, 8192);
  fake_triton::AcceptInferences(false);
  if (b.request != nullptr) End(&fx, b);
  CHECK(fx.CallsInFlight() == 0);
}

// A call that would pass a cap waits for the calls already answered to be
// released (Triton releases a request just after its final response, but
// the model's next call may get there first), then starts.
void
TestACallWaitsForAnsweredCallsToBeReleased()
{
  tritonpy::StubLimits limits;
  limits.max_bls_bytes = 8192;
  Fixture fx(limits);
  fake_triton::AcceptInferences(true);
  fake_triton::Started a = Start(&fx, 1, 4096);
  if (a.request == nullptr) return;
  FinalResponse(a);  // answered; its request is not released yet
  CHECK(Finals(&fx) == 1);
  std::atomic<bool> tried{false};  // b's start returned (a failure, then)
  std::thread triton_thread([&] {
    while (fx.bls->ReleaseWaits() == 0 && !tried) std::this_thread::yield();
    ReleaseRequest(a);
  });
  fake_triton::Started b = Start(&fx, 2, 8192);
  tried = true;
  triton_thread.join();
  fake_triton::AcceptInferences(false);
  CHECK(b.request != nullptr);
  if (b.request != nullptr) End(&fx, b);
  CHECK(fx.CallsInFlight() == 0);
}

// Under stub-sandbox-model-control=true, what one sandboxed model loaded
// is its own: another sandboxed model can neither load code under that
// name nor unload it, and the first may load it again and unload it.
void
TestSandboxedModelsOwnWhatTheyLoad()
{
  auto models = std::make_shared<tritonpy::SandboxedModels>();
  tritonpy::SandboxedControl a;
  a.sandboxed = a.allowed = a.backend_sandboxed = true;
  a.backend = "tritonpy";
  a.model = "a";
  a.models = models;
  tritonpy::SandboxedControl b = a;
  b.model = "b";
  const std::string config = R"({"backend": "tritonpy"})";
  // A free name (the fake's repository is empty, its models never ready).
  CHECK(tritonpy::CheckSandboxedLoad(nullptr, a, "m", config).ok());
  models->Loaded("m", "a");
  CHECK(tritonpy::CheckSandboxedLoad(nullptr, a, "m", config).ok());
  CHECK(tritonpy::CheckSandboxedLoad(nullptr, a, "m", "").ok());
  CHECK(tritonpy::CheckSandboxedUnload(a, "m").ok());
  Status s = tritonpy::CheckSandboxedLoad(nullptr, b, "m", config);
  CHECK(
      !s.ok() &&
      s.message().find("was loaded by model 'a'") != std::string::npos);
  s = tritonpy::CheckSandboxedUnload(b, "m");
  CHECK(
      !s.ok() &&
      s.message().find("unloads only models it loaded") != std::string::npos);
  // Nobody's model: not to unload, nor to load without a config.
  CHECK(!tritonpy::CheckSandboxedUnload(a, "other").ok());
  CHECK(!tritonpy::CheckSandboxedLoad(nullptr, a, "other", "").ok());
}

}  // namespace

int
main()
{
  TestFinalResponseDuringRelease();
  TestFinalResponseAndReleaseTogether();
  TestCallCap();
  TestByteCap();
  TestACallWaitsForAnsweredCallsToBeReleased();
  TestSandboxedModelsOwnWhatTheyLoad();
  printf("%s: %d failure(s)\n", failures == 0 ? "ok" : "FAIL", failures);
  return failures == 0 ? 0 : 1;
}
