# SPDX-License-Identifier: BSD-3-Clause
# Copyright (c) The tritonpy authors.
# cython: language_level=3
"""The stub template's fork (tritonpy/stub/template.py).

The template forks each stub as a child of tritonserver, not of itself
(``CLONE_PARENT``): the server waits for it, reads its exit status and
restarts it as it does an exec'd stub, and the template's death leaves
running stubs alone. glibc has no fork with that flag, so this is the raw
``clone3`` (``clone`` where the kernel lacks it) wrapped as ``os.fork``
wraps glibc's: ``PyOS_BeforeFork`` / ``PyOS_AfterFork_*`` run Python's
at-fork hooks (``random`` reseeds in the child). As glibc's own fork
does, the kernel writes the child's thread id into the thread's control
block (``CLONE_CHILD_SETTID`` at the address ``PR_GET_TID_ADDRESS``
reads): without it, ``raise`` and ``abort`` in the stub would signal a
thread that is not theirs. In the child, before any Python runs, the
steps of an exec'd stub are taken by the same C code the backend uses
(``backend/src/process/child_steps.h``): sandbox, process group, parent-death
signal, descriptors.
"""

import os

from libc.string cimport memset

cdef extern from "Python.h":
    void PyOS_BeforeFork()
    void PyOS_AfterFork_Parent()
    void PyOS_AfterFork_Child()

cdef extern from "child_steps.h" nogil:
    ctypedef unsigned long rlim_t
    struct tritonpy_step_failure:
        int step
        int error
    struct tritonpy_child_setup:
        int report_fd
        int go_fd
        int parent
        int sandbox
        int own_network
        rlim_t max_processes
        rlim_t address_space
        int place[6][2]
        size_t placed
        int null_stdin
        int entered
        tritonpy_step_failure enter_failure
    int tritonpy_child_enter(int own_network, tritonpy_step_failure* failed)
    int tritonpy_child_setup_run(const tritonpy_child_setup* s)
    void tritonpy_child_finish(int first, int max_fd)

cdef extern from *:
    """
    #include <errno.h>
    #include <sched.h>
    #include <stdint.h>
    #include <sys/prctl.h>
    #include <sys/syscall.h>
    #include <unistd.h>

    #ifndef PR_GET_TID_ADDRESS
    #define PR_GET_TID_ADDRESS 40
    #endif

    /* The first fields of the kernel's struct clone_args (CLONE_ARGS_SIZE_VER0). */
    struct tritonpy_clone_args {
      uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
    };

    /* Where glibc keeps this thread's id (the kernel was told at thread
       start, set_tid_address); NULL if the kernel does not say. */
    static int* tritonpy_tid_address(void)
    {
      int* addr = NULL;
      if (prctl(PR_GET_TID_ADDRESS, &addr, 0, 0, 0) != 0) return NULL;
      return addr;
    }

    /* Forks a sibling of this process (CLONE_PARENT), in new user, pid and
       mount namespaces with `sandbox`, and a network namespace too with
       `own_network`. Returns as fork does; -1 with errno. */
    static long tritonpy_clone_sibling(int sandbox, int own_network, int* tid)
    {
      uint64_t flags = CLONE_PARENT | CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID;
      if (sandbox) flags |= CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC;
      if (sandbox && own_network) flags |= CLONE_NEWNET;
      long r = -1;
      errno = ENOSYS;
    #ifdef SYS_clone3
      struct tritonpy_clone_args args = {0};
      args.flags = flags;
      args.child_tid = (uint64_t)(uintptr_t)tid;
      r = syscall(SYS_clone3, &args, sizeof(args));
    #endif
      if (r < 0 && errno == ENOSYS) {
        /* The exit signal is the template's own (SIGCHLD) with CLONE_PARENT. */
    #if defined(__x86_64__)
        r = syscall(SYS_clone, flags, 0, NULL, tid, 0);
    #elif defined(__aarch64__)
        r = syscall(SYS_clone, flags, 0, NULL, 0, tid);
    #endif
      }
      return r;
    }

    /* Closes the descriptors from `first` to `last`. */
    static void tritonpy_close_between(int first, int last)
    {
    #ifdef SYS_close_range
      if (syscall(SYS_close_range, first, last, 0) == 0) return;
    #endif
      for (int fd = first; fd <= last; ++fd) close(fd);
    }
    """
    int* tritonpy_tid_address()
    long tritonpy_clone_sibling(int sandbox, int own_network, int* tid)
    void tritonpy_close_between(int first, int last)


def can_fork() -> str:
    """"" when this process can fork stubs, else why not."""
    if tritonpy_tid_address() == NULL:
        return "the kernel does not report the thread id address (prctl PR_GET_TID_ADDRESS)"
    return ""


