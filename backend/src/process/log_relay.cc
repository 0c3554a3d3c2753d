// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "process/log_relay.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace tritonpy {

namespace {

constexpr size_t kChunk = 64 * 1024;

// Writes all of `data` to `fd`, waiting while it is full; drops the rest
// when it cannot take it (closed, an error).
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
  MutexLock lock(&mu_);
  // What the stubs wrote before they ended, then the pipes.
  for (const Pipe& p : pipes_) {
    for (int i = 0; i < 16 && CopyChunk(p); ++i) {}
    close(p.fd);
  }
  pipes_.clear();
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
    pipes_.push_back({ends[0], target});
    const char byte = 0;
    (void)!write(wake_[1], &byte, 1);
  }
  *write_end = ends[1];
  return Status();
}

size_t
LogRelay::open_pipes() const
{
  MutexLock lock(&mu_);
  return pipes_.size();
}

bool
LogRelay::CopyChunk(const Pipe& p)
{
  char buf[kChunk];
  ssize_t n;
  do {
    n = read(p.fd, buf, sizeof(buf));
  } while (n < 0 && errno == EINTR);
  if (n > 0) {
    WriteAll(p.target, buf, static_cast<size_t>(n));
    return true;
  }
  return n < 0 && errno == EAGAIN;
}

bool
LogRelay::Step()
{
  std::vector<Pipe> pipes;
  std::vector<struct pollfd> polled;
  {
    MutexLock lock(&mu_);
    pipes = pipes_;
    polled.push_back({wake_[0], POLLIN, 0});
  }
  for (const Pipe& p : pipes) polled.push_back({p.fd, POLLIN, 0});
  int r;
  do {
    r = poll(polled.data(), polled.size(), -1);
  } while (r < 0 && errno == EINTR);
  if (thread_.stopping()) return false;
  if (polled[0].revents != 0) {
    char drain[64];
    while (read(polled[0].fd, drain, sizeof(drain)) > 0) {}
  }
  std::vector<int> ended;
  for (size_t i = 0; i < pipes.size(); ++i) {
    if (polled[i + 1].revents != 0 && !CopyChunk(pipes[i])) {
      ended.push_back(pipes[i].fd);
    }
  }
  if (!ended.empty()) {
    MutexLock lock(&mu_);
    for (int fd : ended) {
      for (auto it = pipes_.begin(); it != pipes_.end(); ++it) {
        if (it->fd == fd) {
          pipes_.erase(it);
          break;
        }
      }
      close(fd);
    }
  }
  return true;
}

}  // namespace tritonpy
