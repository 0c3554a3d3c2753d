// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// StubTemplates: the stub templates ("zygotes") of one backend
// (stub-fork, docs/configuration.md). A template is
// `<python> -m tritonpy.stub --template`, started like a stub (StartChild:
// a process group of its own, the parent-death signal, a lifeline) with the
// stubs' environment; it imports the stub's modules and the preload list
// once, then forks stubs on request (tritonpy/stub/template.py has its
// messages). One template per interpreter, environment and preload list:
// an execution environment's models get one made with that environment's
// interpreter, the models of a Python-based backend share their backend's.
// A forked stub is a child of this process (CLONE_PARENT), set up by the
// steps of an exec'd one (child_steps.h): StubProcess waits for it, kills
// and restarts it as ever, and a template's death leaves it alone. A
// template that died is started again at the next fork; one that cannot
// start (a preload module fails to import, or starts a thread) is given up:
// its stubs are exec'd, with one warning naming the reason.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "process/child_launch.h"
#include "process/memory_reporter.h"
#include "process/stub_launch.h"
#include "util/mutex.h"
#include "util/worker_thread.h"

namespace tritonpy {

class StubTemplates {
 public:
  // `timeout_seconds`: how long a template may take to start (its imports)
  // or to answer a fork request (stub-timeout-seconds). `memory`: where a
  // running template's PSS and private memory are reported (kind
  // "template"); it outlives this.
  StubTemplates(int timeout_seconds, MemoryReporter* memory);
  ~StubTemplates();  // ends every template (running stubs stay)
  StubTemplates(const StubTemplates&) = delete;
  StubTemplates& operator=(const StubTemplates&) = delete;

  // Forks the stub of `fork` from the template of `launch` (started when
  // it is not running): the ChildForker contract (child_launch.h). 0 when
  // the stub must be exec'd instead (logged). With `launch.learn`, from
  // the template whose preload list has the model file's opening imports
  // too (the launch's template says which), when one can serve: it is
  // made for the second model file that opens with those imports (the
  // first forks from the launch's template, as it would alone), at most
  // kMostLearned such templates run, and each is shared by every model
  // that imports the same first. A model's own template (launch.model_key)
  // is itself forked so, by the first fork of its stubs: from the
  // template its model file's opening imports say, else from the one of
  // its settings, else exec'd. *from (when given): the description of the
  // template that forked the child. Thread-safe.
  pid_t Fork(
      const StubLaunch& launch, const ChildFork& fork, int* err,
      std::string* from = nullptr);

  // A sandboxed stub forked from the template of `launch` is up (its
  // handshake done): the template makes the spare for the next one now
  // (template.py), when its work no longer slows that stub's start.
  // Thread-safe.
  void MakeSpare(const StubLaunch& launch);

  // The templates running now: what each is for, and its pid.
  struct Running {
    std::string describe;
    pid_t pid;
  };
  std::vector<Running> List() const;

  // What of a sandbox keys templates apart (a part of Key): its limits
  // count only where there is one.
  static std::string SandboxKey(const StubSandbox& box);

  // The model of launch.lease is unloaded: its own template (model_key)
  // ends, and so does each template of opening imports, or of a model's
  // own settings (StubLaunch::own_settings), that no loaded model forked
  // from (a stub, or a model's own template) since it started; their
  // stubs stay. Templates of the backend's settings run on.
  void Forget(const std::string& lease);

 private:
  struct Template;
  // Runs `job` on the starter thread and waits for it.
  void OnStarter(const std::function<void()>& job) EXCLUDES(starter_mu_);
  // The starter's step: runs the job waiting, or waits for one.
  bool RunStarterJob() EXCLUDES(starter_mu_);
  static std::string Key(const StubLaunch& launch);
  // The template of `launch`, made when there is none. One with opening
  // imports is made for the second model (launch.learn) that asks for
  // it: nullptr before, and once kMostLearned exist. launch.lease is
  // among the users (Forget) of one of opening imports or of a model's
  // own settings.
  std::shared_ptr<Template> Find(const StubLaunch& launch);
  // *learned: `launch` with the opening imports of its model file
  // (launch.learn) that its preload list does not have, in `opening`;
  // false when there are none or its template cannot say.
  bool Learn(const StubLaunch& launch, StubLaunch* learned);
  // Forks from `t` (Fork's contract); *asked: whether the request was
  // sent (a child of `t` may then hold the fork's pipes).
  pid_t ForkFrom(
      Template* t, const StubLaunch& launch, const ChildFork& fork, int* err,
      bool* asked, std::string* from);

  // Templates of models' opening imports, at most: each holds what its
  // packages take (torch: some 200 MiB), shared with its stubs, until no
  // loaded model forks from it (Forget).
  static constexpr int kMostLearned = 8;
  // The first model file that asked for each learned template not made
  // yet, for so many of them at most.
  static constexpr size_t kMostLearners = 256;

  const int timeout_ms_;
  MemoryReporter* const memory_;
  // OnStarter, as Template::Start and Up take it.
  const std::function<void(const std::function<void()>&)> starter_job_;
  mutable Mutex mu_;
  std::map<std::string, std::shared_ptr<Template>> templates_ GUARDED_BY(mu_);
  int learned_ GUARDED_BY(mu_) = 0;
  std::map<std::string, std::string> first_learner_ GUARDED_BY(mu_);
  // The leases of the loaded models that forked from each template of
  // opening imports or of a model's own settings (by its key).
  std::map<std::string, std::set<std::string>> users_ GUARDED_BY(mu_);
  // The keys of templates of opening imports that could not serve, ended
  // with their last model: not made again.
  std::set<std::string> refused_learned_ GUARDED_BY(mu_);

  // The thread every template is started from. The kernel's parent of a
  // template, and so of each stub it forks (CLONE_PARENT), is the server
  // *thread* that started the template, and a forked stub keeps
  // PR_SET_PDEATHSIG until it watches the server itself: the kernel sends
  // it when that thread ends. Triton's threads that load instances in
  // parallel end with their instance, so templates are started from a
  // thread of this object's, which outlives them.
  Mutex call_mu_;  // one job at a time
  Mutex starter_mu_;
  CondVar job_done_cv_{&starter_mu_};
  const std::function<void()>* job_ GUARDED_BY(starter_mu_) = nullptr;
  bool job_done_ GUARDED_BY(starter_mu_) = false;
  WorkerThread starter_;  // woken when a job waits
};

// "a,b,c": names joined with `sep`.
std::string JoinNames(
    const std::vector<std::string>& names, const char* sep = ",");

}  // namespace tritonpy
