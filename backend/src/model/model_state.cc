// SPDX-License-Identifier: BSD-3-Clause
// Copyright (c) The tritonpy authors.

#include "model/model_state.h"

#include <sys/stat.h>

#include <atomic>
#include <set>

#include "model/exec_env.h"
#include "triton/triton_util.h"
#include "util/json.h"

extern char** environ;

namespace tritonpy {

namespace {

// The text of model config parameter `key` (its string_value); false when
// the config does not set it.
bool
Parameter(const json::Value* params, const char* key, std::string* text)
{
  const json::Value* p = params != nullptr ? json::Find(*params, key) : nullptr;
  if (p == nullptr) return false;
  const json::Value* sv = json::Find(*p, "string_value");
  *text = sv != nullptr && sv->is_string() ? sv->get<std::string>()
                                           : json::Write(*p);
  return true;
}

// The model's config as Triton has it now (config version 1), as JSON.
Status
ReadConfig(TRITONBACKEND_Model* model, std::string* json)
{
  TRITONSERVER_Message* message = nullptr;
  TRITONPY_RETURN_IF_TRITON_ERROR(
      TRITONBACKEND_ModelConfig(model, 1 /* config_version */, &message));
  return TakeMessageJson(message, json);
}

// Where the backend sandboxes its stubs, a model's parameters may only
// tighten the sandbox: a model (or one loaded through pb_utils.load_model
// by a sandboxed model) must not switch it off or raise its limits. Such a
// model is refused rather than quietly sandboxed anyway: it asked for
// something it will not get, and the load error says which key.
Status
CheckOnlyTightens(
    const std::string& model, const StubSandbox& backend,
    const StubSandbox& wanted)
{
  if (!backend.enabled) return Status();  // any sandbox is tighter than none
  const std::string prefix = "tritonpy: model '" + model + "': parameter ";
  const std::string why =
      ": it would loosen the backend's sandbox, which a model may only "
      "tighten (docs/hardening.md)";
  if (!wanted.enabled) {
    return Status::InvalidArg(prefix + "stub_sandbox=false" + why);
  }
  if (wanted.max_processes > backend.max_processes) {
    return Status::InvalidArg(
        prefix + "stub_sandbox_max_processes=" +
        std::to_string(wanted.max_processes) + " is above the backend's " +
        "stub-sandbox-max-processes=" + std::to_string(backend.max_processes) +
        why);
  }
  if (backend.address_space_bytes != 0 &&
      (wanted.address_space_bytes == 0 ||
       wanted.address_space_bytes > backend.address_space_bytes)) {
    return Status::InvalidArg(
        prefix + "stub_sandbox_address_space_bytes=" +
        std::to_string(wanted.address_space_bytes) +
        (wanted.address_space_bytes == 0 ? " (unlimited)" : "") +
        " is above the backend's stub-sandbox-address-space-bytes=" +
        std::to_string(backend.address_space_bytes) + why);
  }
  if (backend.own_network && !wanted.own_network) {
    return Status::InvalidArg(
        prefix +
        "stub_sandbox_network=host is looser than the backend's "
        "stub-sandbox-network=none" +
        why);
  }
  if (wanted.tmp_bytes > backend.tmp_bytes) {
    return Status::InvalidArg(
        prefix + "stub_sandbox_tmp_bytes=" + std::to_string(wanted.tmp_bytes) +
        " is above the backend's stub-sandbox-tmp-bytes=" +
        std::to_string(backend.tmp_bytes) + why);
  }
  return Status();
}

// The sandbox of the model's stubs: the backend's settings, tightened by
// the model's parameters.
Status
ApplySandboxPolicy(
    const std::string& model, const BackendSettings& settings,
    const json::Value* params, StubLaunch* launch)
{
  const std::string prefix = "model '" + model + "' parameter: ";
  std::string text;
  launch->sandbox = settings.sandbox;
  for (const SandboxKey& k : kSandboxKeys) {
    if (k.parameter == nullptr || !Parameter(params, k.parameter, &text)) {
      continue;
    }
    TRITONPY_RETURN_IF_ERROR(
        k.parse(k.parameter, text, "", &launch->sandbox).WithPrefix(prefix));
  }
  return CheckOnlyTightens(model, settings.sandbox, launch->sandbox);
}

// stub-fork and stub-preload, with the model's parameter stub_preload.
// A sandboxed model's stubs in an execution environment stay exec'd: the
// template imports the preload modules outside the sandbox, and the
// environment's are code from the archive (docs/hardening.md).
Status
ApplyForkPolicy(
    const std::string& model, const BackendState& backend,
    const json::Value* params, bool exec_env, StubLaunch* launch)
{
  std::string text;
  const bool own = Parameter(params, "stub_preload", &text);
  if (own && launch->sandbox.enabled) {
    // Its template would import them outside the sandbox: a model
    // (or a config given to pb_utils.load_model) names no such module.
    return Status::InvalidArg(
        "tritonpy: model '" + model +
        "' parameter: stub_preload is refused for a sandboxed model "
        "(stub-sandbox): only the backend's stub-preload names modules "
        "that sandboxed stubs' template imports");
  }
  if (backend.templates() == nullptr) return Status();
  launch->preload = backend.settings().stub_preload;
  if (own) {
    TRITONPY_RETURN_IF_ERROR(
        BackendState::ParseModules("stub_preload", text, &launch->preload)
            .WithPrefix("tritonpy: model '" + model + "' parameter: "));
  }
  if (!(exec_env && launch->sandbox.enabled)) {
    launch->templates = backend.templates();
  }
  // What keys its template apart from the backend's (StubTemplates::Key):
  // such a template ends with the last model that uses it.
  const BackendSettings& settings = backend.settings();
  launch->own_settings = exec_env || launch->preload != settings.stub_preload ||
                         StubTemplates::SandboxKey(launch->sandbox) !=
                             StubTemplates::SandboxKey(settings.sandbox);
  return Status();
}

// stub-env-allowlist applied to `launch` (of `model`).
Status
ApplyEnvPolicy(
    const std::string& model, const BackendSettings& settings,
    StubLaunch* launch)
{
  if (settings.env_allowlist.empty()) {
    // The sandbox confines files, processes and the network; the server's
    // environment is what the operator filters. Said once per process.
    static std::atomic<bool> told{false};
    if (launch->sandbox.enabled && !told.exchange(true)) {
      TRITONPY_LOG_WARN(
          "tritonpy: model '" + model +
          "' runs sandboxed, but stub-env-allowlist is not set: sandboxed "
          "stubs get the server's whole environment, credentials in it "
          "included; set stub-env-allowlist to the variables models need "
          "(docs/hardening.md)");
    }
    return Status();
  }
  // What an execution environment set (not in the server's environment as
  // it is) stays: it belongs to the environment, not to the server.
  std::set<std::string> server;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    server.insert(*e);
  }
  const std::vector<std::string> from =
      launch->env.empty()
          ? std::vector<std::string>(server.begin(), server.end())
          : launch->env;
  launch->env.clear();
  for (const std::string& entry : from) {
    if (server.count(entry) == 0 ||
        EnvAllowed(settings.env_allowlist, entry.substr(0, entry.find('=')))) {
      launch->env.push_back(entry);
    }
  }
  launch->env_filtered = true;
  return Status();
}

// The instances of a model config: the counts of its instance groups.
int64_t
InstanceCount(const json::Value& config)
{
  int64_t instances = 0;
  if (const json::Value* groups = json::Find(config, "instance_group");
      groups != nullptr && groups->is_array()) {
    for (const json::Value& group : *groups) {
      instances += json::GetInt(group, "count", 1);
    }
  }
  return instances;
}

}  // namespace

