// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// Channel: the backend's end of one instance's SOCK_SEQPACKET socket.
// One message is one frame. Send may be called from any thread (an
// internal mutex serialises writers) and never blocks: what the socket
// cannot take at once waits in a bounded queue that Receive flushes as the
// peer reads. A peer that stops reading gets its socket shut down once the
// queue passes the bound (stub-send-queue-bytes): the reader sees EOF and
// send_failure() says why. A frame larger than MAX_FRAME is refused, not
// sent: the peer could not read it whole. Receive must be called by one
// thread at a time (the instance's reader).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "util/error.h"
#include "util/mutex.h"

struct msghdr;

namespace tritonpy {

class Channel {
 public:
  enum class RecvResult { kFrame, kEof, kTimeout, kError };

  // The default of stub-send-queue-bytes.
  static constexpr uint64_t kDefaultSendQueueBytes = 32ull << 20;

  // Who is at the other end, and what the socket itself is.
  enum class Peer {
    // A stub, on the socket the backend made: it may pass memfds and
    // unix SEQPACKET sockets (BLS_CHANNEL).
    kStub,
    // A process a stub forked, on a socket the stub passed: memfds only,
    // and the socket itself is closed by the closer (fd_closer.h), as is
    // any descriptor a stub passed whose close may block.
    kForkedChild,
  };

  // Takes ownership of `fd`. Raises the socket buffers to 1 MiB (best
  // effort). `send_queue_bytes`: how many bytes of frames may wait for the
  // peer to read before it is given up on.
  explicit Channel(
      int fd, uint64_t send_queue_bytes = kDefaultSendQueueBytes,
      Peer peer = Peer::kStub);
  ~Channel();
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  // Sends one frame, with `fd_to_pass` as SCM_RIGHTS when >= 0 (the
  // caller keeps its descriptor: a queued frame holds a duplicate). Never
  // blocks and never raises SIGPIPE. OK: sent or queued behind earlier
  // frames; INVALID_ARG: the frame is larger than MAX_FRAME and was not
  // sent (the channel stays usable; the caller decides what the peer gets
  // instead); another error: the socket is broken, or the queue passed its
  // bound (then the socket is shut down both ways).
  Status Send(const std::vector<uint8_t>& frame, int fd_to_pass = -1)
      EXCLUDES(send_mu_);

  // Why the backend gave up on the peer (its queue passed the bound), or
  // "". Read by the reader once Receive returned kEof.
  std::string send_failure() EXCLUDES(send_mu_);
  // Bytes of frames waiting in the queue.
  uint64_t queued_bytes() EXCLUDES(send_mu_);

  // Receives one message into `buf` (resized to kMaxFrame once), setting
  // `len`, and any passed descriptors into `fds` (close-on-exec, memfds;
  // the caller owns them). A message that carries any other kind of
  // descriptor is a protocol violation (kError), and the peer is read no
  // further: every later call returns kError at once, and the messages
  // left unread go with the socket, which the closer's thread closes
  // (fd_closer.h). That message's descriptors are closed at once where
  // their close cannot block, else by the closer. timeout_ms < 0 blocks. When
  // `wake_fd` (an eventfd) is given and becomes readable first, it is drained
  // and kTimeout returned: another thread wants the reader's attention. On
  // kError, `error` says why (including MSG_TRUNC / MSG_CTRUNC). Right after a
  // frame, the next call tries the socket before waiting: under load another
  // frame is usually there, and the poll is saved. Frames Send queued go out
  // from here, as the peer makes room; a wait cut short for that also returns
  // kTimeout (callers check their own deadlines on kTimeout).
  RecvResult Receive(
      std::vector<uint8_t>* buf, size_t* len, std::vector<int>* fds,
      int timeout_ms, Status* error, int wake_fd = -1) EXCLUDES(send_mu_);

  // Shuts the socket down both ways: a blocked Receive returns kEof and the
  // peer sees EOF. The descriptor stays open until destruction.
  void Shutdown();

  // Whether the peer closed its end (a hang-up on the socket; frames it
  // sent before may still be unread). Never blocks. Any thread.
  bool PeerClosed() const;

 private:
  // One recvmsg with `flags`; kTimeout when MSG_DONTWAIT found nothing.
  RecvResult Read(
      std::vector<uint8_t>* buf, size_t* len, std::vector<int>* fds,
      Status* error, int flags);
  // Appends the descriptors `msg` carried to `fds` (see Receive); when one
  // is of a kind the peer may not pass, closes them all instead and
  // returns false.
  bool TakeDescriptors(struct msghdr* msg, std::vector<int>* fds) const;
  // One non-blocking sendmsg: 0, or the errno.
  int SendNow(const std::vector<uint8_t>& frame, int fd_to_pass);
  // Sends queued frames until the socket is full or the queue empty
  // (Receive's caller).
  void Flush() EXCLUDES(send_mu_);

  struct Queued {
    std::vector<uint8_t> frame;
    int fd;  // a duplicate, or -1
  };

  int fd_;
  const uint64_t send_queue_bytes_;
  const Peer peer_;
  bool last_was_frame_ = false;  // the reader's own: Receive's caller only
  // The peer passed a descriptor that is not a memfd: it is read no
  // further (Receive's caller only, and the destructor).
  bool refused_ = false;
  // Written when the queue becomes non-empty: the receiver then polls for
  // POLLOUT too.
  int queue_wake_fd_ = -1;
  std::atomic<bool> queued_{false};  // mirrors !queue_.empty()
  Mutex send_mu_;
  std::deque<Queued> queue_ GUARDED_BY(send_mu_);
  uint64_t queue_bytes_ GUARDED_BY(send_mu_) = 0;
  std::string send_failure_ GUARDED_BY(send_mu_);
};

}  // namespace tritonpy
