// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "instance/frontend_pacer.h"

#include <dirent.h>
#include <linux/sockios.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace tritonpy {

namespace {

using Clock = std::chrono::steady_clock;

// What a send buffer holds of one small command when it cannot be
// measured (an skb and its data, about 1 KiB on x86-64 kernels).
constexpr int64_t kFallbackCommandCost = 1024;
// The default send buffer (net.core.wmem_default), for the budget while
// there is no queue to measure.
constexpr int64_t kDefaultSndbuf = 212992;
// The command a libevhtp thread receives: a flag and two pointers, packed.
constexpr size_t kCommandBytes = 17;
constexpr int kPollSliceMs = 50;

int64_t
QueuedBytes(int fd)
{
  int queued = 0;
  if (ioctl(fd, SIOCOUTQ, &queued) != 0) return -1;
  return queued;
}

int64_t
SendBuffer(int fd)
{
  int size = 0;
  socklen_t len = sizeof(size);
  if (getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, &len) != 0) return -1;
  return size;
}

// Measures a small command's share of a send buffer (the kernel's
// accounting, which differs between versions) on a socket pair of our own.
int64_t
MeasureCommandCost()
{
  int64_t cost = 0;
  for (int type : {SOCK_STREAM, SOCK_DGRAM}) {  // the dearer of the two
    int sv[2];
    if (socketpair(AF_UNIX, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) {
      continue;
    }
    const char command[kCommandBytes] = {};
    if (send(sv[0], command, sizeof(command), 0) ==
        static_cast<ssize_t>(sizeof(command))) {
      cost = std::max(cost, QueuedBytes(sv[0]));
    }
    close(sv[0]);
    close(sv[1]);
  }
  return cost >= static_cast<int64_t>(kCommandBytes) ? cost
                                                     : kFallbackCommandCost;
}

bool
Unnamed(int fd, bool peer)
{
  sockaddr_un addr{};
  socklen_t len = sizeof(addr);
  const int r = peer
                    ? getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len)
                    : getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  return r == 0 && len == sizeof(sa_family_t);
}

int
SockOpt(int fd, int option)
{
  int value = -1;
  socklen_t len = sizeof(value);
  if (getsockopt(fd, SOL_SOCKET, option, &value, &len) != 0) return -1;
  return value;
}

// Whether `fd` is one end of an AF_UNIX stream or datagram socket pair
// of this process: what libevhtp's evthr threads are fed through.
bool
IsFrontEndQueue(int fd)
{
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return false;
  const int type = SockOpt(fd, SO_TYPE);
  if (SockOpt(fd, SO_DOMAIN) != AF_UNIX ||
      (type != SOCK_STREAM && type != SOCK_DGRAM)) {
    return false;
  }
  if (!Unnamed(fd, false) || !Unnamed(fd, true)) return false;
  ucred cred{};
  socklen_t len = sizeof(cred);
  return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 &&
         cred.pid == getpid();
}

}  // namespace

namespace {

// Whether `fd` is still the socket (dev, ino) names: a descriptor number
// may have been closed and reused since it was found.
bool
StillSocket(int fd, dev_t dev, ino_t ino)
{
  struct stat st;
  return fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_dev == dev &&
         st.st_ino == ino;
}

// A socket some thread of the process waits to read, as an epoll set
// lists it (/proc/self/fdinfo of the set).
struct ReadEnd {
  dev_t dev;
  ino_t ino;
};

// The sockets registered for input in the process's epoll sets: the ends
// the front end's threads read their commands from. A command is queued
// in the send buffer of the other end, so these need no watching.
std::vector<ReadEnd>
ReadEnds(const std::vector<int>& epoll_fds)
{
  std::vector<ReadEnd> out;
  char path[64];
  char line[256];
  for (int fd : epoll_fds) {
    snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
    FILE* f = fopen(path, "re");
    if (f == nullptr) continue;
    while (fgets(line, sizeof(line), f) != nullptr) {
      // "tfd: %8d events: %8x data: %16llx  pos:%lli ino:%lx sdev:%x"
      int tfd = 0;
      unsigned events = 0;
      unsigned long long data = 0;
      long long pos = 0;
      unsigned long ino = 0;
      unsigned sdev = 0;
      if (sscanf(
              line, "tfd: %d events: %x data: %llx pos:%lli ino:%lx sdev:%x",
              &tfd, &events, &data, &pos, &ino, &sdev) != 6) {
        continue;
      }
      if ((events & POLLIN) == 0) continue;
      // The kernel's dev_t: major in the top 12 bits, minor below.
      out.push_back(
          ReadEnd{
              makedev(sdev >> 20, sdev & 0xfffff), static_cast<ino_t>(ino)});
    }
    fclose(f);
  }
  return out;
}

bool
IsEpoll(int fd)
{
  char path[64];
  char target[64];
  snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(path, target, sizeof(target) - 1);
  if (n <= 0) return false;
  target[n] = '\0';
  return strcmp(target, "anon_inode:[eventpoll]") == 0;
}

}  // namespace