ModelState::~ModelState()
{
  {
    MutexLock lock(&stub_mu_);
    StopStub(&auto_complete_stub_);
  }
  if (!stub_launch_.lease.empty()) {
    stub_launch_.templates->Forget(stub_launch_.lease);
  }
}

void
ModelState::UseOwnTemplate(int64_t instances)
{
  // Sandboxed: its model.py is imported inside its sandbox only, so its
  // stubs fork from the shared template and import it themselves. One
  // instance: no template of its own (nothing to share with a sibling,
  // and a process less), but one that imported model.py's opening imports
  // (StubLaunch::learn). Two or more: a template of its own, itself
  // forked from such a template, so that models share their framework too.
  if (stub_launch_.templates == nullptr) return;
  static std::atomic<uint64_t> serial{0};
  if (stub_launch_.lease.empty()) {
    stub_launch_.lease = "model '" + name_ + "' version " +
                         std::to_string(version_) + " #" +
                         std::to_string(++serial);
  }
  if (stub_launch_.sandbox.enabled || !stub_launch_.model_key.empty()) return;
  json::Value spec = json::Value::object();
  spec["model_file"] = model_file_;
  spec["model_dir"] = model_dir_;
  // What imports the model file's opening imports for its stubs, or for
  // its own template: a template shared with the other models that open
  // with the same. (The name: the models of a Python-based backend share
  // a file.)
  json::Value learn = spec;
  learn["model"] = name_;
  stub_launch_.learn = json::Write(learn);
  if (instances < 2) return;
  stub_launch_.model = json::Write(spec);
  // One template per loaded model: a reload, whatever changed, imports
  // the model again.
  stub_launch_.model_key = stub_launch_.lease;
}

