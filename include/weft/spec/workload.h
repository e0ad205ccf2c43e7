#pragma once
// Workload metadata: a Sample (what one training example contains) and a Batch (the global batch
// of one iteration, packed into fixed-context sequences). Only shapes, never pixels or tokens.
#include <cstdint>
#include <string>
#include <vector>

namespace weft::spec {

struct ImageMeta {
  int width_px = 0;
  int height_px = 0;
  int patch_tokens = 0;      // if > 0: encoder tokens given directly (overrides width/height)
  int text_position = -1;    // token offset in the sample's text where the image goes (-1 = front)
};

struct VideoMeta {
  int frames = 0;            // frames sampled for training (0 = derive from duration_s * fps)
  double fps = 0;            // sampling rate
  double duration_s = 0;
  int width_px = 0;
  int height_px = 0;
};

struct AudioMeta {
  double duration_s = 0;
};

struct Sample {
  int64_t id = 0;
  int text_tokens = 0;       // text tokens (prompt + response), excluding modality tokens
  std::vector<ImageMeta> images;
  std::vector<VideoMeta> videos;
  std::vector<AudioMeta> audios;
};

// Samples packed into one fixed-context LLM sequence (indices into Batch::samples).
struct PackedSequence {
  std::vector<int> sample_indices;
  int64_t llm_tokens = 0;    // text + modality tokens after merge, as packed
};

struct Batch {
  int64_t iteration = 0;
  std::vector<Sample> samples;
  std::vector<PackedSequence> sequences;  // empty = not packed (one sequence per sample)
};

}  // namespace weft::spec
