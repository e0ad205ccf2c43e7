#pragma once
// Per-layer throughput tables of a model (DFLOP's profiling engine, §3.2.1): for every encoder
// (ViT / audio encoder) the time of one layer's forward and backward vs the effective batch size
// (instances of the module's reference tokens per instance) and TP; for every LLM the time of one
// layer vs the sequence length and TP, the attention core and the linear parts apart; and per TP
// the parameters and activation bytes of one layer. DFLOP's optimizer and scheduler price stage
// durations from them (strategy/dflop/), never from the op-level model directly, so that a
// measured profile replaces the analytical one without touching the planner.
//
// Two sources, one format (weft.profile/v1, docs/profiler.md):
//  - measured: `python -m weft.profile --model M --out profile.json` (real torch layers; TP > 1
//    emulated by per-rank shapes on one device, no TP communication — the file says so);
//  - analytical: ThroughputTable::Analytical prices the same grid with the CostModel (TP
//    collectives included), so the optimizer always has tables; `weft profile --model M` writes
//    them in the same format.
//
// Lookups interpolate piecewise-linearly between grid points. Outside the grid: linear parts and
// encoder layers scale proportionally to the batch / tokens from the nearest grid point
// (constant throughput), attention as tokens² (its work). Backward is the full backward (input +
// weight) as timed; callers apply frozen status (BackwardModeOf).
//
// Value type; const methods are thread-safe.
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "weft/common/status.h"
#include "weft/cost/cost_model.h"
#include "weft/spec/model.h"

namespace weft::cost {

inline constexpr std::string_view kProfileSchema = "weft.profile/v1";

enum class ProfileRole { kEncoder, kLlm };
std::string_view ProfileRoleName(ProfileRole role);  // "encoder", "llm"

// One layer on one TP rank at one encoder batch size (instances).
struct EncoderPoint {
  double batch = 0;
  double forward_s = 0;
  double backward_s = 0;
};

// One LLM layer on one TP rank at one sequence length (one sequence of seq_tokens tokens).
struct LlmPoint {
  double seq_tokens = 0;
  double attention_forward_s = 0;
  double attention_backward_s = 0;
  double linear_forward_s = 0;
  double linear_backward_s = 0;
};

// The LLM's output extras (final norm, LM head, loss) for one sequence of seq_tokens tokens on
// one TP rank: what the pipeline's last stage runs beside its layers.
struct HeadPoint {
  double seq_tokens = 0;
  double forward_s = 0;
  double backward_s = 0;
};

// Per TP: what one layer holds.
struct LayerMemory {
  double parameters_per_layer = 0;  // on one TP rank
  // Activation bytes one layer keeps for backward per unit (encoder: instance, LLM: token).
  double activation_bytes_per_unit = 0;
};

struct ModuleTable {
  std::string name;
  int module = -1;  // index into the model's modules
  ProfileRole role = ProfileRole::kEncoder;
  int64_t tokens_per_instance = 0;  // encoders: the reference instance the batch counts
  int layers = 0;
  std::map<int, std::vector<EncoderPoint>> encoder;  // by TP, sorted by batch
  std::map<int, std::vector<LlmPoint>> llm;          // by TP, sorted by seq_tokens
  std::map<int, std::vector<HeadPoint>> head;        // LLM output extras (optional "head" key)
  std::map<int, LayerMemory> memory;                 // by TP
};

struct LayerTime {
  double forward_s = 0;
  double backward_s = 0;
};

struct ProfileGrid {
  std::vector<double> encoder_batch = {1, 2, 4, 8, 16, 32, 64};
  std::vector<double> llm_seq_tokens = {512, 1024, 2048, 4096, 8192, 16384, 32768};
  std::vector<int> tp = {1, 2, 4, 8};
  // Non-empty, positive, strictly increasing; InvalidArgument naming the field otherwise.
  Status Validate() const;
};

class ThroughputTable {
 public:
  // The grid priced by the cost model (one middle layer of each encoder and LLM; projectors and
  // DiTs are not tabled). TP values that do not divide a module's heads are skipped for it.
  static StatusOr<ThroughputTable> Analytical(const spec::ModelSpec& model,
                                              const CostModel& cost_model,
                                              const ProfileGrid& grid = {});
  // A weft.profile/v1 document; its modules are matched to `model` by name (a module of the
  // file the model lacks, a role that contradicts the module's kind, or a bad number is one line
  // "SOURCE: modules[i].field ...: rule").
  static StatusOr<ThroughputTable> ParseJson(std::string_view text,
                                             std::string_view source,
                                             const spec::ModelSpec& model);
  static StatusOr<ThroughputTable> Load(const std::string& path, const spec::ModelSpec& model);

  std::string ToJson() const;  // weft.profile/v1
  std::string ToText() const;  // aligned table for the terminal

  const std::string& source() const { return source_; }  // "analytical" | "measured"
  const std::string& model_name() const { return model_name_; }
  // The table of module `module`, or nullptr.
  const ModuleTable* Find(int module) const;
  const std::vector<ModuleTable>& modules() const { return modules_; }
  // TP values tabled for `module` (empty if none).
  std::vector<int> TpValues(int module) const;

  // One encoder layer at `batch` instances (may be fractional) on TP `tp`.
  StatusOr<LayerTime> EncoderLayerTime(int module, int tp, double batch) const;
  // The linear parts of one LLM layer for `tokens` tokens (all segments together).
  StatusOr<LayerTime> LlmLinearTime(int module, int tp, double tokens) const;
  // The attention core of one LLM layer for one segment of `segment_tokens` tokens.
  StatusOr<LayerTime> LlmAttentionTime(int module, int tp, double segment_tokens) const;
  StatusOr<LayerMemory> Memory(int module, int tp) const;
  // The LLM's output extras for `tokens` tokens (proportional outside the grid); zero when the
  // table has none for (module, tp) — a measured file without a "head" key (HasHead false).
  LayerTime LlmHeadTime(int module, int tp, double tokens) const;
  bool HasHead(int module, int tp) const;

 private:
  std::string source_ = "analytical";
  std::string model_name_;
  std::string provenance_json_ = "{}";  // the file's provenance object, kept verbatim
  ProfileGrid grid_;
  std::vector<ModuleTable> modules_;
};

}  // namespace weft::cost
