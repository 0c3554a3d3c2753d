// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "child_launch.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

extern char** environ;

namespace tritonpy {

namespace {

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
  int report_fd = -1;  // write end of the failure pipe
  int go_fd = -1;      // sandbox: read end, a byte once the ids are mapped
  pid_t parent = -1;
  bool sandbox = false;
  rlim_t max_processes = 0;
  rlim_t address_space = 0;  // 0: unlimited
  std::pair<int, int> place[kMaxPlaced];
  size_t placed = 0;
  bool null_stdin = false;

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
    // Until the child watches the server itself (tritonpy/stub/main.py).
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) {
      Fail(Step::kDeathSignal);
    }
    // Outside a pid namespace: the server may have died before the call.
    if (!sandbox && getppid() != parent) _exit(125);
    // Out of the way of the targets first, then into place (dup2 clears
    // FD_CLOEXEC on the copy).
    int moved[kMaxPlaced];
    int last = 2;
    for (size_t i = 0; i < placed; ++i) {
      moved[i] = fcntl(place[i].first, F_DUPFD, 16);
      if (moved[i] < 0) Fail(Step::kDescriptors);
    }
    for (size_t i = 0; i < placed; ++i) {
      if (dup2(moved[i], place[i].second) != place[i].second) {
        Fail(Step::kDescriptors);
      }
      if (place[i].second > last) last = place[i].second;
    }
    if (null_stdin) {
      int null_fd = open("/dev/null", O_RDONLY);
      if (null_fd < 0 || dup2(null_fd, 0) != 0) Fail(Step::kDescriptors);
    }
    plan->Exec(last);
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

// The sandbox's name in messages.
std::string
SandboxName(const ChildPlan& plan)
{
  return "the stub sandbox (stub-sandbox=true)" +
         (plan.what == "stub" ? std::string() : " of the " + plan.what);
}

// Kills what is left of the process group `pid` leads (it is not reaped
// yet, so the group's id cannot name another) and reaps `pid`.
int
KillGroupAndReap(pid_t pid)
{
  kill(-pid, SIGKILL);
  kill(pid, SIGKILL);
  int status = 0;
  pid_t r;
  do {
    r = waitpid(pid, &status, 0);
  } while (r < 0 && errno == EINTR);
  return r < 0 ? 0 : status;
}

// Appends what is readable on the non-blocking `fd` to *sink, up to
// kCommandOutputLimit (the rest is read and dropped); false at end of file
// or on an error.
bool
Drain(int fd, std::string* sink)
{
  char buf[16384];
  while (true) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n > 0) {
      size_t room =
          kCommandOutputLimit - std::min(kCommandOutputLimit, sink->size());
      sink->append(buf, std::min(room, static_cast<size_t>(n)));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
}

// Whether `pid` has exited (not reaped: WNOWAIT).
bool
Exited(pid_t pid)
{
  siginfo_t info;
  info.si_pid = 0;
  int r = waitid(P_PID, pid, &info, WEXITED | WNOHANG | WNOWAIT);
  return (r == 0 && info.si_pid == pid) || (r < 0 && errno == ECHILD);
}

}  // namespace

