// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// Unit tests of the pieces that need no Triton: JSON, arena allocator,
// peer arena bounds, codec round trips with arena references, the socket
// end's receive, the LOG rate limit, the machine's memory, the front-end
// pacer.

#include <fcntl.h>
#include <linux/sockios.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "check.h"
#include "instance/frontend_pacer.h"
#include "ipc/arena.h"
#include "ipc/channel.h"
#include "ipc/fd_closer.h"
#include "model/machine_memory.h"
#include "process/stub_memory.h"
#include "protocol/protocol.h"
#include "util/json.h"
#include "util/log_limiter.h"

using tritonpy::Allocation;
using tritonpy::ArenaAllocator;
using tritonpy::FrontEndPacer;
using tritonpy::PeerArenas;
using tritonpy::Status;
using tritonpy::json::Value;
namespace tp = tritonpy::proto;

namespace {

using tritonpy_test::failures;

void
TestJson()
{
  namespace json = tritonpy::json;
  Value v;
  CHECK(
      json::Parse(
          R"({"a":1,"b":[true,false,null],"c":"x\"\u00e9\n","d":-2.5,)"
          R"("e":18446744073709551615,"f":{}})",
          &v)
          .ok());
  CHECK(json::GetInt(v, "a") == 1);
  CHECK(json::Find(v, "b")->size() == 3);
  CHECK(json::GetString(v, "c") == "x\"\xc3\xa9\n");
  CHECK(json::Find(v, "d")->get<double>() == -2.5);
  CHECK(json::Find(v, "e")->get<uint64_t>() == 18446744073709551615ull);
  // Absent and mistyped members read as the default.
  CHECK(json::GetInt(v, "c", 7) == 7 && json::Find(v, "zz") == nullptr);
  CHECK(json::GetString(v, "a", "d") == "d" && !json::GetBool(v, "a"));
  Value again;
  CHECK(json::Parse(json::Write(v), &again).ok());
  CHECK(again == v);
  // Keys are written in insertion order, doubles in their shortest form.
  Value o = Value::object();
  o["z"] = 2.0;
  o["a"] = 0.1;
  o["m"] = -3;
  o["s"] = "\x01\xff";
  CHECK(
      json::Write(o) ==
      "{\"z\":2.0,\"a\":0.1,\"m\":-3,\"s\":\"\\u0001\xef\xbf\xbd\"}");
  CHECK(json::FormatNumber(1.0) == "1" && json::FormatNumber(0.5) == "0.5");
  const char* bad[] = {"",        "{",   "[1,]",  "{\"a\" 1}",   "tru",
                       "\"\\x\"", "01x", "{} {}", "\"\\ud800\"", "-"};
  for (const char* b : bad) {
    Value x;
    tritonpy::Status s = json::Parse(b, &x);
    CHECK(!s.ok() && s.message().rfind("invalid JSON: ", 0) == 0);
  }
  std::string deep(1000, '[');
  Value x;
  CHECK(json::Parse(deep, &x).message() == "invalid JSON: nesting too deep");
  std::string ok_deep = std::string(256, '[') + std::string(256, ']');
  CHECK(json::Parse(ok_deep, &x).ok());
}

void
TestAllocator()
{
  ArenaAllocator alloc(1 << 20);
  Allocation a, b, c;
  CHECK(alloc.Allocate(100, &a).ok());
  CHECK(alloc.Allocate(100, &b).ok());
  CHECK(a.offset % 64 == 0 && b.offset % 64 == 0 && a.offset != b.offset);
  CHECK(alloc.arena_count() == 1);
  memset(a.ptr, 1, 100);
  // Too big for the first arena: a second one of 2x the request.
  CHECK(alloc.Allocate(3 << 20, &c).ok());
  CHECK(alloc.arena_count() == 2 && c.arena_id != a.arena_id);
  CHECK(alloc.Unannounced().size() == 2);
  alloc.MarkAnnounced(a.arena_id);
  CHECK(alloc.Unannounced().size() == 1);
  alloc.Free(a.arena_id, a.offset);
  alloc.Free(b.arena_id, b.offset);
  alloc.Free(c.arena_id, c.offset);
  CHECK(alloc.allocated_bytes() == 0);
  // Coalesced: the whole first arena is one run again.
  Allocation whole;
  CHECK(alloc.Allocate(1 << 20, &whole).ok());
  CHECK(whole.arena_id == a.arena_id && whole.offset == 0);
  alloc.MarkAllUnannounced();
  CHECK(alloc.Unannounced().size() == 2);
}

// Under a room (what a stub with an address-space limit can map), no arena
// is larger than the room left: a new one shrinks to what fits, down to
// the pages needed; past that an allocation fails saying why, and one
// larger than the whole room is refused as such. Two allocators (batch
// and BLS arenas) share the room, and one gives its arenas' bytes back
// when it goes.
void
TestAllocatorRoom()
{
  using tritonpy::ArenaRoom;
  const uint64_t kib = 1024;
  auto room = std::make_shared<ArenaRoom>(1024 * kib, "test room");
  auto batch = std::make_unique<ArenaAllocator>(256 * kib, room);
  Allocation a, b, c;
  CHECK(batch->Allocate(100 * kib, &a).ok());
  CHECK(room->used() == 256 * kib);
  // 2 x 600 KiB would pass the room: the arena is what is left, 768 KiB.
  CHECK(batch->Allocate(600 * kib, &b).ok());
  CHECK(batch->arena_count() == 2 && room->used() == 1024 * kib);
  CHECK(batch->Unannounced().size() == 2);
  CHECK(batch->Unannounced()[1]->size() == 768 * kib);
  // Room in the arenas made: no new arena needed.
  CHECK(batch->Allocate(100 * kib, &c).ok());
  Allocation d;
  Status s = batch->Allocate(200 * kib, &d);
  CHECK(!s.ok() && s.code() == TRITONSERVER_ERROR_UNAVAILABLE);
  CHECK(
      s.message().find(
          "hold 1048576 bytes of the 1048576 it can map "
          "(test room), and none has that much free") != std::string::npos);
  s = batch->Allocate(2048 * kib, &d);
  CHECK(!s.ok() && s.code() == TRITONSERVER_ERROR_INVALID_ARG);
  CHECK(
      s.message().find(
          "2097152 bytes are more than the stub can map: "
          "the backend's arenas shared with it may take "
          "1048576 bytes (test room)") != std::string::npos);
  // The BLS allocator finds the room taken, until the batch one goes.
  ArenaAllocator bls(64 * kib, room);
  CHECK(!bls.Allocate(10, &d).ok());
  batch.reset();
  CHECK(room->used() == 0);
  CHECK(bls.Allocate(10, &d).ok() && room->used() == 64 * kib);
}

