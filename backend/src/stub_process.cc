// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "stub_process.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

extern char** environ;

namespace tritonpy {

namespace {

constexpr int kStubFd = 3;
// Where the stub finds the server's pidfd (--server-pidfd).
constexpr int kServerPidFd = 4;

// A pidfd of this process, opened once (close-on-exec): each stub gets a
// copy and a thread of its own, outside the GIL, waits on it to end its
// process group when the server is gone. -1 before Linux 5.3.
int
ServerPidfd()
{
#ifdef SYS_pidfd_open
  static const int fd = static_cast<int>(syscall(SYS_pidfd_open, getpid(), 0));
  return fd;
#else
  return -1;
#endif
}

// Resolves a bare program name through PATH before fork: execvp is not
// async-signal-safe, execve is.
std::string
ResolveExecutable(const std::string& name)
{
  if (name.find('/') != std::string::npos) return name;
  const char* path = getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    if (dir.empty()) dir = ".";
    std::string candidate = dir + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return name;  // execve will fail with ENOENT, reported as exit 127
}

// Everything a child needs between fork and execve, built before fork:
// only async-signal-safe calls are allowed in between.
class ExecPlan {
 public:
  // `env`: null for the server's own environment.
  ExecPlan(
      const std::string& program, std::vector<std::string> args,
      const std::vector<std::string>* env)
      : exe_(ResolveExecutable(program)),
        args_(std::move(args)),
        inherit_env_(env == nullptr)
  {
    if (env != nullptr) env_ = *env;
    for (std::string& a : args_) argv_.push_back(&a[0]);
    argv_.push_back(nullptr);
    for (std::string& e : env_) envp_.push_back(&e[0]);
    envp_.push_back(nullptr);
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        rl.rlim_cur < static_cast<rlim_t>(1 << 20)) {
      max_fd_ = static_cast<int>(rl.rlim_cur);
    }
    sigemptyset(&empty_mask_);
  }

  const std::string& executable() const { return exe_; }

  // In the child: closes every descriptor above `last_kept`, unblocks all
  // signals (threads of tritonserver may block some) and execs.
  [[noreturn]] void Exec(int last_kept)
  {
#ifdef SYS_close_range
    if (syscall(SYS_close_range, last_kept + 1, ~0U, 0) != 0)
#endif
    {
      for (int fd = last_kept + 1; fd < max_fd_; ++fd) close(fd);
    }
    sigprocmask(SIG_SETMASK, &empty_mask_, nullptr);
    execve(exe_.c_str(), argv_.data(), inherit_env_ ? environ : envp_.data());
    _exit(127);
  }

 private:
  std::string exe_;
  std::vector<std::string> args_;
  std::vector<std::string> env_;
  bool inherit_env_;
  std::vector<char*> argv_;
  std::vector<char*> envp_;
  int max_fd_ = 65536;
  sigset_t empty_mask_;
};

// Appends what is readable on `fd` to *sink; false at end of file.
bool
Drain(int fd, std::string* sink)
{
  char buf[4096];
  ssize_t n = read(fd, buf, sizeof(buf));
  if (n > 0) sink->append(buf, static_cast<size_t>(n));
  return n > 0 || (n < 0 && errno == EINTR);
}

// The steps a child takes before execve; the one that fails is reported
// to the parent through a pipe (execve closes it on success).
enum class Step : int {
  kMountPrivate,
  kMountProc,
  kSetIds,
  kNoNewPrivs,
  kMaxProcesses,
  kAddressSpace,
  kProcessGroup,
  kDeathSignal,
  kDescriptors,
};

const char*
StepText(Step step)
{
  switch (step) {
    case Step::kMountPrivate:
      return "making the stub's mount namespace private (mount MS_PRIVATE "
             "on /)";
    case Step::kMountProc:
      return "mounting a /proc of the stub's own pid namespace (mount -t "
             "proc)";
    case Step::kSetIds:
      return "taking uid and gid 0 of its user namespace (setresuid/"
             "setresgid)";
    case Step::kNoNewPrivs:
      return "no_new_privs (prctl PR_SET_NO_NEW_PRIVS)";
    case Step::kMaxProcesses:
      return "the process limit stub-sandbox-max-processes (setrlimit "
             "RLIMIT_NPROC)";
    case Step::kAddressSpace:
      return "the address-space limit stub-sandbox-address-space-bytes "
             "(setrlimit RLIMIT_AS)";
    case Step::kProcessGroup:
      return "a process group of its own (setpgid)";
    case Step::kDeathSignal:
      return "the parent-death signal (prctl PR_SET_PDEATHSIG)";
    case Step::kDescriptors:
      return "setting up its descriptors (dup2)";
  }
  return "an unknown step";
}

struct StepFailure {
  Step step;
  int error;
};

// What the child does between fork (or clone) and execve, prepared before:
// only async-signal-safe calls, and raw syscalls where glibc's wrappers
// would talk to the parent's other threads (setresuid and friends).
struct ChildSetup {
  int socket_fd = -1;
  int pidfd = -1;      // the server's, or -1
  int report_fd = -1;  // write end of the failure pipe
  int go_fd = -1;      // sandbox: read end, a byte once the ids are mapped
  pid_t parent = -1;
  bool sandbox = false;
  rlim_t max_processes = 0;
  rlim_t address_space = 0;  // 0: unlimited

