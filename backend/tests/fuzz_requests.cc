// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "fuzz_requests.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "protocol/protocol.h"

tritonpy::ModelState::~ModelState()
{
  std::fprintf(stderr, "fuzz: a ModelState was destroyed\n");
  std::abort();
}

namespace tritonpy {

ModelState*
ModelStateTestPeer::Make(int64_t max_batch_size, bool decoupled)
{
  auto* m = new ModelState();  // never destroyed: lives until exit
  m->name_ = "fuzz";
  m->max_batch_size_ = max_batch_size;
  m->decoupled_ = decoupled;
  return m;
}

namespace fuzz {

namespace {

// Dims a client can make Triton pass: small ones, and ones whose product
// wraps at 2^64 with 1- to 8-byte elements.
const int64_t kDims[] = {
    0,
    1,
    2,
    3,
    4,
    -1,
    17,
    4096,
    int64_t(1) << 31,
    int64_t(1) << 32,
    int64_t(1) << 61,
    int64_t(1) << 62,
    INT64_MAX,
    INT64_MIN};
// Buffer sizes around the inline limit and MAX_FRAME.
constexpr uint64_t kInline = proto::kMaxInlineTensor;
constexpr uint64_t kFrame = proto::kMaxFrame;
const uint64_t kSizes[] = {0,           1,           3,           8,
                           64,          4096,        kInline - 1, kInline,
                           kInline + 1, kFrame - 72, kFrame,      kFrame + 8928,
                           300000};

std::string
Text(FuzzInput* in)
{
  // Mostly short; now and then past MAX_FRAME on its own.
  switch (in->U8() % 8) {
    case 0:
      return std::string(70000 + in->U8() * 512, static_cast<char>(in->U8()));
    case 1:
      return std::string();
    default:
      return in->Bytes(in->U8() % 40);
  }
}

std::unique_ptr<TRITONBACKEND_Input>
MakeInput(FuzzInput* in)
{
  auto input = std::make_unique<TRITONBACKEND_Input>();
  input->name = Text(in);
  // Triton hands over only the datatypes it knows.
  input->dtype = static_cast<TRITONSERVER_DataType>(1 + in->U8() % 14);
  const size_t ndim = in->U8() % 5;
  for (size_t i = 0; i < ndim; ++i) {
    input->shape.push_back(
        in->U8() % 4 == 0 ? static_cast<int64_t>(in->U64())
                          : kDims[in->U8() % (sizeof(kDims) / 8)]);
  }
  const size_t nbuf = in->U8() % 4;
  uint64_t total = 0;
  for (size_t b = 0; b < nbuf; ++b) {
    uint64_t size = kSizes[in->U8() % (sizeof(kSizes) / 8)];
    std::vector<uint8_t> buf(size);
    const uint8_t seed = in->U8();
    for (uint64_t i = 0; i < size; ++i) buf[i] = static_cast<uint8_t>(seed + i);
    total += size;
    input->buffers.push_back(std::move(buf));
  }
  // What Triton says the byte size is: the buffers' total (as it checks for
  // a request it accepted), now and then anything.
  switch (in->U8() % 6) {
    case 0:
      input->byte_size = in->U64();
      break;
    case 1:
      input->byte_size = total + 1;
      break;
    default:
      input->byte_size = total;
  }
  input->gpu = in->U8() == 0xff;
  return input;
}

}  // namespace

std::unique_ptr<TRITONBACKEND_Request>
MakeRequest(FuzzInput* in)
{
  auto req = std::make_unique<TRITONBACKEND_Request>();
  req->id = Text(in);
  switch (in->U8() % 3) {
    case 0:
      req->correlation = in->U64();
      break;
    case 1:
      req->correlation_is_string = true;
      req->correlation_string = Text(in);
      break;
    default:
      break;
  }
  req->flags = in->U32();
  req->timeout_us = in->U64();
  for (size_t i = in->U8() % 5; i > 0; --i) {
    FakeParameter p;
    p.key = Text(in);
    p.type = static_cast<TRITONSERVER_ParameterType>(in->U8() % 5);
    p.text = Text(in);
    p.integer = static_cast<int64_t>(in->U64());
    p.boolean = (in->U8() & 1) != 0;
    uint64_t bits = in->U64();
    std::memcpy(&p.real, &bits, 8);  // NaN, infinities, denormals too
    req->parameters.push_back(std::move(p));
  }
  for (size_t i = in->U8() % 3; i > 0; --i) req->outputs.push_back(Text(in));
  for (size_t i = in->U8() % 5; i > 0; --i) {
    req->inputs.push_back(MakeInput(in));
  }
  return req;
}

}  // namespace fuzz
}  // namespace tritonpy