void
TestPeerArenas()
{
  std::unique_ptr<tritonpy::MappedArena> arena;
  CHECK(tritonpy::MappedArena::Create(7, 8192, &arena).ok());
  PeerArenas peers;
  CHECK(peers.Add(7, dup(arena->fd()), 8192).ok());
  const uint8_t* p = nullptr;
  CHECK(peers.Resolve(7, 0, 8192, &p).ok());
  CHECK(peers.Resolve(7, 8192, 0, &p).ok());
  CHECK(!peers.Resolve(7, 8192, 1, &p).ok());
  CHECK(!peers.Resolve(7, 1, UINT64_MAX, &p).ok());
  CHECK(!peers.Resolve(7, UINT64_MAX, 2, &p).ok());
  CHECK(!peers.Resolve(8, 0, 1, &p).ok());
  // Announced bigger than the memfd: refused, not a later SIGBUS.
  CHECK(!peers.Add(9, dup(arena->fd()), 1 << 20).ok());
  // The backend's own arenas can neither shrink nor grow, for good.
  CHECK(
      fcntl(arena->fd(), F_GET_SEALS) ==
      (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL));
}

bool
Says(const Status& s, const char* text)
{
  return !s.ok() &&
         s.message().rfind("tritonpy protocol violation: ", 0) == 0 &&
         s.message().find(text) != std::string::npos;
}

// A memfd of `size` bytes, sealed against shrinking when `seal`.
int
Memfd(uint64_t size, bool seal = true)
{
  int fd = memfd_create("unit", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  CHECK(fd >= 0 && ftruncate(fd, static_cast<off_t>(size)) == 0);
  if (seal) CHECK(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) == 0);
  return fd;
}

void
TestPeerArenaChecks()
{
  PeerArenas peers;
  // Only sealed memfds on tmpfs, announced no longer than they are.
  int pipe_fds[2];
  CHECK(pipe(pipe_fds) == 0);
  close(pipe_fds[1]);
  CHECK(Says(peers.Add(1, pipe_fds[0], 4096), "is not a memfd on tmpfs"));
  CHECK(Says(peers.Add(1, Memfd(4096, false), 4096), "(F_SEAL_SHRINK)"));
  CHECK(Says(peers.Add(1, Memfd(4096), 8192), "smaller than its announced"));
  CHECK(Says(peers.Add(1, Memfd(4096), 0), "announced with 0 bytes"));
  CHECK(peers.count() == 0 && peers.mapped_bytes() == 0);
}

void
TestPeerArenaLimits()
{
  tritonpy::StubLimits limits;
  limits.max_arenas = 2;
  limits.max_arena_bytes = 3 * 4096;
  PeerArenas peers(limits);
  CHECK(peers.Add(1, Memfd(4096), 4096).ok());
  CHECK(peers.Add(2, Memfd(4096), 4096).ok());
  CHECK(Says(peers.Add(3, Memfd(4096), 4096), "past stub-max-arenas=2"));
  // A duplicate id replaces its arena: no new mapping, its old bytes freed.
  CHECK(peers.Add(2, Memfd(8192), 8192).ok());
  CHECK(peers.count() == 2 && peers.mapped_bytes() == 3 * 4096);
  CHECK(
      Says(peers.Add(1, Memfd(8192), 8192), "past stub-max-arena-bytes=12288"));
  CHECK(peers.mapped_bytes() == 3 * 4096);
  // A size whose sum with the rest would wrap is refused, not wrapped.
  CHECK(Says(peers.Add(1, Memfd(4096), UINT64_MAX - 4095), "smaller than its"));
  peers.Clear();
  CHECK(peers.count() == 0 && peers.mapped_bytes() == 0);
  CHECK(peers.Add(3, Memfd(4096), 4096).ok());

  // Arenas of processes one stub forked count together (StubUsage): two
  // children share the limits, and what one lets go the other may take.
  auto usage = std::make_shared<tritonpy::StubUsage>();
  auto first = std::make_unique<PeerArenas>(limits, usage);
  PeerArenas second(limits, usage);
  CHECK(first->Add(1, Memfd(4096), 4096).ok());
  CHECK(second.Add(1, Memfd(4096), 4096).ok());
  CHECK(usage->arenas == 2 && usage->arena_bytes == 2 * 4096);
  CHECK(Says(second.Add(2, Memfd(4096), 4096), "past stub-max-arenas=2"));
  CHECK(Says(second.Add(1, Memfd(12288), 12288), "past stub-max-arena-bytes"));
  first.reset();  // gone with its arenas
  CHECK(usage->arenas == 1 && usage->arena_bytes == 4096);
  CHECK(second.Add(2, Memfd(8192), 8192).ok());
  CHECK(usage->arenas == 2 && usage->arena_bytes == 3 * 4096);
}

