// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "stub_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
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
  ExecPlan(
      const std::string& program, std::vector<std::string> args,
      const std::vector<std::string>& env)
      : exe_(ResolveExecutable(program)), args_(std::move(args)), env_(env)
  {
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
    execve(exe_.c_str(), argv_.data(), env_.empty() ? environ : envp_.data());
    _exit(127);
  }

 private:
  std::string exe_;
  std::vector<std::string> args_;
  std::vector<std::string> env_;
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

}  // namespace

StubProcess::~StubProcess()
{
  if (pid_ > 0) KillAndReap();
}

Status
StubProcess::Spawn(
    const StubLaunch& launch, const std::string& instance_name, int* backend_fd)
{
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    return Status::Internal(
        std::string("tritonpy: socketpair: ") + strerror(errno));
  }
  ExecPlan plan(
      launch.python,
      {launch.python, "-m", "tritonpy.stub", "--fd", std::to_string(kStubFd),
       "--instance", instance_name},
      launch.env);
  executable_ = plan.executable();
  int child_fd = sv[1];

  pid_t pid = fork();
  if (pid < 0) {
    int err = errno;
    close(sv[0]);
    close(sv[1]);
    return Status::Internal(std::string("tritonpy: fork: ") + strerror(err));
  }
  if (pid == 0) {
    // Child.
    if (child_fd == kStubFd) {
      // dup2 to itself keeps FD_CLOEXEC set: clear it instead.
      if (fcntl(kStubFd, F_SETFD, 0) != 0) _exit(126);
    } else if (dup2(child_fd, kStubFd) != kStubFd) {
      _exit(126);
    }
    plan.Exec(kStubFd);
  }
  close(sv[1]);
  pid_ = pid;
  *backend_fd = sv[0];
  return Status();
}

bool
StubProcess::WaitFor(int timeout_ms, int* status)
{
  if (pid_ <= 0) return false;
  auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    pid_t r = waitpid(pid_, status, WNOHANG);
    if (r == pid_ || (r < 0 && errno == ECHILD)) {
      if (r < 0) *status = 0;
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
  kill(pid_, SIGKILL);
  pid_t r;
  do {
    r = waitpid(pid_, &status, 0);
  } while (r < 0 && errno == EINTR);
  pid_ = -1;
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
  ExecPlan plan(args.at(0), args, {});
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