  [[noreturn]] void Fail(Step step) const
  {
    StepFailure f{step, errno};
    ssize_t n = write(report_fd, &f, sizeof(f));
    (void)n;
    _exit(125);
  }

  [[noreturn]] void Run(ExecPlan* plan) const
  {
    if (sandbox) {
      char go = 0;
      if (read(go_fd, &go, 1) != 1) _exit(125);  // the parent gave up
      if (mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
        Fail(Step::kMountPrivate);
      }
      if (mount(
              "proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
              nullptr) != 0) {
        Fail(Step::kMountProc);
      }
      if (syscall(SYS_setresgid, 0, 0, 0) != 0 ||
          syscall(SYS_setresuid, 0, 0, 0) != 0) {
        Fail(Step::kSetIds);
      }
      if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
        Fail(Step::kNoNewPrivs);
      }
      struct rlimit nproc = {max_processes, max_processes};
      if (setrlimit(RLIMIT_NPROC, &nproc) != 0) Fail(Step::kMaxProcesses);
      if (address_space != 0) {
        struct rlimit as = {address_space, address_space};
        if (setrlimit(RLIMIT_AS, &as) != 0) Fail(Step::kAddressSpace);
      }
    }
    if (setpgid(0, 0) != 0) Fail(Step::kProcessGroup);
    // Until the stub watches the pidfd itself (tritonpy/stub/main.py).
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) {
      Fail(Step::kDeathSignal);
    }
    // Outside a pid namespace: the server may have died before the call.
    if (!sandbox && getppid() != parent) _exit(125);
    // Out of the way of 3 and 4 first, then into place (dup2 clears
    // FD_CLOEXEC on the copy).
    int sock = fcntl(socket_fd, F_DUPFD, 16);
    int pfd = pidfd >= 0 ? fcntl(pidfd, F_DUPFD, 16) : -1;
    if (sock < 0 || (pidfd >= 0 && pfd < 0) || dup2(sock, kStubFd) != kStubFd ||
        (pfd >= 0 && dup2(pfd, kServerPidFd) != kServerPidFd)) {
      Fail(Step::kDescriptors);
    }
    plan->Exec(pfd >= 0 ? kServerPidFd : kStubFd);
  }
};

// Writes `text` to /proc/<pid>/<name>.
Status
WriteProcFile(pid_t pid, const char* name, const std::string& text)
{
  std::string path = "/proc/" + std::to_string(pid) + "/" + name;
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  ssize_t n = fd >= 0 ? write(fd, text.data(), text.size()) : -1;
  int err = errno;
  if (fd >= 0) close(fd);
  if (n != static_cast<ssize_t>(text.size())) {
    return Status::Unavailable(
        "writing '" + text.substr(0, text.find('\n')) + "' to " + path + ": " +
        strerror(err));
  }
  return Status();
}

// The uid a sandboxed stub of a root server takes as its real uid, inside
// its user namespace (mapped to sandbox.uid outside).
constexpr int kSandboxRealUid = 1;