void
TestCodec()
{
  tp::ResponsesBody rb;
  tp::Response r;
  r.request_index = 3;
  r.response_flags = 1;
  tp::Tensor t;
  t.name = "OUT";
  t.dtype = 11;
  t.dims = {2, 2};
  t.byte_size = 16;
  t.location = tp::kLocationArena;
  t.ref = {5, 1ull << 40};
  r.outputs.push_back(t);
  rb.responses.push_back(r);
  auto frame = tp::MakeFrame(
      tp::FrameType::kResponses, tp::kFlagBatchDone, 99,
      [&](std::vector<uint8_t>* out) { tp::EncodeResponses(rb, out); });
  tp::FrameView f;
  CHECK(tp::DecodeHeader(frame.data(), frame.size(), &f).ok());
  CHECK(f.id == 99 && f.flags == tp::kFlagBatchDone);
  tp::ResponsesBody back;
  CHECK(tp::DecodeResponses(f.body, f.body_len, &back).ok());
  CHECK(
      back.responses.size() == 1 &&
      back.responses[0].outputs[0].ref.offset == (1ull << 40));
  // A body decoded into again (BatchTable reuses one) holds exactly the
  // new frame: nothing of a longer earlier one is left in it.
  tp::ResponsesBody wide = rb;
  wide.responses[0].error_message = "an error that stays behind?";
  wide.responses[0].outputs.push_back(t);
  wide.responses.push_back(wide.responses[0]);
  tp::Response small;
  small.batch_id = 7;
  tp::Tensor inline_t;
  inline_t.name = "X";
  inline_t.dtype = 8;
  inline_t.dims = {1};
  inline_t.byte_size = 4;
  const uint8_t four[4] = {1, 2, 3, 4};
  inline_t.data = four;
  small.outputs.push_back(inline_t);
  tp::ResponsesBody narrow;
  narrow.responses.push_back(small);
  tp::ResponsesBody reused, fresh;
  for (const tp::ResponsesBody* body : {&wide, &narrow}) {
    auto fr = tp::MakeFrame(
        tp::FrameType::kResponses, 0, 1,
        [&](std::vector<uint8_t>* out) { tp::EncodeResponses(*body, out); });
    CHECK(tp::DecodeHeader(fr.data(), fr.size(), &f).ok());
    CHECK(tp::DecodeResponses(f.body, f.body_len, &reused).ok());
    if (body == &narrow) {
      CHECK(tp::DecodeResponses(f.body, f.body_len, &fresh).ok());
    }
  }
  CHECK(reused.responses.size() == 1 && reused.responses[0].batch_id == 7);
  const tp::Response& a = reused.responses[0];
  const tp::Response& b = fresh.responses[0];
  CHECK(a.error_message.empty() && a.outputs.size() == 1);
  CHECK(
      a.outputs[0].name == b.outputs[0].name &&
      a.outputs[0].dims == b.outputs[0].dims &&
      a.outputs[0].location == tp::kLocationInline &&
      a.outputs[0].ref.arena_id == 0 && a.outputs[0].ref.offset == 0 &&
      a.outputs[0].byte_size == 4 && a.outputs[0].data[3] == 4);
  // BATCH_DONE is not allowed on EXECUTE_DONE.
  auto done = tp::MakeFrame(
      tp::FrameType::kExecuteDone, tp::kFlagBatchDone, 1,
      [&](std::vector<uint8_t>* out) { tp::EncodeExecuteDone({1, ""}, out); });
  CHECK(!tp::DecodeHeader(done.data(), done.size(), &f).ok());
  CHECK(tp::DataTypeByteSize(14) == 2 && tp::DataTypeByteSize(13) == 0);
  // No list may hold more than MAX_COUNT items, whatever the body's size.
  uint8_t many[4] = {0x01, 0x00, 0x10, 0x00};  // 2^20 + 1
  tp::ReleaseBody release;
  CHECK(Says(tp::DecodeRelease(many, sizeof(many), &release), "MAX_COUNT"));
  // HELLO must say protocol 1; AUTO_COMPLETE(_DONE) are JSON frames.
  CHECK(tp::CheckHello(R"({"protocol":1,"pid":7})").ok());
  Status hello = tp::CheckHello(R"({"protocol":2})");
  CHECK(!hello.ok() && hello.message().find("protocol 2") != std::string::npos);
  CHECK(!tp::CheckHello(R"({"pid":7})").ok() && !tp::CheckHello("[1]").ok());
  CHECK(!tp::CheckHello("not json").ok());
  CHECK(
      tp::IsJsonFrame(tp::FrameType::kAutoComplete) &&
      tp::IsJsonFrame(tp::FrameType::kAutoCompleteDone));
  CHECK(
      std::string(tp::FrameTypeName(tp::FrameType::kAutoCompleteDone)) ==
      "AUTO_COMPLETE_DONE");
}

// Channel::Receive on a real SOCK_SEQPACKET pair: frames in order, also
// when read without a poll right after one another; the wake eventfd and
// the timeout still end a receive after a frame; EOF when the peer closes.
void
TestChannel()
{
  using tritonpy::Channel;
  int sv[2];
  CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
  int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  CHECK(wake >= 0);
  Channel ch(sv[0]);
  std::vector<uint8_t> buf;
  std::vector<int> fds;
  size_t len = 0;
  Status err;
  CHECK(write(sv[1], "one", 3) == 3 && write(sv[1], "three", 5) == 5);
  CHECK(
      ch.Receive(&buf, &len, &fds, 1000, &err, wake) ==
          Channel::RecvResult::kFrame &&
      len == 3 && memcmp(buf.data(), "one", 3) == 0);
  CHECK(
      ch.Receive(&buf, &len, &fds, 1000, &err, wake) ==
          Channel::RecvResult::kFrame &&
      len == 5 && memcmp(buf.data(), "three", 5) == 0);
  // Nothing waiting after a frame: the receive waits out its timeout.
  auto t0 = std::chrono::steady_clock::now();
  CHECK(
      ch.Receive(&buf, &len, &fds, 50, &err, wake) ==
      Channel::RecvResult::kTimeout);
  CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(45));
  // The wake eventfd ends a receive that follows a frame, and is drained.
  CHECK(write(sv[1], "x", 1) == 1);
  CHECK(
      ch.Receive(&buf, &len, &fds, 1000, &err, wake) ==
      Channel::RecvResult::kFrame);
  uint64_t one = 1;
  CHECK(write(wake, &one, sizeof(one)) == sizeof(one));
  t0 = std::chrono::steady_clock::now();
  CHECK(
      ch.Receive(&buf, &len, &fds, 5000, &err, wake) ==
      Channel::RecvResult::kTimeout);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2));
  uint64_t left = 0;
  CHECK(read(wake, &left, sizeof(left)) < 0);  // drained: EAGAIN
  // A frame and the wake together: the frame first, the wake next.
  CHECK(write(sv[1], "y", 1) == 1);
  CHECK(
      ch.Receive(&buf, &len, &fds, 1000, &err, wake) ==
      Channel::RecvResult::kFrame);
  CHECK(write(sv[1], "z", 1) == 1);
  CHECK(write(wake, &one, sizeof(one)) == sizeof(one));
  CHECK(
      ch.Receive(&buf, &len, &fds, 1000, &err, wake) ==
          Channel::RecvResult::kFrame &&
      len == 1 && buf[0] == 'z');
  CHECK(
      ch.Receive(&buf, &len, &fds, 1000, &err, wake) ==
      Channel::RecvResult::kTimeout);
  // The peer's close reads as EOF, right after a frame too.
  CHECK(write(sv[1], "w", 1) == 1);
  close(sv[1]);
  CHECK(
      ch.Receive(&buf, &len, &fds, 1000, &err, wake) ==
      Channel::RecvResult::kFrame);
  CHECK(
      ch.Receive(&buf, &len, &fds, 1000, &err, wake) ==
      Channel::RecvResult::kEof);
  close(wake);
}

