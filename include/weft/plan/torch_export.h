#pragma once
// Export of linear-chain plans to the CSV schedule format of PyTorch's pipelining runtime
// (torch.distributed.pipelining.schedules._PipelineScheduleRuntime._load_csv): one row per rank,
// one cell per action, each cell an `_Action` string "<stage><type><microbatch>":
//   F (forward), B (full backward), I (backward input), W (backward weight),
//   SEND_F / RECV_F / SEND_B / RECV_B (format "compute_comms" only).
// A torch stage is one pipeline slot of a rank, (rank, chunk): weft strategies may place several
// modules' chunks in one slot (e.g. the ViT, the projector and the first LLM layers all with
// chunk 0 on rank 0), which run back to back and pass data through local buffers. All compute
// actions of one (rank, chunk, microbatch, pass) collapse into ONE cell (they must be adjacent
// among the rank's compute actions), intra-stage local buffers have no cell, and only cross-rank
// transfers become SEND/RECV cells. The stage index is the position of the slot in the model
// chain and must equal rank + chunk·P (P = number of ranks), torch's loop placement. SEND_F/SEND_B carry the sending stage,
// RECV_F/RECV_B the receiving stage (as torch's _add_send_recv writes them). wait_send,
// wait_recv and free have no cell: torch's runtime waits for a receive just before the compute
// that consumes it and for all sends at the end of the step. all_reduce_grads has no cell either
// (torch's pipelining schedule has no data parallelism; wrap the stages in DDP / FSDP).
//
// The torch IR can express only a chain of stages, each run for every microbatch 0..m-1 with
// one forward and one backward (B, or I then W), one tensor transfer per (stage, microbatch,
// direction). Anything else — fan-in of parallel encoders on different ranks, fan-out,
// sub-microbatches, different microbatch counts per stage, a chain not numbered rank + chunk·P,
// a slot whose modules' computes are interleaved with other work — is refused with
// FailedPrecondition naming the reason; a file is never written for a plan the format cannot
// express.
// Thread-safety: pure functions.
#include <string>
#include <vector>

#include "weft/common/status.h"
#include "weft/plan/plan.h"

namespace weft::plan {

enum class TorchCsvFormat {
  kComputeComms,  // compute and send/recv cells (load with format="compute_comms")
  kComputeOnly,   // compute cells only (torch inserts the communication itself)
};

struct TorchCsvOptions {
  TorchCsvFormat format = TorchCsvFormat::kComputeComms;  // which torch loader format to write
};

// The chain a plan's compute actions form: for each virtual stage, its (rank, chunk) slot and
// the modules whose chunks run in it.
struct TorchStageMap {
  struct StageKey {
    int rank = 0;
    int chunk = 0;                 // the rank's local pipeline slot
    std::vector<int> modules;      // modules (ExecutionPlan::module_names index) in the slot, sorted
  };
  std::vector<StageKey> stages;  // index = torch stage index
  int num_microbatches = 0;
};

// Derives the chain from the plan's forward data flow (local buffers and matched isend/irecv).
// The plan must pass ValidatePlan.
StatusOr<TorchStageMap> DeriveTorchStageMap(const ExecutionPlan& plan);

// The cells of each rank (row r = rank r).
StatusOr<std::vector<std::vector<std::string>>> ExportTorchActions(
    const ExecutionPlan& plan, const TorchCsvOptions& options = {});
// The CSV text: one line per rank, cells separated by ',' (no quoting needed).
StatusOr<std::string> ExportTorchCsv(const ExecutionPlan& plan, const TorchCsvOptions& options = {});

}  // namespace weft::plan
