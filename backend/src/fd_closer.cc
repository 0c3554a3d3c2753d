// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "fd_closer.h"

#include <pthread.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <deque>
#include <thread>

#include "mutex.h"

#ifndef TMPFS_MAGIC
#define TMPFS_MAGIC 0x01021994
#endif

namespace tritonpy {

namespace {

class Closer {
 public:
  void Push(int fd) EXCLUDES(mu_)
  {
    MutexLock lock(&mu_);
    if (!started_) {
      // Detached: at exit the process may still be stuck in a close.
      std::thread(&Closer::Loop, this).detach();
      started_ = true;
    }
    if (static_cast<int>(queue_.size()) + busy_ >= kCloserQueue) {
      ++leaked_;
      return;
    }
    queue_.push_back(fd);
    ready_.NotifyAll();
  }

  CloserCounts Counts() EXCLUDES(mu_)
  {
    MutexLock lock(&mu_);
    return {static_cast<int>(queue_.size()) + busy_, leaked_};
  }

 private:
  void Loop() EXCLUDES(mu_)
  {
    pthread_setname_np(pthread_self(), "tritonpy-closer");
    while (true) {
      int fd;
      {
        MutexLock lock(&mu_);
        busy_ = 0;
        while (queue_.empty()) ready_.Wait();
        fd = queue_.front();
        queue_.pop_front();
        busy_ = 1;
      }
      close(fd);
    }
  }

  Mutex mu_;
  CondVar ready_{&mu_};
  std::deque<int> queue_ GUARDED_BY(mu_);
  int busy_ GUARDED_BY(mu_) = 0;
  long leaked_ GUARDED_BY(mu_) = 0;
  bool started_ GUARDED_BY(mu_) = false;
};

// Never destroyed: the detached thread uses it until the process ends.
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
  // A socket is made to close without lingering (an abortive close) while
  // the stub may still hold it: usually the close then cannot block at
  // all. The stub can set SO_LINGER again before the closer gets to it,
  // hence the thread.
  struct linger off = {1, 0};
  (void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &off, sizeof(off));
  TheCloser().Push(fd);
}

bool
IsTmpfsFile(int fd)
{
  struct stat st;
  struct statfs fs;
  return fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && fstatfs(fd, &fs) == 0 &&
         fs.f_type == TMPFS_MAGIC;
}

CloserCounts
CloserState()
{
  return TheCloser().Counts();
}

}  // namespace tritonpy
