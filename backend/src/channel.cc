// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "channel.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "protocol.h"

namespace tritonpy {

namespace {
// Room for a few descriptors, so that a peer sending too many is seen as a
// protocol error rather than silently truncated.
constexpr size_t kMaxFds = 8;
}  // namespace

Channel::Channel(int fd) : fd_(fd)
{
  int size = 1 << 20;
  (void)setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
  (void)setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
}

Channel::~Channel()
{
  if (fd_ >= 0) close(fd_);
}

void
Channel::Shutdown()
{
  (void)shutdown(fd_, SHUT_RDWR);
}

Status
Channel::Send(const std::vector<uint8_t>& frame, int fd_to_pass)
{
  struct iovec iov;
  iov.iov_base = const_cast<uint8_t*>(frame.data());
  iov.iov_len = frame.size();
  struct msghdr msg;
  memset(&msg, 0, sizeof(msg));
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  if (fd_to_pass >= 0) {
    memset(control, 0, sizeof(control));
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    struct cmsghdr* cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &fd_to_pass, sizeof(int));
  }
  std::lock_guard<std::mutex> lock(send_mu_);
  while (true) {
    ssize_t n = sendmsg(fd_, &msg, MSG_NOSIGNAL);
    if (n >= 0) return Status();
    if (errno == EINTR) continue;
    return Status::Unavailable(
        std::string("tritonpy: sending a frame to the stub failed: ") +
        strerror(errno));
  }
}

Channel::RecvResult
Channel::Receive(
    std::vector<uint8_t>* buf, size_t* len, std::vector<int>* fds,
    int timeout_ms, Status* error, int wake_fd)
{
  fds->clear();
  if (buf->size() < proto::kMaxFrame) buf->resize(proto::kMaxFrame);
  if (timeout_ms < 0 && wake_fd < 0) return Read(buf, len, fds, error, 0);
  if (last_was_frame_) {
    RecvResult r = Read(buf, len, fds, error, MSG_DONTWAIT);
    if (r != RecvResult::kTimeout) return r;
  }
  struct pollfd pfd[2];
  pfd[0].fd = fd_;
  pfd[0].events = POLLIN;
  pfd[0].revents = 0;
  pfd[1].fd = wake_fd;
  pfd[1].events = POLLIN;
  pfd[1].revents = 0;
  nfds_t n = wake_fd >= 0 ? 2 : 1;
  int r;
  do {
    r = poll(pfd, n, timeout_ms);
  } while (r < 0 && errno == EINTR);
  if (r == 0) return RecvResult::kTimeout;
  if (r < 0) {
    *error = Status::Internal(std::string("poll: ") + strerror(errno));
    return RecvResult::kError;
  }
  if (pfd[0].revents == 0) {
    uint64_t drain;
    (void)!read(wake_fd, &drain, sizeof(drain));
    return RecvResult::kTimeout;
  }
  return Read(buf, len, fds, error, 0);
}

Channel::RecvResult
Channel::Read(
    std::vector<uint8_t>* buf, size_t* len, std::vector<int>* fds,
    Status* error, int flags)
{
  last_was_frame_ = false;
  struct iovec iov;
  iov.iov_base = buf->data();
  iov.iov_len = buf->size();
  alignas(struct cmsghdr) char control[CMSG_SPACE(kMaxFds * sizeof(int))];
  struct msghdr msg;
  memset(&msg, 0, sizeof(msg));
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  do {
    n = recvmsg(fd_, &msg, MSG_CMSG_CLOEXEC | flags);
  } while (n < 0 && errno == EINTR);
  if (n < 0) {
    if ((flags & MSG_DONTWAIT) != 0 &&
        (errno == EAGAIN || errno == EWOULDBLOCK))
      return RecvResult::kTimeout;
    if (errno == ECONNRESET || errno == EPIPE) return RecvResult::kEof;
    *error = Status::Internal(std::string("recvmsg: ") + strerror(errno));
    return RecvResult::kError;
  }
  // Collect descriptors first so that they are closed by the caller even
  // when the message itself is rejected.
  for (struct cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm != nullptr;
       cm = CMSG_NXTHDR(&msg, cm)) {
    if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
      fds->push_back(fd);
    }
  }
  if (n == 0 && fds->empty()) return RecvResult::kEof;
  if ((msg.msg_flags & MSG_TRUNC) != 0) {
    *error = Status::InvalidArg(
        "tritonpy protocol violation: message longer than MAX_FRAME");
    return RecvResult::kError;
  }
  if ((msg.msg_flags & MSG_CTRUNC) != 0) {
    *error = Status::InvalidArg(
        "tritonpy protocol violation: too many file descriptors");
    return RecvResult::kError;
  }
  *len = static_cast<size_t>(n);
  last_was_frame_ = true;
  return RecvResult::kFrame;
}

}  // namespace tritonpy
