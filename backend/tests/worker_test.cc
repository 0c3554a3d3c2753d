// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// Tests of the backend's own threads and children: WorkerThread (its
// wake-ups, stop, failures, a join from the thread itself), ChildLinks
// (a child's descriptor pairs, placed, then closed on every path) and
// LogRelay (sandboxed stubs' output copied, each pipe in turn).

#include <dirent.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>

#include "check.h"
#include "process/child_launch.h"
#include "process/log_relay.h"
#include "util/worker_thread.h"

using tritonpy::ChildLinks;
using tritonpy::ChildPlan;
using tritonpy::LogRelay;
using tritonpy::Status;
using tritonpy::WorkerThread;

namespace {

using tritonpy_test::failures;

// Waits (up to 10 s) until `cond` holds.
template <typename Cond>
bool
Eventually(Cond cond)
{
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!cond()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

bool
GoOn(const Status&)
{
  return true;
}

void
TestWorkerWakes()
{
  WorkerThread w;
  std::atomic<int> rounds{0};
  // A Wake before the first Wait is not lost.
  w.Wake();
  w.Start(
      "test-wake", "the test worker",
      [&] {
        ++rounds;
        return w.Wait();
      },
      GoOn);
  CHECK(w.started());
  CHECK(Eventually([&] { return rounds.load() >= 2; }));
  const int before = rounds.load();
  w.Wake();
  CHECK(Eventually([&] { return rounds.load() > before; }));
  w.Stop();
  w.Join();
  CHECK(w.stopping() && !w.started());
  const int after = rounds.load();
  w.Wake();  // after the join: nothing runs
  CHECK(rounds.load() == after);
}

void
TestWorkerWaitsForItsPeriod()
{
  WorkerThread w;
  std::atomic<int> timeouts{0};
  w.Start(
      "test-period", "the test worker",
      [&] {
        if (!w.WaitFor(std::chrono::milliseconds(5))) return false;
        ++timeouts;
        return true;
      },
      GoOn);
  CHECK(Eventually([&] { return timeouts.load() >= 3; }));
  // Stop ends a long wait at once.
  const auto t0 = std::chrono::steady_clock::now();
  w.Stop();
  w.Join();
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
}

void
TestWorkerFailures()
{
  WorkerThread w;
  std::atomic<int> steps{0};
  std::string seen;
  w.Start(
      "test-fail", "the test worker",
      [&]() -> bool {
        if (++steps < 3) throw std::runtime_error("step failed");
        return false;  // the third step ends the thread
      },
      [&](const Status& failed) {
        seen = failed.message();
        return true;  // go on after a failure
      });
  w.Join();
  CHECK(steps.load() == 3);
  CHECK(seen.find("the test worker") != std::string::npos);
  CHECK(seen.find("step failed") != std::string::npos);

  // A failure handler that gives up ends the thread.
  WorkerThread w2;
  std::atomic<int> steps2{0};
  w2.Start(
      "test-fail2", "the test worker",
      [&]() -> bool {
        ++steps2;
        throw std::runtime_error("again");
      },
      [](const Status&) { return false; });
  w2.Join();
  CHECK(steps2.load() == 1);

  // Started after Stop: it ends before its first step.
  WorkerThread w3;
  std::atomic<int> steps3{0};
  w3.Stop();
  w3.Start(
      "test-stopped", "the test worker",
      [&] {
        ++steps3;
        return true;
      },
      GoOn);
  w3.Join();
  CHECK(steps3.load() == 0);
}

void
TestWorkerJoinsItself()
{
  // A step that ends its owner (a load that unloads the instance) joins
  // its own thread: detached, it finishes on its own. Leaked: the detached
  // thread may still be returning when the test looks.
  auto* w = new WorkerThread();
  std::atomic<bool> joined{false};
  w->Start(
      "test-self", "the test worker",
      [&] {
        w->Join();
        joined = true;
        return false;
      },
      GoOn);
  CHECK(Eventually([&] { return joined.load(); }));
  CHECK(!w->started());
}

int
OpenDescriptors()
{
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  while (struct dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(d);
  return n;
}

void
TestChildLinks()
{
  const int baseline = OpenDescriptors();
  pid_t pid = -1;
  {
    // The child copies what it reads on fd 4 to fd 3.
    ChildLinks links("test: ");
    CHECK(links.Open(ChildLinks::Kind::kFromChild, 3).ok());
    CHECK(links.Open(ChildLinks::Kind::kToChild, 4).ok());
    CHECK(OpenDescriptors() == baseline + 4);
    ChildPlan plan;
    plan.program = "/bin/sh";
    plan.args = {"/bin/sh", "-c", "cat <&4 >&3"};
    plan.null_stdin = true;
    std::string executable;
    CHECK(links.Start(&plan, &pid, &executable).ok());
    CHECK(pid > 0 && plan.place.size() == 2);
    // The child's ends are closed here; ours are held.
    CHECK(OpenDescriptors() == baseline + 2);
    int from = links.Take(0);
    int to = links.Take(1);
    CHECK(links.Take(0) == -1);
    CHECK(write(to, "ping", 4) == 4);
    close(to);
    char buf[8] = {};
    ssize_t n = 0;
    ssize_t r;
    while (n < 4 && (r = read(from, buf + n, sizeof(buf) - 1 - n)) > 0) n += r;
    CHECK(n == 4 && strcmp(buf, "ping") == 0);
    close(from);
  }
  CHECK(OpenDescriptors() == baseline);
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);

  {
    // A child that cannot start: every end is closed, ours too.
    ChildLinks links("test: ");
    CHECK(links.Open(ChildLinks::Kind::kSocket, 3).ok());
    ChildPlan plan;
    plan.program = "/bin/true";
    plan.args = {"/bin/true"};
    for (int i = 0; i < 8; ++i) plan.place.emplace_back(0, 5 + i);  // too many
    std::string executable;
    pid_t none = -1;
    CHECK(!links.Start(&plan, &none, &executable).ok());
    CHECK(links.ours(0) == -1 && none == -1);
    CHECK(OpenDescriptors() == baseline);
  }
  {
    // Opened, never started: closed when destroyed.
    ChildLinks links("test: ");
    CHECK(links.Open(ChildLinks::Kind::kSocket, 3).ok());
    CHECK(OpenDescriptors() == baseline + 2);
  }
  CHECK(OpenDescriptors() == baseline);
}

void
TestRunCommand()
{
  // What a helper writes to stdout and stderr is collected, as it ends.
  const int baseline = OpenDescriptors();
  tritonpy::StubLaunch launch;
  std::string out, err;
  int status = -1;
  const Status s = tritonpy::RunCommand(
      {"/bin/sh", "-c", "echo out; echo err >&2; exit 3"}, launch, &out, &err,
      &status);
  CHECK(s.ok());
  CHECK(out == "out\n");
  CHECK(err == "err\n");
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 3);
  CHECK(OpenDescriptors() == baseline);
}

// Reads from `fd` until `want` bytes came; what came when it ends or
// nothing comes for 10 s.
std::string
ReadBytes(int fd, size_t want)
{
  std::string got;
  char buf[4096];
  while (got.size() < want) {
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 10000) != 1) break;
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  return got;
}

