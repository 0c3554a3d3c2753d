// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "process/log_relay.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace tritonpy {

namespace {

constexpr size_t kChunk = 64 * 1024;

// SIGPIPE blocked on the calling thread while it lives: a write to a pipe
// that closed fails with EPIPE instead of killing the server. The signal
// the kernel raised meanwhile is taken, so that none is left pending.
class NoSigpipe {
 public:
  NoSigpipe()
  {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~NoSigpipe()
  {
    const struct timespec now = {0, 0};
    while (sigtimedwait(&pipe_, nullptr, &now) > 0) {}
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  NoSigpipe(const NoSigpipe&) = delete;
  NoSigpipe& operator=(const NoSigpipe&) = delete;

 private:
  sigset_t pipe_;
  sigset_t old_;
};

// Writes all of `data` to `fd`; drops the rest when it cannot take it (it
// closed, an error). The caller blocks SIGPIPE.
void
WriteAll(int fd, const char* data, size_t size)
{
  while (size > 0) {
    const ssize_t n = write(fd, data, size);
    if (n > 0) {
      data += n;
      size -= static_cast<size_t>(n);
    } else if (n < 0 && errno == EAGAIN) {
      struct pollfd p = {fd, POLLOUT, 0};
      (void)poll(&p, 1, -1);
    } else if (!(n < 0 && errno == EINTR)) {
      return;
    }
  }
}

}  // namespace

LogRelay::~LogRelay()
{
  {
    MutexLock lock(&mu_);
    if (!thread_.started()) return;
  }
  thread_.Stop();
  {
    MutexLock lock(&mu_);
    const char byte = 0;
    (void)!write(wake_[1], &byte, 1);
  }
  thread_.Join();
  NoSigpipe quiet;
  MutexLock lock(&mu_);
  for (Pipe& p : added_) pipes_.push_back(std::move(p));
  added_.clear();
  // What the stubs wrote before they ended, then the pipes.
  for (Pipe& p : pipes_) {
    for (int i = 0; i < 16 && CopyChunk(&p); ++i) {}
    WriteAll(p.target, p.partial.data(), p.partial.size());
    close(p.fd);
  }
  pipes_.clear();
  open_ = 0;
  close(wake_[0]);
  close(wake_[1]);
}

Status
LogRelay::Open(int target, int* write_end)
{
  int ends[2];
  if (pipe2(ends, O_CLOEXEC) != 0) {
    return Status::Internal(
        std::string("a pipe for the sandboxed stub's output: ") +
        strerror(errno));
  }
  // The relay never waits on one pipe: a read finds what is there.
  (void)fcntl(ends[0], F_SETFL, O_NONBLOCK);
  {
    MutexLock lock(&mu_);
    if (!thread_.started()) {
      if (pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
        const int err = errno;
        close(ends[0]);
        close(ends[1]);
        return Status::Internal(
            std::string("the log relay's wake-up pipe: ") + strerror(err));
      }
      thread_.Start(
          "tritonpy-logs", "the sandboxed stubs' log relay",
          [this] { return Step(); }, [](const Status&) { return true; });
    }
    added_.push_back({ends[0], target, std::string()});
    ++open_;
    const char byte = 0;
    (void)!write(wake_[1], &byte, 1);
  }
  *write_end = ends[1];
  return Status();
}

size_t
LogRelay::open_pipes() const
{
  return open_.load();
}

bool
LogRelay::CopyChunk(Pipe* p)
{
  const size_t kept = p->partial.size();
  p->partial.resize(kept + kChunk);
  ssize_t n;
  do {
    n = read(p->fd, &p->partial[kept], kChunk);
  } while (n < 0 && errno == EINTR);
  p->partial.resize(kept + (n > 0 ? static_cast<size_t>(n) : 0));
  if (n <= 0) {
    const bool ended = !(n < 0 && errno == EAGAIN);
    if (ended) {
      WriteAll(p->target, p->partial.data(), p->partial.size());
      p->partial.clear();
    }
    return !ended;
  }
  // Whole lines out; the start of the next kept, unless it is long.
  const size_t end = p->partial.rfind('\n');
  const size_t out = p->partial.size() > kChunk ? p->partial.size()
                     : end == std::string::npos ? 0
                                                : end + 1;
  WriteAll(p->target, p->partial.data(), out);
  p->partial.erase(0, out);
  return true;
}

bool
LogRelay::Step()
{
  static thread_local NoSigpipe quiet;  // for the thread's life
  std::vector<struct pollfd> polled;
  {
    MutexLock lock(&mu_);
    for (Pipe& p : added_) pipes_.push_back(std::move(p));
    added_.clear();
    polled.push_back({wake_[0], POLLIN, 0});
  }
  for (const Pipe& p : pipes_) polled.push_back({p.fd, POLLIN, 0});
  int r;
  do {
    r = poll(polled.data(), polled.size(), -1);
  } while (r < 0 && errno == EINTR);
  if (thread_.stopping()) return false;
  if (r < 0) return thread_.WaitFor(std::chrono::milliseconds(100));
  if (polled[0].revents != 0) {
    char drain[64];
    while (read(polled[0].fd, drain, sizeof(drain)) > 0) {}
  }
  // Back to front: an ended pipe leaves, the others keep their places.
  for (size_t i = pipes_.size(); i-- > 0;) {
    if (polled[i + 1].revents != 0 && !CopyChunk(&pipes_[i])) {
      close(pipes_[i].fd);
      pipes_.erase(pipes_.begin() + static_cast<std::ptrdiff_t>(i));
      --open_;
    }
  }
  return true;
}

}  // namespace tritonpy
