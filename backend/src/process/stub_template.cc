// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "process/stub_template.h"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>

#include "triton/triton_util.h"
#include "util/barrier.h"
#include "util/json.h"

extern char** environ;

namespace tritonpy {

namespace {

// Descriptors in the template, as in a stub (stub_process.cc).
constexpr int kControlFd = 3;
constexpr int kLifelineFd = 4;
// The largest message either side sends (template.py's _MAX_REQUEST).
constexpr size_t kMaxMessage = 1 << 20;
constexpr size_t kTitleRoom = 4096;
// The template's `-c` code: `-m tritonpy.stub` without the working
// directory that -m puts first on sys.path (Python 3.11's -P, on every
// version): with `-s` (no user site), no directory a stub may write is on
// the template's path when it imports.
constexpr const char* kBoot =
    "import sys\n"
    "if sys.path[:1] == ['']: del sys.path[0]\n"
    "import runpy\n"
    "runpy.run_module('tritonpy.stub', run_name='__main__', alter_sys=True)\n";

// Sends `text` with `fds` as one message.
bool
SendWithFds(int sock, const std::string& text, const std::vector<int>& fds)
{
  struct iovec iov = {const_cast<char*>(text.data()), text.size()};
  struct msghdr msg = {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  std::vector<char> control(CMSG_SPACE(sizeof(int) * fds.size()));
  if (!fds.empty()) {
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  ssize_t n;
  do {
    n = sendmsg(sock, &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  return n == static_cast<ssize_t>(text.size());
}

// Receives one message within `timeout_ms` into *text; false at end of
// file, on an error, at the deadline, or once the process `pidfd` refers
// to (-1: none) exited without sending (*why says which). A child it
// forked holds its socket until that child's go byte: the socket alone
// does not say that it died.
bool
Receive(
    int sock, int pidfd, int timeout_ms, std::string* text, std::string* why)
{
  struct pollfd p[2] = {{sock, POLLIN, 0}, {pidfd, POLLIN, 0}};
  int r;
  do {
    r = poll(p, 2, timeout_ms);
  } while (r < 0 && errno == EINTR);
  if (r == 0) {
    *why = "no answer within " + std::to_string(timeout_ms / 1000) +
           " s (stub-timeout-seconds)";
    return false;
  }
  if (p[0].revents == 0 && p[1].revents != 0) {
    *why = "it exited before it answered";
    return false;
  }
  std::vector<char> buf(kMaxMessage);
  ssize_t n;
  do {
    n = recv(sock, buf.data(), buf.size(), 0);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) {
    *why = n == 0 ? "it closed its socket" : strerror(errno);
    return false;
  }
  text->assign(buf.data(), static_cast<size_t>(n));
  return true;
}

}  // namespace

struct StubTemplates::Template {
  Mutex mu;
  std::string describe;  // "interpreter '...' preload 'numpy'"
  StubLaunch launch;     // without templates
  pid_t pid GUARDED_BY(mu) = -1;
  int control GUARDED_BY(mu) = -1;   // its socket
  int lifeline GUARDED_BY(mu) = -1;  // the write end of its lifeline
  int pidfd GUARDED_BY(mu) = -1;     // readable once it exited; -1: none
  // Why it cannot serve, for good: its stubs are exec'd (a learned one's
  // fork from the template without its models' opening imports).
  std::string refused GUARDED_BY(mu);
  // A model's own: whether it ran initialize_shared (since it started).
  bool shared GUARDED_BY(mu) = false;
  // Ended for good (Forget): no longer in the map, it forks nothing.
  bool ended GUARDED_BY(mu) = false;
  // Its memory metrics, while it runs (reset before it is reaped, so that
  // no reused pid is read).
  MemoryReporter::Registration memory GUARDED_BY(mu);
  // The template of sandboxed stubs: its spare (template.py), a child of
  // this process that the next fork with stub-sandbox-network=none takes;
  // reaped here when it is not taken. `spare_asked`: its answer is due.
  pid_t spare GUARDED_BY(mu) = -1;
  bool spare_asked GUARDED_BY(mu) = false;
  // A sandboxed stub was forked since the last spare was asked for: the
  // next is asked for once that stub is up (MakeSpare).
  bool spare_due GUARDED_BY(mu) = false;

  // Kills and reaps the spare that was not taken.
  void EndSpare() REQUIRES(mu)
  {
    if (spare <= 0) return;
    kill(spare, SIGKILL);
    pid_t r;
    do {
      r = waitpid(spare, nullptr, 0);
    } while (r < 0 && errno == EINTR);
    spare = -1;
  }

  // Reads the answer to the spare asked for, if it is due: true unless
  // the template gave none (it is then ended by the caller).
  bool CollectSpare(int timeout_ms) REQUIRES(mu)
  {
    if (!spare_asked) return true;
    spare_asked = false;
    std::string text, why;
    json::Value answer;
    if (!Receive(control, pidfd, timeout_ms, &text, &why) ||
        !json::Parse(text, &answer).ok()) {
      return false;
    }
    const int64_t pid = json::GetInt(answer, "spare", 0);
    if (pid > 0 && pid != spare) {
      EndSpare();  // it died meanwhile: the template made another
      spare = static_cast<pid_t>(pid);
      TRITONPY_LOG_VERBOSE(
          "tritonpy: stub template (" + describe + ") made a spare, pid " +
          std::to_string(spare));
    }
    return true;
  }

  // Asks for the next spare, for stubs of `sandbox`: the template writes
  // its ids' maps (SandboxIdMaps) once it cloned it, so that it builds
  // its root ahead. Its answer is read before the next message.
  void AskSpare(const StubSandbox& sandbox) REQUIRES(mu)
  {
    json::Value maps = json::Value::array();
    for (const auto& [name, text] : SandboxIdMaps(sandbox)) {
      maps.push_back(json::Value::array({name, text}));
    }
    json::Value ask = json::Value::object();
    ask["maps"] = std::move(maps);
    ask["tmp_bytes"] = sandbox.tmp_bytes;
    json::Value message = json::Value::object();
    message["spare"] = std::move(ask);
    if (SendWithFds(control, json::Write(message), {})) spare_asked = true;
  }

  // Whether it has exited (it is not reaped yet).
  bool Exited() REQUIRES(mu)
  {
    siginfo_t info;
    info.si_pid = 0;
    int r = waitid(P_PID, pid, &info, WEXITED | WNOHANG | WNOWAIT);
    return (r == 0 && info.si_pid == pid) || (r < 0 && errno == ECHILD);
  }

  // Ends it (EOF first: it exits by itself) and reaps it, and its spare;
  // its stubs stay.
  std::string End() REQUIRES(mu)
  {
    // A spare it made and did not say yet is said now, or it is found
    // among the template's process group below.
    const bool said = pid <= 0 || control < 0 || CollectSpare(1000);
    CloseIf(&control);
    CloseIf(&lifeline);
    CloseIf(&pidfd);
    memory.Reset();
    if (pid <= 0) return "";
    kill(-pid, SIGKILL);  // it and what is left of its group
    int status = 0;
    pid_t r;
    do {
      r = waitpid(pid, &status, 0);
    } while (r < 0 && errno == EINTR);
    const std::string how = r < 0 ? "" : DescribeWaitStatus(status);
    EndSpare();
    if (!said) {
      // A spare keeps the template's group until it is taken: what is
      // left of the group, killed above, is reaped.
      do {
        r = waitpid(-pid, nullptr, 0);
      } while (r > 0 || (r < 0 && errno == EINTR));
    }
    pid = -1;
    return how;
  }

  // Sends `message`, waits for its {"ok": true} (into *reply when given);
  // "" or why not (it is then ended).
  std::string Ask(
      const std::string& message, int timeout_ms, json::Value* reply = nullptr)
      REQUIRES(mu)
  {
    std::string text, why;
    json::Value answer;
    if (!CollectSpare(timeout_ms)) {
      why = "it did not answer for its spare";
    } else if (!SendWithFds(control, message, {})) {
      why = std::string("sending it a message: ") + strerror(errno);
    } else if (!Receive(control, pidfd, timeout_ms, &text, &why)) {
      const std::string how = End();
      return how.empty() ? why : why + "; the template " + how;
    } else if (!json::Parse(text, &answer).ok()) {
      why = "it sent '" + text.substr(0, 200) + "'";
    } else if (!json::GetBool(answer, "ok")) {
      why = json::GetString(answer, "error", "it refused");
    } else if (reply != nullptr) {
      *reply = std::move(answer);
    }
    if (!why.empty()) End();
    return why;
  }

  // Gives it up for good, logged.
  void Refuse(const std::string& why) REQUIRES(mu)
  {
    refused = why;
    TRITONPY_LOG_WARN(
        "tritonpy: stub template (" + describe + ") cannot fork stubs: " + why +
        (!launch.opening.empty()
             ? "; the stubs of its models, and their own templates, fork "
               "from the template without their opening imports instead"
             : "; its stubs start afresh (exec) instead"));
  }

  // Starts it when it is not running (again, when it exited), its memory
  // reported to `reporter`; false when it cannot start (it is then
  // refused). `forker` (a model's own template): what forks it from
  // another template, when one can, and says which in *from (Start).
  bool Up(
      int timeout_ms,
      const std::function<void(const std::function<void()>&)>& starter,
      MemoryReporter* reporter, const ChildForker* forker = nullptr,
      std::string* from = nullptr) REQUIRES(mu)
  {
    if (pid > 0 && Exited()) {
      const pid_t old = pid;
      const std::string how = End();
      TRITONPY_LOG_WARN(
          "tritonpy: stub template (" + describe + ") pid " +
          std::to_string(old) + " " + how +
          "; starting it again (running stubs are unaffected)");
    }
    if (pid > 0) return true;
    const std::string why = Start(timeout_ms, starter, forker, from);
    if (!why.empty()) {
      Refuse(why);
      return false;
    }
    TRITONPY_LOG_INFO(
        "tritonpy: stub template (" + describe + ") started, pid " +
        std::to_string(pid) +
        (from == nullptr || from->empty()
             ? ""
             : ", forked from the stub template (" + *from + ")"));
    const MemoryReporter::Labels labels = {
        {"kind", "template"},
        {"model", ""},
        {"version", ""},
        {"instance", "template pid " + std::to_string(pid)}};
    memory = MemoryReporter::Registration(
        reporter,
        reporter->Add(pid, labels, "stub template (" + describe + ")"));
    return true;
  }

  // Starts it and waits until it has imported everything; "" or why not.
  // `starter` runs a job on the backend's starter thread (StubTemplates).
  // With `forker`, it is forked from another template first, sharing what
  // that one imported (the forker describes it in *from); when that
  // cannot be done, it is exec'd (*from cleared).
  std::string Start(
      int timeout_ms,
      const std::function<void(const std::function<void()>&)>& starter,
      const ChildForker* forker, std::string* from) REQUIRES(mu)
  {
    std::string why;
    if (forker != nullptr) {
      why = Spawn(starter, forker);
      if (!why.empty()) {
        TRITONPY_LOG_VERBOSE(
            "tritonpy: stub template (" + describe +
            ") was not forked from another template: " + why +
            "; it starts afresh (exec)");
        from->clear();
      }
    }
    if (forker == nullptr || !why.empty()) why = Spawn(starter, nullptr);
    if (!why.empty()) return why;
    std::string text;
    json::Value hello;
    if (!Receive(control, pidfd, timeout_ms, &text, &why)) {
      // How it ended says why (a crash at import, a kill).
      const std::string how = End();
      return how.empty() ? why : why + "; the template " + how;
    }
    if (!json::Parse(text, &hello).ok()) {
      why = "it sent '" + text.substr(0, 200) + "'";
    } else if (!json::GetBool(hello, "ok")) {
      why = json::GetString(hello, "error", "it refused");
    } else if (!launch.model.empty()) {
      // A model's own: it imports the model before it forks.
      shared = false;
      return Ask("{\"model\": " + launch.model + "}", timeout_ms);
    }
    if (!why.empty()) End();
    return why;
  }

  // Its process, socket and lifeline: forked by `forker` (a model's own
  // template), or exec'd on the starter thread; "" or why not.
  std::string Spawn(
      const std::function<void(const std::function<void()>&)>& starter,
      const ChildForker* forker) REQUIRES(mu)
  {
    ChildLinks links("");
    Status s = links.Open(ChildLinks::Kind::kSocket, kControlFd);
    if (s.ok()) s = links.Open(ChildLinks::Kind::kToChild, kLifelineFd);
    if (!s.ok()) return s.message();
    ChildPlan plan;
    plan.program = launch.python;
    // Forked, as a stub's request: the child keeps its template's path (no
    // working directory) and the room of its command line.
    plan.args =
        forker != nullptr
            ? std::vector<std::string>{launch.python, "-m", "tritonpy.stub"}
            : std::vector<std::string>{launch.python, "-s", "-c", kBoot};
    plan.args.insert(
        plan.args.end(),
        {"--template", "--fd", std::to_string(kControlFd), "--server-lifeline",
         std::to_string(kLifelineFd), "--preload", JoinNames(launch.preload),
         "--opening", JoinNames(launch.opening),
         // Its stubs' sandbox module, loaded and prepared once.
         "--sandboxed", launch.sandbox.enabled ? "1" : "0"});
    if (forker == nullptr) {
      // Room for the command lines of the stubs it forks (template.py,
      // _retitle), which ps and tools read.
      plan.args.push_back("--title-room");
      plan.args.push_back(std::string(kTitleRoom, ' '));
    }
    plan.env =
        launch.env.empty() && !launch.env_filtered ? nullptr : &launch.env;
    plan.null_stdin = true;
    plan.what = "stub template";
    std::string executable;
    pid_t started = -1;
    if (forker != nullptr) {
      // Not on the starter thread: the template it forks from may have to
      // be started there first. A forked child's parent is that
      // template's (CLONE_PARENT): the starter thread.
      bool abandoned = false;
      s = links.Start(&plan, &started, &executable, forker, &abandoned);
    } else {
      s = Status::Internal("the starter thread failed to start it");
      starter([&] { s = links.Start(&plan, &started, &executable); });
    }
    if (!s.ok()) return s.message();
    pid = started;
    control = links.Take(0);
    lifeline = links.Take(1);
#ifdef SYS_pidfd_open
    pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
#endif
    return "";
  }
};

StubTemplates::StubTemplates(int timeout_seconds, MemoryReporter* memory)
    : timeout_ms_(timeout_seconds * 1000),
      memory_(memory),
      starter_job_([this](const std::function<void()>& job) { OnStarter(job); })
{
  starter_.Start(
      "tritonpy-starter", "the stub template starter",
      [this] { return RunStarterJob(); }, LogAndGoOn);
}

StubTemplates::~StubTemplates()
{
  // Each ended outside mu_ (the lock order: a model's own template's lock,
  // then mu_, as it finds the template it forks from).
  std::map<std::string, std::shared_ptr<Template>> all;
  {
    MutexLock lock(&mu_);
    all.swap(templates_);
  }
  for (auto& [key, t] : all) {
    MutexLock tlock(&t->mu);
    t->End();
  }
  starter_.Stop();
  starter_.Join();
}

bool
StubTemplates::RunStarterJob()
{
  const std::function<void()>* job;
  {
    MutexLock lock(&starter_mu_);
    job = job_;
  }
  if (job == nullptr) return starter_.Wait();
  // Its caller waits in OnStarter (call_mu_ lets one in at a time). A job
  // that throws is done all the same: its caller finds no result.
  const Status failed = Guarded("the stub template starter", [&] {
    (*job)();
    return Status();
  });
  if (!failed.ok()) TRITONPY_LOG_ERROR(failed.message());
  MutexLock lock(&starter_mu_);
  job_ = nullptr;
  job_done_ = true;
  job_done_cv_.NotifyAll();
  return true;
}

void
StubTemplates::OnStarter(const std::function<void()>& job)
{
  MutexLock call(&call_mu_);
  MutexLock lock(&starter_mu_);
  job_ = &job;
  job_done_ = false;
  starter_.Wake();
  while (!job_done_) job_done_cv_.Wait();
}

std::string
StubTemplates::Key(const StubLaunch& launch)
{
  // What makes two templates differ. The sandbox is applied per stub,
  // but sandboxed and unsandboxed models never share a template: what one
  // kind of stub leaves in it (a cache, a module's state) the other does
  // not see.
  return launch.python + '\0' + JoinNames(launch.env, "\n") + '\0' +
         (launch.env_filtered ? "1" : "0") + '\0' + JoinNames(launch.preload) +
         '\0' + JoinNames(launch.opening) + '\0' + SandboxKey(launch.sandbox) +
         '\0' + launch.model_key;
}

std::string
StubTemplates::SandboxKey(const StubSandbox& box)
{
  return box.enabled ? "sandbox " + std::to_string(box.max_processes) + " " +
                           std::to_string(box.address_space_bytes) + " " +
                           std::to_string(box.uid)
                     : "no sandbox";
}

std::shared_ptr<StubTemplates::Template>
StubTemplates::Find(const StubLaunch& launch)
{
  const bool learned = !launch.opening.empty();
  // Runs while a loaded model uses it (Forget); the backend's own run on.
  const bool leased = (learned || launch.own_settings) && !launch.lease.empty();
  const std::string key = Key(launch);
  MutexLock lock(&mu_);
  auto found = templates_.find(key);
  if (found != templates_.end()) {
    if (leased) users_[key].insert(launch.lease);
    return found->second;
  }
  if (learned) {
    // One that could not serve is not tried again (Forget keeps its key).
    if (refused_learned_.count(key) != 0) return nullptr;
    // Made for the second model file that opens with these imports: the
    // first is spared the process (and the wait for it) while it is alone.
    auto first = first_learner_.find(key);
    if (first == first_learner_.end()) {
      if (first_learner_.size() < kMostLearners) {
        first_learner_.emplace(key, launch.learn);
      }
      return nullptr;
    }
    if (first->second == launch.learn || learned_ >= kMostLearned) {
      return nullptr;
    }
  }
  std::shared_ptr<Template>& t = templates_[key];
  t = std::make_shared<Template>();
  t->launch = launch;
  t->launch.templates = nullptr;
  t->launch.learn.clear();
  t->launch.lease.clear();
  if (learned) ++learned_;
  if (leased) users_[key].insert(launch.lease);
  t->describe =
      "interpreter '" + launch.python + "', preload '" +
      JoinNames(launch.preload) + "'" +
      (learned ? ", opening imports '" + JoinNames(launch.opening) + "'" : "") +
      (launch.sandbox.enabled ? ", sandboxed stubs" : "") +
      (launch.model_key.empty() ? "" : ", " + launch.model_key);
  return t;
}

bool
StubTemplates::Learn(const StubLaunch& launch, StubLaunch* learned)
{
  std::shared_ptr<Template> t = Find(launch);
  MutexLock lock(&t->mu);
  if (!t->refused.empty() || !t->Up(timeout_ms_, starter_job_, memory_)) {
    return false;
  }
  json::Value answer;
  const std::string why =
      t->Ask("{\"imports\": " + launch.learn + "}", timeout_ms_, &answer);
  if (!why.empty()) {
    TRITONPY_LOG_WARN(
        "tritonpy: stub template (" + t->describe +
        ") did not say which packages a model file imports first: " + why +
        "; the next fork starts the template again");
    return false;
  }
  *learned = launch;
  learned->opening.clear();
  const json::Value* modules = json::Find(answer, "modules");
  if (modules == nullptr || !modules->is_array()) return false;
  for (const json::Value& m : *modules) {
    // Names of the --preload list: identifiers, joined with commas.
    const std::string name = m.is_string() ? m.get<std::string>() : "";
    const bool identifier = !name.empty() && name.size() < 256 &&
                            name.find_first_not_of(
                                "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRST"
                                "UVWXYZ0123456789_") == std::string::npos;
    if (!identifier) return false;
    if (std::find(launch.preload.begin(), launch.preload.end(), name) ==
            launch.preload.end() &&
        std::find(learned->opening.begin(), learned->opening.end(), name) ==
            learned->opening.end()) {
      learned->opening.push_back(name);
    }
  }
  return !learned->opening.empty();
}

pid_t
StubTemplates::Fork(
    const StubLaunch& launch, const ChildFork& fork, int* err,
    std::string* from)
{
  if (!launch.learn.empty() && launch.model_key.empty()) {
    // The template whose preload list has what the model file imports
    // first too; when there is none (none learned, too many, or it cannot
    // serve), the launch's own.
    StubLaunch learned;
    if (Learn(launch, &learned)) {
      std::shared_ptr<Template> t = Find(learned);
      if (t != nullptr) {
        TRITONPY_LOG_VERBOSE(
            "tritonpy: a child for the model file in " + launch.learn +
            " forks from the stub template (" + t->describe + ")");
        // Once it was asked, a child of it may hold the fork's pipes: no
        // other template may fork with them (the caller execs the stub
        // with pipes of its own).
        bool asked = false;
        const pid_t pid = ForkFrom(t.get(), learned, fork, err, &asked, from);
        if (pid != 0 || asked) return pid;
      }
    }
  }
  std::shared_ptr<Template> t = Find(launch);
  bool asked = false;
  return ForkFrom(t.get(), launch, fork, err, &asked, from);
}

pid_t
StubTemplates::ForkFrom(
    Template* t, const StubLaunch& launch, const ChildFork& fork, int* err,
    bool* asked, std::string* from)
{
  MutexLock lock(&t->mu);
  if (!t->refused.empty() || t->ended) return 0;
  const std::string what = "tritonpy: stub template (" + t->describe + ")";
  // A model's own template is forked itself, as a stub of the model
  // would be without it: from the template of its model file's opening
  // imports when there is one, else from the launch's (the lock order:
  // a model's own template, then the one it forks from).
  StubLaunch parent;
  std::string parent_describe;
  ChildForker forker;
  if (!launch.model_key.empty()) {
    parent = launch;
    parent.model.clear();
    parent.model_key.clear();
    parent.shared_args.clear();
    forker = [this, &parent, &parent_describe](
                 const ChildFork& child, int* child_err) {
      return Fork(parent, child, child_err, &parent_describe);
    };
  }
  if (!t->Up(
          timeout_ms_, starter_job_, memory_, forker ? &forker : nullptr,
          &parent_describe)) {
    return 0;
  }

  if (!launch.shared_args.empty() && !t->shared) {
    // The config is final: initialize_shared runs once, before the
    // instances fork.
    const std::string why =
        t->Ask("{\"shared\": " + launch.shared_args + "}", timeout_ms_);
    if (!why.empty()) {
      t->Refuse(why);
      return 0;
    }
    t->shared = true;
  }

  // The request: the stub's argv (`python -m tritonpy.stub ...`).
  const ChildPlan& plan = *fork.plan;
  json::Value request = json::Value::object();
  request["argv"] = plan.args;
  std::vector<std::string> env;
  if (plan.env != nullptr) {
    env = *plan.env;
  } else {
    for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  }
  request["env"] = env;
  char cwd[PATH_MAX];
  request["cwd"] = getcwd(cwd, sizeof(cwd)) != nullptr ? cwd : "/";
  request["parent"] = static_cast<int64_t>(fork.parent);
  if (plan.sandbox.enabled) {
    json::Value sandbox = json::Value::object();
    sandbox["max_processes"] = plan.sandbox.max_processes;
    sandbox["address_space"] = plan.sandbox.address_space_bytes;
    sandbox["own_network"] = plan.sandbox.own_network;
    request["sandbox"] = std::move(sandbox);
  } else {
    request["sandbox"] = nullptr;
  }
  // Every forked child waits for its go byte (child_steps.h).
  std::vector<int> fds = {fork.report_fd, fork.go_fd};
  std::vector<int> targets;
  for (const auto& [fd, target] : plan.place) {
    fds.push_back(fd);
    targets.push_back(target);
  }
  request["targets"] = targets;
  request["null_stdin"] = plan.null_stdin;

  std::string text, why;
  json::Value reply;
  if (!t->CollectSpare(timeout_ms_)) {
    why = "no answer for its spare";
  } else {
    *asked = true;
    if (!SendWithFds(t->control, json::Write(request), fds)) {
      why = std::string("sending it the request: ") + strerror(errno);
    } else if (!Receive(t->control, t->pidfd, timeout_ms_, &text, &why)) {
    } else if (!json::Parse(text, &reply).ok()) {
      why = "it answered '" + text.substr(0, 200) + "'";
    }
  }
  if (!why.empty()) {
    const std::string how = t->End();
    TRITONPY_LOG_WARN(
        what + " failed to fork a stub: " + why +
        (how.empty() ? "" : "; the template " + how) +
        "; this stub starts afresh (exec), the next fork starts the " +
        "template again");
    return 0;
  }
  const int64_t pid = json::GetInt(reply, "pid", -1);
  if (pid > 0) {
    if (from != nullptr) *from = t->describe;
    if (pid == t->spare) {
      t->spare = -1;  // the stub's now: its StubProcess reaps it
      TRITONPY_LOG_VERBOSE(
          what + " forked stub pid " + std::to_string(pid) + " from its spare");
    }
    // The next sandboxed stub's namespaces and common root, made before
    // it is asked for, once this stub is up (MakeSpare).
    if (plan.sandbox.enabled) t->spare_due = true;
    return static_cast<pid_t>(pid);
  }
  if (json::Find(reply, "errno") != nullptr) {
    *err = static_cast<int>(json::GetInt(reply, "errno"));
    return -1;
  }
  TRITONPY_LOG_WARN(
      what +
      " refused to fork a stub: " + json::GetString(reply, "refused", text) +
      "; this stub starts afresh (exec) instead");
  return 0;
}

void
StubTemplates::MakeSpare(const StubLaunch& launch)
{
  std::shared_ptr<Template> t = Find(launch);
  MutexLock lock(&t->mu);
  if (!t->spare_due || t->pid <= 0 || t->spare_asked) return;
  t->spare_due = false;
  t->AskSpare(launch.sandbox);
}

std::string
JoinNames(const std::vector<std::string>& names, const char* sep)
{
  std::string out;
  for (const std::string& name : names) {
    if (!out.empty()) out += sep;
    out += name;
  }
  return out;
}

void
StubTemplates::Forget(const std::string& lease)
{
  std::vector<std::shared_ptr<Template>> ended;
  {
    MutexLock lock(&mu_);
    for (auto it = templates_.begin(); it != templates_.end();) {
      bool end = it->second->launch.model_key == lease;
      auto users = users_.find(it->first);
      if (users != users_.end() && users->second.erase(lease) > 0 &&
          users->second.empty()) {
        // The last loaded model that forked from it. Of opening imports:
        // the next model that opens with them is a first learner again.
        users_.erase(users);
        if (!it->second->launch.opening.empty()) {
          first_learner_.erase(it->first);
          --learned_;
        }
        end = true;
      }
      if (end) {
        ended.push_back(std::move(it->second));
        it = templates_.erase(it);
      } else {
        ++it;
      }
    }
  }
  // Outside mu_: a fork of another model's template may hold its own lock.
  for (const std::shared_ptr<Template>& t : ended) {
    MutexLock tlock(&t->mu);
    t->ended = true;
    const pid_t pid = t->pid;
    t->End();
    if (!t->launch.opening.empty() && !t->refused.empty()) {
      // Given up for good: its models keep forking from the shared one.
      MutexLock lock(&mu_);
      if (refused_learned_.size() < kMostLearners) {
        refused_learned_.insert(Key(t->launch));
      }
    }
    if (t->launch.model_key.empty() && pid > 0) {
      TRITONPY_LOG_INFO(
          "tritonpy: stub template (" + t->describe + ") pid " +
          std::to_string(pid) +
          " ended: no loaded model forks from it (its stubs stay)");
    }
  }
}

std::vector<StubTemplates::Running>
StubTemplates::List() const
{
  // Not under mu_: a model's own template starting holds its lock while
  // it finds the template it forks from.
  std::vector<std::shared_ptr<Template>> all;
  {
    MutexLock lock(&mu_);
    for (const auto& [key, t] : templates_) all.push_back(t);
  }
  std::vector<Running> out;
  for (const std::shared_ptr<Template>& t : all) {
    MutexLock tlock(&t->mu);
    if (t->pid > 0) out.push_back({t->describe, t->pid});
  }
  return out;
}

}  // namespace tritonpy
