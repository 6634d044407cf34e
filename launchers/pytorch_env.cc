#include "launchers/pytorch_env.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"

namespace distjob {

EnvMap PyTorchWorkerEnv(const PyTorchGroupInfo& group, int local_rank,
                        const EnvMap& agent_env,
                        const std::string& error_file) {
  EnvMap env = agent_env;
  auto set = [&env](const char* name, const std::string& value) {
    env[name] = value;
  };
  auto set_int = [&env](const char* name, int value) {
    env[name] = std::to_string(value);
  };
  set_int("LOCAL_RANK", local_rank);
  set_int("RANK", group.base_rank + local_rank);
  set_int("GROUP_RANK", group.group_rank);
  set_int("ROLE_RANK", group.role_base_rank + local_rank);
  set("ROLE_NAME", group.role_name);
  set_int("LOCAL_WORLD_SIZE", group.local_world_size);
  set_int("WORLD_SIZE", group.world_size);
  set_int("GROUP_WORLD_SIZE", group.group_world_size);
  set_int("ROLE_WORLD_SIZE", group.role_world_size);
  set("MASTER_ADDR", group.master_addr);
  set_int("MASTER_PORT", group.master_port);
  set_int("TORCHELASTIC_RESTART_COUNT", group.restart_count);
  set_int("TORCHELASTIC_MAX_RESTARTS", group.max_restarts);
  set("TORCHELASTIC_RUN_ID", group.run_id);
  set("TORCHELASTIC_USE_AGENT_STORE", group.use_agent_store ? "True" : "False");
  set("TORCHELASTIC_SIGNALS_TO_HANDLE", group.signals_to_handle);
  if (!error_file.empty()) {
    set("TORCHELASTIC_ERROR_FILE", error_file);
  } else {
    env.erase("TORCHELASTIC_ERROR_FILE");
  }
  if (group.virtual_local_rank) {
    // As torchrun: the worker's device is its local rank, mapped through
    // the agent's own CUDA_VISIBLE_DEVICES when that lists enough devices.
    set("LOCAL_RANK", "0");
    std::string device = std::to_string(local_rank);
    if (auto visible = Lookup(agent_env, "CUDA_VISIBLE_DEVICES")) {
      std::vector<std::string> ids =
          absl::StrSplit(*visible, ',', absl::SkipEmpty());
      if (static_cast<size_t>(local_rank) < ids.size()) {
        device = std::string(
            absl::StripAsciiWhitespace(ids[static_cast<size_t>(local_rank)]));
      }
    }
    set("CUDA_VISIBLE_DEVICES", device);
  }
  // torchrun sets these only when the user has not.
  if (group.local_world_size > 1) env.emplace("OMP_NUM_THREADS", "1");
  env.emplace("TORCH_NCCL_ASYNC_ERROR_HANDLING", "1");
  // And 1.13's name, which current torchrun no longer sets: the only one a
  // 1.13 NCCL process group reads. 2.11 warns once per process that it is
  // deprecated (seen by tests/device/check.sh's probes step; docs/torchrun.md,
  // "Worker environment, 1.13 and current torchrun side by side").
  env.emplace("NCCL_ASYNC_ERROR_HANDLING", "1");
  return env;
}

}  // namespace distjob
