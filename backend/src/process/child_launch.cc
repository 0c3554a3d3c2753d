// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "process/child_launch.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "process/child_steps.h"

extern char** environ;

static_assert(tritonpy::kMaxPlaced == TRITONPY_MAX_PLACED);

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
  }

  const std::string& executable() const { return exe_; }

  // In the child: closes every descriptor above `last_kept`, unblocks all
  // signals and execs.
  [[noreturn]] void Exec(int last_kept)
  {
    tritonpy_child_finish(last_kept + 1, max_fd_);
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
};

const char*
StepText(int step)
{
  switch (step) {
    case TRITONPY_STEP_MOUNT_PRIVATE:
      return "making the stub's mount namespace private (mount MS_PRIVATE "
             "on /)";
    case TRITONPY_STEP_MOUNT_PROC:
      return "mounting a /proc of the stub's own pid namespace (mount -t "
             "proc)";
    case TRITONPY_STEP_SET_IDS:
      return "taking uid and gid 0 of its user namespace (setresuid/"
             "setresgid)";
    case TRITONPY_STEP_NO_NEW_PRIVS:
      return "no_new_privs (prctl PR_SET_NO_NEW_PRIVS)";
    case TRITONPY_STEP_MAX_PROCESSES:
      return "the process limit stub-sandbox-max-processes (setrlimit "
             "RLIMIT_NPROC)";
    case TRITONPY_STEP_ADDRESS_SPACE:
      return "the address-space limit stub-sandbox-address-space-bytes "
             "(setrlimit RLIMIT_AS)";
    case TRITONPY_STEP_PROCESS_GROUP:
      return "a process group of its own (setpgid)";
    case TRITONPY_STEP_DEATH_SIGNAL:
      return "the parent-death signal (prctl PR_SET_PDEATHSIG)";
    case TRITONPY_STEP_DESCRIPTORS:
      return "setting up its descriptors (dup2)";
    case TRITONPY_STEP_LOOPBACK:
      return "bringing up the loopback of its network namespace "
             "(ioctl SIOCSIFFLAGS on lo)";
    case TRITONPY_STEP_LANDLOCK:
      return "a Landlock ruleset, which confines the stub's files "
             "(landlock_create_ruleset)";
  }
  return "an unknown step";
}

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

// Reads /proc/<pid>/<name> into *text; false if it cannot be read.
bool
ReadProcFile(pid_t pid, const std::string& name, std::string* text)
{
  const std::string path = "/proc/" + std::to_string(pid) + "/" + name;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[512];
  ssize_t n;
  do {
    n = read(fd, buf, sizeof(buf));
  } while (n < 0 && errno == EINTR);
  close(fd);
  if (n < 0) return false;
  text->assign(buf, static_cast<size_t>(n));
  return true;
}

// The words of `text` (the kernel pads a map's numbers with spaces).
std::vector<std::string>
Words(const std::string& text)
{
  std::vector<std::string> words;
  size_t at = 0;
  while (true) {
    at = text.find_first_not_of(" \t\n", at);
    if (at == std::string::npos) return words;
    const size_t end = text.find_first_of(" \t\n", at);
    words.push_back(text.substr(at, end - at));
    at = end;
  }
}