// Sends one message "arena" carrying `fds` on `fd`.
void
SendDescriptors(int fd, const std::vector<int>& fds)
{
  std::vector<char> control(CMSG_SPACE(fds.size() * sizeof(int)));
  struct iovec iov = {const_cast<char*>("arena"), 5};
  struct msghdr msg;
  memset(&msg, 0, sizeof(msg));
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control.data();
  msg.msg_controllen = control.size();
  struct cmsghdr* cm = CMSG_FIRSTHDR(&msg);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(fds.size() * sizeof(int));
  memcpy(CMSG_DATA(cm), fds.data(), fds.size() * sizeof(int));
  CHECK(sendmsg(fd, &msg, 0) == 5);
}

// Whether the pipe whose write end is `w` has lost its reader, waiting
// up to `ms` for it.
bool
ReaderGone(int w, int ms)
{
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  struct pollfd p = {w, POLLOUT, 0};
  do {
    p.revents = 0;
    if (poll(&p, 1, ms == 0 ? 0 : 100) < 0 && errno != EINTR) return false;
  } while ((p.revents & POLLERR) == 0 &&
           std::chrono::steady_clock::now() < deadline);
  return (p.revents & POLLERR) != 0;
}

// Descriptors passed with a frame. Memfds are kept, more than the 8 the
// receive buffer once held arriving whole (no MSG_CTRUNC, so the kernel
// closes none on the reader's thread). A message with any other kind is
// a protocol violation: its pipes and eventfds are closed before Receive
// returns, its socket (whose close may block) goes to the closer alone,
// and the peer is read no further: a message sent after it stays unread
// until the channel is destroyed, when the closer closes the socket with
// it.
void
TestChannelPassedDescriptors()
{
  using tritonpy::Channel;
  using tritonpy::CloserState;
  using tritonpy::IsTmpfsFile;
  using tritonpy::IsUnixSeqpacket;
  int sv[2];
  CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
  auto ch = std::make_unique<Channel>(sv[0]);
  std::vector<uint8_t> buf;
  std::vector<int> fds;
  size_t len = 0;
  Status err;

  std::vector<int> memfds;
  for (int i = 0; i < 20; ++i) {
    memfds.push_back(memfd_create("unit", MFD_CLOEXEC));
  }
  SendDescriptors(sv[1], memfds);
  for (int fd : memfds) close(fd);
  CHECK(
      ch->Receive(&buf, &len, &fds, 1000, &err) == Channel::RecvResult::kFrame);
  CHECK(fds.size() == 20);
  for (int fd : fds) {
    CHECK(fd >= 0);
    if (fd >= 0) close(fd);
  }

  // A unix SEQPACKET socket (BLS_CHANNEL) passes too, and is told apart.
  int seq[2];
  CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, seq) == 0);
  SendDescriptors(sv[1], {seq[0]});
  close(seq[0]);
  CHECK(
      ch->Receive(&buf, &len, &fds, 1000, &err) == Channel::RecvResult::kFrame);
  CHECK(fds.size() == 1);
  CHECK(!fds.empty() && IsUnixSeqpacket(fds[0]) && !IsTmpfsFile(fds[0]));
  for (int fd : fds) close(fd);
  fds.clear();
  const int plain = memfd_create("unit", MFD_CLOEXEC);
  CHECK(!IsUnixSeqpacket(plain) && IsTmpfsFile(plain));
  close(plain);
  close(seq[1]);

  const long handed = CloserState().handed;
  std::vector<int> passed;
  passed.push_back(memfd_create("unit", MFD_CLOEXEC));
  std::vector<int> writers;
  for (int i = 0; i < 20; ++i) {
    int p[2];
    CHECK(pipe2(p, O_CLOEXEC) == 0);
    passed.push_back(p[0]);
    writers.push_back(p[1]);
  }
  passed.push_back(eventfd(0, EFD_CLOEXEC));
  int sp[2];  // a socket: its close may block, the closer takes it
  CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) == 0);
  passed.push_back(sp[0]);
  SendDescriptors(sv[1], passed);
  for (int fd : passed) close(fd);  // the channel's copies are the last
  CHECK(
      ch->Receive(&buf, &len, &fds, 1000, &err) == Channel::RecvResult::kError);
  CHECK(fds.empty());
  CHECK(Says(err, "is not a memfd on tmpfs (nor a unix SEQPACKET socket"));
  CHECK(Says(err, "nothing more it sends is read"));
  // Closed at once, on this thread: their writers see no reader now.
  for (int w : writers) CHECK(ReaderGone(w, 0));
  CHECK(CloserState().handed == handed + 1);
  char c;
  struct pollfd p = {sp[1], POLLIN, 0};
  CHECK(poll(&p, 1, 30000) == 1 && read(sp[1], &c, 1) == 0);  // closed

  // Read no further: the next message stays in the socket.
  int later[2];
  CHECK(pipe2(later, O_CLOEXEC) == 0);
  SendDescriptors(sv[1], {later[0]});
  close(later[0]);
  const auto start = std::chrono::steady_clock::now();
  CHECK(
      ch->Receive(&buf, &len, &fds, 1000, &err) == Channel::RecvResult::kError);
  CHECK(
      std::chrono::steady_clock::now() - start <
      std::chrono::milliseconds(500));
  CHECK(!ReaderGone(later[1], 0));
  ch.reset();  // its socket, and the unread message, go to the closer
  CHECK(CloserState().handed == handed + 2);
  CHECK(ReaderGone(later[1], 30000));
  for (int w : writers) close(w);
  close(later[1]);
  close(sp[1]);
  close(sv[1]);
}

