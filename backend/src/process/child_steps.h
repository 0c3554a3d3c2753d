// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// The steps a child of the server takes before it runs its program: the
// sandbox (mounts, ids, no_new_privs, rlimits: docs/hardening.md), a
// process group of its own, the parent-death signal, its descriptors.
// Plain C, shared by the backend (child_launch.cc: between fork or clone
// and execve) and the stub template (src/tritonpy/stub/_zygote.pyx:
// between clone and the stub's main), so that a forked stub is set up by
// the very code that sets up an exec'd one. Only async-signal-safe calls,
// and raw syscalls where glibc's wrappers would talk to other threads
// (setresuid and friends).
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

// The step that failed, written to the report pipe with errno (the
// backend names it: StepText in child_launch.cc).
enum tritonpy_child_step {
  TRITONPY_STEP_MOUNT_PRIVATE = 0,
  TRITONPY_STEP_MOUNT_PROC = 1,
  TRITONPY_STEP_SET_IDS = 2,
  TRITONPY_STEP_NO_NEW_PRIVS = 3,
  TRITONPY_STEP_MAX_PROCESSES = 4,
  TRITONPY_STEP_ADDRESS_SPACE = 5,
  TRITONPY_STEP_PROCESS_GROUP = 6,
  TRITONPY_STEP_DEATH_SIGNAL = 7,
  TRITONPY_STEP_DESCRIPTORS = 8,
  TRITONPY_STEP_LOOPBACK = 9,
  TRITONPY_STEP_LANDLOCK = 10,
};

struct tritonpy_step_failure {
  int step;
  int error;
};

#define TRITONPY_MAX_PLACED 6

// landlock_create_ruleset: one number on every architecture (system
// headers may predate it).
#define TRITONPY_SYS_LANDLOCK_CREATE_RULESET 444

struct tritonpy_child_setup {
  int report_fd;  // write end of the failure pipe
  // Read end, or -1: a byte once the ids are mapped (sandbox) and the
  // backend has the pid of a forked child; end of file: it gave up.
  int go_fd;
  pid_t parent;  // the server
  int sandbox;
  int own_network;  // sandbox in a network namespace of its own (CLONE_NEWNET)
  rlim_t max_processes;
  rlim_t address_space;  // 0: unlimited
  // {descriptor now, descriptor in the child}
  int place[TRITONPY_MAX_PLACED][2];
  size_t placed;
  int null_stdin;
  // A spare (tritonpy/stub/template.py) took tritonpy_child_enter's steps
  // before its request: they are not taken again; the one that failed
  // (step -1: none) is reported once the go byte came.
  int entered;
  struct tritonpy_step_failure enter_failure;
};

static inline void
tritonpy_child_fail(const struct tritonpy_child_setup* s, int step)
{
  struct tritonpy_step_failure f;
  f.step = step;
  f.error = errno;
  ssize_t n = write(s->report_fd, &f, sizeof(f));
  (void)n;
  _exit(125);
}

// Brings up the loopback of the child's own network namespace (down when
// the namespace is made): 127.0.0.1 then reaches the stub's own sockets
// only.
static inline int
tritonpy_loopback_up(void)
{
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  struct ifreq ifr;
  memset(&ifr, 0, sizeof(ifr));
  memcpy(ifr.ifr_name, "lo", 3);
  int r = ioctl(fd, SIOCGIFFLAGS, &ifr);
  if (r == 0) {
    ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
    r = ioctl(fd, SIOCSIFFLAGS, &ifr);
  }
  int err = errno;
  close(fd);
  errno = err;
  return r;
}

