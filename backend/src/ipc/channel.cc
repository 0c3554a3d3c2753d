// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "ipc/channel.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "ipc/fd_closer.h"
#include "protocol/protocol.h"

namespace tritonpy {

namespace {
// Room for the most descriptors one message can carry (the kernel's
// SCM_MAX_FD). Descriptors that do not fit are released by the kernel
// inside recvmsg, on the reader's thread, where a lingering close would
// block it; so all are taken, and too many is a protocol error.
constexpr size_t kMaxFds = 253;

Status
Refused()
{
  return Status::InvalidArg(
      "tritonpy protocol violation: the stub passed a file descriptor that "
      "is not a memfd on tmpfs (nor a unix SEQPACKET socket, for "
      "BLS_CHANNEL); nothing more it sends is read");
}
}  // namespace

Channel::Channel(int fd, uint64_t send_queue_bytes, Peer peer)
    : fd_(fd), send_queue_bytes_(send_queue_bytes), peer_(peer)
{
  int size = 1 << 20;
  (void)setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
  (void)setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
  queue_wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

Channel::~Channel()
{
  for (const Queued& q : queue_) {
    if (q.fd >= 0) close(q.fd);
  }
  if (queue_wake_fd_ >= 0) close(queue_wake_fd_);
  if (fd_ >= 0) {
    // Descriptors still in unread messages would be released by the close
    // below, on this thread. An honest peer's are memfds: they are taken
    // out and closed here. Once the peer passed anything else it is read
    // no further, and the socket, with what its queue holds, is closed
    // by the closer (fd_closer.h), where a close that blocks stalls no
    // reader, kill or unload.
    std::vector<uint8_t> buf(proto::kMaxFrame);
    std::vector<int> fds;
    size_t len = 0;
    Status ignored;
    for (int i = 0; i < 4096 && !refused_; ++i) {
      fds.clear();
      RecvResult r = Read(&buf, &len, &fds, &ignored, MSG_DONTWAIT);
      for (int fd : fds) CloseReceived(fd);
      if (r != RecvResult::kFrame && fds.empty()) break;
    }
    if (refused_ || peer_ == Peer::kForkedChild) {
      CloseUntrusted(fd_);
    } else {
      close(fd_);
    }
  }
}

void
Channel::Shutdown()
{
  (void)shutdown(fd_, SHUT_RDWR);
}

bool
Channel::PeerClosed() const
{
  struct pollfd p = {fd_, POLLRDHUP, 0};
  return poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLRDHUP)) != 0;
}

std::string
Channel::send_failure()
{
  MutexLock lock(&send_mu_);
  return send_failure_;
}

uint64_t
Channel::queued_bytes()
{
  MutexLock lock(&send_mu_);
  return queue_bytes_;
}

int
Channel::SendNow(const std::vector<uint8_t>& frame, int fd_to_pass)
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
  while (true) {
    if (sendmsg(fd_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT) >= 0) return 0;
    if (errno != EINTR) return errno;
  }
}

Status
Channel::Send(const std::vector<uint8_t>& frame, int fd_to_pass)
{
  if (frame.size() > proto::kMaxFrame) {
    // A seqpacket socket would take it (up to its buffer), and the peer,
    // which reads MAX_FRAME bytes at most, would get it cut short.
    return Status::InvalidArg(
        "tritonpy: a frame of " + std::to_string(frame.size()) +
        " bytes is larger than MAX_FRAME (" + std::to_string(proto::kMaxFrame) +
        " bytes): not sent to the stub");
  }
  MutexLock lock(&send_mu_);
  if (!send_failure_.empty()) {
    return Status::Unavailable("tritonpy: " + send_failure_);
  }
  if (queue_.empty()) {
    const int err = SendNow(frame, fd_to_pass);
    if (err == 0) return Status();
    if (err != EAGAIN && err != EWOULDBLOCK) {
      return Status::Unavailable(
          std::string("tritonpy: sending a frame to the stub failed: ") +
          strerror(err));
    }
  }
  // The socket is full: the frame waits, behind any queued before it.
  if (queue_bytes_ + frame.size() > send_queue_bytes_) {
    send_failure_ = "it stopped reading its socket: more than " +
                    std::to_string(send_queue_bytes_) +
                    " bytes of frames waited for it (stub-send-queue-bytes)";
    // The reader sees EOF, and kills the stub naming send_failure_.
    Shutdown();
    return Status::Unavailable("tritonpy: " + send_failure_);
  }
  int dup_fd = -1;
  if (fd_to_pass >= 0) {
    dup_fd = fcntl(fd_to_pass, F_DUPFD_CLOEXEC, 0);
    if (dup_fd < 0) {
      return Status::Unavailable(
          std::string("tritonpy: queueing a frame to the stub failed: ") +
          strerror(errno));
    }
  }
  queue_.push_back({frame, dup_fd});
  queue_bytes_ += frame.size();
  if (queue_.size() == 1) {
    queued_.store(true);
    uint64_t one = 1;
    (void)!write(queue_wake_fd_, &one, sizeof(one));
  }
  return Status();
}

