// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "stub_process.h"

#include <fcntl.h>
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

}  // namespace

StubProcess::~StubProcess()
{
  if (pid_ > 0) KillAndReap();
}

Status
StubProcess::Spawn(
    const std::string& python, const std::string& instance_name,
    int* backend_fd)
{
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    return Status::Internal(
        std::string("tritonpy: socketpair: ") + strerror(errno));
  }
  executable_ = ResolveExecutable(python);

  // Everything the child needs is built before fork: between fork and
  // execve only async-signal-safe calls are allowed.
  std::vector<std::string> args = {python,
                                   "-m",
                                   "tritonpy.stub",
                                   "--fd",
                                   std::to_string(kStubFd),
                                   "--instance",
                                   instance_name};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(&a[0]);
  argv.push_back(nullptr);
  const char* exe = executable_.c_str();
  int child_fd = sv[1];
  struct rlimit rl;
  int max_fd = 65536;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
      rl.rlim_cur < static_cast<rlim_t>(1 << 20)) {
    max_fd = static_cast<int>(rl.rlim_cur);
  }
  sigset_t empty_mask;
  sigemptyset(&empty_mask);

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
#ifdef SYS_close_range
    if (syscall(SYS_close_range, kStubFd + 1, ~0U, 0) != 0)
#endif
    {
      for (int fd = kStubFd + 1; fd < max_fd; ++fd) close(fd);
    }
    // Threads of tritonserver may block signals; the stub starts clean.
    sigprocmask(SIG_SETMASK, &empty_mask, nullptr);
    execve(exe, argv.data(), environ);
    _exit(127);
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

}  // namespace tritonpy
