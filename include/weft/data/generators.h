#pragma once
// Synthetic sample generators that mimic published dataset distributions (sources in
// src/data/generators.cc and docs/data.md). Deterministic: the same profile, options and seed give
// the same samples on every platform (own distributions over std::mt19937_64).
// Free functions; thread-safe.
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "weft/common/status.h"
#include "weft/spec/workload.h"

namespace weft::data {

struct GeneratorOptions {
  int64_t num_samples = 1000;   // samples to draw
  uint64_t seed = 0;            // same seed (and iteration) => identical output
  int64_t iteration = 0;        // training iteration: mixed into the seed (each iteration draws
                                // fresh data); rise-and-fall also takes its image bounds from it
  int64_t first_id = 0;         // Sample::id of the first sample
  // rise-and-fall: each sample is one document filling a packed sequence (DIP §7.1 setting).
  int64_t context_tokens = 8192;   // LLM context the document fills
  int llm_tokens_per_image = 169;  // 728 px, patch 14, merge 4
  int image_size_px = 728;         // rise-and-fall, dip-vlm: images are pre-resized to this square
  Status Validate() const;
};

// "laion", "obelics", "coco-llava", "video", "audio", "mixed", "rise-and-fall", "cornstarch",
// "scienceqa", and DIP §7.1's own data: "dip-vlm" (LAION / OBELICS / ScienceQA mix, images at
// image_size_px), "dip-t2v" (16-fps clips of at most 16 s at 768 px), and "dflop-mixed" (DFLOP
// Table 2: LLaVA-Wild, AI2D, InfographicVQA, M4-Instruct, LLaVA-Video-178K).
std::vector<std::string_view> GeneratorProfileNames();

// Draws options.num_samples samples of `profile`; NotFound naming the known profiles otherwise.
StatusOr<std::vector<spec::Sample>> GenerateSamples(std::string_view profile,
                                                    const GeneratorOptions& options = {});

// One source of a mixed profile: dataset, data kind ("single-image", "multi-image", "video") and
// its sample count (the draw weight).
struct MixComponent {
  std::string_view dataset;
  std::string_view kind;
  int64_t samples = 0;
};
// DFLOP Table 2, the composition of "dflop-mixed": 28k LLaVA-Wild + 18k AI2D + 19k InfoVQA
// (single image), 60k M4-Instruct (multi-image), 60k LLaVA-Video-178K (video).
std::span<const MixComponent> DflopMixedComposition();

// DIP §7.1 "rise-and-fall" image-count bounds per packed sequence at `iteration` (0-based): a
// 20-iteration pattern, repeated. Iterations 1–5 raise the lower bound 0→16 under an upper bound
// of 32; iterations 6–20 lower both bounds linearly to 0.
struct ImageCountBounds {
  int min_images = 0;
  int max_images = 0;
};
ImageCountBounds RiseAndFallImageBounds(int64_t iteration);

}  // namespace weft::data
