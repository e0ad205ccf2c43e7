#include "weft/plan/plan_data.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <set>
#include <tuple>

namespace weft::plan {

int64_t InstanceData::TotalTokens() const {
  int64_t total = 0;
  for (int32_t t : tokens) total += t;
  return total;
}

int PlanData::FindMicrobatch(int replica, int microbatch) const {
  auto it = std::lower_bound(microbatches.begin(), microbatches.end(),
                             std::pair<int, int>{replica, microbatch},
                             [](const MicrobatchData& m, const std::pair<int, int>& key) {
                               return std::pair<int, int>{m.replica, m.microbatch} < key;
                             });
  if (it == microbatches.end() || it->replica != replica || it->microbatch != microbatch) {
    return -1;
  }
  return static_cast<int>(it - microbatches.begin());
}

int64_t InstanceTokens(const PlanData& data, int index, int module, int begin, int end) {
  if (index < 0 || index >= static_cast<int>(data.microbatches.size())) return 0;
  const auto& instances = data.microbatches[index].instances;
  if (module < 0 || module >= static_cast<int>(instances.size())) return 0;
  const auto& list = instances[module];
  begin = std::clamp(begin, 0, static_cast<int>(list.size()));
  end = std::clamp(end, begin, static_cast<int>(list.size()));
  int64_t tokens = 0;
  for (int i = begin; i < end; ++i) tokens += list[i].TotalTokens();
  return tokens;
}

namespace {

constexpr int64_t kMaxInt32 = std::numeric_limits<int32_t>::max();

// The module's instances in a microbatch as the plan ships them. For an audio encoder that pads
// its windows, the unpadded tokens come from the same derivation without padding (same windows,
// same order: only the token counts differ).
StatusOr<std::vector<InstanceData>> Instances(const spec::ModelSpec& model, int module,
                                              const spec::Batch& batch,
                                              const std::vector<int>& sequences,
                                              const data::WorkloadOptions& workload) {
  WEFT_ASSIGN_OR_RETURN(data::ModuleWorkload w,
                        data::DeriveModuleWorkload(model, module, batch, sequences, workload));
  std::vector<InstanceData> out;
  out.reserve(w.instances.size());
  for (data::WorkloadInstance& instance : w.instances) {
    InstanceData d;
    d.tokens = std::move(instance.segment_tokens);
    d.samples = std::move(instance.segment_samples);
    d.item = instance.item;
    d.unpadded_tokens = d.TotalTokens();
    out.push_back(std::move(d));
  }
  if (model.modules[module].kind == spec::ModuleKind::kAudioEncoder &&
      workload.pad_audio_to_window) {
    data::WorkloadOptions unpadded = workload;
    unpadded.pad_audio_to_window = false;
    WEFT_ASSIGN_OR_RETURN(data::ModuleWorkload u,
                          data::DeriveModuleWorkload(model, module, batch, sequences, unpadded));
    if (u.instances.size() != out.size()) {
      return InternalError(fmt::format(
          "module {}: {} padded audio windows but {} unpadded ones", model.modules[module].name,
          out.size(), u.instances.size()));
    }
    for (size_t k = 0; k < out.size(); ++k) {
      int64_t data_tokens = 0;
      for (int32_t t : u.instances[k].segment_tokens) data_tokens += t;
      out[k].unpadded_tokens = std::min(out[k].unpadded_tokens, data_tokens);
    }
  }
  return out;
}

}  // namespace

StatusOr<PlanData> MakePlanData(const spec::ModelSpec& model, const spec::Batch& batch,
                                const std::vector<std::vector<std::vector<int>>>&
                                    microbatches_by_replica,
                                std::vector<RankData> ranks,
                                const data::WorkloadOptions& workload) {
  const int num_modules = static_cast<int>(model.modules.size());
  const int num_replicas = static_cast<int>(microbatches_by_replica.size());
  if (static_cast<int64_t>(batch.samples.size()) > kMaxInt32) {
    return InvalidArgumentError(
        fmt::format("batch has {} samples; at most {}", batch.samples.size(), kMaxInt32));
  }
  PlanData data;
  data.samples.reserve(batch.samples.size());
  for (const spec::Sample& s : batch.samples) {
    data.samples.push_back(SampleData{.id = s.id, .text_tokens = std::max(0, s.text_tokens)});
  }
  const int num_samples = static_cast<int>(batch.samples.size());
  if (batch.sequences.empty()) {
    // Not packed: each sample is its own sequence (DeriveModuleWorkload's convention).
    const int llm = data::FirstLlmModule(model);
    std::optional<data::LlmTokenCounter> counter;
    if (llm >= 0) {
      WEFT_ASSIGN_OR_RETURN(data::LlmTokenCounter c, data::LlmTokenCounter::Create(model, llm));
      counter.emplace(std::move(c));
    }
    for (int i = 0; i < num_samples; ++i) {
      int64_t tokens = 0;
      if (counter.has_value()) {
        WEFT_ASSIGN_OR_RETURN(tokens, counter->Tokens(batch.samples[i], workload));
      }
      data.sequences.push_back(SequenceData{.samples = {i}, .llm_tokens = tokens});
    }
  } else {
    for (size_t q = 0; q < batch.sequences.size(); ++q) {
      const spec::PackedSequence& seq = batch.sequences[q];
      SequenceData d{.samples = {}, .llm_tokens = seq.llm_tokens};
      for (size_t j = 0; j < seq.sample_indices.size(); ++j) {
        const int s = seq.sample_indices[j];
        if (s < 0 || s >= num_samples) {
          return InvalidArgumentError(fmt::format(
              "batch.sequences[{}].sample_indices[{}] = {}; must be in [0, {})", q, j, s,
              num_samples));
        }
        d.samples.push_back(s);
      }
      data.sequences.push_back(std::move(d));
    }
  }
  const int num_sequences = static_cast<int>(data.sequences.size());

  // Modules with a chunk on some rank, and the replicas some rank runs.
  std::vector<bool> placed(num_modules, false);
  std::set<int> replicas;
  for (size_t r = 0; r < ranks.size(); ++r) {
    const RankData& rank = ranks[r];
    if (rank.replica < 0 || rank.replica >= num_replicas) {
      return InvalidArgumentError(fmt::format("ranks[{}].replica = {}; must be in [0, {})", r,
                                              rank.replica, num_replicas));
    }
    replicas.insert(rank.replica);
    for (size_t c = 0; c < rank.chunks.size(); ++c) {
      const int m = rank.chunks[c].module;
      if (m < 0 || m >= num_modules) {
        return InvalidArgumentError(fmt::format("ranks[{}].chunks[{}].module = {}; must be in "
                                                "[0, {})",
                                                r, c, m, num_modules));
      }
      placed[m] = true;
    }
  }
  for (int q : replicas) {
    const auto& microbatches = microbatches_by_replica[q];
    for (size_t mb = 0; mb < microbatches.size(); ++mb) {
      MicrobatchData d;
      d.replica = q;
      d.microbatch = static_cast<int>(mb);
      for (size_t k = 0; k < microbatches[mb].size(); ++k) {
        const int seq = microbatches[mb][k];
        if (seq < 0 || seq >= num_sequences) {
          return InvalidArgumentError(fmt::format(
              "replica {} microbatch {}: sequence [{}] = {}; must be in [0, {})", q, mb, k, seq,
              num_sequences));
        }
        d.sequences.push_back(seq);
      }
      d.instances.resize(num_modules);
      for (int m = 0; m < num_modules; ++m) {
        if (!placed[m]) continue;
        WEFT_ASSIGN_OR_RETURN(d.instances[m],
                              Instances(model, m, batch, microbatches[mb], workload));
      }
      data.microbatches.push_back(std::move(d));
    }
  }
  data.ranks = std::move(ranks);
  return data;
}

}  // namespace weft::plan