void
Channel::Flush()
{
  MutexLock lock(&send_mu_);
  while (!queue_.empty()) {
    Queued& q = queue_.front();
    const int err = SendNow(q.frame, q.fd);
    if (err == EAGAIN || err == EWOULDBLOCK) return;
    // Sent, or the socket is broken: the reader sees that as EOF.
    if (q.fd >= 0) close(q.fd);
    queue_bytes_ -= q.frame.size();
    queue_.pop_front();
  }
  queued_.store(false);
}

Channel::RecvResult
Channel::Receive(
    std::vector<uint8_t>* buf, size_t* len, std::vector<int>* fds,
    int timeout_ms, Status* error, int wake_fd)
{
  fds->clear();
  if (buf->size() < proto::kMaxFrame) buf->resize(proto::kMaxFrame);
  // Queued frames go out first, also while frames keep coming in.
  if (queued_.load(std::memory_order_relaxed)) Flush();
  if (last_was_frame_) {
    RecvResult r = Read(buf, len, fds, error, MSG_DONTWAIT);
    if (r != RecvResult::kTimeout) return r;
  }
  struct pollfd pfd[3];
  pfd[0].fd = fd_;
  pfd[0].events = static_cast<short>(
      POLLIN | (queued_.load(std::memory_order_relaxed) ? POLLOUT : 0));
  pfd[1].fd = queue_wake_fd_;
  pfd[1].events = POLLIN;
  pfd[2].fd = wake_fd;
  pfd[2].events = POLLIN;
  for (struct pollfd& p : pfd) p.revents = 0;
  const nfds_t n = wake_fd >= 0 ? 3 : 2;
  int r;
  do {
    r = poll(pfd, n, timeout_ms);
  } while (r < 0 && errno == EINTR);
  if (r == 0) return RecvResult::kTimeout;
  if (r < 0) {
    *error = Status::Internal(std::string("poll: ") + strerror(errno));
    return RecvResult::kError;
  }
  if (pfd[1].revents != 0) {
    uint64_t drain;
    (void)!read(queue_wake_fd_, &drain, sizeof(drain));
  }
  if ((pfd[0].revents & POLLOUT) != 0 || pfd[1].revents != 0) Flush();
  if ((pfd[0].revents & ~POLLOUT) != 0) return Read(buf, len, fds, error, 0);
  if (pfd[2].revents != 0) {
    uint64_t drain;
    (void)!read(wake_fd, &drain, sizeof(drain));
  }
  // Woken, or only to flush the queue: the caller looks at its clocks.
  return RecvResult::kTimeout;
}

bool
Channel::TakeDescriptors(struct msghdr* msg, std::vector<int>* fds) const
{
  // Collected first so that they are closed even when the message itself
  // is rejected. Only memfds (files on tmpfs) are accepted, and from a stub
  // unix SEQPACKET sockets (BLS_CHANNEL); the reader checks which frame
  // may carry which. When another
  // kind came along, the whole message's descriptors are closed: those
  // whose close cannot block here and now, the others on the closer's
  // thread (fd_closer.h).
  const size_t first = fds->size();
  bool all_memfds = true;
  for (struct cmsghdr* cm = CMSG_FIRSTHDR(msg); cm != nullptr;
       cm = CMSG_NXTHDR(msg, cm)) {
    if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
      if (!IsTmpfsFile(fd) && (peer_ != Peer::kStub || !IsUnixSeqpacket(fd))) {
        all_memfds = false;
      }
      fds->push_back(fd);
    }
  }
  if (all_memfds) return true;
  for (size_t i = first; i < fds->size(); ++i) CloseReceived((*fds)[i]);
  fds->resize(first);
  return false;
}

Channel::RecvResult
Channel::Read(
    std::vector<uint8_t>* buf, size_t* len, std::vector<int>* fds,
    Status* error, int flags)
{
  last_was_frame_ = false;
  if (refused_) {
    *error = Refused();
    return RecvResult::kError;
  }
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
  if (!TakeDescriptors(&msg, fds)) {
    refused_ = true;
    *error = Refused();
    return RecvResult::kError;
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
