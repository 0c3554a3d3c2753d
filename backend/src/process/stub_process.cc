// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "process/stub_process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "process/child_launch.h"
#include "process/log_relay.h"
#include "process/stub_template.h"

namespace tritonpy {

namespace {

constexpr int kStubFd = 3;
// Where the stub finds the server's lifeline (--server-lifeline).
constexpr int kLifelineFd = 4;

// Descriptors of the server's, closed when it goes (once placed in the
// child, or when the start failed).
struct ClosedAtEnd {
  std::vector<int> fds;
  ~ClosedAtEnd()
  {
    for (int fd : fds) close(fd);
  }
};

}  // namespace

StubProcess::~StubProcess()
{
  if (pid_ > 0) KillAndReap();
}

Status
StubProcess::Spawn(
    const StubLaunch& launch, const std::string& instance_name, int* backend_fd)
{
  bool abandoned = false;
  Status s = SpawnOnce(
      launch, instance_name, launch.templates, backend_fd, &abandoned);
  if (abandoned) {
    // The template did not fork it: exec'd, with a socket and a lifeline
    // no child of the template can hold.
    s = SpawnOnce(launch, instance_name, nullptr, backend_fd, &abandoned);
  }
  return s;
}

Status
StubProcess::SpawnOnce(
    const StubLaunch& launch, const std::string& instance_name,
    StubTemplates* templates, int* backend_fd, bool* abandoned)
{
  const std::string prefix =
      "tritonpy: stub for instance '" + instance_name + "': ";
  // The stub's socket, and its lifeline: the read end of a pipe of its
  // own whose write end only this process holds (until the stub is
  // reaped). When the server ends, however it ends, the kernel closes the
  // write end and the pipe hangs up: a thread of the stub, outside the
  // GIL, waits for that to end its process group. Not a pidfd of the
  // server, which would let model code signal it (pidfd_send_signal) and
  // take its descriptors (pidfd_getfd); and one pipe per stub, so that
  // what model code does to its own (reopening /proc/self/fd/4 for
  // writing) reaches no other stub.
  ChildLinks links(prefix);
  TRITONPY_RETURN_IF_ERROR(links.Open(ChildLinks::Kind::kSocket, kStubFd));
  TRITONPY_RETURN_IF_ERROR(links.Open(ChildLinks::Kind::kToChild, kLifelineFd));
  ChildPlan plan;
  plan.program = launch.python;
  plan.args = {
      launch.python,
      "-m",
      "tritonpy.stub",
      "--fd",
      std::to_string(kStubFd),
      "--instance",
      instance_name,
      "--server-lifeline",
      std::to_string(kLifelineFd)};
  if (launch.sandbox.enabled && geteuid() == 0) {
    plan.args.push_back("--sandbox-real-uid");
    plan.args.push_back(std::to_string(kSandboxRealUid));
  }
  if (launch.sandbox.enabled) {
    // The stub confines its own files (tritonpy/stub/sandbox.py).
    plan.args.push_back("--sandbox-tmp-bytes");
    plan.args.push_back(std::to_string(launch.sandbox.tmp_bytes));
    for (const std::string& path : launch.sandbox.read_paths) {
      plan.args.push_back("--sandbox-read");
      plan.args.push_back(path);
    }
    for (const std::string& path : launch.sandbox.write_paths) {
      plan.args.push_back("--sandbox-write");
      plan.args.push_back(path);
    }
  }
  plan.env = launch.env.empty() && !launch.env_filtered ? nullptr : &launch.env;
  plan.sandbox = launch.sandbox;
  // A sandboxed stub writes to the server's stdout and stderr (the log)
  // through pipes of its own (log_relay.h), and has no stdin (a terminal,
  // perhaps, that it could read or inject into).
  plan.null_stdin = launch.sandbox.enabled;
  ClosedAtEnd outputs;
  if (launch.sandbox.enabled && launch.log_relay != nullptr) {
    for (int target : {1, 2}) {
      int fd = -1;
      TRITONPY_RETURN_IF_ERROR(
          launch.log_relay->Open(target, &fd).WithPrefix(prefix));
      outputs.fds.push_back(fd);
      plan.place.emplace_back(fd, target);
    }
  }
  pid_t pid = -1;
  ChildForker forker = [&launch, templates](const ChildFork& fork, int* err) {
    return templates->Fork(launch, fork, err);
  };
  TRITONPY_RETURN_IF_ERROR(links.Start(
      &plan, &pid, &executable_, templates != nullptr ? &forker : nullptr,
      abandoned));
  pid_ = pid;
  *backend_fd = links.Take(0);
  lifeline_ = links.Take(1);
  if (templates != nullptr && launch.sandbox.enabled) {
    spare_templates_ = templates;
    spare_launch_ = launch;
  }
  return Status();
}

void
StubProcess::Started()
{
  if (spare_templates_ == nullptr) return;
  spare_templates_->MakeSpare(spare_launch_);
  spare_templates_ = nullptr;
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
  CloseIf(&lifeline_);
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
      CloseIf(&lifeline_);
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
  return DescribeWaitStatus(status);
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

}  // namespace tritonpy