// The sandbox's first steps, which reach nothing beyond the child's own
// namespaces (its ids mapped by then): its mounts made private, a /proc
// of its pid namespace, uid and gid 0 of its user namespace, its loopback
// up (own_network), Landlock checked. 0, or -1 with the step that failed
// in *failed.
static inline int
tritonpy_child_enter(int own_network, struct tritonpy_step_failure* failed)
{
  int step = -1;
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
    step = TRITONPY_STEP_MOUNT_PRIVATE;
  } else if (
      mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) !=
      0) {
    step = TRITONPY_STEP_MOUNT_PROC;
  } else if (
      syscall(SYS_setresgid, 0, 0, 0) != 0 ||
      syscall(SYS_setresuid, 0, 0, 0) != 0) {
    step = TRITONPY_STEP_SET_IDS;
  } else if (own_network && tritonpy_loopback_up() != 0) {
    step = TRITONPY_STEP_LOOPBACK;
  } else if (syscall(TRITONPY_SYS_LANDLOCK_CREATE_RULESET, NULL, 0, 1u) < 0) {
    // The stub confines its files with Landlock (tritonpy/stub/sandbox.py)
    // once its interpreter runs; a kernel without it fails here, where
    // the backend can say so.
    step = TRITONPY_STEP_LANDLOCK;
  }
  failed->step = step;
  failed->error = step < 0 ? 0 : errno;
  return step < 0 ? 0 : -1;
}

// Takes every step; a refused one is reported and ends the child (exit
// 125). Returns the highest descriptor placed (at least 2): the caller
// closes the ones above it (tritonpy_close_from).
static inline int
tritonpy_child_setup_run(const struct tritonpy_child_setup* s)
{
  if (s->go_fd >= 0) {
    char go = 0;
    if (read(s->go_fd, &go, 1) != 1) _exit(125);  // the parent gave up
  }
  if (s->sandbox) {
    struct tritonpy_step_failure failed = s->enter_failure;
    if (!s->entered) tritonpy_child_enter(s->own_network, &failed);
    if (failed.step >= 0) {
      errno = failed.error;
      tritonpy_child_fail(s, failed.step);
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
      tritonpy_child_fail(s, TRITONPY_STEP_NO_NEW_PRIVS);
    }
    struct rlimit nproc = {s->max_processes, s->max_processes};
    if (setrlimit(RLIMIT_NPROC, &nproc) != 0) {
      tritonpy_child_fail(s, TRITONPY_STEP_MAX_PROCESSES);
    }
    if (s->address_space != 0) {
      struct rlimit as = {s->address_space, s->address_space};
      if (setrlimit(RLIMIT_AS, &as) != 0) {
        tritonpy_child_fail(s, TRITONPY_STEP_ADDRESS_SPACE);
      }
    }
  }
  if (setpgid(0, 0) != 0) tritonpy_child_fail(s, TRITONPY_STEP_PROCESS_GROUP);
  // Until the child watches the server itself (tritonpy/stub/main.py).
  if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) {
    tritonpy_child_fail(s, TRITONPY_STEP_DEATH_SIGNAL);
  }
  // Outside a pid namespace: the server may have died before the call.
  if (!s->sandbox && getppid() != s->parent) _exit(125);
  // Out of the way of the targets first, then into place (dup2 clears
  // FD_CLOEXEC on the copy).
  int moved[TRITONPY_MAX_PLACED];
  int last = 2;
  for (size_t i = 0; i < s->placed; ++i) {
    moved[i] = fcntl(s->place[i][0], F_DUPFD, 16);
    if (moved[i] < 0) tritonpy_child_fail(s, TRITONPY_STEP_DESCRIPTORS);
  }
  for (size_t i = 0; i < s->placed; ++i) {
    if (dup2(moved[i], s->place[i][1]) != s->place[i][1]) {
      tritonpy_child_fail(s, TRITONPY_STEP_DESCRIPTORS);
    }
    if (s->place[i][1] > last) last = s->place[i][1];
  }
  if (s->null_stdin) {
    int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd < 0 || dup2(null_fd, 0) != 0) {
      tritonpy_child_fail(s, TRITONPY_STEP_DESCRIPTORS);
    }
  }
  return last;
}

// Closes every descriptor from `first` on (below `max_fd` where
// close_range is missing), and unblocks all signals (threads of
// tritonserver may block some).
static inline void
tritonpy_child_finish(int first, int max_fd)
{
#ifdef SYS_close_range
  if (syscall(SYS_close_range, first, ~0U, 0) != 0)
#endif
  {
    for (int fd = first; fd < max_fd; ++fd) close(fd);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
}
