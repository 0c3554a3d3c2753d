# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
# cython: language_level=3
"""The stub ends with tritonserver, whatever its model's code is doing.

A native thread (no GIL: model code holding the GIL or blocking the event
loop cannot hold it up) waits on the server's lifeline, the read end of a
pipe whose write end only the server holds, which the backend hands over
as a descriptor (a pidfd of the server would let model code signal it and
take its descriptors). Once the server has exited, the pipe hangs up and
the thread SIGKILLs
the stub's process group (the stub and whatever its model started and left
in the group), then ends the stub. In the sandbox the stub is pid 1 of its
own pid namespace: its exit takes every process of the namespace along.

Until the thread watches, the parent-death signal the backend set before
execve (SIGKILL) covers the stub alone; the thread clears it once it
watches, so that the death of the server thread that happened to start the
stub (the kernel's "parent" for that signal) cannot end a healthy stub.
"""

import os

from libc.errno cimport EINTR, errno

cdef extern from "<poll.h>" nogil:
    struct pollfd:
        int fd
        short events
        short revents
    int poll(pollfd* fds, unsigned long nfds, int timeout)
    enum:
        POLLIN
        POLLNVAL

cdef extern from "<pthread.h>" nogil:
    ctypedef unsigned long pthread_t
    ctypedef struct pthread_attr_t:
        pass
    int pthread_attr_init(pthread_attr_t* attr)
    int pthread_attr_setdetachstate(pthread_attr_t* attr, int state)
    int pthread_attr_setstacksize(pthread_attr_t* attr, size_t size)
    int pthread_attr_destroy(pthread_attr_t* attr)
    int pthread_create(pthread_t* t, const pthread_attr_t* attr, void* (*fn)(void*) noexcept nogil, void* arg)
    enum:
        PTHREAD_CREATE_DETACHED

cdef extern from "<signal.h>" nogil:
    ctypedef struct sigset_t:
        pass
    int sigfillset(sigset_t* s)
    int pthread_sigmask(int how, const sigset_t* s, sigset_t* old)
    int kill(int pid, int sig)
    enum:
        SIG_BLOCK
        SIGKILL

cdef extern from "<sys/prctl.h>" nogil:
    int prctl(int option, unsigned long a2, unsigned long a3, unsigned long a4, unsigned long a5)
    enum:
        PR_SET_PDEATHSIG

cdef extern from "<unistd.h>" nogil:
    void _exit(int status)

cdef int _lifeline = -1


cdef void* _watch(void* arg) noexcept nogil:
    cdef sigset_t all_signals
    cdef pollfd p
    cdef int r
    # Signals are for the stub's main thread (Python runs handlers there).
    sigfillset(&all_signals)
    pthread_sigmask(SIG_BLOCK, &all_signals, NULL)
    p.fd = _lifeline
    p.events = POLLIN
    p.revents = 0
    while True:
        r = poll(&p, 1, -1)
        if r > 0:
            break
        if r < 0 and errno != EINTR:
            return NULL
    if p.revents & POLLNVAL:
        return NULL  # model code closed the descriptor before we watched it
    kill(0, SIGKILL)  # the stub's process group, the stub included...
    _exit(1)  # ...except pid 1 of a namespace, which SIGKILL from inside spares
    return NULL


def watch_server(int lifeline) -> bool:
    """Starts the thread that ends the stub's process group once the pipe
    ``lifeline`` hangs up (tritonserver has exited), then clears the stub's
    parent-death signal. False (nothing changed) if the thread could not
    start."""
    global _lifeline
    cdef pthread_attr_t attr
    cdef pthread_t thread
    cdef int r
    _lifeline = lifeline
    pthread_attr_init(&attr)
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED)
    pthread_attr_setstacksize(&attr, 64 * 1024)
    r = pthread_create(&thread, &attr, _watch, NULL)
    pthread_attr_destroy(&attr)
    if r != 0:
        return False
    prctl(PR_SET_PDEATHSIG, 0, 0, 0, 0)
    return True


cdef extern from *:
    """
    #include <errno.h>
    #include <linux/audit.h>
    #include <linux/filter.h>
    #include <linux/seccomp.h>
    #include <stddef.h>
    #include <sys/prctl.h>
    #include <sys/syscall.h>
    #include <unistd.h>

    #if defined(__x86_64__)
    #define TRITONPY_AUDIT_ARCH AUDIT_ARCH_X86_64
    #elif defined(__aarch64__)
    #define TRITONPY_AUDIT_ARCH AUDIT_ARCH_AARCH64
    #endif

    /* Sets the real uid to `uid` (the effective and saved ones stay), then
       denies every later change of uid to the process and all it starts:
       set*uid fail with EPERM (other ABIs than the native one are killed).
       Returns 0, or -1 with errno and *step: 1 the switch, 2 the filter. */
    static int tritonpy_keep_real_uid(unsigned int uid, int* step)
    {
    #ifndef TRITONPY_AUDIT_ARCH
      *step = 2;
      errno = ENOSYS;
      return -1;
    #else
      struct sock_filter filter[] = {
          BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
          BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, TRITONPY_AUDIT_ARCH, 1, 0),
          BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
          BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
          BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 4, 0), /* x32 */
          BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_setuid, 3, 0),
          BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_setreuid, 2, 0),
          BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_setresuid, 1, 0),
          BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
          BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
      };
      struct sock_fprog prog = {sizeof(filter) / sizeof(filter[0]), filter};
      *step = 1;
      if (syscall(SYS_setresuid, uid, -1, -1) != 0) return -1;
      *step = 2;
      return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
    #endif
    }
    """
    int tritonpy_keep_real_uid(unsigned int uid, int* step) nogil


def keep_real_uid(unsigned int uid) -> None:
    """For a sandboxed stub of a root server: makes the stub's real uid
    ``uid`` of its user namespace (mapped to stub-sandbox-uid outside, so
    that the kernel counts its processes against RLIMIT_NPROC, which a real
    root escapes) while files stay readable as root, then forbids changing
    uids back. Before any thread starts (setresuid here is the raw call,
    for the calling thread only). Raises OSError saying what was refused."""
    cdef int step = 0
    if tritonpy_keep_real_uid(uid, &step) != 0:
        what = (
            "switching the real uid (setresuid)"
            if step == 1
            else "a seccomp filter against uid changes (prctl PR_SET_SECCOMP)"
        )
        raise OSError(errno, f"the kernel refused {what}: {os.strerror(errno)}")