// Channel::Send never blocks: frames the socket cannot take wait in the
// queue, in order, with their descriptors, and Receive flushes them as the
// peer reads. A peer that never reads is given up on once the queue passes
// the bound: Send fails naming the key, the socket is shut down, and the
// receiver reads EOF.
void
TestChannelSendQueue()
{
  using tritonpy::Channel;
  int sv[2];
  CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
  const uint64_t bound = 4 * tp::kMaxFrame;
  Channel ch(sv[0], bound);
  std::vector<uint8_t> big(64 << 10, 7);
  // Fill the socket (about 2 MiB of buffer) until frames queue.
  int sent = 0;
  while (ch.queued_bytes() == 0 && sent < 200) {
    big[0] = static_cast<uint8_t>(sent++);
    CHECK(ch.Send(big).ok());
  }
  CHECK(ch.queued_bytes() == big.size());
  int memfd = memfd_create("unit", MFD_CLOEXEC);
  std::vector<uint8_t> tagged(16, 0xAB);
  Status s;
  CHECK(ch.Send(tagged, memfd).ok());  // queued: the socket is full
  close(memfd);                        // the queue holds its own copy
  // The peer reads everything: Receive on the sending side (the reader's
  // call) flushes the queue as room appears.
  Channel peer(sv[1]);
  std::vector<uint8_t> buf;
  std::vector<uint8_t> pbuf;
  std::vector<int> fds;
  size_t len = 0;
  Status err;
  int got = 0;
  bool tagged_seen = false;
  uint8_t expect = 0;
  bool in_order = true;
  while (!tagged_seen) {
    if (peer.Receive(&pbuf, &len, &fds, 0, &err) !=
        Channel::RecvResult::kFrame) {
      // Empty: let the channel flush more.
      CHECK(
          ch.Receive(&buf, &len, &fds, 50, &err) ==
          Channel::RecvResult::kTimeout);
      continue;
    }
    if (len == tagged.size()) {
      tagged_seen = pbuf[0] == 0xAB;
      CHECK(fds.size() == 1);
      for (int fd : fds) close(fd);
    } else {
      in_order = in_order && pbuf[0] == expect;
      ++expect;
      ++got;
    }
  }
  CHECK(in_order && got == sent && ch.queued_bytes() == 0);
  // Now a peer that never reads: the queue passes the bound.
  bool failed = false;
  for (int i = 0; i < 1000 && !failed; ++i) {
    s = ch.Send(big);
    failed = !s.ok();
  }
  CHECK(failed);
  CHECK(s.message().find("stub-send-queue-bytes") != std::string::npos);
  CHECK(ch.send_failure().find("stopped reading") != std::string::npos);
  CHECK(!ch.Send(tagged).ok());  // given up on: no more queueing
  // The receiving side sees EOF (after draining what reached it).
  Channel::RecvResult r;
  do {
    r = ch.Receive(&buf, &len, &fds, 1000, &err);
  } while (r == Channel::RecvResult::kFrame);
  CHECK(r == Channel::RecvResult::kEof);
}

// A frame larger than MAX_FRAME is refused, not sent (the peer would get
// it cut short), with or without a descriptor; the channel stays usable
// and the largest frame allowed still goes through whole.
void
TestChannelFrameLimit()
{
  using tritonpy::Channel;
  int sv[2];
  CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0);
  Channel ch(sv[0]);
  Channel peer(sv[1]);
  std::vector<uint8_t> too_big(tp::kMaxFrame + 1, 1);
  Status s = ch.Send(too_big);
  CHECK(!s.ok() && s.code() == TRITONSERVER_ERROR_INVALID_ARG);
  CHECK(
      s.message().find("131073 bytes is larger than MAX_FRAME") !=
      std::string::npos);
  int fd = eventfd(0, EFD_CLOEXEC);
  CHECK(!ch.Send(too_big, fd).ok());
  close(fd);
  CHECK(ch.queued_bytes() == 0 && ch.send_failure().empty());
  std::vector<uint8_t> largest(tp::kMaxFrame, 2);
  CHECK(ch.Send(largest).ok());
  std::vector<uint8_t> buf;
  std::vector<int> fds;
  size_t len = 0;
  Status err;
  // The first message the peer gets is the largest frame, whole.
  CHECK(
      peer.Receive(&buf, &len, &fds, 1000, &err) ==
          Channel::RecvResult::kFrame &&
      len == tp::kMaxFrame && buf[0] == 2 && fds.empty());
  CHECK(
      peer.Receive(&buf, &len, &fds, 0, &err) == Channel::RecvResult::kTimeout);
}

