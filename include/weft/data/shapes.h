#pragma once
// Per-sample input shapes — DFLOP's data profiler (§3.2.2): what a model's preprocessing makes of
// each sample. Per non-LLM module (encoder, projector): the instances it processes (images,
// frames, clips, 30-s audio windows — the encoder's effective batch) and their tokens; for the
// LLM: the sample's sequence length (text + modality tokens). The shape file
// ("weft.data_shapes/v1", JSONL) carries them to an optimizer, which reads it back with
// ReadSampleShapes. Value types, free functions; thread-safe.
//
// File format (docs/data.md): line 1 is a header
//   {"schema":"weft.data_shapes/v1","model":M,"source":S,"num_samples":N,"modules":[names]}
// then exactly N lines, one per sample:
//   {"id":I,"text_tokens":T,"llm_tokens":L,"modules":{"<name>":{"instances":n,"tokens":t,
//    "sum_sq_tokens":q,"max_instance_tokens":m}, ...}}
// with every header module present in every line.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "weft/common/status.h"
#include "weft/data/workload.h"
#include "weft/spec/model.h"
#include "weft/spec/workload.h"

namespace weft::data {

inline constexpr std::string_view kSampleShapesSchema = "weft.data_shapes/v1";

// One module's input from one sample. Units: tokens (sum_sq_tokens: tokens², attention work).
struct ModuleShape {
  int64_t instances = 0;            // attention units (0 = the module does not see this sample)
  int64_t tokens = 0;               // Σ tokens over the instances (linear work)
  int64_t sum_sq_tokens = 0;        // Σ tokens² over the instances (attention work)
  int64_t max_instance_tokens = 0;  // the longest instance
  bool operator==(const ModuleShape&) const = default;
};

struct SampleShape {
  int64_t id = 0;  // spec::Sample::id
  int64_t text_tokens = 0;
  int64_t llm_tokens = 0;            // the sample as its own LLM sequence (0 if no LLM)
  std::vector<ModuleShape> modules;  // one per SampleShapes::module_names, same order
  bool operator==(const SampleShape&) const = default;
};

struct SampleShapes {
  std::string model;                      // model preset or spec file the shapes are for
  std::string source;                     // data file, or the generator profile and seed
  std::vector<std::string> module_names;  // the model's non-LLM modules, in model order
  std::vector<SampleShape> samples;
  bool operator==(const SampleShapes&) const = default;
};

// Shapes of `samples` under `model` (DeriveModuleWorkload per sample and module, each sample its
// own LLM sequence: no packing, no truncation). `model` names SampleShapes::model when non-empty
// (else ModelSpec::name); `source` is copied.
StatusOr<SampleShapes> ComputeSampleShapes(std::span<const spec::Sample> samples,
                                           const spec::ModelSpec& model,
                                           const WorkloadOptions& options = {},
                                           std::string_view model_label = {},
                                           std::string_view source = {});

namespace internal {
// ComputeSampleShapes that also appends every instance's tokens to (*instance_tokens)[k] for
// module_names[k] (ComputeDataProfile's tokens_per_instance histograms; one derivation serves
// both).
StatusOr<SampleShapes> ComputeSampleShapes(std::span<const spec::Sample> samples,
                                           const spec::ModelSpec& model,
                                           const WorkloadOptions& options,
                                           std::vector<std::vector<double>>* instance_tokens);
}  // namespace internal

// The file's text (header + one line per sample, each ending in '\n').
std::string SampleShapesToJsonl(const SampleShapes& shapes);

// Strict: any problem is InvalidArgument "SOURCE:LINE: FIELD = VALUE; RULE" (one line) — a line
// that is not a JSON object, a missing, unknown (with "did you mean") or duplicated key, a value
// of the wrong type or range, a module not named in the header (or missing), inconsistent
// numbers (instances 0 with tokens > 0, max_instance_tokens > tokens, llm_tokens < text_tokens),
// a wrong schema, or a sample count other than the header's.
StatusOr<SampleShapes> ParseSampleShapes(std::string_view content, std::string_view source);
// Reads a file (regular, at most kMaxDataFileBytes); NotFound when it cannot be opened.
StatusOr<SampleShapes> ReadSampleShapes(const std::string& path);

}  // namespace weft::data
