#include "weft/strategy/launch.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>

#include "weft/data/workload.h"
#include "weft/plan/torch_export.h"
#include "weft/planning/configuration.h"
#include "weft/planning/mimo_config.h"

namespace weft::strategy {
namespace {

// Strategies whose schedule a stock pipeline schedule reproduces (torchtitan's names).
const std::map<std::string_view, std::string_view>& TorchtitanSchedules() {
  static const auto* m = new std::map<std::string_view, std::string_view>{
      {"megatron-1f1b", "1F1B"}, {"gpipe", "GPipe"}, {"megatron-vpp", "Interleaved1F1B"}};
  return *m;
}

std::string CommentBlock(std::string_view header) {
  std::string out;
  size_t start = 0;
  while (start <= header.size() && !header.empty()) {
    const size_t end = header.find('\n', start);
    const std::string_view line =
        header.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    out += "# " + std::string(line) + "\n";
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return out;
}

// The backbone's layers per pipeline rank (replica 0), in rank order.
std::vector<int> LlmLayersPerRank(const planning::Planner& planner) {
  return planning::ModuleLayersPerGroup(planner.static_plan().placement,
                                        data::FirstLlmModule(planner.job().model));
}

struct Sizes {
  int tp = 1, cp = 1, pp = 1, dp = 1, microbatches = 1, gbs = 0, micro_batch_size = 0;
  bool sequence_parallel = true;
};

StatusOr<Sizes> SizesOf(const planning::Planner& planner) {
  const planning::Job& job = planner.job();
  const int llm = data::FirstLlmModule(job.model);
  const spec::ModuleParallel lp = job.parallel.For(job.model.modules[llm].name);
  Sizes s{.tp = lp.tp, .cp = lp.cp, .pp = job.PipelineSize(), .dp = job.DataParallelSize()};
  s.sequence_parallel = lp.sequence_parallel;
  s.microbatches = planner.static_plan().num_microbatches > 0
                       ? planner.static_plan().num_microbatches
                       : job.parallel.num_microbatches;
  s.gbs = planner.setup().sequences_per_batch;
  if (s.gbs % (s.dp * s.microbatches) != 0) {
    return FailedPreconditionError(fmt::format(
        "global batch {} is not a multiple of DP {} x microbatches {}: Megatron-LM and "
        "torchtitan need equal microbatches (pick --microbatches dividing {})",
        s.gbs, s.dp, s.microbatches, s.gbs / std::max(1, s.dp)));
  }
  s.micro_batch_size = s.gbs / (s.dp * s.microbatches);
  return s;
}

StatusOr<LaunchFile> Megatron(const planning::Planner& planner,
                              spec::Recompute recompute,
                              std::string_view header) {
  const std::string name(planner.strategy().Name());
  if (name != "megatron-1f1b" && name != "megatron-vpp") {
    return FailedPreconditionError(fmt::format(
        "--emit megatron: Megatron-LM runs megatron-1f1b and megatron-vpp; '{}' is not its "
        "schedule (its formats: {})",
        name, [&] {
          std::string f;
          for (LaunchFormat x : LaunchFormatsFor(name))
            f += (f.empty() ? "" : ", ") + std::string(LaunchFormatName(x));
          return f;
        }()));
  }
  WEFT_ASSIGN_OR_RETURN(Sizes s, SizesOf(planner));
  const planning::Job& job = planner.job();
  std::string text = CommentBlock(header);
  const std::vector<int> layers = LlmLayersPerRank(planner);
  text += fmt::format(
      "# world size {} = DP {} x TP {} x PP {} x CP {} (Megatron-LM derives DP); weft's "
      "backbone layers per pipeline rank: [{}]\n",
      s.dp * s.tp * s.pp * s.cp, s.dp, s.tp, s.pp, s.cp, fmt::join(layers, ", "));
  const auto& placement = planner.static_plan().placement;
  const int llm = data::FirstLlmModule(job.model);
  for (const planning::Chunk& c : placement.chunks) {
    if (c.module != llm && c.replica == 0 && c.group > 0) {
      text += fmt::format(
          "# weft's plan puts {} layers on pipeline rank {}; Megatron-LM's multimodal models "
          "place the encoders on the first stage only, so that rank's load differs there\n",
          job.model.modules[c.module].name, c.group);
      break;
    }
  }
  text += fmt::format("--tensor-model-parallel-size {}\n", s.tp);
  text += fmt::format("--pipeline-model-parallel-size {}\n", s.pp);
  text += fmt::format("--context-parallel-size {}\n", s.cp);
  text += fmt::format("--micro-batch-size {}\n", s.micro_batch_size);
  text += fmt::format("--global-batch-size {}\n", s.gbs);
  text += fmt::format("--seq-length {}\n", planner.setup().context_tokens);
  if (s.tp > 1 && s.sequence_parallel) text += "--sequence-parallel\n";
  if (recompute == spec::Recompute::kSelective) {
    text += "--recompute-granularity selective\n";
  } else if (recompute == spec::Recompute::kFull) {
    text += "--recompute-granularity full\n--recompute-method uniform\n--recompute-num-layers 1\n";
  }
  if (s.pp > 1 && !layers.empty()) {
    int total = 0;
    for (int l : layers) total += l;
    const bool even = std::all_of(layers.begin(), layers.end(),
                                  [&](int l) { return l * s.pp == total; });
    if (!even) {
      text += fmt::format("--decoder-first-pipeline-num-layers {}\n", layers.front());
      text += fmt::format("--decoder-last-pipeline-num-layers {}\n", layers.back());
    }
  }
  return LaunchFile{.text = text};
}

StatusOr<LaunchFile> Torchtitan(const planning::Planner& planner,
                                spec::Recompute recompute,
                                std::string_view header,
                                std::string_view companion_path) {
  const std::string name(planner.strategy().Name());
  WEFT_ASSIGN_OR_RETURN(Sizes s, SizesOf(planner));
  const bool fsdp = name == "fsdp";
  auto stock = TorchtitanSchedules().find(name);
  LaunchFile out;
  std::string text = CommentBlock(header);
  text += fmt::format(
      "# torchtitan builds the language model; weft's plan also places the other modules (the "
      "CSV or `weft simulate` shows where)\n[training]\nseq_len = {}\nglobal_batch_size = {}\n"
      "local_batch_size = {}\n\n[parallelism]\n",
      planner.setup().context_tokens, s.gbs, s.gbs / s.dp);
  if (fsdp) {
    text += fmt::format("data_parallel_replicate_degree = 1\ndata_parallel_shard_degree = {}\n",
                        s.dp);
  } else {
    text += fmt::format(
        "# weft's DP shards the optimizer state (ZeRO-1); torchtitan's nearest is replicate\n"
        "data_parallel_replicate_degree = {}\ndata_parallel_shard_degree = 1\n",
        s.dp);
  }
  text += fmt::format("tensor_parallel_degree = {}\ncontext_parallel_degree = {}\n", s.tp, s.cp);
  text += fmt::format("pipeline_parallel_degree = {}\n", s.pp);
  if (s.pp > 1 || !fsdp) {
    text += fmt::format("pipeline_parallel_microbatch_size = {}\n", s.micro_batch_size);
  }
  if (s.pp > 1) {
    if (stock != TorchtitanSchedules().end()) {
      text += fmt::format("pipeline_parallel_schedule = \"{}\"\n", stock->second);
    } else {
      // weft's own schedule: torch's pipelining CSV of the first profile batch's plan.
      if (companion_path.empty()) {
        return InvalidArgumentError(
            "--emit torchtitan: strategy '" + name +
            "' runs weft's own schedule; the CSV needs a path (--out FILE gives FILE.csv)");
      }
      if (planner.job().profile_batches.empty()) {
        return FailedPreconditionError("--emit torchtitan: no profile batch to plan the CSV from");
      }
      WEFT_ASSIGN_OR_RETURN(planning::PlannedIteration planned,
                            planner.Plan(planner.job().profile_batches.front()));
      WEFT_ASSIGN_OR_RETURN(plan::ExecutionPlan compiled, planner.Compile(planned, 0));
      auto csv = plan::ExportTorchCsv(compiled);
      if (!csv.ok()) {
        return FailedPreconditionError("--emit torchtitan: strategy '" + name +
                                       "': its plan has no torch pipelining CSV (" +
                                       std::string(csv.status().message()) +
                                       "); use --emit weft");
      }
      out.companion_text = *csv;
      text += fmt::format(
          "# weft's own schedule ({}): torch's _PipelineScheduleRuntime loads it\n"
          "pipeline_parallel_schedule = \"PipelineScheduleMulti\"\n"
          "pipeline_parallel_schedule_csv = \"{}\"\n",
          name, companion_path);
    }
  }
  text += fmt::format("\n[activation_checkpoint]\nmode = \"{}\"\n",
                      recompute == spec::Recompute::kNone   ? "none"
                      : recompute == spec::Recompute::kFull ? "full"
                                                            : "selective");
  out.text = text;
  return out;
}

StatusOr<LaunchFile> Mimo(const planning::Planner& planner, std::string_view header) {
  const planning::Job& job = planner.job();
  auto config = planning::MimoConfigOfPlacement(planner.static_plan().placement, job.model,
                                                job.cluster, *job.cost_model);
  if (!config.ok()) {
    return FailedPreconditionError(fmt::format(
        "--emit mimo: strategy '{}': its placement is not a Megatron MIMO config ({})",
        planner.strategy().Name(), config.status().message()));
  }
  WEFT_ASSIGN_OR_RETURN(Sizes s, SizesOf(planner));
  // The config holds the parallelism only; the batch is Megatron's own arguments.
  const std::string batch = fmt::format(
      "{}\nbatch: Megatron --micro-batch-size {} --global-batch-size {} --seq-length {}; weft: "
      "--placement FILE --microbatches {} --global-batch-size {} --seq-length {}",
      header, s.micro_batch_size, s.gbs, planner.setup().context_tokens, s.microbatches, s.gbs,
      planner.setup().context_tokens);
  return LaunchFile{.text = planning::MimoConfigToYaml(*config, batch)};
}

StatusOr<LaunchFile> Weft(const planning::Planner& planner,
                          spec::Recompute recompute,
                          std::string_view header) {
  WEFT_ASSIGN_OR_RETURN(Sizes s, SizesOf(planner));
  const planning::JobSetup& setup = planner.setup();
  std::string text = CommentBlock(header);
  text += fmt::format(
      "# weft's own flags: weft plan $(grep -v '^#' FILE) --out plan/ writes the plans; "
      "python -m weft.train executes them (docs/runtime.md)\n");
  text += fmt::format("--strategy {}\n--model {}\n--cluster {}\n--gpus {}\n--data {}\n",
                      planner.strategy().Name(), setup.model_name, setup.cluster_name,
                      planner.job().cluster.TotalGpus(), setup.data_name);
  text += fmt::format("--tp {}\n--cp {}\n--pp {}\n--dp {}\n--microbatches {}\n", s.tp, s.cp, s.pp,
                      s.dp, s.microbatches);
  text += fmt::format("--global-batch-size {}\n--seq-length {}\n", s.gbs, setup.context_tokens);
  if (recompute != spec::Recompute::kNone &&
      planner.memory_policy() == planning::MemoryPolicy::kFirstUniformLevelThatFits) {
    text += fmt::format("--recompute-granularity {}\n", spec::RecomputeName(recompute));
  }
  return LaunchFile{.text = text};
}

}  // namespace

std::string_view LaunchFormatName(LaunchFormat format) {
  switch (format) {
    case LaunchFormat::kMegatron:
      return "megatron";
    case LaunchFormat::kMimo:
      return "mimo";
    case LaunchFormat::kTorchtitan:
      return "torchtitan";
    case LaunchFormat::kWeft:
      return "weft";
  }
  return "weft";
}

StatusOr<LaunchFormat> ParseLaunchFormat(std::string_view name) {
  for (LaunchFormat f : {LaunchFormat::kMegatron, LaunchFormat::kMimo, LaunchFormat::kTorchtitan,
                         LaunchFormat::kWeft}) {
    if (LaunchFormatName(f) == name) return f;
  }
  return InvalidArgumentError(fmt::format(
      "--emit {}: must be megatron, mimo, torchtitan or weft", std::string(name).substr(0, 40)));
}

std::vector<LaunchFormat> LaunchFormatsFor(std::string_view strategy) {
  std::vector<LaunchFormat> out;
  if (strategy == "megatron-1f1b" || strategy == "megatron-vpp") {
    out.push_back(LaunchFormat::kMegatron);
  }
  if (strategy == "megatron-mimo" || strategy == "cornstarch" || strategy == "dflop" ||
      strategy == "dflop-paper" || strategy == "dflop-optimizer-only") {
    out.push_back(LaunchFormat::kMimo);  // when the placement is one (EmitLaunch checks)
  }
  if (TorchtitanSchedules().count(strategy) || strategy == "fsdp") {
    out.push_back(LaunchFormat::kTorchtitan);
  }
  out.push_back(LaunchFormat::kWeft);
  return out;
}

StatusOr<LaunchFile> EmitLaunch(LaunchFormat format,
                                const planning::Planner& planner,
                                spec::Recompute recompute,
                                std::string_view header,
                                std::string_view companion_path) {
  switch (format) {
    case LaunchFormat::kMegatron:
      return Megatron(planner, recompute, header);
    case LaunchFormat::kMimo:
      return Mimo(planner, header);
    case LaunchFormat::kTorchtitan:
      return Torchtitan(planner, recompute, header, companion_path);
    case LaunchFormat::kWeft:
      return Weft(planner, recompute, header);
  }
  return InvalidArgumentError("unknown launch format");
}

}  // namespace weft::strategy