// ValidUtf8 against Python's bytes.decode("utf-8", "replace") (the
// expected strings are its output), and ClipText's cut and marker.
void
TestText()
{
  const std::string r = "\xef\xbf\xbd";  // U+FFFD
  const std::pair<std::string, std::string> cases[] = {
      {"ab\xff", "ab" + r},
      {"\xe0\x80\x80", r + r + r},          // overlong
      {"\xed\xa0\x80", r + r + r},          // a surrogate
      {"\xf0\x9f\x98", r},                  // cut short: one
      {"\xf4\x90\x80\x80", r + r + r + r},  // past U+10FFFF
      {"\xc3", r},
      {"\xe2\x82", r},
      {"ok\xc3\xa9\xe2\x82\xacx", "ok\xc3\xa9\xe2\x82\xacx"},
      {"\xf0\x9f\x98\x80\x80", "\xf0\x9f\x98\x80" + r},
  };
  for (const auto& c : cases) {
    CHECK(tp::ValidUtf8(c.first) == c.second);
    CHECK(tp::IsValidUtf8(c.first) == (c.first == c.second));
  }
  CHECK(tp::ClipText("short", 100) == "short");
  std::string e;
  for (int i = 0; i < 20000; ++i) e += "\xc3\xa9";
  const std::string cut = tp::ClipText(e, tp::kMaxBackendText);
  const std::string marker = "... [truncated, 40000 bytes]";
  CHECK(cut.size() == tp::kMaxBackendText);
  CHECK(cut.compare(cut.size() - marker.size(), marker.size(), marker) == 0);
  CHECK(tp::IsValidUtf8(cut));
  CHECK(tp::ClipText(cut, tp::kMaxBackendText) == cut);  // cut once only
  // An odd limit: the cut backs off to a character's first byte.
  const std::string odd = tp::ClipText(e, 101);
  CHECK(odd.size() == 100 && tp::IsValidUtf8(odd));
  // The backend's error texts for the stub are cut as they are encoded,
  // so that every such frame stays inline.
  tp::BlsResponseBody bls;
  bls.response_flags = tp::kRespFinal;
  bls.has_error = 1;
  bls.error_message = std::string(300000, 'x') + "\xff";
  auto frame = tp::MakeFrame(
      tp::FrameType::kBlsResponse, 0, 1,
      [&](std::vector<uint8_t>* out) { tp::EncodeBlsResponse(bls, out); });
  CHECK(frame.size() <= tp::kMaxFrame);
  tp::FrameView f;
  tp::BlsResponseBody back;
  CHECK(tp::DecodeHeader(frame.data(), frame.size(), &f).ok());
  CHECK(tp::DecodeBlsResponse(f.body, f.body_len, &back).ok());
  CHECK(back.error_message.size() == tp::kMaxBackendText);
  CHECK(
      back.error_message.find("... [truncated, 300001 bytes]") !=
      std::string::npos);
  tp::SendErrorBody send_error;
  send_error.message = "id \xff";
  frame = tp::MakeFrame(
      tp::FrameType::kSendError, 0, 0,
      [&](std::vector<uint8_t>* out) { tp::EncodeSendError(send_error, out); });
  tp::SendErrorBody send_back;
  CHECK(tp::DecodeHeader(frame.data(), frame.size(), &f).ok());
  CHECK(tp::DecodeSendError(f.body, f.body_len, &send_back).ok());
  CHECK(send_back.message == "id " + r);
}

void
TestTokenBucket()
{
  using std::chrono::milliseconds;
  using tritonpy::TokenBucket;
  const TokenBucket::Clock::time_point t0{};
  TokenBucket b(1000, 4000, t0);  // 1000 per second, 4000 at most
  // Starts full; a take that does not fit takes nothing.
  CHECK(b.Take(3000, t0));
  CHECK(!b.Take(1001, t0));
  CHECK(b.Take(1000, t0));
  CHECK(!b.Take(1, t0));
  // Refills at the rate, fractions carried over.
  CHECK(!b.Take(500, t0 + milliseconds(499)));
  CHECK(b.Take(500, t0 + milliseconds(500)));
  for (int i = 1; i <= 10; ++i) {
    CHECK(b.Take(1, t0 + milliseconds(500) + milliseconds(i)));
  }
  // Never past the burst, however long it waited.
  const auto later = t0 + std::chrono::hours(24);
  CHECK(b.Take(4000, later));
  CHECK(!b.Take(1, later));
  // A clock that goes backwards refills nothing.
  CHECK(!b.Take(1, t0));
  // More than the burst never fits.
  TokenBucket small(10, 100, t0);
  CHECK(!small.Take(101, later));
  CHECK(small.Take(100, later));
  // Huge rates and waits neither wrap nor overflow.
  TokenBucket fast(UINT64_C(1) << 40, UINT64_C(1) << 42, t0);
  CHECK(fast.Take(UINT64_C(1) << 42, t0));
  CHECK(fast.Take(UINT64_C(1) << 42, t0 + std::chrono::hours(1000000)));
}

void
TestLogLimiter()
{
  using std::chrono::milliseconds;
  using tritonpy::LogLimiter;
  const LogLimiter::Clock::time_point t0{};
  // 1000 bytes per second: a burst of 4000; each line costs 64 more.
  LogLimiter limiter(1000, t0);
  std::string report;
  CHECK(limiter.Admit(1936, t0, &report) && report.empty());
  CHECK(limiter.Admit(1936, t0, &report) && report.empty());
  CHECK(limiter.Flush().empty());
  // The bucket is empty: the first drop is reported at once.
  CHECK(!limiter.Admit(100, t0, &report));
  CHECK(
      report ==
      "dropped 1 log line (0.0 MB) over stub-log-bytes-per-second=1000");
  // Then at most once per second, with what was dropped since.
  report.clear();
  for (int i = 0; i < 5; ++i) {
    CHECK(!limiter.Admit(300000, t0 + milliseconds(i), &report));
  }
  CHECK(report.empty());
  // 0.1 s refills 100 bytes: a line of 35 passes, and no report is due.
  CHECK(limiter.Admit(35, t0 + milliseconds(100), &report) && report.empty());
  // A second after the last report, the next line brings the report.
  CHECK(!limiter.Admit(5000, t0 + milliseconds(1000), &report));
  CHECK(
      report ==
      "dropped 6 log lines (1.5 MB) over stub-log-bytes-per-second=1000");
  // What is left goes out when the stub goes.
  report.clear();
  CHECK(
      !limiter.Admit(5000, t0 + milliseconds(1001), &report) && report.empty());
  CHECK(
      limiter.Flush() ==
      "dropped 1 log line (0.0 MB) over stub-log-bytes-per-second=1000");
  CHECK(limiter.Flush().empty());
}

