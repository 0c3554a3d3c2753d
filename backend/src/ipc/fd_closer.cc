// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "ipc/fd_closer.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <deque>

#include "util/mutex.h"
#include "util/worker_thread.h"

#include <linux/magic.h>

namespace tritonpy {

namespace {

// A socket made to close without lingering (an abortive close): its close
// then waits for nothing. Harmless on other descriptors.
void
NoLinger(int fd)
{
  struct linger off = {1, 0};
  (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &off, sizeof(off));
}

class Closer {
 public:
  void Push(int fd) EXCLUDES(mu_)
  {
    {
      MutexLock lock(&mu_);
      if (!started_) {
        // Never stopped nor joined (this object is never destroyed): at
        // exit the process may still be stuck in a close.
        // Nothing in a step throws; if it did, the next one goes on.
        thread_.Start(
            "tritonpy-closer", "the descriptor closer",
            [this] { return CloseNext(); }, [](const Status&) { return true; });
        started_ = true;
      }
      ++handed_;
      if (static_cast<int>(queue_.size()) + busy_ >= kCloserQueue) {
        ++leaked_;
        return;
      }
      queue_.push_back(fd);
    }
    thread_.Wake();
  }

  CloserCounts Counts() EXCLUDES(mu_)
  {
    MutexLock lock(&mu_);
    return {static_cast<int>(queue_.size()) + busy_, leaked_, handed_};
  }

 private:
  // The thread's step: closes the next descriptor, or waits for one.
  bool CloseNext() EXCLUDES(mu_)
  {
    int fd = -1;
    {
      MutexLock lock(&mu_);
      busy_ = 0;
      if (!queue_.empty()) {
        fd = queue_.front();
        queue_.pop_front();
        busy_ = 1;
      }
    }
    if (fd < 0) return thread_.Wait();
    // Once more right before the close: the sender may have set
    // SO_LINGER again since CloseUntrusted (it is usually dead by now,
    // and no one else can).
    NoLinger(fd);
    close(fd);
    return true;
  }

  WorkerThread thread_;
  Mutex mu_;
  std::deque<int> queue_ GUARDED_BY(mu_);
  int busy_ GUARDED_BY(mu_) = 0;
  long leaked_ GUARDED_BY(mu_) = 0;
  long handed_ GUARDED_BY(mu_) = 0;
  bool started_ GUARDED_BY(mu_) = false;
};

// Never destroyed: its thread uses it until the process ends.
Closer&
TheCloser()
{
  static Closer* closer = new Closer();
  return *closer;
}

}  // namespace

void
CloseUntrusted(int fd)
{
  if (fd < 0) return;
  // A socket is made to close without lingering while the stub may still
  // hold it: usually the close then cannot block at all. The stub can set
  // SO_LINGER again before the closer gets to it, hence the thread.
  NoLinger(fd);
  TheCloser().Push(fd);
}

void
CloseReceived(int fd)
{
  if (fd < 0) return;
  if (CannotBlockOnClose(fd)) {
    close(fd);
  } else {
    CloseUntrusted(fd);
  }
}

bool
CannotBlockOnClose(int fd)
{
  struct stat st;
  struct statfs fs;
  if (fstat(fd, &st) != 0 || fstatfs(fd, &fs) != 0) return false;
  // A pipe's or FIFO's close only wakes its other end (the FIFO's own
  // file system is not asked: no FUSE flush).
  if (S_ISFIFO(st.st_mode)) return true;
  switch (static_cast<unsigned long>(fs.f_type)) {
    case TMPFS_MAGIC:
    case RAMFS_MAGIC:
    case HUGETLBFS_MAGIC:
      // Memory file systems: nothing to write back, no server to ask.
      return S_ISREG(st.st_mode) || S_ISDIR(st.st_mode);
    case ANON_INODE_FS_MAGIC:
      return true;  // eventfd, epoll, timerfd, signalfd, ...
    default:
      return false;  // sockets, FUSE and network files, devices: may block
  }
}

bool
IsTmpfsFile(int fd)
{
  struct stat st;
  struct statfs fs;
  return fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && fstatfs(fd, &fs) == 0 &&
         fs.f_type == TMPFS_MAGIC;
}

bool
IsUnixSeqpacket(int fd)
{
  struct stat st;
  int domain = 0;
  int type = 0;
  socklen_t len = sizeof(domain);
  if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return false;
  if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0) return false;
  len = sizeof(type);
  if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0) return false;
  return domain == AF_UNIX && type == SOCK_SEQPACKET;
}

CloserCounts
CloserState()
{
  return TheCloser().Counts();
}

}  // namespace tritonpy
