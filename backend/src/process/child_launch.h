// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// Starting a child of the server: a stub, or a helper command such as
// `python -m tritonpy.exec_env`, the same way: in a process group of its
// own, or in the stub sandbox (new user, pid and mount namespaces,
// no_new_privs, rlimits: docs/hardening.md), with exactly the descriptors
// and the environment it is given.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "process/stub_launch.h"
#include "util/error.h"

namespace tritonpy {

// What a child gets between fork (or clone) and execve.
struct ChildPlan {
  std::string program;            // looked up in PATH when it has no '/'
  std::vector<std::string> args;  // args[0] included
  // "KEY=VALUE" entries; nullptr: the server's own environment.
  const std::vector<std::string>* env = nullptr;
  StubSandbox sandbox;
  // Descriptors of the server placed in the child: {server fd, child fd};
  // every other descriptor above 2 is closed. At most kMaxPlaced, child
  // fds from 0 to 15.
  std::vector<std::pair<int, int>> place;
  // Whether descriptor 0 is /dev/null rather than the server's stdin.
  bool null_stdin = false;
  // Step texts for a sandbox the kernel refuses name "the stub sandbox".
  std::string what = "stub";
};
constexpr size_t kMaxPlaced = 6;  // TRITONPY_MAX_PLACED (child_steps.h)

// What a stub template needs to fork a child in StartChild's place
// (stub_template.h): the plan, and the server's ends of the child's set-up
// (tritonpy_child_setup in child_steps.h: the write end of the report
// pipe, the read end of the go pipe, -1 without the sandbox).
struct ChildFork {
  const ChildPlan* plan;
  int report_fd;
  int go_fd;
  pid_t parent;
};
// Returns the pid of the child it forked (a child of this process:
// CLONE_PARENT), 0 when the child must be exec'd instead, or -1 with *err
// when the kernel refused the clone.
using ChildForker = std::function<pid_t(const ChildFork&, int* err)>;

// The uid a sandboxed child of a root server takes as its real uid, inside
// its user namespace (mapped to sandbox.uid outside): the stub does so
// when given --sandbox-real-uid (tritonpy/stub/main.py).
constexpr int kSandboxRealUid = 1;

// The files of /proc/<pid>/ that map a sandboxed child's user namespace,
// in the order they are written, with what is written: the backend
// writes them once it has the child's pid, a stub template those of its
// spare (stub_template.h) when it clones it.
std::vector<std::pair<std::string, std::string>> SandboxIdMaps(
    const StubSandbox& sandbox);

// Forks, or with plan.sandbox.enabled clones into new user, pid and mount
// namespaces (the child is pid 1 of its own), and waits until the child
// reached execve. The child leads a process group of its own and has
// PR_SET_PDEATHSIG SIGKILL. A step the kernel refuses fails the start
// with a message naming it, after `prefix`; the child is then reaped.
// *executable: the program as resolved. With a `forker`, the child is
// forked by it (from a stub template) instead, and set up by the same
// steps (child_steps.h) short of execve; the sandbox's ids are mapped here
// all the same (a template's spare has them mapped by its template: they
// are checked instead), and the child goes on only once it got the go
// byte. When
// the forker returns 0, StartChild sets *abandoned and fails: the plan's
// descriptors may be held by a child the template forked before it died
// (which exits without its go byte), so the caller starts the child again
// with new descriptors and no forker.
Status StartChild(
    const ChildPlan& plan, const std::string& prefix, pid_t* pid,
    std::string* executable, const ChildForker* forker = nullptr,
    bool* abandoned = nullptr);

// The descriptor pairs a child is started with (a socket, pipes): each
// pair's child end is placed in the child at its target descriptor and
// closed here once the child started; the server's end is kept (Take), or
// closed when the child did not start. Whatever it still holds it closes
// when destroyed, so that no failure path leaks a descriptor.
class ChildLinks {
 public:
  enum class Kind {
    kSocket,     // a SOCK_SEQPACKET socket pair
    kToChild,    // a pipe: the child gets its read end
    kFromChild,  // a pipe: the child gets its write end
  };
  // Messages start with `prefix` (as StartChild's).
  explicit ChildLinks(std::string prefix) : prefix_(std::move(prefix)) {}
  ~ChildLinks();
  ChildLinks(const ChildLinks&) = delete;
  ChildLinks& operator=(const ChildLinks&) = delete;

  // Opens a pair (close-on-exec) whose child end goes to the child's
  // descriptor `target`. The pairs are numbered from 0 in order of Open.
  Status Open(Kind kind, int target);
  // StartChild of `plan` with the child ends placed after plan->place's,
  // then closes the child ends; when it failed, the server's ends too.
  Status Start(
      ChildPlan* plan, pid_t* pid, std::string* executable,
      const ChildForker* forker = nullptr, bool* abandoned = nullptr);
  // The server's end of pair `i`, now the caller's to close (-1 once
  // taken, or when the child did not start).
  int Take(size_t i);
  int ours(size_t i) const { return links_.at(i).ours; }

 private:
  struct Link {
    int ours = -1;
    int theirs = -1;
    int target = -1;
  };
  const std::string prefix_;
  std::vector<Link> links_;
};

// Runs args[0] as StartChild does with `launch`'s sandbox and environment
// (launch.env, or the server's own unless launch.env_filtered), stdin
// /dev/null, and collects what it writes to stdout and stderr (the first
// kCommandOutputLimit bytes of each) until it exits, then kills what is
// left of its process group (or its pid namespace) and reaps it. It
// waits for the child, never for the pipes: a process the child started
// that keeps them open does not hold it up. No time limit: for helpers of
// tritonpy's own (`python -m tritonpy.exec_env`), which bound what they
// run themselves. *wait_status is its waitpid status.
Status RunCommand(
    const std::vector<std::string>& args, const StubLaunch& launch,
    std::string* out, std::string* err, int* wait_status);
constexpr size_t kCommandOutputLimit = 1 << 20;

// How a child ended, from its waitpid status: "exited with status 3",
// "killed by signal 9 (SIGKILL)".
std::string DescribeWaitStatus(int status);

// Closes *fd if it is open and sets it to -1.
void CloseIf(int* fd);

}  // namespace tritonpy