// Maps the sandboxed child's user namespace. A server that is not root
// may map only its own ids: uid and gid 0 inside are the server's. A root
// server maps uid 0 to root (files stay readable as they are for every
// stub) and kSandboxRealUid to sandbox.uid, which the stub takes as its
// real uid before anything else runs (tritonpy/stub/main.py): a real root
// would escape RLIMIT_NPROC.
Status
MapIds(pid_t pid, const StubSandbox& sandbox)
{
  if (geteuid() == 0) {
    TRITONPY_RETURN_IF_ERROR(WriteProcFile(
        pid, "uid_map",
        "0 0 1\n" + std::to_string(kSandboxRealUid) + " " +
            std::to_string(sandbox.uid) + " 1\n"));
    return WriteProcFile(pid, "gid_map", "0 0 1\n");
  }
  // Without CAP_SETGID, gid_map may be written only once setgroups is
  // denied.
  TRITONPY_RETURN_IF_ERROR(WriteProcFile(pid, "setgroups", "deny"));
  TRITONPY_RETURN_IF_ERROR(
      WriteProcFile(pid, "uid_map", "0 " + std::to_string(geteuid()) + " 1\n"));
  return WriteProcFile(
      pid, "gid_map", "0 " + std::to_string(getegid()) + " 1\n");
}

void
CloseIf(int* fd)
{
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

}  // namespace

StubProcess::~StubProcess()
{
  if (pid_ > 0) KillAndReap();
}

Status
StubProcess::Spawn(
    const StubLaunch& launch, const std::string& instance_name, int* backend_fd)
{
  const std::string prefix =
      "tritonpy: stub for instance '" + instance_name + "': ";
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    return Status::Internal(
        std::string("tritonpy: socketpair: ") + strerror(errno));
  }
  int report[2] = {-1, -1};
  int go[2] = {-1, -1};
  if (pipe2(report, O_CLOEXEC) != 0 ||
      (launch.sandbox.enabled && pipe2(go, O_CLOEXEC) != 0)) {
    int err = errno;
    for (int* fd : {&sv[0], &sv[1], &report[0], &report[1]}) CloseIf(fd);
    return Status::Internal(std::string("tritonpy: pipe: ") + strerror(err));
  }
  std::vector<std::string> args = {
      launch.python,           "-m",         "tritonpy.stub", "--fd",
      std::to_string(kStubFd), "--instance", instance_name};
  ChildSetup setup;
  setup.socket_fd = sv[1];
  setup.pidfd = ServerPidfd();
  if (setup.pidfd >= 0) {
    args.push_back("--server-pidfd");
    args.push_back(std::to_string(kServerPidFd));
  }
  if (launch.sandbox.enabled && geteuid() == 0) {
    args.push_back("--sandbox-real-uid");
    args.push_back(std::to_string(kSandboxRealUid));
  }
  setup.report_fd = report[1];
  setup.go_fd = go[0];
  setup.parent = getpid();
  setup.sandbox = launch.sandbox.enabled;
  setup.max_processes = launch.sandbox.max_processes;
  setup.address_space = launch.sandbox.address_space_bytes;
  ExecPlan plan(
      launch.python, std::move(args),
      launch.env.empty() && !launch.env_filtered ? nullptr : &launch.env);
  executable_ = plan.executable();

  pid_t pid;
  if (launch.sandbox.enabled) {
    // A fork into new user, pid and mount namespaces: the stub is pid 1 of
    // its own pid namespace, and everything in it dies with it.
    pid = static_cast<pid_t>(syscall(
        SYS_clone, CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | SIGCHLD,
        nullptr, nullptr, nullptr, nullptr));
  } else {
    pid = fork();
  }
  if (pid == 0) setup.Run(&plan);
  const int fork_errno = errno;
  CloseIf(&sv[1]);
  CloseIf(&report[1]);
  CloseIf(&go[0]);
  if (pid < 0) {
    CloseIf(&sv[0]);
    CloseIf(&report[0]);
    CloseIf(&go[1]);
    if (launch.sandbox.enabled) {
      return Status::Unavailable(
          prefix + "the stub sandbox (stub-sandbox=true) could not be set " +
          "up: the kernel refused new user, pid and mount namespaces " +
          "(clone CLONE_NEWUSER|CLONE_NEWPID|CLONE_NEWNS): " +
          strerror(fork_errno) +
          " (are user namespaces disabled, e.g. by sysctl " +
          "user.max_user_namespaces or a container's seccomp profile?)");
    }
    return Status::Internal(
        std::string("tritonpy: fork: ") + strerror(fork_errno));
  }
  pid_ = pid;
  Status s;
  if (launch.sandbox.enabled) {
    s = MapIds(pid, launch.sandbox);
    if (!s.ok()) {
      s = Status::Unavailable(
          prefix + "the stub sandbox (stub-sandbox=true) could not be set " +
          "up: the kernel refused to map its user namespace's ids: " +
          s.message());
    } else if (write(go[1], "g", 1) != 1) {
      s = Status::Internal(prefix + "the sandboxed child went away");
    }
    CloseIf(&go[1]);
  }
  if (s.ok()) {
    // End of file: the child reached execve.
    StepFailure f;
    ssize_t n;
    do {
      n = read(report[0], &f, sizeof(f));
    } while (n < 0 && errno == EINTR);
    if (n == static_cast<ssize_t>(sizeof(f))) {
      s = Status::Unavailable(
          prefix +
          (launch.sandbox.enabled
               ? "the stub sandbox (stub-sandbox=true) could not be "
                 "set up: "
               : "") +
          "the kernel refused " + StepText(f.step) + ": " + strerror(f.error));
    }
  }
  CloseIf(&report[0]);
  if (!s.ok()) {
    KillAndReap();
    CloseIf(&sv[0]);
    return s;
  }
  *backend_fd = sv[0];
  return Status();
}