void
CloseIf(int* fd)
{
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

Status
StartChild(
    const ChildPlan& plan, const std::string& prefix, pid_t* out_pid,
    std::string* executable)
{
  const bool sandbox = plan.sandbox.enabled;
  int report[2] = {-1, -1};
  int go[2] = {-1, -1};
  if (plan.place.size() > kMaxPlaced) {
    return Status::Internal("tritonpy: too many descriptors for a child");
  }
  if (pipe2(report, O_CLOEXEC) != 0 || (sandbox && pipe2(go, O_CLOEXEC) != 0)) {
    int err = errno;
    for (int* fd : {&report[0], &report[1]}) CloseIf(fd);
    return Status::Internal(std::string("tritonpy: pipe: ") + strerror(err));
  }
  ChildSetup setup;
  setup.report_fd = report[1];
  setup.go_fd = go[0];
  setup.parent = getpid();
  setup.sandbox = sandbox;
  setup.max_processes = plan.sandbox.max_processes;
  setup.address_space = plan.sandbox.address_space_bytes;
  for (const auto& p : plan.place) setup.place[setup.placed++] = p;
  setup.null_stdin = plan.null_stdin;
  ExecPlan exec(plan.program, plan.args, plan.env);
  *executable = exec.executable();

  pid_t pid;
  if (sandbox) {
    // A fork into new user, pid and mount namespaces: the child is pid 1
    // of its own pid namespace, and everything in it dies with it.
    pid = static_cast<pid_t>(syscall(
        SYS_clone, CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | SIGCHLD,
        nullptr, nullptr, nullptr, nullptr));
  } else {
    pid = fork();
  }
  if (pid == 0) setup.Run(&exec);
  const int fork_errno = errno;
  CloseIf(&report[1]);
  CloseIf(&go[0]);
  if (pid < 0) {
    CloseIf(&report[0]);
    CloseIf(&go[1]);
    if (sandbox) {
      return Status::Unavailable(
          prefix + SandboxName(plan) + " could not be set " +
          "up: the kernel refused new user, pid and mount namespaces " +
          "(clone CLONE_NEWUSER|CLONE_NEWPID|CLONE_NEWNS): " +
          strerror(fork_errno) +
          " (are user namespaces disabled, e.g. by sysctl " +
          "user.max_user_namespaces or a container's seccomp profile?)");
    }
    return Status::Internal(
        std::string("tritonpy: fork: ") + strerror(fork_errno));
  }
  Status s;
  if (sandbox) {
    s = MapIds(pid, plan.sandbox);
    if (!s.ok()) {
      s = Status::Unavailable(
          prefix + SandboxName(plan) + " could not be set " +
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
          (sandbox ? SandboxName(plan) + " could not be set up: " : "") +
          "the kernel refused " + StepText(f.step) + ": " + strerror(f.error));
    }
  }
  CloseIf(&report[0]);
  if (!s.ok()) {
    KillGroupAndReap(pid);
    return s;
  }
  *out_pid = pid;
  return Status();
}

Status
RunCommand(
    const std::vector<std::string>& args, const StubLaunch& launch,
    std::string* out, std::string* err, int* wait_status)
{
  int out_pipe[2] = {-1, -1};
  int err_pipe[2] = {-1, -1};
  if (pipe2(out_pipe, O_CLOEXEC | O_NONBLOCK) != 0 ||
      pipe2(err_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    int e = errno;
    for (int* fd : {&out_pipe[0], &out_pipe[1]}) CloseIf(fd);
    return Status::Internal(std::string("tritonpy: pipe: ") + strerror(e));
  }
  // The child's ends block, as a program expects of its stdout.
  fcntl(out_pipe[1], F_SETFL, 0);
  fcntl(err_pipe[1], F_SETFL, 0);
  ChildPlan plan;
  plan.program = args.at(0);
  plan.args = args;
  plan.env = launch.env.empty() && !launch.env_filtered ? nullptr : &launch.env;
  plan.sandbox = launch.sandbox;
  plan.place = {{out_pipe[1], 1}, {err_pipe[1], 2}};
  plan.null_stdin = true;
  plan.what = "environment's probe";
  pid_t pid = -1;
  std::string executable;
  Status s = StartChild(plan, "", &pid, &executable);
  CloseIf(&out_pipe[1]);
  CloseIf(&err_pipe[1]);
  if (!s.ok()) {
    CloseIf(&out_pipe[0]);
    CloseIf(&err_pipe[0]);
    return s;
  }
  // Readable once the child has exited (Linux 5.3); else a short tick.
  int child_fd = -1;
#ifdef SYS_pidfd_open
  child_fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
#endif
  struct pollfd fds[3] = {
      {out_pipe[0], POLLIN, 0},
      {err_pipe[0], POLLIN, 0},
      {child_fd, POLLIN, 0}};
  std::string* sinks[2] = {out, err};
  while (!Exited(pid)) {
    if (poll(fds, 3, child_fd >= 0 ? -1 : 50) < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd >= 0 && fds[i].revents != 0 &&
          !Drain(fds[i].fd, sinks[i])) {
        fds[i].fd = -1;  // poll ignores negative descriptors
      }
    }
  }
  // What the child wrote before it exited is in the pipes: take it without
  // waiting for an end of file that a process it started may withhold.
  for (int i = 0; i < 2; ++i) {
    if (fds[i].fd >= 0) Drain(fds[i].fd, sinks[i]);
  }
  CloseIf(&out_pipe[0]);
  CloseIf(&err_pipe[0]);
  CloseIf(&child_fd);
  *wait_status = KillGroupAndReap(pid);
  return Status();
}

}  // namespace tritonpy
