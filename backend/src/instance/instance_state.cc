// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "instance/instance_state.h"

#include <chrono>

#include "triton/triton_util.h"
#include "util/json.h"

namespace tritonpy {

namespace {

// What the model's stubs can map of the backend's arenas: half of their
// address-space limit under the sandbox (arena.h); no limit without one.
std::shared_ptr<ArenaRoom>
RoomOf(const ModelState& model)
{
  const StubSandbox& sandbox = model.stub_launch().sandbox;
  if (!sandbox.enabled || sandbox.address_space_bytes == 0) return nullptr;
  return std::make_shared<ArenaRoom>(
      sandbox.address_space_bytes / 2,
      "half of the stub's address-space limit " +
          std::to_string(sandbox.address_space_bytes) +
          ", stub-sandbox-address-space-bytes");
}

// The model loading API of the model's stubs, if they are sandboxed.
SandboxedControl
SandboxedControlOf(const ModelState& model)
{
  const BackendState& backend = model.backend();
  SandboxedControl policy;
  policy.sandboxed = model.stub_launch().sandbox.enabled;
  policy.allowed = backend.settings().sandbox_model_control;
  policy.backend_sandboxed = backend.settings().sandbox.enabled;
  policy.backend = backend.name();
  policy.model = model.name();
  policy.models = backend.sandboxed_models();
  return policy;
}

}  // namespace

InstanceState::InstanceState(
    ModelState* model, TRITONBACKEND_ModelInstance* instance, std::string name,
    std::string kind, int32_t device_id, TRITONSERVER_Server* server)
    : model_(model),
      instance_(instance),
      name_(std::move(name)),
      kind_(std::move(kind)),
      device_id_(device_id),
      arena_room_(RoomOf(*model)),
      usage_(std::make_shared<StubUsage>()),
      bls_(
          std::make_unique<Bls>(
              server, Describe(), model->backend().settings().arena_byte_size,
              model->backend().settings().model_control,
              model->backend().settings().stub_limits, arena_room_,
              SandboxedControlOf(*model), usage_)),
      forks_(
          std::make_unique<ForkChannels>(ForkChannels::Settings{
              server, Describe(), model->backend().settings().arena_byte_size,
              model->backend().settings().model_control,
              model->backend().settings().stub_limits,
              model->backend().settings().stub_send_queue_bytes, arena_room_,
              SandboxedControlOf(*model), usage_, bls_.get()})),
      metrics_(
          std::make_unique<InstanceMetrics>(
              &model->backend().metric_store(), "model '" + model->name() + "'",
              model->name())),
      frames_(
          Describe(), metrics_.get(), &stub_,
          model->backend().settings().stub_limits),
      starter_(
          model, name_, kind_, device_id_, Describe(), &frames_, bls_.get(),
          &log_levels_, &stub_, &recv_buf_),
      stub_(
          Describe(), model->backend().settings().stub_restart_limit,
          [this](
              std::unique_ptr<StubProcess>* process,
              std::shared_ptr<Channel>* channel, StubTraits* traits) {
            return starter_.Start(process, channel, traits);
          }),
      gate_(
          Describe(), &stub_, model->max_inflight_batches(),
          model->sync_prefetch_batches(),
          2 * model->backend().settings().stub_timeout_seconds),
      arenas_(model->backend().settings().arena_byte_size, arena_room_),
      table_(model, instance, &stub_, &gate_, &arenas_),
      readiness_(
          Describe(), name_, &stub_,
          model->backend().settings().ready_timeout_seconds),
      reader_(
          Describe(),
          {model, &stub_, &frames_, &table_, &gate_, &arenas_, bls_.get(),
           forks_.get(), &log_levels_, &readiness_, drain_.get(), &recv_buf_})
{
}

std::string
InstanceState::Describe() const
{
  return "model '" + model_->name() + "' instance '" + name_ + "'";
}

Status
InstanceState::Create(
    ModelState* model, TRITONBACKEND_ModelInstance* instance,
    std::unique_ptr<InstanceState>* out)
{
  const char* name = nullptr;
  TRITONPY_RETURN_IF_TRITON_ERROR(
      TRITONBACKEND_ModelInstanceName(instance, &name));
  TRITONSERVER_InstanceGroupKind kind;
  TRITONPY_RETURN_IF_TRITON_ERROR(
      TRITONBACKEND_ModelInstanceKind(instance, &kind));
  int32_t device_id = 0;
  TRITONPY_RETURN_IF_TRITON_ERROR(
      TRITONBACKEND_ModelInstanceDeviceId(instance, &device_id));
  TRITONSERVER_Server* server = nullptr;
  TRITONPY_RETURN_IF_TRITON_ERROR(
      TRITONBACKEND_ModelServer(model->triton_model(), &server));
  // Bls exists before the stub: initialize() may use the model loading API.
  std::unique_ptr<InstanceState> state(new InstanceState(
      model, instance, name,
      kind == TRITONSERVER_INSTANCEGROUPKIND_GPU     ? "GPU"
      : kind == TRITONSERVER_INSTANCEGROUPKIND_MODEL ? "MODEL"
                                                     : "CPU",
      device_id, server));
  if (!state->reader_.ok()) {
    return Status::Internal("tritonpy: eventfd failed");
  }
  state->WatchStubMemory();
  {
    // Triton starts every instance at once; the model lets
    // instance-start-parallelism of them run their start together.
    ModelState::StartTurn turn(model, name);
    TRITONPY_RETURN_IF_ERROR(state->stub_.Start());
  }
  state->drain_->server = server;
  state->drain_->model_name = model->name();
  state->drain_->model_version = static_cast<int64_t>(model->version());
  // Without a grace, Triton alone decides when work in flight ends.
  if (model->backend().settings().finalize_grace_seconds > 0) {
    model->backend().drain_watcher().Register(state->drain_);
  }
  state->reader_.Start();
  *out = std::move(state);
  return Status();
}

void
InstanceState::WatchStubMemory()
{
  MemoryReporter* reporter = &model_->backend().memory_reporter();
  const MemoryReporter::Labels labels = {
      {"kind", "stub"},
      {"model", model_->name()},
      {"version", std::to_string(model_->version())},
      {"instance", name_}};
  stub_.set_pid_observer([this, reporter, labels](pid_t pid) {
    if (pid < 0) {
      memory_.Reset();
    } else {
      memory_ = MemoryReporter::Registration(
          reporter, reporter->Add(pid, labels, Describe()));
    }
  });
}

InstanceState::~InstanceState()
{
  model_->backend().drain_watcher().Unregister(drain_.get());
  const BackendSettings& settings = model_->backend().settings();
  const auto wait = std::chrono::milliseconds(
      static_cast<int64_t>(
          1000 *
          (settings.finalize_grace_seconds + settings.stub_timeout_seconds)));
  const std::string wait_text = json::FormatNumber(
      settings.finalize_grace_seconds + settings.stub_timeout_seconds);
  TRITONPY_LOG_INFO("tritonpy: stopping stub for " + Describe());
  stub_.Stop(
      wait, wait_text, std::chrono::seconds(settings.stub_timeout_seconds),
      [this](Channel* channel) {
        log_levels_.Sync(channel);  // for what finalize() logs
      });
  reader_.Join();
  forks_.reset();    // closes the forked children's channels
  bls_.reset();      // cancels BLS calls still in flight
  metrics_.reset();  // deletes the stub's metrics from the server
}

}  // namespace tritonpy