void
TestMachineMemory()
{
  namespace fs = std::filesystem;
  char tmpl[] = "/tmp/tritonpy-memory-XXXXXX";
  CHECK(mkdtemp(tmpl) != nullptr);
  const std::string root = tmpl;
  auto put = [&](const std::string& path, const std::string& text) {
    fs::create_directories(fs::path(root + path).parent_path());
    std::ofstream(root + path) << text;
  };
  const uint64_t gb = 1000000000;
  // No cgroup file at all: the physical memory.
  tritonpy::MachineMemory m = tritonpy::ReadMachineMemory(root, 8 * gb);
  CHECK(m.physical == 8 * gb && m.cgroup == 0 && m.usable() == 8 * gb);
  // cgroup v2: the lowest memory.max from the cgroup up ("max": none).
  put("/proc/self/cgroup", "0::/a/b\n");
  put("/sys/fs/cgroup/a/b/memory.max", "max\n");
  put("/sys/fs/cgroup/a/memory.max", "3000000000\n");
  put("/sys/fs/cgroup/memory.max", "5000000000\n");
  m = tritonpy::ReadMachineMemory(root, 8 * gb);
  CHECK(m.cgroup == 3 * gb && m.usable() == 3 * gb);
  CHECK(
      m.Describe() ==
      "physical memory 8000000000 bytes, cgroup limit 3000000000 bytes");
  // cgroup v1 beside it (a hybrid system): the lower of both; v1's "no
  // limit" is its largest page-aligned int64.
  put("/proc/self/cgroup", "0::/a/b\n5:cpu,memory:/x/y\n");
  put("/sys/fs/cgroup/memory/x/y/memory.limit_in_bytes", "2000000000\n");
  put("/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
  m = tritonpy::ReadMachineMemory(root, 8 * gb);
  CHECK(m.cgroup == 2 * gb && m.usable() == 2 * gb);
  // A limit above the physical memory: the physical memory.
  m = tritonpy::ReadMachineMemory(root, gb);
  CHECK(m.usable() == gb);
  // This machine: something, never more than its physical memory.
  m = tritonpy::ReadMachineMemory();
  CHECK(m.physical > 0 && m.usable() > 0 && m.usable() <= m.physical);
  fs::remove_all(root);
}

void
TestStubMemory()
{
  namespace fs = std::filesystem;
  // smaps_rollup: only the exact keys count (not Pss_Anon, SwapPss...).
  tritonpy::ProcessMemory m;
  CHECK(
      tritonpy::ParseSmaps(
          "55d0a0000000-7ffc00000000 ---p 00000000 00:00 0 [rollup]\n"
          "Rss:               20480 kB\nPss:               10240 kB\n"
          "Pss_Anon:           4096 kB\nPss_File:           6144 kB\n"
          "Shared_Clean:      10240 kB\nPrivate_Clean:      1024 kB\n"
          "Private_Dirty:      4096 kB\nSwapPss:             512 kB\n",
          &m));
  CHECK(m.pss_bytes == 10240u << 10 && m.private_bytes == 5120u << 10);
  CHECK(m.rss_bytes == 20480u << 10);
  // A process that exited shows an empty file: no reading.
  CHECK(!tritonpy::ParseSmaps("", &m));
  CHECK(!tritonpy::ParseSmaps("Rss: 4 kB\n", &m));

  // No smaps_rollup (kernels before 4.14): the mappings of smaps, summed.
  char tmpl[] = "/tmp/tritonpy-smaps-XXXXXX";
  CHECK(mkdtemp(tmpl) != nullptr);
  const std::string root = tmpl;
  fs::create_directories(root + "/42");
  std::ofstream(root + "/42/smaps")
      << "00400000-00452000 r-xp 00000000 08:02 173521 /usr/bin/x:y\n"
         "Rss:                 8 kB\nPss:                 6 kB\n"
         "Private_Clean:       4 kB\nPrivate_Dirty:       0 kB\n"
         "7f0000000000-7f0000100000 rw-p 00000000 00:00 0\n"
         "Rss:                12 kB\nPss:                12 kB\n"
         "Private_Clean:       0 kB\nPrivate_Dirty:      12 kB\n";
  tritonpy::Status s = tritonpy::ReadProcessMemory(42, &m, root);
  CHECK(s.ok() && m.pss_bytes == 18u << 10 && m.private_bytes == 16u << 10);
  // Neither file: an error naming the rollup.
  s = tritonpy::ReadProcessMemory(43, &m, root);
  CHECK(!s.ok() && s.message().find("/43/smaps_rollup") != std::string::npos);
  fs::remove_all(root);

  // This process: private pages at least what it just wrote, and never
  // more private memory than its PSS.
  tritonpy::ProcessMemory before;
  CHECK(tritonpy::ReadProcessMemory(getpid(), &before).ok());
  std::vector<char> block(64u << 20, 1);
  tritonpy::ProcessMemory after;
  CHECK(tritonpy::ReadProcessMemory(getpid(), &after).ok());
  CHECK(block[12345] == 1);
  CHECK(after.pss_bytes > 0 && after.private_bytes <= after.pss_bytes);
  CHECK(after.private_bytes >= before.private_bytes + (60u << 20));
}

}  // namespace

// Fills the datagram socket `fd` (non-blocking) with small commands.
void
FillDatagrams(int fd)
{
  const char command[32] = {};
  while (send(fd, command, sizeof(command), 0) > 0) {}
  CHECK(errno == EAGAIN || errno == EWOULDBLOCK);
}

