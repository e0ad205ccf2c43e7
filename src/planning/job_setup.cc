#include "weft/planning/job_setup.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <filesystem>

#include "weft/common/text.h"
#include "weft/data/generators.h"
#include "weft/data/packing.h"
#include "weft/data/readers.h"
#include "weft/data/workload.h"
#include "weft/planning/graph_builder.h"
#include "weft/planning/parallel_space.h"

namespace weft::planning {
namespace {

bool IsGeneratorProfile(std::string_view name) {
  for (auto p : data::GeneratorProfileNames()) {
    if (p == name) return true;
  }
  return false;
}

}  // namespace

Status AddModuleSize(std::string_view flag, std::string_view text, int max, ModuleSizes& sizes) {
  const size_t eq = text.find('=');
  const std::string_view module = eq == std::string_view::npos ? "" : text.substr(0, eq);
  const std::string_view number = eq == std::string_view::npos ? text : text.substr(eq + 1);
  if (eq != std::string_view::npos && module.empty()) {
    return InvalidArgumentError(fmt::format("{} {}: a module name must come before '=' (e.g. {} "
                                            "vision=1)",
                                            flag, QuoteForMessage(text, 40), flag));
  }
  int value = 0;
  const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (ec != std::errc() || end != number.data() + number.size() || value < 1 || value > max) {
    return InvalidArgumentError(fmt::format("{} {}: must be an integer in [1, {}] (N or MODULE=N)",
                                            flag, QuoteForMessage(text, 40), max));
  }
  if (module.empty()) {
    sizes.all = value;
  } else {
    sizes.by_module[std::string(module)] = value;
  }
  return OkStatus();
}

Status JobOptions::Validate() const {
  auto range = [](const char* field, int64_t value, int64_t hi, const char* zero) -> Status {
    if (value >= 0 && value <= hi) return OkStatus();
    return InvalidArgumentError(std::string(field) + " = " + std::to_string(value) +
                                "; must be in [0, " + std::to_string(hi) + "] (0 = " + zero + ")");
  };
  WEFT_RETURN_IF_ERROR(range("gpus", gpus, kMaxGpus, "the model's setup"));
  WEFT_RETURN_IF_ERROR(range("pipeline_size", pipeline_size, kMaxPipelineSize, "the setup's pp"));
  WEFT_RETURN_IF_ERROR(range("sequences_per_batch", sequences_per_batch, kMaxSequencesPerBatch,
                             "microbatches x DP"));
  WEFT_RETURN_IF_ERROR(
      range("num_microbatches", num_microbatches, kMaxMicrobatches, "the setup's, else 2 x pp"));
  WEFT_RETURN_IF_ERROR(
      range("context_tokens", context_tokens, kMaxContextTokens, "the setup's, else 8192"));
  WEFT_RETURN_IF_ERROR(
      range("data_parallel_size", data_parallel_size, kMaxParallelSize, "fill the GPUs"));
  WEFT_RETURN_IF_ERROR(range("first_stage_llm_layers", first_stage_llm_layers, 1 << 20, "unchecked"));
  WEFT_RETURN_IF_ERROR(range("last_stage_llm_layers", last_stage_llm_layers, 1 << 20, "unchecked"));
  WEFT_RETURN_IF_ERROR(range("micro_batch_sequences", micro_batch_sequences,
                             kMaxSequencesPerBatch, "--microbatches decides"));
  for (const auto* sizes : {&tensor_size, &context_size}) {
    const char* name = sizes == &tensor_size ? "tensor_size" : "context_size";
    WEFT_RETURN_IF_ERROR(range(name, sizes->all, kMaxParallelSize, "the setup's"));
    for (const auto& [module, size] : sizes->by_module) {
      if (size < 1 || size > kMaxParallelSize) {
        return InvalidArgumentError(fmt::format("{}[{}] = {}; must be in [1, {}]", name, module,
                                                size, kMaxParallelSize));
      }
    }
  }
  if (!recompute.empty() && !spec::ParseRecompute(recompute).ok()) {
    return InvalidArgumentError("recompute = " + QuoteForMessage(recompute, 40) +
                                "; must be none, selective or full");
  }
  return OkStatus();
}

StatusOr<std::unique_ptr<JobSetup>> MakeJobSetup(const JobOptions& options) {
  WEFT_RETURN_IF_ERROR(options.Validate());
  auto setup = std::make_unique<JobSetup>();
  WEFT_ASSIGN_OR_RETURN(spec::ModelPreset preset, spec::LoadModel(options.model));
  setup->model_name = options.model;
  for (const std::string& name : options.freeze) {
    std::optional<int> module = preset.model.FindModule(name);
    if (!module) {
      std::string names;
      for (const auto& m : preset.model.modules) names += (names.empty() ? "" : ", ") + m.name;
      return InvalidArgumentError("--freeze: " + QuoteForMessage(name, 40) +
                                  "; must name a module of the model (" + names + ")");
    }
    preset.model.modules[*module].frozen = true;
  }
  const spec::TrainingSetup training = preset.setup.value_or(spec::TrainingSetup{});
  std::string cluster_name = !options.cluster.empty() ? options.cluster : training.cluster;
  std::string cluster_note;
  if (cluster_name.empty()) {
    // A model without a setup (a Hugging Face config.json, a bare YAML spec): the most common
    // training GPU, said in the notes and in every header that names the cluster.
    cluster_name = "h100";
    cluster_note = "no cluster given and the model names none: h100 assumed (--cluster to choose)";
  }
  WEFT_ASSIGN_OR_RETURN(spec::ClusterSpec cluster, spec::LoadCluster(cluster_name));
  setup->cluster_name = cluster_name;
  setup->notes = cluster_note;
  const int gpus = options.gpus > 0    ? options.gpus
                   : training.gpus > 0 ? training.gpus
                                       : cluster.TotalGpus();
  WEFT_ASSIGN_OR_RETURN(cluster, cluster.WithTotalGpus(gpus));
  if (cluster.last_node_gpus > 0) {
    // One rule for every command (issue 34 item 12): the GPUs asked for, the last node partial.
    setup->notes += fmt::format("{}{} GPUs = {} node{} of {} + 1 node of {}",
                                setup->notes.empty() ? "" : "; ", gpus, cluster.num_nodes - 1,
                                cluster.num_nodes - 1 == 1 ? "" : "s", cluster.gpus_per_node,
                                cluster.last_node_gpus);
  }

  Job& job = setup->job;
  job.model = std::move(preset.model);
  job.cluster = cluster;
  job.parallel = training.parallel;
  job.seed = options.seed;
  job.charge_idle_gpus = options.charge_idle_gpus;
  if (options.pool_bytes < 0) {
    return InvalidArgumentError("--pool-bytes = " + std::to_string(options.pool_bytes) +
                                "; must be >= 0");
  }
  job.pool_capacity_bytes = options.pool_bytes;
  // The backbone's TP·PP·CP fixes one replica; DP fills the GPUs.
  const int llm = data::FirstLlmModule(job.model);
  if (llm < 0) return FailedPreconditionError("model '" + options.model + "' has no llm module");
  // --tp / --cp: every module's, then the per-module entries (which must name modules).
  for (const auto* sizes : {&options.tensor_size, &options.context_size}) {
    const bool is_tp = sizes == &options.tensor_size;
    for (const auto& [name, size] : sizes->by_module) {
      if (!job.model.FindModule(name)) {
        std::string names;
        for (const auto& m : job.model.modules) names += (names.empty() ? "" : ", ") + m.name;
        return InvalidArgumentError(fmt::format("{} {}={}: no module '{}' in model '{}' ({})",
                                                is_tp ? "--tp" : "--cp", name, size, name,
                                                job.model.name, names));
      }
    }
    if (sizes->empty()) continue;
    std::vector<spec::ModuleParallel> entries;
    std::vector<std::string> lowered;
    for (const auto& m : job.model.modules) {
      spec::ModuleParallel p = job.parallel.For(m.name);
      p.module = m.name;
      auto own = sizes->by_module.find(m.name);
      int size = own != sizes->by_module.end() ? own->second : sizes->all;
      if (size > 0) {
        if (is_tp && own == sizes->by_module.end() && m.num_attention_heads > 0) {
          // --tp N for every module: one whose heads N does not divide keeps the largest TP
          // below N that does (a ViT with 16 heads under --tp 32 runs at 16).
          int fit = size;
          while (fit > 1 && (size % fit != 0 || !TpFitsHeads(m, fit))) --fit;
          if (fit != size) lowered.push_back(fmt::format("{} tp {}", m.name, fit));
          size = fit;
        }
        (is_tp ? p.tp : p.cp) = size;
      }
      entries.push_back(p);
    }
    job.parallel.modules = entries;
    if (!lowered.empty()) {
      std::string list;
      for (const auto& l : lowered) list += (list.empty() ? "" : ", ") + l;
      setup->notes += std::string(setup->notes.empty() ? "" : "; ") + "--tp " +
                      std::to_string(sizes->all) + ": " + list + " (heads)";
    }
  }
  spec::ModuleParallel lp = job.parallel.For(job.model.modules[llm].name);
  if (options.pipeline_size < 0) {
    return InvalidArgumentError("--pp = " + std::to_string(options.pipeline_size) +
                                "; must be >= 0");
  }
  if (options.pipeline_size > 0) lp.pp = options.pipeline_size;
  const int replica = lp.tp * lp.pp * lp.cp;
  if (gpus < replica) {
    // Name where both numbers come from (issue 34 item 18): the GPUs from --gpus, the model's
    // setup or the cluster preset; the sizes from --tp / --pp / --cp or the model's setup.
    const std::string gpus_from =
        options.gpus > 0    ? fmt::format("--gpus = {}", gpus)
        : training.gpus > 0 ? fmt::format("the setup's gpus = {} (model '{}')", gpus, options.model)
                            : fmt::format("cluster '{}' has {} GPUs", cluster_name, gpus);
    auto from = [&](bool flag, const char* name) {
      return flag ? std::string(name) : std::string("setup.parallel");
    };
    return FailedPreconditionError(fmt::format(
        "{}; module '{}' needs tp·pp·cp = {}·{}·{} = {} GPUs (tp from {}, pp from {}, cp from "
        "{}; lower them with --tp / --pp / --cp, or raise --gpus)",
        gpus_from, job.model.modules[llm].name, lp.tp, lp.pp, lp.cp, replica,
        from(!options.tensor_size.empty(), "--tp"), from(options.pipeline_size > 0, "--pp"),
        from(!options.context_size.empty(), "--cp")));
  }
  if (options.data_parallel_size > 0 && options.data_parallel_size * replica > gpus) {
    return FailedPreconditionError(fmt::format(
        "--dp {} needs tp·pp·cp·dp = {}·{}·{}·{} = {} GPUs; the job has {} (--gpus)",
        options.data_parallel_size, lp.tp, lp.pp, lp.cp, options.data_parallel_size,
        options.data_parallel_size * replica, gpus));
  }
  const int dp = options.data_parallel_size > 0 ? options.data_parallel_size : gpus / replica;
  if (gpus != dp * replica) {
    const int unused = gpus - dp * replica;
    setup->notes += std::string(setup->notes.empty() ? "" : "; ") + std::to_string(unused) +
                    (unused == 1 ? " GPU" : " GPUs") +
                    " unused by pipeline replicas of tp·pp·cp = " + std::to_string(replica);
  }
  if (dp != lp.dp && options.data_parallel_size == 0) {
    setup->notes += std::string(setup->notes.empty() ? "" : "; ") + "dp set to " +
                    std::to_string(dp) + " to fill " + std::to_string(gpus) + " GPUs";
  }
  // Every module uses the backbone's DP (one pipeline replica per DP rank).
  std::vector<spec::ModuleParallel> entries;
  for (const auto& m : job.model.modules) {
    spec::ModuleParallel p = job.parallel.For(m.name);
    p.module = m.name;
    p.dp = dp;
    if (&m == &job.model.modules[llm]) p.pp = lp.pp;
    entries.push_back(p);
  }
  job.parallel.modules = entries;
  const int p = lp.pp;
  job.parallel.num_microbatches = options.num_microbatches > 0 ? options.num_microbatches
                                  : training.parallel.num_microbatches > 1
                                      ? training.parallel.num_microbatches
                                      : 2 * p;
  // Videos longer than the model takes (docs/data.md): the setup's rules.
  if (training.max_video_frames > 0) job.workload.max_vit_video_frames = training.max_video_frames;
  if (training.max_clip_s > 0) job.workload.max_dit_video_s = training.max_clip_s;
  if (!training.long_clips.empty()) {
    WEFT_ASSIGN_OR_RETURN(setup->long_clips, data::ParseLongClipRule(training.long_clips));
  }
  setup->context_tokens = options.context_tokens > 0    ? options.context_tokens
                          : training.context_tokens > 0 ? training.context_tokens
                                                        : 8192;
  job.context_tokens = setup->context_tokens;
  setup->sequences_per_batch = options.sequences_per_batch > 0 ? options.sequences_per_batch
                               : training.global_batch_sequences > 0
                                   ? training.global_batch_sequences
                                   : job.parallel.num_microbatches * dp;
  if (options.micro_batch_sequences > 0) {
    // Megatron's --micro-batch-size: microbatches = global batch / (size · DP).
    const int gbs = setup->sequences_per_batch;
    if (options.sequences_per_batch == 0 && training.global_batch_sequences == 0) {
      return InvalidArgumentError(fmt::format(
          "--micro-batch-size {} needs the global batch: pass --global-batch-size (the model's "
          "setup names none)",
          options.micro_batch_sequences));
    }
    const int per_step = options.micro_batch_sequences * dp;
    if (gbs % per_step != 0) {
      return InvalidArgumentError(fmt::format(
          "--micro-batch-size {}: global batch {} must be a multiple of micro batch size x DP "
          "= {} x {} = {}",
          options.micro_batch_sequences, gbs, options.micro_batch_sequences, dp, per_step));
    }
    const int microbatches = gbs / per_step;
    if (options.num_microbatches > 0 && options.num_microbatches != microbatches) {
      return InvalidArgumentError(fmt::format(
          "--microbatches {} and --micro-batch-size {} disagree: global batch {} / ({} x DP {}) "
          "= {} microbatches; pass one of them",
          options.num_microbatches, options.micro_batch_sequences, gbs,
          options.micro_batch_sequences, dp, microbatches));
    }
    job.parallel.num_microbatches = microbatches;
  }
  if (!options.recompute.empty()) {
    WEFT_ASSIGN_OR_RETURN(setup->recompute_floor, spec::ParseRecompute(options.recompute));
  }
  setup->first_stage_llm_layers = options.first_stage_llm_layers;
  setup->last_stage_llm_layers = options.last_stage_llm_layers;
  // The derived batch too (microbatches x DP): beyond the limit a batch exhausts memory.
  if (setup->sequences_per_batch > JobOptions::kMaxSequencesPerBatch) {
    return InvalidArgumentError(
        "sequences per global batch = " + std::to_string(setup->sequences_per_batch) +
        " (microbatches " + std::to_string(job.parallel.num_microbatches) + " x DP " +
        std::to_string(dp) + "); must be <= " + std::to_string(JobOptions::kMaxSequencesPerBatch) +
        ": lower --microbatches or --gpus, or set --sequences");
  }
  setup->data_name = !options.data.empty() ? options.data : training.data_profile;
  std::error_code exists_error;  // a name the OS cannot look up (too long, ...) does not exist
  if (setup->data_name.empty() || (!IsGeneratorProfile(setup->data_name) &&
                                   !std::filesystem::exists(setup->data_name, exists_error))) {
    std::string known;
    for (auto n : data::GeneratorProfileNames())
      known += (known.empty() ? "" : ", ") + std::string(n);
    if (!options.data.empty()) {
      return NotFoundError("--data = " + QuoteForMessage(options.data) +
                           "; neither a file nor a profile (profiles: " + known + ")");
    }
    if (!setup->data_name.empty()) {
      // The model's setup names a profile that does not exist: an error, not a silent "mixed".
      return NotFoundError(options.model +
                           ": setup.data_profile = " + QuoteForMessage(setup->data_name) +
                           "; neither a file nor a profile (profiles: " + known + ")");
    }
    setup->data_name = "mixed";
  }
  setup->cost_model = std::make_unique<cost::CostModel>(cluster);
  job.cost_model = setup->cost_model.get();
  WEFT_RETURN_IF_ERROR(job.Validate());
  if (options.profile_batches > 0) {
    auto profile = MakeProfileBatches(*setup, 0, options.profile_batches);
    if (!profile.ok()) return profile.status();
    job.profile_batches = std::move(*profile);
  }
  return setup;
}

namespace {
StatusOr<std::vector<spec::Batch>> MakeBatchesWithSeed(const JobSetup& setup, uint64_t seed,
                                                       int64_t first, int count,
                                                       std::string* warning) {
  const Job& job = setup.job;
  data::BatchingOptions batching;
  batching.packing.context_tokens = setup.context_tokens;
  // T2V (DIP §7.1 after MovieGen): up to 8 clips and 16 s of video per packed microbatch.
  for (const auto& m : job.model.modules) {
    if (m.kind == spec::ModuleKind::kDit) {
      batching.packing.max_videos_per_sequence = 8;
      batching.packing.max_video_s_per_sequence = std::max(16.0, job.workload.max_dit_video_s);
    }
  }
  batching.packing.workload = job.workload;
  batching.packing.long_clips = setup.long_clips;
  batching.sequences_per_batch = setup.sequences_per_batch;
  std::vector<spec::Batch> out;
  if (IsGeneratorProfile(setup.data_name)) {
    for (int64_t it = first; it < first + count; ++it) {
      int64_t n = 4LL * setup.sequences_per_batch;
      for (int attempt = 0; attempt < 12; ++attempt, n *= 2) {
        data::GeneratorOptions g;
        g.num_samples = n;
        g.seed = seed;
        g.iteration = it;
        g.context_tokens = setup.context_tokens;
        WEFT_ASSIGN_OR_RETURN(auto samples, data::GenerateSamples(setup.data_name, g));
        batching.first_iteration = it;
        batching.drop_last = true;
        WEFT_ASSIGN_OR_RETURN(auto batches, data::MakeBatches(job.model, samples, batching));
        if (!batches.empty()) {
          out.push_back(std::move(batches.front()));
          out.back().iteration = it;
          break;
        }
      }
      if (static_cast<int64_t>(out.size()) != it - first + 1) {
        return FailedPreconditionError("data profile '" + setup.data_name +
                                       "' could not fill a batch of " +
                                       std::to_string(setup.sequences_per_batch) + " sequences");
      }
    }
    return out;
  }
  WEFT_ASSIGN_OR_RETURN(data::ReadResult read, data::ReadSamples(setup.data_name));
  if (read.samples.empty()) {
    return InvalidArgumentError(setup.data_name + ": no usable samples");
  }
  // A DiT needs each clip's frame size (or the model's image_size_px): say so here, naming the
  // file and the sample, not later in every strategy without the file's name.
  for (const spec::ModuleSpec& m : job.model.modules) {
    if (m.kind != spec::ModuleKind::kDit) continue;
    for (const spec::Sample& sample : read.samples) {
      for (size_t v = 0; v < sample.videos.size(); ++v) {
        auto tokens = data::DitLatentTokensForVideo(m, sample.videos[v]);
        if (!tokens.ok()) {
          return InvalidArgumentError(
              setup.data_name + ": sample " + std::to_string(sample.id) + " videos[" +
              std::to_string(v) + "] (w " + std::to_string(sample.videos[v].width_px) + ", h " +
              std::to_string(sample.videos[v].height_px) + "): " + tokens.status().message() +
              "; give the frame size (w, h) in the data or set " + m.name +
              ".image_size_px in the model");
        }
      }
    }
  }
  batching.drop_last = true;
  data::BatchingReport used;
  WEFT_ASSIGN_OR_RETURN(auto batches, data::MakeBatches(job.model, read.samples, batching, &used));
  std::string short_note;
  if (batches.empty()) {
    // Less than one batch in the whole file: that short batch is the data (said below).
    batching.drop_last = false;
    WEFT_ASSIGN_OR_RETURN(batches, data::MakeBatches(job.model, read.samples, batching, &used));
    if (batches.empty()) {
      return InvalidArgumentError(setup.data_name + ": no sample could be packed into " +
                                  std::to_string(setup.context_tokens) + "-token sequences");
    }
    short_note = "; the whole file packs into " + std::to_string(used.packing.sequences) +
                 " sequence(s), fewer than a batch of " +
                 std::to_string(setup.sequences_per_batch) + ": every iteration uses them";
  }
  const int64_t given = static_cast<int64_t>(read.samples.size()) + read.num_malformed;
  const int64_t unused = read.num_malformed +
                         static_cast<int64_t>(used.packing.rejected_ids.size()) +
                         used.samples_in_dropped_batch;
  // The video rules changed what trains on: say how much.
  const data::PackingReport& pr = used.packing;
  std::string rules;
  if (pr.frame_sampled_samples > 0) {
    rules += "; " + std::to_string(pr.frame_sampled_samples) +
             " sample(s) frame-sampled to fit the context (ViT frames " +
             std::to_string(pr.vit_frames_packed) + " packed of " +
             std::to_string(pr.vit_frames_in) + " given)";
  }
  if (pr.long_clips > 0) {
    rules += "; " + std::to_string(pr.long_clips) + " clip(s) longer than " +
             fmt::format("{:g}", job.workload.max_dit_video_s) + " s " +
             (setup.long_clips == data::LongClipRule::kSplit ? "split" : "truncated") +
             fmt::format(" ({:.0f} of {:.0f} s of video packed)", pr.video_s_packed, pr.video_s_in);
  }
  if (read.num_malformed > 0 && !read.warnings.empty()) {
    // Where and why, as `weft data stats` says it (issue 34 item 17).
    rules += "; first malformed record: " + read.warnings.front().ToString();
  }
  const int64_t num_batches = static_cast<int64_t>(batches.size());
  if (short_note.empty() && (first < 0 || first + count > num_batches)) {
    rules += "; the file makes " + std::to_string(num_batches) + " batch" +
             (num_batches == 1 ? "" : "es") + " of " + std::to_string(setup.sequences_per_batch) +
             " sequences: iterations beyond them reuse them in order";
  }
  if (warning != nullptr && (read.num_malformed > 0 || used.sequences_in_dropped_batch > 0 ||
                             100 * unused > given || !short_note.empty() || !rules.empty())) {
    *warning = setup.data_name + ": " + std::to_string(given) + " records given, " +
               std::to_string(given - unused) + " samples used (" +
               std::to_string(read.num_malformed) + " malformed, " +
               std::to_string(used.packing.rejected_ids.size()) + " rejected by packing into " +
               std::to_string(setup.context_tokens) + "-token sequences, " +
               std::to_string(used.samples_in_dropped_batch) + " in a short last batch of " +
               std::to_string(used.sequences_in_dropped_batch) + " sequence(s), dropped)" +
               short_note + rules;
  }
  for (int64_t it = first; it < first + count; ++it) {
    const int64_t n = static_cast<int64_t>(batches.size());
    spec::Batch b = batches[((it % n) + n) % n];
    b.iteration = it;
    out.push_back(std::move(b));
  }
  return out;
}
}  // namespace

StatusOr<std::vector<spec::Batch>> MakeIterationBatches(const JobSetup& setup, int64_t first,
                                                        int count, std::string* warning) {
  return MakeBatchesWithSeed(setup, setup.job.seed, first, count, warning);
}

StatusOr<std::vector<spec::Batch>> MakeProfileBatches(const JobSetup& setup, int64_t first,
                                                      int count) {
  return MakeBatchesWithSeed(setup, setup.job.seed ^ 0x9e3779b97f4a7c15ULL, first, count,
                             nullptr);
}

}  // namespace weft::planning
