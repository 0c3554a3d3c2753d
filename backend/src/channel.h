// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// Channel: the backend's end of one instance's SOCK_SEQPACKET socket.
// One message is one frame. Send may be called from any thread (an
// internal mutex serialises writers); Receive must be called by one thread
// at a time (the instance's reader).
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "error.h"

namespace tritonpy {

class Channel {
 public:
  enum class RecvResult { kFrame, kEof, kTimeout, kError };

  // Takes ownership of `fd`. Raises the socket buffers to 1 MiB (best
  // effort).
  explicit Channel(int fd);
  ~Channel();
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  // Sends one frame, with `fd_to_pass` as SCM_RIGHTS when >= 0. Never
  // raises SIGPIPE.
  Status Send(const std::vector<uint8_t>& frame, int fd_to_pass = -1);

  // Receives one message into `buf` (resized to kMaxFrame once), setting
  // `len`, and any passed descriptors into `fds` (close-on-exec; the caller
  // owns them). timeout_ms < 0 blocks. When `wake_fd` (an eventfd) is
  // given and becomes readable first, it is drained and kTimeout returned:
  // another thread wants the reader's attention. On kError, `error` says
  // why (including MSG_TRUNC / MSG_CTRUNC). Right after a frame, the next
  // call tries the socket before waiting: under load another frame is
  // usually there, and the poll is saved.
  RecvResult Receive(
      std::vector<uint8_t>* buf, size_t* len, std::vector<int>* fds,
      int timeout_ms, Status* error, int wake_fd = -1);

  // Shuts the socket down both ways: a blocked Receive returns kEof and the
  // peer sees EOF. The descriptor stays open until destruction.
  void Shutdown();

 private:
  // One recvmsg with `flags`; kTimeout when MSG_DONTWAIT found nothing.
  RecvResult Read(
      std::vector<uint8_t>* buf, size_t* len, std::vector<int>* fds,
      Status* error, int flags);

  int fd_;
  bool last_was_frame_ = false;  // the reader's own: Receive's caller only
  std::mutex send_mu_;
};

}  // namespace tritonpy