void
TestFrontEndPacer()
{
  FrontEndPacer& pacer = FrontEndPacer::Get();
  // The scan finds both ends of stream and datagram socket pairs of this
  // process, and not a SEQPACKET pair (tritonpy's own channels).
  int dgram[2], stream[2], seqpacket[2];
  CHECK(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0, dgram) == 0);
  CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, stream) == 0);
  CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, seqpacket) == 0);
  pacer.BeforeSend();  // the first send measures
  CHECK(pacer.counters().queues == 4 && pacer.counters().refills == 1);
  // A measured budget: the next sends cost no syscall, no refill.
  for (int i = 0; i < 50; ++i) pacer.BeforeSend();
  CHECK(pacer.counters().refills == 1);
  // An end that an epoll set waits to read (a front-end thread's) is
  // left out at the next scan; its peer, where commands queue, is kept.
  const int ep = epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, stream[1], &ev) == 0);
  pacer.WatchForTest({});  // scan again
  pacer.BeforeSend();
  CHECK(pacer.counters().queues == 3 && pacer.counters().refills == 2);
  close(ep);

  // Two full queues nobody drains (their HTTP threads stopped): the
  // sender waits for them together, kStallMs, once, then skips both.
  pacer.WatchForTest({dgram[0], stream[0]});
  FillDatagrams(dgram[0]);
  FillDatagrams(stream[0]);
  const auto start = std::chrono::steady_clock::now();
  pacer.BeforeSend();
  const auto waited = std::chrono::steady_clock::now() - start;
  CHECK(waited >= std::chrono::milliseconds(FrontEndPacer::kStallMs));
  CHECK(pacer.counters().stalls == 2 && pacer.counters().waits == 1);
  // Its next measurement skips it while it stays as it was: no wait.
  const uint64_t refills = pacer.counters().refills;
  for (int i = 0; i < 100000 && pacer.counters().refills == refills; ++i) {
    pacer.BeforeSend();
  }
  CHECK(pacer.counters().refills == refills + 1);
  CHECK(pacer.counters().stalls == 2 && pacer.counters().waits == 1);

  // A full queue its thread drains: the sender goes on once it is down to
  // a quarter, without taking it for stalled.
  char buf[64];
  while (recv(dgram[1], buf, sizeof(buf), 0) > 0) {}
  FillDatagrams(dgram[0]);
  pacer.WatchForTest({dgram[0]});
  int sndbuf = 0;
  socklen_t len = sizeof(sndbuf);
  getsockopt(dgram[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, &len);
  auto queued = [&] {
    int q = 0;
    CHECK(ioctl(dgram[0], SIOCOUTQ, &q) == 0);
    return q;
  };
  std::thread drainer([&] {  // down to a tenth, then it stops
    while (queued() * 10 > sndbuf) (void)!recv(dgram[1], buf, sizeof(buf), 0);
  });
  pacer.BeforeSend();
  CHECK(queued() * 4 <= sndbuf);
  CHECK(pacer.counters().stalls == 2 && pacer.counters().waits == 2);
  drainer.join();
  pacer.WatchForTest({});
  for (int fd :
       {dgram[0], dgram[1], stream[0], stream[1], seqpacket[0], seqpacket[1]}) {
    close(fd);
  }
}

// The pacer caps a send's wait however slowly a queue drains: a queue
// its thread reads one command at a time, never stalling and never down
// to a quarter within the cap, holds a send kMaxWaitMs, not until it is.
void
TestFrontEndPacerWaitCapped()
{
  FrontEndPacer& pacer = FrontEndPacer::Get();
  int dgram[2];
  CHECK(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0, dgram) == 0);
  FillDatagrams(dgram[0]);
  pacer.WatchForTest({dgram[0]});
  std::atomic<bool> stop{false};
  std::thread drip([&] {  // a command every 40 ms: a quarter takes seconds
    char buf[64];
    while (!stop.load()) {
      (void)!recv(dgram[1], buf, sizeof(buf), 0);
      std::this_thread::sleep_for(std::chrono::milliseconds(40));
    }
  });
  const auto start = std::chrono::steady_clock::now();
  pacer.BeforeSend();
  const auto waited = std::chrono::steady_clock::now() - start;
  stop.store(true);
  drip.join();
  CHECK(waited < std::chrono::milliseconds(FrontEndPacer::kMaxWaitMs + 1500));
  CHECK(waited >= std::chrono::milliseconds(FrontEndPacer::kMaxWaitMs / 2));
  pacer.WatchForTest({});
  close(dgram[0]);
  close(dgram[1]);
}

// A sender waiting for a queue holds no lock: the pacer answers others
// (here its counters, which take its lock) while the wait goes on.
void
TestFrontEndPacerWaitsUnlocked()
{
  FrontEndPacer& pacer = FrontEndPacer::Get();
  int dgram[2];
  CHECK(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0, dgram) == 0);
  FillDatagrams(dgram[0]);  // nobody drains it: the wait lasts kStallMs
  pacer.WatchForTest({dgram[0]});
  const uint64_t refills = pacer.counters().refills;
  using Clock = std::chrono::steady_clock;
  Clock::time_point done;
  std::thread sender([&] {
    pacer.BeforeSend();
    done = Clock::now();
  });
  Clock::time_point seen;
  while (true) {
    const uint64_t now = pacer.counters().refills;
    seen = Clock::now();
    if (now != refills) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  sender.join();
  // Seen while the sender was still waiting, well before it returned.
  CHECK(seen + std::chrono::milliseconds(300) < done);
  pacer.WatchForTest({});
  close(dgram[0]);
  close(dgram[1]);
}

// A queue's descriptor closed and its number reused by another socket is
// not measured as the queue: the pacer sees another (st_dev, st_ino),
// drops it, and does not wait for the stranger however full it is.
void
TestFrontEndPacerReusedDescriptor()
{
  FrontEndPacer& pacer = FrontEndPacer::Get();
  int dgram[2], other[2];
  CHECK(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0, dgram) == 0);
  CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0, other) == 0);
  pacer.WatchForTest({dgram[0]});
  pacer.BeforeSend();  // measured: an empty queue
  CHECK(pacer.counters().queues == 1);
  FillDatagrams(other[0]);
  CHECK(dup2(other[0], dgram[0]) == dgram[0]);  // the number, reused
  const uint64_t refills = pacer.counters().refills;
  const uint64_t waits = pacer.counters().waits;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 100000 && pacer.counters().refills == refills; ++i) {
    pacer.BeforeSend();
  }
  const auto took = std::chrono::steady_clock::now() - start;
  CHECK(pacer.counters().refills == refills + 1);
  CHECK(pacer.counters().waits == waits);
  CHECK(pacer.counters().queues == 0);
  CHECK(took < std::chrono::milliseconds(FrontEndPacer::kStallMs / 2));
  pacer.WatchForTest({});
  for (int fd : {dgram[0], dgram[1], other[0], other[1]}) close(fd);
}

int
main()
{
  TestFrontEndPacer();  // first: it scans this process's descriptors
  TestFrontEndPacerWaitCapped();
  TestFrontEndPacerWaitsUnlocked();
  TestFrontEndPacerReusedDescriptor();
  TestText();
  TestJson();
  TestAllocator();
  TestAllocatorRoom();
  TestPeerArenas();
  TestPeerArenaChecks();
  TestPeerArenaLimits();
  TestCodec();
  TestChannel();
  TestChannelSendQueue();
  TestChannelFrameLimit();
  TestTokenBucket();
  TestLogLimiter();
  TestMachineMemory();
  TestStubMemory();
  TestChannelPassedDescriptors();
  printf("%s: %d failure(s)\n", failures == 0 ? "ok" : "FAIL", failures);
  return failures == 0 ? 0 : 1;
}
