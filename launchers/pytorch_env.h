// The PyTorch worker environment: torchrun's contract (docs/cli.md:
// "Worker environment"), as a pure function from where this node stands in the
// job to each local worker's environment.
#ifndef DISTJOB_LAUNCHERS_PYTORCH_ENV_H_
#define DISTJOB_LAUNCHERS_PYTORCH_ENV_H_

#include <string>

#include "common/environment.h"

namespace distjob {

struct PyTorchGroupInfo {
  int group_rank = 0;        // this node's rank in the round
  int group_world_size = 1;  // nodes in the round
  int base_rank = 0;         // global rank of this node's local rank 0
  int world_size = 1;        // workers in the round, all nodes
  int role_base_rank = 0;
  int role_world_size = 1;
  int local_world_size = 1;
  std::string role_name = "default";
  std::string master_addr;
  int master_port = 0;
  int restart_count = 0;
  int max_restarts = 0;
  std::string run_id;
  bool use_agent_store = false;
  // torchrun's --virtual-local-rank: every worker sees LOCAL_RANK=0 and only
  // its own device in CUDA_VISIBLE_DEVICES.
  bool virtual_local_rank = false;
  // TORCHELASTIC_SIGNALS_TO_HANDLE: torchrun 2.x's --signals-to-handle as
  // given, exported to the workers whatever their environment says.
  std::string signals_to_handle = "SIGTERM,SIGINT,SIGHUP,SIGQUIT";
};

// The full environment of local worker `local_rank`: the agent's own
// environment `agent_env`, plus torchrun's variables. OMP_NUM_THREADS=1 and
// the NCCL async-error-handling switches are added only when the agent's
// environment does not set them. `error_file` becomes
// TORCHELASTIC_ERROR_FILE (omitted when empty).
EnvMap PyTorchWorkerEnv(const PyTorchGroupInfo& group, int local_rank,
                        const EnvMap& agent_env, const std::string& error_file);

}  // namespace distjob

#endif  // DISTJOB_LAUNCHERS_PYTORCH_ENV_H_