// Maps the sandboxed child's user namespace (SandboxIdMaps). A spare's
// were written by its template before its pid was known here
// (stub_template.h): they must then read as these would.
Status
MapIds(pid_t pid, const StubSandbox& sandbox)
{
  const std::vector<std::pair<std::string, std::string>> maps =
      SandboxIdMaps(sandbox);
  std::string now;
  if (ReadProcFile(pid, "uid_map", &now) && !Words(now).empty()) {
    for (const auto& [name, text] : maps) {
      if (!ReadProcFile(pid, name, &now) || Words(now) != Words(text)) {
        return Status::Unavailable(
            "/proc/" + std::to_string(pid) + "/" + name + " reads '" +
            now.substr(0, now.find('\n')) + "' instead of '" +
            text.substr(0, text.find('\n')) + "'");
      }
    }
    return Status();
  }
  for (const auto& [name, text] : maps) {
    TRITONPY_RETURN_IF_ERROR(WriteProcFile(pid, name.c_str(), text));
  }
  return Status();
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

std::vector<std::pair<std::string, std::string>>
SandboxIdMaps(const StubSandbox& sandbox)
{
  // A server that is not root may map only its own ids: uid and gid 0
  // inside are the server's (and without CAP_SETGID, gid_map may be
  // written only once setgroups is denied). A root server maps uid 0 to
  // root (files stay readable as they are for every stub) and
  // kSandboxRealUid to sandbox.uid, which the stub takes as its real uid
  // before anything else runs (tritonpy/stub/main.py): a real root would
  // escape RLIMIT_NPROC.
  if (geteuid() == 0) {
    return {
        {"uid_map", "0 0 1\n" + std::to_string(kSandboxRealUid) + " " +
                        std::to_string(sandbox.uid) + " 1\n"},
        {"gid_map", "0 0 1\n"}};
  }
  return {
      {"setgroups", "deny"},
      {"uid_map", "0 " + std::to_string(geteuid()) + " 1\n"},
      {"gid_map", "0 " + std::to_string(getegid()) + " 1\n"}};
}

void
CloseIf(int* fd)
{
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

Status
StartChild(
    const ChildPlan& plan, const std::string& prefix, pid_t* out_pid,
    std::string* executable, const ChildForker* forker, bool* abandoned)
{
  const bool sandbox = plan.sandbox.enabled;
  int report[2] = {-1, -1};
  // The go byte: a sandboxed child waits for its ids to be mapped, a
  // forked one for the template's reply (child_steps.h).
  int go[2] = {-1, -1};
  if (plan.place.size() > kMaxPlaced) {
    return Status::Internal("tritonpy: too many descriptors for a child");
  }
  if (pipe2(report, O_CLOEXEC) != 0 ||
      ((sandbox || forker != nullptr) && pipe2(go, O_CLOEXEC) != 0)) {
    int err = errno;
    for (int* fd : {&report[0], &report[1]}) CloseIf(fd);
    return Status::Internal(std::string("tritonpy: pipe: ") + strerror(err));
  }
  tritonpy_child_setup setup{};
  setup.report_fd = report[1];
  setup.go_fd = go[0];
  setup.parent = getpid();
  setup.sandbox = sandbox;
  setup.own_network = sandbox && plan.sandbox.own_network;
  setup.max_processes = plan.sandbox.max_processes;
  setup.address_space = plan.sandbox.address_space_bytes;
  for (const auto& p : plan.place) {
    setup.place[setup.placed][0] = p.first;
    setup.place[setup.placed][1] = p.second;
    ++setup.placed;
  }
  setup.null_stdin = plan.null_stdin;
  ExecPlan exec(plan.program, plan.args, plan.env);
  *executable = exec.executable();

  pid_t pid = 0;
  int fork_errno = 0;
  if (forker != nullptr) {
    // A template forks the child (stub_template.h); 0: do it here.
    pid = (*forker)(
        ChildFork{&plan, report[1], go[0], setup.parent}, &fork_errno);
    if (pid == 0) {
      // Not forked, or the template died or gave no answer after it may
      // have: a child of it would hold these pipes and the plan's
      // descriptors, read end of file for its go byte and exit. The
      // caller starts the child again with descriptors of its own.
      for (int* fd : {&report[0], &report[1], &go[0], &go[1]}) CloseIf(fd);
      *abandoned = true;
      return Status::Unavailable(prefix + "the stub template did not fork it");
    }
  }
  if (pid == 0 && sandbox) {
    // A fork into new user, pid, mount, IPC (and network) namespaces: the
    // child is pid 1 of its own pid namespace, and everything in it dies
    // with it.
    pid = static_cast<pid_t>(syscall(
        SYS_clone,
        CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC |
            (setup.own_network ? CLONE_NEWNET : 0) | SIGCHLD,
        nullptr, nullptr, nullptr, nullptr));
    fork_errno = errno;
  } else if (pid == 0) {
    pid = fork();
    fork_errno = errno;
  }
  if (pid == 0) exec.Exec(tritonpy_child_setup_run(&setup));
  CloseIf(&report[1]);
  CloseIf(&go[0]);
  if (pid < 0) {
    CloseIf(&report[0]);
    CloseIf(&go[1]);
    if (sandbox) {
      return Status::Unavailable(
          prefix + SandboxName(plan) + " could not be set " +
          "up: the kernel refused new user, pid, mount, IPC" +
          (setup.own_network ? " and network" : "") + " namespaces " +
          "(clone CLONE_NEWUSER|CLONE_NEWPID|CLONE_NEWNS|CLONE_NEWIPC" +
          (setup.own_network ? "|CLONE_NEWNET" : "") +
          "): " + strerror(fork_errno) +
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
    }
  }
  if (s.ok() && go[1] >= 0 && write(go[1], "g", 1) != 1) {
    s = Status::Internal(
        prefix + (sandbox ? "the sandboxed child" : "the forked child") +
        " went away");
  }
  CloseIf(&go[1]);
  if (s.ok()) {
    // End of file: the child reached execve.
    tritonpy_step_failure f;
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

ChildLinks::~ChildLinks()
{
  for (Link& link : links_) {
    CloseIf(&link.ours);
    CloseIf(&link.theirs);
  }
}

Status
ChildLinks::Open(Kind kind, int target)
{
  int pair[2] = {-1, -1};
  const bool socket = kind == Kind::kSocket;
  const int r =
      socket ? socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair)
             : pipe2(pair, O_CLOEXEC);
  if (r != 0) {
    return Status::Internal(
        prefix_ + (socket ? "socketpair: " : "pipe: ") + strerror(errno));
  }
  // A pipe's read end is [0]: the child's for kToChild.
  const bool child_reads = kind == Kind::kToChild;
  Link link;
  link.ours = child_reads ? pair[1] : pair[0];
  link.theirs = child_reads ? pair[0] : pair[1];
  link.target = target;
  links_.push_back(link);
  return Status();
}

Status
ChildLinks::Start(
    ChildPlan* plan, pid_t* pid, std::string* executable,
    const ChildForker* forker, bool* abandoned)
{
  for (const Link& link : links_) {
    plan->place.emplace_back(link.theirs, link.target);
  }
  const Status s =
      StartChild(*plan, prefix_, pid, executable, forker, abandoned);
  for (Link& link : links_) {
    CloseIf(&link.theirs);
    if (!s.ok()) CloseIf(&link.ours);
  }
  return s;
}

int
ChildLinks::Take(size_t i)
{
  const int fd = links_.at(i).ours;
  links_.at(i).ours = -1;
  return fd;
}

Status
RunCommand(
    const std::vector<std::string>& args, const StubLaunch& launch,
    std::string* out, std::string* err, int* wait_status)
{
  ChildLinks links("");
  TRITONPY_RETURN_IF_ERROR(links.Open(ChildLinks::Kind::kFromChild, 1));
  TRITONPY_RETURN_IF_ERROR(links.Open(ChildLinks::Kind::kFromChild, 2));
  ChildPlan plan;
  plan.program = args.at(0);
  plan.args = args;
  plan.env = launch.env.empty() && !launch.env_filtered ? nullptr : &launch.env;
  plan.sandbox = launch.sandbox;
  plan.null_stdin = true;
  plan.what = "environment's probe";
  pid_t pid = -1;
  std::string executable;
  TRITONPY_RETURN_IF_ERROR(links.Start(&plan, &pid, &executable));
  // Our ends never block: the child is waited for, not the pipes. (The
  // child's blocked, as a program expects of its stdout.)
  int out_pipe = links.Take(0);
  int err_pipe = links.Take(1);
  fcntl(out_pipe, F_SETFL, O_NONBLOCK);
  fcntl(err_pipe, F_SETFL, O_NONBLOCK);
  // Readable once the child has exited (Linux 5.3); else a short tick.
  int child_fd = -1;
#ifdef SYS_pidfd_open
  child_fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
#endif
  struct pollfd fds[3] = {
      {out_pipe, POLLIN, 0}, {err_pipe, POLLIN, 0}, {child_fd, POLLIN, 0}};
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
  CloseIf(&out_pipe);
  CloseIf(&err_pipe);
  CloseIf(&child_fd);
  *wait_status = KillGroupAndReap(pid);
  return Status();
}

std::string
DescribeWaitStatus(int status)
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
