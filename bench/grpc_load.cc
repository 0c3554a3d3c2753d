// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// grpc_load: the C++ twin of bench/grpc_load.py, for when the Python client
// would be the bottleneck (it spends 30-40 us of CPU per streamed message,
// more than the server). Same flags, same measuring rules, same JSON on
// stdout; grpc_load.py stays the fallback where this cannot be built.
//
//   grpc_load --target HOST:PORT --mode unary|stream --conns N
//             --tokens T --start S --end E --payload FILE
//
// FILE holds the serialized ModelInferRequest, sent as is for every
// request (the generic stub needs no protobuf code). One thread drives every
// call through one completion queue on one channel.
//   unary:  N callers, each sends its next ModelInfer when the last answers.
//   stream: N ModelStreamInfer streams, each sends its next request when
//           the T-th response of the last one arrived.
// Window rules (as in grpc_load.py): a unary request counts, with its
// latency, if it completed inside [S, E]; in a stream, a token counts if it
// arrived inside the window, time to first token is kept for requests sent
// inside it, an inter-token gap when its second token arrived inside it,
// and a request counts as ok or failed if it was sent inside it.

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace {

constexpr const char* kService = "/inference.GRPCInferenceService/";

double
WallNow()
{
  timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

double
MonoNow()
{
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

double
CpuNow()
{
  rusage r;
  getrusage(RUSAGE_SELF, &r);
  return r.ru_utime.tv_sec + r.ru_utime.tv_usec * 1e-6 + r.ru_stime.tv_sec +
         r.ru_stime.tv_usec * 1e-6;
}

struct Args {
  std::string target, mode = "unary", payload;
  int conns = 1, tokens = 100;
  double start = 0, end = 0;
};

struct Totals {
  long ok = 0, errors = 0, tokens = 0;
  std::vector<double> latency_us, ttft_us, itl_us;
  std::string error;

  void NoteError(const std::string& text)
  {
    if (error.empty()) error = text;
  }
};

// Tags: a call's address with the operation in the low two bits.
enum Op : uintptr_t { kStart = 0, kWrite = 1, kRead = 2, kFinish = 3 };

void*
Tag(void* call, Op op)
{
  return reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(call) | op);
}

// A ModelStreamInferResponse whose first field is error_message (field 1,
// length-delimited: byte 0x0a) failed; a normal one starts with field 2.
bool
IsStreamError(grpc::ByteBuffer* buf, std::string* text)
{
  std::vector<grpc::Slice> slices;
  if (!buf->Dump(&slices).ok() || slices.empty() || slices[0].size() == 0) {
    return false;
  }
  if (slices[0].begin()[0] != 0x0a) return false;
  std::string all;
  for (const grpc::Slice& s : slices) {
    all.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  // 0x0a, a varint length, then the message
  size_t at = 1;
  while (at < all.size() && (all[at] & 0x80)) ++at;
  *text = all.substr(std::min(all.size(), at + 1), 200);
  return true;
}

struct Stream {
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> rw;
  grpc::ByteBuffer in;
  grpc::Status status;
  int k = 0;        // responses of the current request
  double sent = 0;  // wall time the current request was sent
  double prev = 0;  // monotonic time of the previous response (or send)
  bool in_window = false;
  bool writing = false;
  bool send_after_write = false;  // the next request waits for the last write
  bool idle = false;              // past the window, nothing in flight
};

struct Unary {
  grpc::ClientContext* ctx = nullptr;
  std::unique_ptr<grpc::GenericClientAsyncResponseReader> reader;
  grpc::ByteBuffer out;
  grpc::Status status;
  double sent_mono = 0;
  double sent_wall = 0;
  bool idle = false;
};

class Runner {
 public:
  Runner(const Args& a, const std::string& payload) : a_(a), payload_(payload)
  {
    grpc::ChannelArguments ch_args;
    ch_args.SetMaxReceiveMessageSize(-1);
    ch_args.SetMaxSendMessageSize(-1);
    channel_ = grpc::CreateCustomChannel(
        a.target, grpc::InsecureChannelCredentials(), ch_args);
    stub_ = std::make_unique<grpc::GenericStub>(channel_);
    grpc::Slice slice(payload_.data(), payload_.size());
    request_ = grpc::ByteBuffer(&slice, 1);
  }

  void Run()
  {
    if (a_.mode == "stream") {
      RunStreams();
    } else {
      RunUnary();
    }
  }

  Totals totals;
  double cpu_s = 0;
  bool timed_out = false;

 private:
  // Waits for the next event; false when the queue is past `give_up`.
  bool Next(void** tag, bool* ok)
  {
    for (;;) {
      SampleCpu();
      auto deadline =
          std::chrono::system_clock::now() + std::chrono::milliseconds(50);
      auto r = cq_.AsyncNext(tag, ok, deadline);
      if (r == grpc::CompletionQueue::GOT_EVENT) return true;
      if (r == grpc::CompletionQueue::SHUTDOWN) return false;
      if (WallNow() > a_.end + 10.0) {
        timed_out = true;
        return false;
      }
    }
  }

  void SampleCpu()
  {
    double now = WallNow();
    if (cpu_start_ < 0 && now >= a_.start) cpu_start_ = CpuNow();
    if (cpu_end_ < 0 && now >= a_.end) {
      cpu_end_ = CpuNow();
      cpu_s = cpu_end_ - (cpu_start_ < 0 ? cpu_end_ : cpu_start_);
    }
  }

  void SendStream(Stream* s)
  {
    if (s->writing) {
      // One write in flight per stream: the responses of the last request
      // can all arrive before its write's completion is dequeued.
      s->send_after_write = true;
      return;
    }
    s->k = 0;
    s->sent = WallNow();
    s->prev = MonoNow();
    s->in_window = s->sent >= a_.start && s->sent <= a_.end;
    s->writing = true;
    s->rw->Write(request_, Tag(s, kWrite));
  }

  void EndStreamRequest(Stream* s, bool failed)
  {
    if (s->in_window) {
      if (failed) {
        ++totals.errors;
      } else {
        ++totals.ok;
      }
    }
    if (WallNow() < a_.end) {
      if (failed) usleep(10000);  // a failing model must not spin the client
      SendStream(s);
    } else {
      s->idle = true;
      ++idle_;
    }
  }

  void RunStreams()
  {
    std::vector<std::unique_ptr<Stream>> streams;
    const std::string method = std::string(kService) + "ModelStreamInfer";
    for (int i = 0; i < a_.conns; ++i) {
      auto s = std::make_unique<Stream>();
      s->rw = stub_->PrepareCall(&s->ctx, method, &cq_);
      s->rw->StartCall(Tag(s.get(), kStart));
      streams.push_back(std::move(s));
    }
    void* tag;
    bool ok;
    while (idle_ < a_.conns && Next(&tag, &ok)) {
      auto bits = reinterpret_cast<uintptr_t>(tag);
      auto* s = reinterpret_cast<Stream*>(bits & ~uintptr_t{3});
      Op op = static_cast<Op>(bits & 3);
      if (s->idle) continue;
      if (!ok) {
        totals.NoteError("a stream ended (operation failed)");
        if (s->in_window) ++totals.errors;
        s->idle = true;
        ++idle_;
        continue;
      }
      if (op == kStart) {
        SendStream(s);
        s->rw->Read(&s->in, Tag(s, kRead));
      } else if (op == kWrite) {
        s->writing = false;
        if (s->send_after_write) {
          s->send_after_write = false;
          SendStream(s);
        }
      } else if (op == kRead) {
        double mono = MonoNow();
        std::string text;
        bool failed = IsStreamError(&s->in, &text);
        if (failed) {
          totals.NoteError(text);
        } else {
          double gap = (mono - s->prev) * 1e6;
          double when = s->k == 0 ? s->sent + (mono - s->prev) : WallNow();
          bool inside = when >= a_.start && when <= a_.end;
          if (s->k == 0) {
            if (s->in_window) totals.ttft_us.push_back(gap);
          } else if (inside) {
            totals.itl_us.push_back(gap);
          }
          if (inside) ++totals.tokens;
          s->prev = mono;
          ++s->k;
        }
        s->in.Clear();
        if (failed || s->k == a_.tokens) EndStreamRequest(s, failed);
        if (!s->idle) s->rw->Read(&s->in, Tag(s, kRead));
      }
    }
  }

  void SendUnary(Unary* u)
  {
    delete u->ctx;
    u->ctx = new grpc::ClientContext();
    u->out.Clear();
    u->sent_wall = WallNow();
    u->sent_mono = MonoNow();
    u->reader = stub_->PrepareUnaryCall(
        u->ctx, std::string(kService) + "ModelInfer", request_, &cq_);
    u->reader->StartCall();
    u->reader->Finish(&u->out, &u->status, Tag(u, kFinish));
  }

  void RunUnary()
  {
    std::vector<std::unique_ptr<Unary>> calls;
    for (int i = 0; i < a_.conns; ++i) {
      calls.push_back(std::make_unique<Unary>());
      SendUnary(calls.back().get());
    }
    void* tag;
    bool ok;
    while (idle_ < a_.conns && Next(&tag, &ok)) {
      auto* u = reinterpret_cast<Unary*>(
          reinterpret_cast<uintptr_t>(tag) & ~uintptr_t{3});
      double latency = (MonoNow() - u->sent_mono) * 1e6;
      double done = u->sent_wall + latency * 1e-6;
      bool good = ok && u->status.ok();
      if (!good) {
        totals.NoteError(
            ok ? std::to_string(u->status.error_code()) + ": " +
                     u->status.error_message()
               : "a call failed");
      }
      if (done >= a_.start && done <= a_.end) {
        if (good) {
          ++totals.ok;
          totals.latency_us.push_back(latency);
        } else {
          ++totals.errors;
        }
      }
      if (WallNow() < a_.end) {
        if (!good) usleep(10000);  // a failing model must not spin the client
        SendUnary(u);
      } else {
        u->idle = true;
        ++idle_;
      }
    }
    for (auto& u : calls) {
      if (u->idle) {
        delete u->ctx;
        u->ctx = nullptr;
      }
    }
  }

  const Args& a_;
  std::string payload_;
  grpc::ByteBuffer request_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<grpc::GenericStub> stub_;
  grpc::CompletionQueue cq_;
  int idle_ = 0;
  double cpu_start_ = -1, cpu_end_ = -1;
};

void
PrintList(const char* name, const std::vector<double>& v)
{
  std::printf("\"%s\":[", name);
  for (size_t i = 0; i < v.size(); ++i) {
    std::printf(i ? ",%.1f" : "%.1f", v[i]);
  }
  std::printf("]");
}

std::string
JsonString(const std::string& s)
{
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (
        static_cast<unsigned char>(c) >= 0x20 &&
        static_cast<unsigned char>(c) < 0x7f) {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace

int
main(int argc, char** argv)
{
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--target") {
      a.target = v;
    } else if (k == "--mode") {
      a.mode = v;
    } else if (k == "--conns") {
      a.conns = std::atoi(v.c_str());
    } else if (k == "--tokens") {
      a.tokens = std::atoi(v.c_str());
    } else if (k == "--start") {
      a.start = std::atof(v.c_str());
    } else if (k == "--end") {
      a.end = std::atof(v.c_str());
    } else if (k == "--payload") {
      a.payload = v;
    } else if (k == "--model") {
      // the model is named inside the payload; accepted for grpc_load.py's
      // command line
    } else {
      std::fprintf(stderr, "grpc_load: unknown flag %s\n", k.c_str());
      return 2;
    }
  }
  if (a.target.empty() || a.payload.empty() || a.conns <= 0 || a.tokens <= 0 ||
      a.end <= a.start || (a.mode != "unary" && a.mode != "stream")) {
    std::fprintf(
        stderr,
        "usage: grpc_load --target HOST:PORT --mode unary|stream --conns N "
        "--tokens T --start S --end E --payload FILE\n");
    return 2;
  }
  std::ifstream f(a.payload, std::ios::binary);
  std::stringstream bytes;
  bytes << f.rdbuf();
  if (!f) {
    std::fprintf(stderr, "grpc_load: cannot read %s\n", a.payload.c_str());
    return 2;
  }
  Runner runner(a, bytes.str());
  runner.Run();
  const Totals& t = runner.totals;
  std::printf(
      "{\"ok\":%ld,\"errors\":%ld,\"tokens\":%ld,\"client_cpu_s\":%.6f,", t.ok,
      t.errors, t.tokens, runner.cpu_s);
  if (runner.timed_out) std::printf("\"timed_out\":true,");
  if (!t.error.empty())
    std::printf("\"error\":%s,", JsonString(t.error).c_str());
  PrintList("latency_us", t.latency_us);
  std::printf(",");
  PrintList("ttft_us", t.ttft_us);
  std::printf(",");
  PrintList("itl_us", t.itl_us);
  std::printf(",\"window_s\":%.6f}\n", a.end - a.start);
  std::fflush(stdout);
  // Calls still open (streams past the window) would make an orderly
  // shutdown wait for the server: the measurement is done.
  _exit(0);
}