void
ModelState::ShareInTemplate()
{
  if (stub_launch_.model_key.empty()) return;
  // initialize's args without the instance's keys (stub_starter.cc).
  json::Value args = json::Value::object();
  args["model_config"] = config_json_;
  args["model_repository"] = repository_;
  args["model_version"] = std::to_string(version_);
  args["model_name"] = name_;
  stub_launch_.shared_args = json::Write(args);
  // The stub that ran auto_complete_config has not run initialize_shared:
  // every instance forks from the template instead.
  MutexLock lock(&stub_mu_);
  StopStub(&auto_complete_stub_);
}

bool
ModelState::TakeAutoCompleteStub(
    const std::string& instance, std::unique_ptr<StubProcess>* process,
    std::shared_ptr<Channel>* channel)
{
  MutexLock lock(&stub_mu_);
  if (auto_complete_stub_.process == nullptr) return false;
  if (auto_complete_instance_exists_ && instance != auto_complete_instance_) {
    return false;
  }
  *process = std::move(auto_complete_stub_.process);
  *channel = std::move(auto_complete_stub_.channel);
  return true;
}

ModelState::StartTurn::StartTurn(ModelState* model, const std::string& instance)
    : model_(model)
{
  const int most = model_->backend_->settings().instance_start_parallelism;
  MutexLock lock(&model_->start_mu_);
  if (model_->starting_ >= most) {
    TRITONPY_LOG_VERBOSE(
        "tritonpy: model '" + model_->name_ + "' instance '" + instance +
        "' waits for its turn to start: " + std::to_string(most) +
        " instances are starting (instance-start-parallelism)");
  }
  while (model_->starting_ >= most) model_->start_cv_.Wait();
  ++model_->starting_;
}

ModelState::StartTurn::~StartTurn()
{
  MutexLock lock(&model_->start_mu_);
  --model_->starting_;
  model_->start_cv_.NotifyAll();
}

Status
ModelState::AutoComplete(const std::string& first_instance)
{
  AutoCompleteCall call;
  call.model_name = name_;
  call.instance_name = first_instance;
  call.config_json = config_json_;
  call.model_file = model_file_;
  call.model_dir = model_dir_;
  call.launch = stub_launch_;
  call.stub_timeout_seconds = backend_->settings().stub_timeout_seconds;
  call.stub_send_queue_bytes = backend_->settings().stub_send_queue_bytes;
  call.python_logging = backend_->settings().python_logging;
  std::string completed;
  StartedStub stub;
  TRITONPY_RETURN_IF_ERROR(RunAutoComplete(call, &completed, &stub));
  Status s;
  if (!completed.empty()) {
    s = ApplyCompletedConfig(model_, name_, completed);
    if (s.ok()) s = ReadConfig(model_, &config_json_);
  }
  if (!s.ok()) {
    StopStub(&stub);
    return s;
  }
  if (!completed.empty()) {
    TRITONPY_LOG_VERBOSE(
        "tritonpy: model '" + name_ +
        "': config after auto_complete_config: " + config_json_);
  }
  // Triton names a group's instances <group name>_<index>.
  bool exists = false;
  json::Value completed_config;
  if (json::Parse(config_json_, &completed_config).ok()) {
    if (const json::Value* groups =
            json::Find(completed_config, "instance_group");
        groups != nullptr && groups->is_array()) {
      for (const json::Value& group : *groups) {
        const std::string prefix = json::GetString(group, "name", "") + "_";
        const int64_t count = json::GetInt(group, "count", 1);
        if (first_instance.rfind(prefix, 0) != 0) continue;
        const std::string index = first_instance.substr(prefix.size());
        exists = exists ||
                 (!index.empty() &&
                  index.find_first_not_of("0123456789") == std::string::npos &&
                  index.size() < 19 && std::stoll(index) < count);
      }
    }
  }
  MutexLock lock(&stub_mu_);
  auto_complete_stub_ = std::move(stub);
  auto_complete_instance_ = first_instance;
  auto_complete_instance_exists_ = exists;
  return Status();
}

