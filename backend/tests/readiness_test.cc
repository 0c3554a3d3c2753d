// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.
//
// Tests of the instance readiness answer (readiness_queries.cc) against the
// stand-in for tritonserver (fake_triton.cc), built with ASan and UBSan:
// an instance whose stub is not running answers with the official
// backend's text first ("Stub process '<instance>' is not healthy."), then
// tritonpy's reason. Triton 2.51 never asks (tests/integration/
// test_readiness.py), so this is where the answer is checked.

#include <cstdio>
#include <memory>
#include <string>

#include "check.h"
#include "instance/readiness_queries.h"
#include "process/stub_supervisor.h"

using tritonpy::Status;

namespace {

using tritonpy_test::failures;

bool
StartsWith(const std::string& text, const std::string& prefix)
{
  return text.compare(0, prefix.size(), prefix) == 0;
}

// No stub: it failed to start (a dead stub that is not restarted is the
// same state to the readiness answer).
void
TestNoStubAnswersTheOfficialTextFirst()
{
  tritonpy::StubSupervisor stub(
      "model 'm' instance 'm_0_0'", 1,
      [](std::unique_ptr<tritonpy::StubProcess>*,
         std::shared_ptr<tritonpy::Channel>*, tritonpy::StubTraits*) {
        return Status::Internal("the stub did not start");
      });
  CHECK(!stub.Start().ok());
  tritonpy::ReadinessQueries readiness(
      "model 'm' instance 'm_0_0'", "m_0_0", &stub, 1.0);
  const Status s = readiness.Check();
  CHECK(!s.ok());
  CHECK(StartsWith(
      s.message(),
      "Stub process 'm_0_0' is not healthy. tritonpy: model 'm' instance "
      "'m_0_0' is not ready: "));
  if (!StartsWith(s.message(), "Stub process 'm_0_0' is not healthy. ")) {
    printf("got: %s\n", s.message().c_str());
  }
}

}  // namespace

int
main()
{
  TestNoStubAnswersTheOfficialTextFirst();
  printf("%s: %d failure(s)\n", failures == 0 ? "ok" : "FAIL", failures);
  return failures == 0 ? 0 : 1;
}