void
TestLogRelay()
{
  int out[2];
  CHECK(pipe(out) == 0);
  {
    LogRelay relay;
    int a = -1, b = -1;
    CHECK(relay.Open(out[1], &a).ok());
    CHECK(relay.Open(out[1], &b).ok());
    CHECK(relay.open_pipes() == 2);
    // What each writes arrives, in order.
    CHECK(write(a, "one\n", 4) == 4);
    CHECK(ReadBytes(out[0], 4) == "one\n");
    CHECK(write(b, "two\n", 4) == 4);
    CHECK(ReadBytes(out[0], 4) == "two\n");
    // Lines stay whole: another's line never lands inside one.
    CHECK(write(a, "abc", 3) == 3);
    CHECK(write(b, "xyz\n", 4) == 4);
    CHECK(write(a, "def\n", 4) == 4);
    const std::string lines = ReadBytes(out[0], 11);
    CHECK(lines == "xyz\nabcdef\n" || lines == "abcdef\nxyz\n");
    // One that writes more than a chunk while another writes a line: both
    // get through, the short line whole.
    std::string big(200 * 1024, 'x');
    big.back() = '\n';
    std::thread flood([&] { CHECK(write(a, big.data(), big.size()) > 0); });
    CHECK(write(b, "three\n", 6) == 6);
    const std::string got = ReadBytes(out[0], big.size() + 6);
    flood.join();
    CHECK(got.size() == big.size() + 6);
    CHECK(got.find("three\n") != std::string::npos);
    // A pipe ends when its writers closed it, after what they wrote (the
    // end of a line not ended too).
    CHECK(write(a, "last", 4) == 4);
    close(a);
    CHECK(ReadBytes(out[0], 4) == "last");
    CHECK(Eventually([&] { return relay.open_pipes() == 1; }));
    // The relay's end copies what is left.
    CHECK(write(b, "bye\n", 4) == 4);
    close(b);
  }
  CHECK(ReadBytes(out[0], 4) == "bye\n");
  close(out[0]);
  // A server whose stdout closed: the relay's writes fail, the server
  // lives on (no SIGPIPE), and the relay ends.
  {
    LogRelay relay;
    int c = -1;
    CHECK(relay.Open(out[1], &c).ok());
    CHECK(write(c, "lost\n", 5) == 5);
    close(c);
    CHECK(Eventually([&] { return relay.open_pipes() == 0; }));
  }
  close(out[1]);
}

}  // namespace

int
main()
{
  TestChildLinks();  // first: they count this process's descriptors
  TestRunCommand();
  TestWorkerWakes();
  TestWorkerWaitsForItsPeriod();
  TestWorkerFailures();
  TestWorkerJoinsItself();
  TestLogRelay();
  printf("%s: %d failure(s)\n", failures == 0 ? "ok" : "FAIL", failures);
  return failures == 0 ? 0 : 1;
}