FrontEndPacer&
FrontEndPacer::Get()
{
  static FrontEndPacer* pacer = new FrontEndPacer();  // never destroyed
  return *pacer;
}

FrontEndPacer::FrontEndPacer() : command_cost_(MeasureCommandCost()) {}

FrontEndPacer::Counters
FrontEndPacer::counters()
{
  MutexLock lock(&mu_);
  Counters c = counters_;
  c.queues = queues_.size();
  return c;
}

void
FrontEndPacer::WatchForTest(const std::vector<int>& fds)
{
  MutexLock lock(&mu_);
  queues_.clear();
  for (int fd : fds) {
    struct stat st;
    if (fstat(fd, &st) != 0) continue;
    queues_.push_back(Queue{fd, st.st_dev, st.st_ino, SendBuffer(fd)});
  }
  fixed_ = !fds.empty();
  scanned_ = fixed_;
  budget_.store(0);
}

void
FrontEndPacer::Scan()
{
  std::vector<Queue> found;
  std::vector<int> epolls;
  DIR* dir = opendir("/proc/self/fd");
  if (dir != nullptr) {
    const int own = dirfd(dir);
    while (dirent* e = readdir(dir)) {
      char* end = nullptr;
      const long fd = strtol(e->d_name, &end, 10);
      if (end == e->d_name || *end != '\0' || fd == own) continue;
      if (e->d_type == DT_LNK && IsEpoll(static_cast<int>(fd))) {
        epolls.push_back(static_cast<int>(fd));
        continue;
      }
      if (!IsFrontEndQueue(static_cast<int>(fd))) continue;
      struct stat st;
      if (fstat(static_cast<int>(fd), &st) != 0) continue;
      Queue q{
          static_cast<int>(fd), st.st_dev, st.st_ino,
          SendBuffer(static_cast<int>(fd))};
      for (const Queue& old : queues_) {
        if (old.dev == q.dev && old.ino == q.ino) q.stalled_at = old.stalled_at;
      }
      if (q.sndbuf > 0) found.push_back(q);
    }
    closedir(dir);
  }
  // Each pair's read end is left out: half the measuring per refill.
  const std::vector<ReadEnd> read_ends = ReadEnds(epolls);
  found.erase(
      std::remove_if(
          found.begin(), found.end(),
          [&read_ends](const Queue& q) {
            for (const ReadEnd& r : read_ends) {
              if (r.dev == q.dev && r.ino == q.ino) return true;
            }
            return false;
          }),
      found.end());
  queues_.swap(found);
  scanned_ = true;
  last_scan_ = Clock::now();
}

std::vector<FrontEndPacer::Watched>
FrontEndPacer::WaitForRoom(const std::vector<Queue>& full)
{
  // Every full queue is watched at once: queues of threads that stopped
  // together cost one kStallMs, not one each.
  struct Watch {
    size_t index;  // in `out`
    int64_t low;   // the fewest bytes seen queued
    Clock::time_point progress_at;
  };
  std::vector<Watched> out;
  std::vector<Watch> watching;
  const auto start = Clock::now();
  // The stall window and the cap start together: at the cap, a queue
  // that never moved is taken for stopped.
  const auto deadline = start + std::chrono::milliseconds(kMaxWaitMs);
  for (const Queue& q : full) {
    watching.push_back(Watch{out.size(), QueuedBytes(q.fd), start});
    out.push_back(Watched{q});
  }
  std::vector<pollfd> fds;
  while (!watching.empty()) {
    // Each descriptor is checked to be its socket before each poll.
    size_t kept = 0;
    for (const Watch& w : watching) {
      Watched& o = out[w.index];
      if (StillSocket(o.queue.fd, o.queue.dev, o.queue.ino)) {
        watching[kept++] = w;
      } else {
        o.gone = true;
      }
    }
    watching.resize(kept);
    if (watching.empty()) break;
    fds.clear();
    for (const Watch& w : watching) {
      fds.push_back(pollfd{out[w.index].queue.fd, POLLOUT, 0});
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - Clock::now());
    const int slice = static_cast<int>(
        std::max<int64_t>(0, std::min<int64_t>(kPollSliceMs, left.count())));
    const int r = poll(fds.data(), fds.size(), slice);
    const auto now = Clock::now();
    kept = 0;
    for (size_t i = 0; i < watching.size(); ++i) {
      Watch& w = watching[i];
      Watched& o = out[w.index];
      const short ev = r > 0 ? fds[i].revents : 0;
      if ((ev & POLLOUT) != 0) continue;  // down to a quarter: done
      const int64_t queued = StillSocket(o.queue.fd, o.queue.dev, o.queue.ino)
                                 ? QueuedBytes(o.queue.fd)
                                 : -1;
      if ((ev & (POLLNVAL | POLLERR | POLLHUP)) != 0 || queued < 0) {
        o.gone = true;
        continue;
      }
      if (queued < w.low) {
        w.low = queued;
        w.progress_at = now;
      } else if (now - w.progress_at >= std::chrono::milliseconds(kStallMs)) {
        o.stalled = true;
        o.queued = queued;
        continue;
      }
      watching[kept++] = w;
    }
    watching.resize(kept);
    if (now >= deadline) break;  // the most one send waits
  }
  return out;
}

