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

import fcntl
import os

from libc.errno cimport EINTR, errno

from tritonpy.stub._poll cimport POLLIN, POLLNVAL, poll, pollfd

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
    /* Kernel interfaces a model has no use for, refused with EPERM (the
       set Docker's default profile, nsjail and Chromium keep from their
       sandboxes): asynchronous I/O rings, page faults handled in user
       space, performance counters, the kernel's key store, eBPF, kernels
       and modules, file handles, other processes' memory, mounts and
       namespaces once the stub has made its own, swap, reboot, process
       accounting and quotas, port I/O. Numbers of x86_64. */
    static const unsigned int tritonpy_refused[] = {
        425, 426, 427, /* io_uring_setup, io_uring_enter, io_uring_register */
        323,           /* userfaultfd */
        298,           /* perf_event_open */
        248, 249, 250, /* add_key, request_key, keyctl */
        321,           /* bpf */
        246, 320,      /* kexec_load, kexec_file_load */
        175, 313, 176, /* init_module, finit_module, delete_module */
        303, 304,      /* name_to_handle_at, open_by_handle_at */
        101, 310, 311, /* ptrace, process_vm_readv, process_vm_writev */
        165, 166, 155, 161, 308, /* mount, umount2, pivot_root, chroot, setns */
        428, 429, 430, 431, 432, 433, 442, /* open_tree, move_mount, fsopen,
                                              fsconfig, fsmount, fspick,
                                              mount_setattr */
        167, 168, 169, /* swapon, swapoff, reboot */
        163, 179, 443, /* acct, quotactl, quotactl_fd */
        172, 173,      /* iopl, ioperm */
    };
    #define TRITONPY_SYS_CLONE 56u
    #define TRITONPY_SYS_CLONE3 435u
    #define TRITONPY_SYS_UNSHARE 272u
    #define TRITONPY_SYS_PERSONALITY 135u
    #define TRITONPY_CLONE_NEWUSER 0x10000000u
    #define TRITONPY_SYS_IOCTL 16u
    /* ioctl requests that type into a terminal, or reach the console:
       TIOCSTI, TIOCLINUX (as bubblewrap and Flatpak refuse them). */
    #define TRITONPY_TIOCSTI 0x5412u
    #define TRITONPY_TIOCLINUX 0x541Cu
    /* personality(2) flags that turn off address randomisation or make
       memory executable or mappable at 0: ADDR_NO_RANDOMIZE, MMAP_PAGE_ZERO,
       ADDR_COMPAT_LAYOUT, READ_IMPLIES_EXEC. */
    #define TRITONPY_PERSONALITY_REFUSED 0x0740000u
    #endif

    /* Installs the filter above for the process and all it starts. Other
       ABIs than x86_64 are killed, x32 calls get ENOSYS; clone and unshare
       may not ask for a new user namespace (their flags are the first
       argument), clone3 gets ENOSYS (its flags are behind a pointer the
       filter cannot read; glibc then falls back to clone); ioctl may not
       type into a terminal. 0, or -1 with
       errno (ENOSYS on another architecture). */
    static int tritonpy_refuse_syscalls(void)
    {
    #if !defined(__x86_64__)
      errno = ENOSYS;
      return -1;
    #else
      enum {
        N = sizeof(tritonpy_refused) / sizeof(tritonpy_refused[0]),
        LIST = 5,                /* after: arch, its check, kill, nr, x32 */
        SPECIAL = LIST + N,      /* clone3, clone, unshare, personality, ioctl */
        ALLOW = SPECIAL + 5,
        FLAGS = ALLOW + 1,       /* clone and unshare: load, test, allow */
        PERSONA = FLAGS + 3,     /* load, query, test, allow */
        IOCTL = PERSONA + 4,     /* load the request, two tests, allow */
        EPERM_AT = IOCTL + 4,
        ENOSYS_AT = EPERM_AT + 1,
        LEN = ENOSYS_AT + 1,
      };
      struct sock_filter f[LEN];
      const unsigned int arg0 = offsetof(struct seccomp_data, args[0]);
      int i;
    #define TRITONPY_TO(at, label) ((unsigned char)((label) - (at) - 1))
      f[0] = (struct sock_filter)BPF_STMT(
          BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
      f[1] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0);
      f[2] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS);
      f[3] = (struct sock_filter)BPF_STMT(
          BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
      f[4] = (struct sock_filter)BPF_JUMP(
          BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, TRITONPY_TO(4, ENOSYS_AT), 0);
      for (i = 0; i < N; ++i)
        f[LIST + i] = (struct sock_filter)BPF_JUMP(
            BPF_JMP | BPF_JEQ | BPF_K, tritonpy_refused[i], TRITONPY_TO(LIST + i, EPERM_AT), 0);
      f[SPECIAL] = (struct sock_filter)BPF_JUMP(
          BPF_JMP | BPF_JEQ | BPF_K, TRITONPY_SYS_CLONE3, TRITONPY_TO(SPECIAL, ENOSYS_AT), 0);
      f[SPECIAL + 1] = (struct sock_filter)BPF_JUMP(
          BPF_JMP | BPF_JEQ | BPF_K, TRITONPY_SYS_CLONE, TRITONPY_TO(SPECIAL + 1, FLAGS), 0);
      f[SPECIAL + 2] = (struct sock_filter)BPF_JUMP(
          BPF_JMP | BPF_JEQ | BPF_K, TRITONPY_SYS_UNSHARE, TRITONPY_TO(SPECIAL + 2, FLAGS), 0);
      f[SPECIAL + 3] = (struct sock_filter)BPF_JUMP(
          BPF_JMP | BPF_JEQ | BPF_K, TRITONPY_SYS_PERSONALITY, TRITONPY_TO(SPECIAL + 3, PERSONA),
          0);
      f[SPECIAL + 4] = (struct sock_filter)BPF_JUMP(
          BPF_JMP | BPF_JEQ | BPF_K, TRITONPY_SYS_IOCTL, TRITONPY_TO(SPECIAL + 4, IOCTL), 0);
      f[ALLOW] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
      /* The low half of the flags: CLONE_NEWUSER is there. */
      f[FLAGS] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, arg0);
      f[FLAGS + 1] = (struct sock_filter)BPF_JUMP(
          BPF_JMP | BPF_JSET | BPF_K, TRITONPY_CLONE_NEWUSER, TRITONPY_TO(FLAGS + 1, EPERM_AT), 0);
      f[FLAGS + 2] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
      /* personality(0xffffffff) only asks for the current persona. */
      f[PERSONA] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, arg0);
      f[PERSONA + 1] = (struct sock_filter)BPF_JUMP(
          BPF_JMP | BPF_JEQ | BPF_K, 0xffffffffu, TRITONPY_TO(PERSONA + 1, PERSONA + 3),
          0);
      f[PERSONA + 2] = (struct sock_filter)BPF_JUMP(
          BPF_JMP | BPF_JSET | BPF_K, TRITONPY_PERSONALITY_REFUSED,
          TRITONPY_TO(PERSONA + 2, EPERM_AT), 0);
      f[PERSONA + 3] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
      /* The request is an unsigned int: the low half of the argument. */
      f[IOCTL] = (struct sock_filter)BPF_STMT(
          BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1]));
      f[IOCTL + 1] = (struct sock_filter)BPF_JUMP(
          BPF_JMP | BPF_JEQ | BPF_K, TRITONPY_TIOCSTI, TRITONPY_TO(IOCTL + 1, EPERM_AT), 0);
      f[IOCTL + 2] = (struct sock_filter)BPF_JUMP(
          BPF_JMP | BPF_JEQ | BPF_K, TRITONPY_TIOCLINUX, TRITONPY_TO(IOCTL + 2, EPERM_AT), 0);
      f[IOCTL + 3] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
      f[EPERM_AT] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM);
      f[ENOSYS_AT] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS);
    #undef TRITONPY_TO
      struct sock_fprog prog = {LEN, f};
      if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
      return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
    #endif
    }
    """
    int tritonpy_refuse_syscalls() nogil


def refuse_syscalls() -> None:
    """For a sandboxed stub, once its own set-up (mounts, Landlock) is done
    and before model code: the seccomp filter that refuses the kernel
    interfaces a model has no use for (docs/hardening.md). Raises OSError
    saying what the kernel refused."""
    if tritonpy_refuse_syscalls() != 0:
        raise OSError(
            errno,
            "the kernel refused a seccomp filter against unneeded system calls "
            f"(prctl PR_SET_SECCOMP): {os.strerror(errno)}",
        )


cdef extern from *:
    """
    #include <errno.h>
    #include <fcntl.h>
    #include <stdint.h>
    #include <sys/mount.h>
    #include <sys/stat.h>
    #include <sys/syscall.h>
    #include <unistd.h>

    /* Landlock's system calls have one number on every architecture. */
    #define TRITONPY_LANDLOCK_CREATE_RULESET 444
    #define TRITONPY_LANDLOCK_ADD_RULE 445
    #define TRITONPY_LANDLOCK_RESTRICT_SELF 446
    #define TRITONPY_LANDLOCK_VERSION 1u
    #define TRITONPY_LANDLOCK_RULE_PATH_BENEATH 1

    /* struct landlock_ruleset_attr as of ABI 6, and the rule of a path:
       spelled here, as system headers may predate them. */
    struct tritonpy_landlock_ruleset {
      uint64_t handled_access_fs;
      uint64_t handled_access_net;
      uint64_t scoped;
    };
    struct tritonpy_landlock_path {
      uint64_t allowed_access;
      int32_t parent_fd;
    } __attribute__((packed));

    /* The rights a rule on a file (not a directory) may carry: execute,
       write, read, truncate, ioctl on a device. */
    #define TRITONPY_LANDLOCK_FILE_RIGHTS \
      ((1ull << 0) | (1ull << 1) | (1ull << 2) | (1ull << 14) | (1ull << 15))

    /* The kernel's Landlock ABI version; -1 with errno without one. */
    static int tritonpy_landlock_abi(void)
    {
      return (int)syscall(TRITONPY_LANDLOCK_CREATE_RULESET, NULL, 0,
                          TRITONPY_LANDLOCK_VERSION);
    }

    static int tritonpy_landlock_ruleset(uint64_t fs, uint64_t scoped)
    {
      struct tritonpy_landlock_ruleset attr = {fs, 0, scoped};
      /* The size of the struct as far as the ABI knows it. */
      size_t size = scoped ? sizeof(attr) : sizeof(uint64_t);
      return (int)syscall(TRITONPY_LANDLOCK_CREATE_RULESET, &attr, size, 0);
    }

    /* Allows `access` beneath `path` (only the file rights if it is not a
       directory). 1 when the path does not exist or cannot be reached (no
       rule), 0 on success, -1 with errno. */
    static int tritonpy_landlock_allow(int ruleset, const char* path, uint64_t access)
    {
      struct tritonpy_landlock_path rule;
      struct stat st;
      int fd = open(path, O_PATH | O_CLOEXEC);
      if (fd < 0) return (errno == ENOENT || errno == EACCES || errno == ENOTDIR) ? 1 : -1;
      if (fstat(fd, &st) != 0) {
        int err = errno;
        close(fd);
        errno = err;
        return -1;
      }
      rule.allowed_access = S_ISDIR(st.st_mode) ? access : access & TRITONPY_LANDLOCK_FILE_RIGHTS;
      rule.parent_fd = fd;
      int r = (int)syscall(TRITONPY_LANDLOCK_ADD_RULE, ruleset,
                           TRITONPY_LANDLOCK_RULE_PATH_BENEATH, &rule, 0);
      int err = errno;
      close(fd);
      errno = err;
      return r;
    }

    static int tritonpy_landlock_restrict(int ruleset)
    {
      return (int)syscall(TRITONPY_LANDLOCK_RESTRICT_SELF, ruleset, 0);
    }

    /* The stub's scratch: a tmpfs of `bytes` on `path`, in the stub's own
       mount namespace; without access times with `noatime`. */
    static int tritonpy_mount_scratch(const char* path, const char* options, int noatime)
    {
      return mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV | (noatime ? MS_NOATIME : 0),
                   options);
    }

    /* The same tmpfs given `options` (its size) again. */
    static int tritonpy_resize_scratch(const char* path, const char* options)
    {
      return mount("tmpfs", path, "tmpfs", MS_REMOUNT | MS_NOSUID | MS_NODEV, options);
    }

    /* struct mount_attr and mount_setattr's number (the same on every
       architecture), spelled here as headers may predate them. */
    struct tritonpy_mount_attr {
      uint64_t attr_set, attr_clr, propagation, userns_fd;
    };
    #define TRITONPY_SYS_MOUNT_SETATTR 442
    #define TRITONPY_MOUNT_ATTR_RDONLY 0x1ull
    #define TRITONPY_AT_RECURSIVE 0x8000

    #define TRITONPY_MOUNT_ATTR_NOSUID 0x2ull
    #define TRITONPY_MOUNT_ATTR_NODEV 0x4ull
    #define TRITONPY_MOUNT_ATTR_NOEXEC 0x8ull

    /* `source` and the mounts beneath it bound on `target`, then given
       the attributes `set` (never taken away: those the source has stay).
       1 when the bind failed, 2 when the attributes did, with errno. */
    static int tritonpy_bind(const char* source, const char* target, uint64_t set, int recursive)
    {
      struct tritonpy_mount_attr attr = {set, 0, 0, 0};
      if (mount(source, target, NULL, MS_BIND | MS_REC, NULL) != 0) return 1;
      if (set && syscall(TRITONPY_SYS_MOUNT_SETATTR, AT_FDCWD, target,
                         recursive ? TRITONPY_AT_RECURSIVE : 0, &attr, sizeof(attr)) != 0) {
        return 2;
      }
      return 0;
    }

    /* The attributes `set` on the mount at `path` alone. */
    static int tritonpy_set_mount(const char* path, uint64_t set)
    {
      struct tritonpy_mount_attr attr = {set, 0, 0, 0};
      return (int)syscall(TRITONPY_SYS_MOUNT_SETATTR, AT_FDCWD, path, 0, &attr, sizeof(attr));
    }

    /* The current directory becomes the root; the old root is mounted
       on `put_old` (beneath the new one). */
    static int tritonpy_pivot_here(const char* put_old)
    {
      return (int)syscall(SYS_pivot_root, ".", put_old);
    }

    static int tritonpy_detach(const char* path)
    {
      return umount2(path, MNT_DETACH);
    }
    """
    int tritonpy_landlock_abi()
    int tritonpy_landlock_ruleset(unsigned long long fs, unsigned long long scoped)
    int tritonpy_landlock_allow(int ruleset, const char* path, unsigned long long access)
    int tritonpy_landlock_restrict(int ruleset)
    int tritonpy_mount_scratch(const char* path, const char* options, int noatime)
    int tritonpy_resize_scratch(const char* path, const char* options)
    int tritonpy_bind(const char* source, const char* target, unsigned long long set, int recursive)
    int tritonpy_set_mount(const char* path, unsigned long long set)
    int tritonpy_pivot_here(const char* put_old)
    int tritonpy_detach(const char* path)
    unsigned long long TRITONPY_MOUNT_ATTR_RDONLY
    unsigned long long TRITONPY_MOUNT_ATTR_NOSUID
    unsigned long long TRITONPY_MOUNT_ATTR_NODEV
    unsigned long long TRITONPY_MOUNT_ATTR_NOEXEC


def _refused(int err, what: str) -> OSError:
    return OSError(err, f"the kernel refused {what}: {os.strerror(err)}")


def mount_scratch(str path, unsigned long long size, bint noatime=False) -> None:
    """Mounts a private tmpfs of ``size`` bytes on ``path`` (the stub's
    own mount namespace: nobody else sees it), without access times with
    ``noatime``. OSError naming the step."""
    options = f"size={size},mode=1777".encode()
    if tritonpy_mount_scratch(os.fsencode(path), options, noatime) != 0:
        raise _refused(errno, f"a private scratch tmpfs on {path} (mount -t tmpfs)")


def resize_scratch(str path, unsigned long long size) -> None:
    """Makes the scratch tmpfs on ``path`` (mount_scratch's) ``size``
    bytes. OSError naming the step."""
    options = f"size={size}".encode()
    if tritonpy_resize_scratch(os.fsencode(path), options) != 0:
        raise _refused(errno, f"the size of the private scratch on {path} (mount -o remount)")


READ_ONLY = TRITONPY_MOUNT_ATTR_RDONLY
NO_SUID = TRITONPY_MOUNT_ATTR_NOSUID
NO_DEVICES = TRITONPY_MOUNT_ATTR_NODEV
NO_EXEC = TRITONPY_MOUNT_ATTR_NOEXEC


def bind(str source, str target, unsigned long long attributes, bint recursive=True) -> None:
    """Binds ``source`` (and the mounts beneath it) on ``target``, then
    sets ``attributes`` (READ_ONLY, NO_SUID, ...) on the new mounts, or on
    the top one alone. OSError naming the step."""
    r = tritonpy_bind(os.fsencode(source), os.fsencode(target), attributes, recursive)
    if r == 1:
        raise _refused(errno, f"a view of {target} (mount --bind)")
    if r == 2:
        raise _refused(errno, f"a read-only view of {target} (mount_setattr)")


def set_mount(str path, unsigned long long attributes) -> None:
    """Sets ``attributes`` on the mount at ``path``. OSError naming it."""
    if tritonpy_set_mount(os.fsencode(path), attributes) != 0:
        raise _refused(errno, f"the attributes of the mount at {path} (mount_setattr)")


def pivot_here(str put_old) -> None:
    """Makes the current directory the root, the old root mounted on
    ``put_old``. OSError naming the step."""
    if tritonpy_pivot_here(os.fsencode(put_old)) != 0:
        raise _refused(errno, "a root of the stub's own (pivot_root)")


def detach(str path) -> None:
    """Detaches the mount at ``path`` and those beneath it."""
    if tritonpy_detach(os.fsencode(path)) != 0:
        raise _refused(errno, f"detaching {path} (umount2 MNT_DETACH)")


cdef extern from *:
    """
    #include <pthread.h>
    #include <sched.h>
    #include <signal.h>
    #include <string.h>
    #include <unistd.h>

    /* The last steps of the stub's root, on a thread of their own: the
       detach waits for the kernel (an RCU grace period) while the stub's
       main thread goes on. `step` names the one that failed (0: none). */
    struct tritonpy_root_job {
      char host[256];
      uint64_t root_attributes;
      int step;
      int error;
      int started;
      pthread_t thread;
    };
    static struct tritonpy_root_job tritonpy_root;

    static void* tritonpy_root_run(void* arg)
    {
      struct tritonpy_root_job* job = (struct tritonpy_root_job*)arg;
      sigset_t all;
      sigfillset(&all);
      pthread_sigmask(SIG_BLOCK, &all, NULL);
      job->step = 1;
      if (tritonpy_detach(job->host) != 0) goto failed;
      job->step = 2;
      if (rmdir(job->host) != 0) goto failed;
      job->step = 3;
      /* A write under way on the root makes the kernel refuse the flag
         (EBUSY) for as long as it lasts: tried again, a bounded number
         of times. */
      for (int tries = 0; tritonpy_set_mount("/", job->root_attributes) != 0; ++tries) {
        if (errno != EBUSY || tries == 1000) goto failed;
        sched_yield();
      }
      job->step = 0;
      return NULL;
    failed:
      job->error = errno;
      return NULL;
    }

    /* 0, or the error of pthread_create (the caller then runs the job). */
    static int tritonpy_root_start(const char* host, uint64_t attributes)
    {
      struct tritonpy_root_job* job = &tritonpy_root;
      memset(job, 0, sizeof(*job));
      strncpy(job->host, host, sizeof(job->host) - 1);
      job->root_attributes = attributes;
      int r = pthread_create(&job->thread, NULL, tritonpy_root_run, job);
      job->started = r == 0;
      return r;
    }

    /* Waits for the job (run here if no thread took it): 0, or its step. */
    static int tritonpy_root_finish(int* error)
    {
      struct tritonpy_root_job* job = &tritonpy_root;
      if (job->started) {
        pthread_join(job->thread, NULL);
        job->started = 0;
      } else {
        tritonpy_root_run(job);
      }
      *error = job->error;
      return job->step;
    }
    """
    int tritonpy_root_start(const char* host, unsigned long long attributes)
    int tritonpy_root_finish(int* error) nogil


_root_host = ""


def finish_root_later(str host, unsigned long long attributes) -> None:
    """Starts the last steps of the stub's own root on a thread of its
    own: detaches ``host`` (the host's root, and the mounts beneath it),
    removes its mount point, and sets ``attributes`` on the root.
    finish_root() waits for them; nothing may run in between that the
    host's root must not be reachable for."""
    global _root_host
    _root_host = host
    tritonpy_root_start(os.fsencode(host), attributes)


def finish_root() -> None:
    """Waits for finish_root_later's steps (they run here if no thread
    could take them). OSError naming the step the kernel refused."""
    cdef int error = 0
    cdef int step
    with nogil:
        step = tritonpy_root_finish(&error)
    if step == 1:
        raise _refused(error, f"detaching {_root_host} (umount2 MNT_DETACH)")
    if step == 2:
        raise _refused(error, f"removing {_root_host} (rmdir)")
    if step == 3:
        raise _refused(error, "the attributes of the mount at / (mount_setattr)")


cdef extern from *:
    """
    #include <linux/capability.h>
    #include <sys/prctl.h>
    #include <sys/syscall.h>
    #include <unistd.h>

    /* Keeps only the capabilities of `keep` (a mask), for this process
       and whatever it executes: the bounding set loses the rest, then the
       permitted and effective sets. */
    static int tritonpy_keep_capabilities(uint64_t keep, int* step)
    {
      struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
      struct __user_cap_data_struct data[2];
      *step = 1;
      for (int cap = 0; cap < 64; ++cap) {
        if (keep & (1ull << cap)) continue;
        if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) {
          if (errno == EINVAL) break; /* past the kernel's last */
          return -1;
        }
      }
      *step = 2;
      if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL) {
        return -1;
      }
      *step = 3;
      data[0].effective = data[0].permitted = (uint32_t)keep;
      data[1].effective = data[1].permitted = (uint32_t)(keep >> 32);
      data[0].inheritable = data[1].inheritable = 0;
      return (int)syscall(SYS_capset, &header, data);
    }
    """
    int tritonpy_keep_capabilities(unsigned long long keep, int* step)


def keep_capabilities(unsigned long long keep) -> None:
    """Drops every capability but those of the mask ``keep``, for good
    (the bounding set too). OSError naming the step."""
    cdef int step = 0
    if tritonpy_keep_capabilities(keep, &step) != 0:
        what = {
            1: "dropping capabilities from the bounding set (prctl PR_CAPBSET_DROP)",
            2: "clearing the ambient capabilities (prctl PR_CAP_AMBIENT)",
        }.get(step, "dropping its capabilities (capset)")
        raise _refused(errno, what)


def landlock_abi() -> int:
    """The kernel's Landlock ABI version. OSError naming the step where it
    has none."""
    cdef int abi = tritonpy_landlock_abi()
    if abi < 0:
        raise _refused(errno, "a Landlock ruleset (landlock_create_ruleset)")
    return abi


def landlock(unsigned long long handled, unsigned long long scoped, list rules) -> None:
    """Restricts this process, and all it starts from now on, to the
    ``rules`` ((path, rights) pairs: rights beneath each path, of the
    ``handled`` ones; a path that does not exist is left out), and to the
    ``scoped`` scopes (abstract unix sockets, signals). Needs no_new_privs.
    OSError naming the step the kernel refused."""
    landlock_finish(landlock_ruleset(handled, scoped, []), rules)


def landlock_ruleset(
    unsigned long long handled, unsigned long long scoped, list rules, int lowest=0
) -> int:
    """A Landlock ruleset of ``handled`` and ``scoped`` (as landlock's)
    with the ``rules`` in it, not applied yet: its descriptor
    (close-on-exec), ``lowest`` or above. OSError naming the step."""
    cdef int ruleset = tritonpy_landlock_ruleset(handled, scoped)
    cdef int moved
    if ruleset < 0:
        raise _refused(errno, "a Landlock ruleset (landlock_create_ruleset)")
    if lowest > 0:
        moved = fcntl.fcntl(ruleset, fcntl.F_DUPFD_CLOEXEC, lowest)
        os.close(ruleset)
        ruleset = moved
    try:
        _landlock_add(ruleset, rules)
    except BaseException:
        os.close(ruleset)
        raise
    return ruleset


def _landlock_add(int ruleset, list rules) -> None:
    cdef bytes path
    for name, rights in rules:
        path = os.fsencode(name)
        if tritonpy_landlock_allow(ruleset, path, rights) < 0:
            raise _refused(errno, f"a Landlock rule for {name} (landlock_add_rule)")


def landlock_finish(int ruleset, list rules) -> None:
    """Adds the ``rules`` to ``ruleset`` (landlock_ruleset's), restricts
    this process to it as landlock does, and closes it, whatever
    happens. OSError naming the step the kernel refused."""
    try:
        _landlock_add(ruleset, rules)
        if tritonpy_landlock_restrict(ruleset) != 0:
            raise _refused(errno, "the Landlock ruleset (landlock_restrict_self)")
    finally:
        os.close(ruleset)
