// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// Closing descriptors a stub passed (SCM_RIGHTS) that are not what the
// protocol allows (a memfd on tmpfs). close() of some of them may block
// for as long as their sender likes: the last close of a TCP socket with
// SO_LINGER and unsent data to a peer that does not read waits for the
// linger time, a FUSE file waits for its server, a Unix socket releases
// the descriptors in flight in its queue. Those are closed on a thread of
// their own, never on a reader, a kill or an unload. The kinds whose
// close cannot block (pipes and FIFOs, files on tmpfs, ramfs or
// hugetlbfs, eventfds and the other anonymous inodes) are closed at once
// where they are met, so that they never wait behind a stuck close.
#pragma once

namespace tritonpy {

// Hands `fd` to the closer thread (started on first use, for the life of
// the process) and returns at once. The queue is bounded: while the
// closer is stuck on one close and kCloserQueue descriptors wait, further
// ones are left open (counted in CloserState().leaked) rather than closed
// where they could block.
void CloseUntrusted(int fd);

// Closes `fd` at once when its close cannot block (CannotBlockOnClose),
// else hands it to the closer (CloseUntrusted).
void CloseReceived(int fd);

// Whether the close of `fd` can never block: a pipe or FIFO, a regular
// file on tmpfs, ramfs or hugetlbfs, or an anonymous inode (eventfd,
// epoll, timerfd, signalfd ...). Never blocks itself.
bool CannotBlockOnClose(int fd);

// Whether `fd` is a regular file on tmpfs (a memfd): its close never
// blocks, and it is the only kind of descriptor a stub may pass. Never
// blocks itself (fstat and fstatfs only).
bool IsTmpfsFile(int fd);

// Whether `fd` is an AF_UNIX SOCK_SEQPACKET socket: the one other kind a
// stub may pass (BLS_CHANNEL, for a process it forked). Its close never
// blocks (no lingering on a unix socket). Never blocks itself.
bool IsUnixSeqpacket(int fd);

// Descriptors queued or being closed, left open for a full queue, and
// handed to the closer in all (for tests and debug counters).
struct CloserCounts {
  int pending = 0;
  long leaked = 0;
  long handed = 0;
};
CloserCounts CloserState();

constexpr int kCloserQueue = 4096;

}  // namespace tritonpy