void
StubProcess::ReapExited(int* status)
{
  // The exited child is a zombie until reaped: its pid, the group's id,
  // cannot name another process yet.
  kill(-pid_, SIGKILL);
  pid_t r;
  do {
    r = waitpid(pid_, status, 0);
  } while (r < 0 && errno == EINTR);
  if (r < 0) *status = 0;
  pid_ = -1;
}

bool
StubProcess::WaitFor(int timeout_ms, int* status)
{
  if (pid_ <= 0) return false;
  auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    siginfo_t info;
    info.si_pid = 0;
    int r = waitid(P_PID, pid_, &info, WEXITED | WNOHANG | WNOWAIT);
    if (r == 0 && info.si_pid == pid_) {
      ReapExited(status);
      return true;
    }
    if (r < 0 && errno == ECHILD) {  // reaped by someone else
      *status = 0;
      pid_ = -1;
      return true;
    }
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::string
StubProcess::EndWithin(int timeout_ms)
{
  if (!running()) return "";
  int status = 0;
  if (!WaitFor(timeout_ms, &status)) status = KillAndReap();
  return DescribeStatus(status);
}

int
StubProcess::KillAndReap()
{
  if (pid_ <= 0) return 0;
  int status = 0;
  if (WaitFor(0, &status)) return status;
  kill(-pid_, SIGKILL);  // the stub and what it started
  kill(pid_, SIGKILL);   // in case it left its group
  ReapExited(&status);
  return status;
}

std::string
StubProcess::DescribeStatus(int status)
{
  if (WIFEXITED(status)) {
    int code = WEXITSTATUS(status);
    std::string s = "exited with status " + std::to_string(code);
    if (code == 127) s += " (the interpreter could not be executed)";
    return s;
  }
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    const char* abbrev = sigabbrev_np(sig);
    std::string s = "killed by signal " + std::to_string(sig);
    if (abbrev != nullptr) s += std::string(" (SIG") + abbrev + ")";
    return s;
  }
  return "ended with wait status " + std::to_string(status);
}

Status
RunCommand(
    const std::vector<std::string>& args, std::string* out, std::string* err,
    int* wait_status)
{
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) {
    return Status::Internal(std::string("tritonpy: pipe: ") + strerror(errno));
  }
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    int e = errno;
    close(out_pipe[0]);
    close(out_pipe[1]);
    return Status::Internal(std::string("tritonpy: pipe: ") + strerror(e));
  }
  ExecPlan plan(args.at(0), args, nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    if (dup2(out_pipe[1], 1) != 1 || dup2(err_pipe[1], 2) != 2) _exit(126);
    plan.Exec(2);
  }
  int fork_errno = errno;
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (pid < 0) {
    close(out_pipe[0]);
    close(err_pipe[0]);
    return Status::Internal(
        std::string("tritonpy: fork: ") + strerror(fork_errno));
  }
  struct pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {out, err};
  int open_count = 2;
  while (open_count > 0) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd >= 0 && fds[i].revents != 0 &&
          !Drain(fds[i].fd, sinks[i])) {
        close(fds[i].fd);
        fds[i].fd = -1;  // poll ignores negative descriptors
        --open_count;
      }
    }
  }
  for (struct pollfd& p : fds) {
    if (p.fd >= 0) close(p.fd);
  }
  pid_t r;
  do {
    r = waitpid(pid, wait_status, 0);
  } while (r < 0 && errno == EINTR);
  return Status();
}

}  // namespace tritonpy