Status
ModelState::Create(TRITONBACKEND_Model* model, std::unique_ptr<ModelState>* out)
{
  std::unique_ptr<ModelState> state(new ModelState());
  state->model_ = model;

  TRITONBACKEND_Backend* backend = nullptr;
  TRITONPY_RETURN_IF_TRITON_ERROR(TRITONBACKEND_ModelBackend(model, &backend));
  void* vbackend = nullptr;
  TRITONPY_RETURN_IF_TRITON_ERROR(
      TRITONBACKEND_BackendState(backend, &vbackend));
  if (vbackend == nullptr) {
    return Status::Internal("tritonpy: backend state is missing");
  }
  state->backend_ = static_cast<BackendState*>(vbackend);

  const char* name = nullptr;
  TRITONPY_RETURN_IF_TRITON_ERROR(TRITONBACKEND_ModelName(model, &name));
  state->name_ = name;
  TRITONPY_RETURN_IF_TRITON_ERROR(
      TRITONBACKEND_ModelVersion(model, &state->version_));

  TRITONBACKEND_ArtifactType artifact_type;
  const char* location = nullptr;
  TRITONPY_RETURN_IF_TRITON_ERROR(
      TRITONBACKEND_ModelRepository(model, &artifact_type, &location));
  if (artifact_type != TRITONBACKEND_ARTIFACT_FILESYSTEM ||
      location == nullptr) {
    return Status::Unsupported(
        "tritonpy: model '" + state->name_ +
        "': the model repository must be a filesystem path");
  }
  state->repository_ = location;
  state->version_dir_ =
      state->repository_ + "/" + std::to_string(state->version_);

  TRITONPY_RETURN_IF_ERROR(ReadConfig(model, &state->config_json_));
  json::Value config;
  TRITONPY_RETURN_IF_ERROR(
      json::Parse(state->config_json_, &config)
          .WithPrefix("tritonpy: model '" + state->name_ + "' config: "));

  std::string file = json::GetString(config, "default_model_filename");
  if (file.empty()) file = "model.py";
  state->model_file_ = state->version_dir_ + "/" + file;
  state->model_dir_ = state->version_dir_;
  if (json::GetString(config, "runtime") == "model.py") {
    // A Python-based backend: Triton found backends/<backend>/model.py and
    // loaded this library for it; that file is the model's code.
    state->model_dir_ = state->backend_->directory();
    state->model_file_ = state->model_dir_ + "/model.py";
  }
  struct stat st;
  if (stat(state->model_file_.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return Status::NotFound(
        "tritonpy: model '" + state->name_ + "' version " +
        std::to_string(state->version_) + ": model file " + state->model_file_ +
        " not found");
  }

  // The interpreter (and environment) of every stub of this model, the
  // auto-complete stub included.
  // The sandbox first: the environment's probe runs in it.
  std::string text;
  state->stub_launch_.python = state->backend_->settings().python_executable;
  TRITONPY_RETURN_IF_ERROR(ApplySandboxPolicy(
      state->name_, state->backend_->settings(),
      json::Find(config, "parameters"), &state->stub_launch_));
  state->stub_launch_.log_relay = state->backend_->log_relay();
  // What a sandboxed stub reads of the repository: its model's own
  // directory (and a Python-based backend's), no other model's.
  state->stub_launch_.sandbox.read_paths.push_back(state->repository_);
  if (state->model_dir_ != state->version_dir_) {
    state->stub_launch_.sandbox.read_paths.push_back(state->model_dir_);
  }
  const bool exec_env =
      Parameter(json::Find(config, "parameters"), "EXECUTION_ENV_PATH", &text);
  if (exec_env) {
    TRITONPY_RETURN_IF_ERROR(PrepareExecutionEnv(
        state->backend_->settings(), state->name_, state->repository_, text,
        &state->stub_launch_));
  }
  TRITONPY_RETURN_IF_ERROR(ApplyEnvPolicy(
      state->name_, state->backend_->settings(), &state->stub_launch_));
  TRITONPY_RETURN_IF_ERROR(ApplyForkPolicy(
      state->name_, *state->backend_, json::Find(config, "parameters"),
      exec_env, &state->stub_launch_));

  // With the count the config has now: the auto-complete stub then forks
  // from the model's template, which imports the model once for both.
  state->UseOwnTemplate(InstanceCount(config));
  bool auto_complete = false;
  TRITONPY_RETURN_IF_TRITON_ERROR(
      TRITONBACKEND_ModelAutoCompleteConfig(model, &auto_complete));
  if (auto_complete) {
    // Triton names instances <group name>_<index>, the first group first.
    const json::Value* groups = json::Find(config, "instance_group");
    std::string first = state->name_;
    if (groups != nullptr && groups->is_array() && !groups->empty()) {
      first = json::GetString(groups->front(), "name", state->name_) + "_0";
    }
    TRITONPY_RETURN_IF_ERROR(state->AutoComplete(first));
    TRITONPY_RETURN_IF_ERROR(
        json::Parse(state->config_json_, &config)
            .WithPrefix("tritonpy: model '" + state->name_ + "' config: "));
  }

  state->max_batch_size_ = json::GetInt(config, "max_batch_size");
  const json::Value* policy = json::Find(config, "model_transaction_policy");
  state->decoupled_ = policy != nullptr && json::GetBool(*policy, "decoupled");
  const json::Value* params = json::Find(config, "parameters");
  // A decoupled request stays in flight until its stream ends: with the
  // default-mode bound, stream 129 would wait in Triton's queue for a whole
  // stream to end before its first token. Streams are bounded by memory
  // (each holds its inputs and a task), not by the batcher's need of a
  // queue, so the decoupled default is high.
  if (state->decoupled_) {
    state->max_inflight_batches_ = kDecoupledMaxInflightBatches;
  }
  if (Parameter(params, "max_inflight_batches", &text)) {
    TRITONPY_RETURN_IF_ERROR(ParseCount(
        state->name_, "max_inflight_batches", text, 1, 1u << 20,
        &state->max_inflight_batches_));
  }
  // Batches sent ahead pay off where Triton's default scheduler hands out
  // requests one by one to a single instance: the stub then finds the next
  // batch waiting (add_sub at 64 connections: 1.46x the requests per second
  // at 0.78x the CPU per request with 4 ahead against 1; 16 ahead, refilled
  // at half, another 0.88x the CPU and 1.13x the requests per second
  // against 4; bench.profile, three alternating runs each). Under the dynamic
  // or sequence batcher, a batch taken early would be smaller than the one
  // Triton could have formed; with several instances, a slow batch would
  // hold the ones queued behind it while another instance idles.
  const int64_t instances = InstanceCount(config);
  if (json::Find(config, "dynamic_batching") == nullptr &&
      json::Find(config, "sequence_batching") == nullptr && instances <= 1) {
    state->sync_prefetch_batches_ = kSoloSyncPrefetchBatches;
  }
  if (Parameter(params, "sync_prefetch_batches", &text)) {
    TRITONPY_RETURN_IF_ERROR(ParseCount(
        state->name_, "sync_prefetch_batches", text, 0, 64,
        &state->sync_prefetch_batches_));
  }
  TRITONPY_LOG_VERBOSE(
      "tritonpy: model '" + state->name_ + "': sync_prefetch_batches " +
      std::to_string(state->sync_prefetch_batches_) +
      ", max_inflight_batches " + std::to_string(state->max_inflight_batches_));
  state->execute_timeout_seconds_ =
      state->backend_->settings().execute_timeout_seconds;
  if (Parameter(params, "execute_timeout_seconds", &text)) {
    TRITONPY_RETURN_IF_ERROR(
        BackendState::ParseSeconds(
            "execute_timeout_seconds", text, &state->execute_timeout_seconds_)
            .WithPrefix("model '" + state->name_ + "' parameter: "));
  }

  state->UseOwnTemplate(instances);
  state->ShareInTemplate();
  *out = std::move(state);
  return Status();
}

Status
ModelState::ParseCount(
    const std::string& model, const std::string& name, const std::string& value,
    uint32_t lo, uint32_t hi, uint32_t* out)
{
  // Digits only, at most 8 of them, within [lo, hi].
  bool digits = !value.empty() && value.size() <= 8 &&
                value.find_first_not_of("0123456789") == std::string::npos;
  unsigned long v = digits ? std::stoul(value) : 0;
  if (!digits || v < lo || v > hi) {
    return Status::InvalidArg(
        "tritonpy: model '" + model + "': parameter " + name +
        " must be an integer from " + std::to_string(lo) + " to " +
        std::to_string(hi) + ", got '" + value + "'");
  }
  *out = static_cast<uint32_t>(v);
  return Status();
}

}  // namespace tritonpy