cdef void _fill(
    tritonpy_child_setup* s, int report_fd, int go_fd, int parent, list place, bint null_stdin
) except *:
    """The steps' descriptors; the caller fills in the sandbox's fields."""
    if len(place) > 6:
        raise ValueError("too many descriptors for a stub")
    memset(s, 0, sizeof(s[0]))
    s.report_fd = report_fd
    s.go_fd = go_fd
    s.parent = parent
    for fd, target in place:
        s.place[s.placed][0] = fd
        s.place[s.placed][1] = target
        s.placed += 1
    s.null_stdin = null_stdin


def fork_stub(
    int report_fd,
    int go_fd,
    int parent,
    bint sandbox,
    unsigned long long max_processes,
    unsigned long long address_space,
    list place,
    bint null_stdin,
    int max_fd,
    bint own_network=True,
) -> int:
    """Forks a child of this process's parent. The child takes the steps of
    child_steps.h (every one after the go byte on ``go_fd``: without it the
    child exits, and a child the backend gave up on never runs; a failure
    reported on ``report_fd``), keeps only the descriptors of ``place``
    ((fd, target) pairs) and 0 to 2, and returns 0; the parent returns the
    child's pid. A sandboxed child gets a network namespace of its own
    unless ``own_network`` is false (stub-sandbox-network=host). OSError
    when the kernel refuses the clone."""
    cdef tritonpy_child_setup s
    _fill(&s, report_fd, go_fd, parent, place, null_stdin)
    s.sandbox = sandbox
    s.own_network = sandbox and own_network
    s.max_processes = max_processes
    s.address_space = address_space
    return _clone(sandbox, own_network, &s, max_fd)


cdef long _clone(
    bint sandbox, bint own_network, tritonpy_child_setup* steps, int max_fd
) except -1:
    """Clones a sibling as fork_stub says; the child takes ``steps``
    (none: NULL) and returns 0."""
    cdef int* tid = tritonpy_tid_address()
    cdef long pid
    cdef int err
    cdef int last
    if tid == NULL:
        raise OSError(can_fork())
    PyOS_BeforeFork()
    pid = tritonpy_clone_sibling(sandbox, own_network, tid)
    if pid == 0:
        if steps != NULL:
            last = tritonpy_child_setup_run(steps)
            tritonpy_child_finish(last + 1, max_fd)
        PyOS_AfterFork_Child()
        return 0
    err = errno_now()
    PyOS_AfterFork_Parent()
    if pid < 0:
        raise OSError(err, os.strerror(err))
    return pid


def clone_spare() -> int:
    """Clones a sandboxed child of this process's parent ahead of its
    stub (template.py, the spare): new user, pid, mount, IPC and network
    namespaces, and no other step. Returns as fork does; OSError when the
    kernel refuses the clone. Once its ids are mapped, the child takes the
    steps within its namespaces with ``enter``, and the others with
    ``take_steps`` once it is given a stub to become."""
    return _clone(True, True, NULL, 0)


def enter() -> tuple[int, int]:
    """In a spare whose ids are mapped: the sandbox's steps that reach
    nothing beyond its own namespaces (child_steps.h,
    tritonpy_child_enter). (step, errno) of the one the kernel refused,
    or (-1, 0), for ``take_steps`` to report."""
    cdef tritonpy_step_failure failed
    tritonpy_child_enter(1, &failed)
    return failed.step, failed.error


def take_steps(
    int report_fd,
    int go_fd,
    int parent,
    unsigned long long max_processes,
    unsigned long long address_space,
    list place,
    bint null_stdin,
    int max_fd,
    tuple entered,
    int keep=-1,
) -> None:
    """In a spare (clone_spare): the steps a sandboxed child of fork_stub
    takes after its clone, the go byte first, but those ``enter`` took
    (``entered``: what it returned), whose failure is reported here. The
    descriptor ``keep`` (above 15, the highest a stub's are placed at;
    -1: none) stays open."""
    cdef tritonpy_child_setup s
    cdef int last
    _fill(&s, report_fd, go_fd, parent, place, null_stdin)
    s.sandbox = 1
    s.own_network = 1
    s.max_processes = max_processes
    s.address_space = address_space
    s.entered = 1
    s.enter_failure.step = entered[0]
    s.enter_failure.error = entered[1]
    last = tritonpy_child_setup_run(&s)
    if keep > last:
        tritonpy_close_between(last + 1, keep - 1)
        tritonpy_child_finish(keep + 1, max_fd)
    else:
        tritonpy_child_finish(last + 1, max_fd)


cdef extern from "<errno.h>":
    int errno


cdef inline int errno_now() noexcept:
    return errno


cdef extern from "<sys/prctl.h>" nogil:
    int prctl(int option, unsigned long a2, unsigned long a3, unsigned long a4, unsigned long a5)
    enum:
        PR_SET_PDEATHSIG


def clear_death_signal() -> None:
    """The template watches the server's lifeline itself: the death of the
    server thread that started it (the kernel's parent for the signal)
    must not end it."""
    prctl(PR_SET_PDEATHSIG, 0, 0, 0, 0)