void
FrontEndPacer::Apply(const std::vector<Watched>& watched)
{
  for (const Watched& w : watched) {
    if (w.gone) scanned_ = false;  // scan again at the next refill
    if (!w.stalled) continue;
    for (Queue& q : queues_) {
      if (q.dev != w.queue.dev || q.ino != w.queue.ino) continue;
      q.stalled_at = w.queued;
    }
    ++counters_.stalls;
    if (LogFn log = log_.load()) {
      log(true, "tritonpy: a queue of Triton's HTTP front end (descriptor " +
                    std::to_string(w.queue.fd) + ", " +
                    std::to_string(w.queued) +
                    " bytes queued) made no progress for " +
                    std::to_string(kStallMs) +
                    " ms; responses no longer wait for it until it moves");
    }
  }
}

void
FrontEndPacer::Refill()
{
  std::vector<Queue> full;
  int64_t room = 0;
  const auto start = Clock::now();
  {
    MutexLock lock(&mu_);
    // Another sender may have refilled while this one waited for the lock.
    if (budget_.load(std::memory_order_relaxed) > 0) {
      budget_.fetch_sub(1, std::memory_order_relaxed);
      return;
    }
    ++counters_.refills;
    if (!fixed_ && (!scanned_ || start - last_scan_ >=
                                     std::chrono::milliseconds(kRescanMs))) {
      Scan();
    }
    room = MeasureRoom(&full);
    if (full.empty()) {
      SetBudget(room);
      return;
    }
  }
  // Only after a wait is each queue measured a second time.
  std::vector<Watched> watched = WaitForRoom(full);
  MutexLock lock(&mu_);
  Apply(watched);
  room = MeasureRoom(nullptr);
  if (counters_.waits == 0) {
    if (LogFn log = log_.load()) {
      log(false,
          "tritonpy: Triton's HTTP front end takes responses in slower "
          "than they come; they are paced to its queues from now on "
          "(docs/llm-serving.md, HTTP streams). Logged once.");
    }
  }
  ++counters_.waits;
  counters_.wait_us += static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(
          Clock::now() - start)
          .count());
  SetBudget(room);
}

int64_t
FrontEndPacer::MeasureRoom(std::vector<Queue>* full)
{
  int64_t room = std::numeric_limits<int64_t>::max();
  size_t kept = 0;
  for (size_t i = 0; i < queues_.size(); ++i) {
    Queue q = queues_[i];
    const int64_t queued =
        StillSocket(q.fd, q.dev, q.ino) ? QueuedBytes(q.fd) : -1;
    if (queued < 0) {
      scanned_ = false;  // closed, or its number reused: dropped
      continue;
    }
    if (full != nullptr && q.stalled_at >= 0 && queued != q.stalled_at) {
      q.stalled_at = -1;  // it moved again
    }
    queues_[kept++] = q;
    if (q.stalled_at >= 0) continue;
    if (full != nullptr && queued * 4 > q.sndbuf) full->push_back(q);
    // A quarter of each buffer stays free for other senders (other
    // backends' responses, the front end's own commands).
    room = std::min(room, q.sndbuf * 3 / 4 - queued);
  }
  queues_.resize(kept);
  return room;
}

void
FrontEndPacer::SetBudget(int64_t room)
{
  if (room == std::numeric_limits<int64_t>::max()) {
    // Nothing to pace against (no HTTP front end yet, or every queue
    // stalled): a budget that cannot fill a default buffer alone.
    room = kDefaultSndbuf / 4;
  }
  const int64_t per_response = kCommandsPerResponse * command_cost_;
  budget_.store(std::max<int64_t>(room / per_response, 1) - 1);
}

}  // namespace tritonpy
