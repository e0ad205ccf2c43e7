#pragma once
// Per-module workload derivation: how the metadata of a Sample (text tokens, images, videos,
// audio clips) turns into the tokens each module of a ModelSpec processes. Only shapes; never
// pixels. Free functions of value types; thread-safe.
//
// Rules (docs/data.md has the full text):
//  - ViT (kVit): an image is resized by the module's ResizeRule and cut into patch_size² patches;
//    patch tokens = (H/patch)·(W/patch). The LLM sees patch tokens / spatial_merge² of them.
//    Tile rules (anyres, tiles) make several crops of image_size_px per image, each one attention
//    unit of the ViT; the projector and LLM see the image's LLM tokens as one unit.
//  - Video through a ViT: frames are sampled at VideoMeta::fps (or WorkloadOptions), each frame is
//    resized like an image, temporal_patch frames form one temporal patch.
//  - DiT (kDit): latent tokens = ⌈F/vae_t / temporal_patch⌉ · ⌈H/vae_s/patch⌉ · ⌈W/vae_s/patch⌉.
//  - Whisper (kAudioEncoder): every clip is cut into 30 s windows (max_source_positions ·
//    conv_downsample mel frames), each window padded to full length (one attention unit).
//  - Projectors see the tokens their encoder hands to the LLM (after merge / unpadded audio).
//  - LLM (kLlm): one instance per packed sequence; its segments are the samples packed in it,
//    each with text tokens + the modality tokens of every encoder with a path to that LLM.
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "weft/common/status.h"
#include "weft/spec/model.h"
#include "weft/spec/workload.h"

namespace weft::data {

// One attention unit of a module: an image, a video clip (or one frame for a frame-wise image
// encoder), a 30 s audio window, or one packed LLM sequence whose segments are the samples packed
// in it. Attention cost is Σ s_i² over segments (block-diagonal masks), linear cost Σ s_i.
struct WorkloadInstance {
  std::vector<int32_t> segment_tokens;
  // Where the tokens come from (filled by DeriveModuleWorkload; empty / -1 = unknown): the batch
  // sample of each segment (Batch::samples index), and for an encoder or projector instance the
  // item of its sample it belongs to (image, audio clip, video or frame; numbered per sample in
  // this order). An encoder's instances and its projector's share item numbers (the windows of
  // one audio clip share the clip's), so stage graphs can route each instance's tokens exactly.
  std::vector<int32_t> segment_samples;
  int32_t item = -1;
  // A ViT with window attention (ModuleSpec::attention_window_px): Σ w² over the attention
  // windows of this instance, what its windowed layers' attention scales with (0 otherwise).
  double window_sum_squared = 0;
};

// The workload of one module for one microbatch. Value type.
struct ModuleWorkload {
  int module = -1;  // index into ModelSpec::modules
  std::vector<WorkloadInstance> instances;

  int64_t TotalTokens() const;        // Σ over instances and segments of s_i
  double SumSquaredTokens() const;    // Σ s_i² (attention work, tokens²)
  double WindowSumSquaredTokens() const;  // Σ over instances of window_sum_squared
  int NumInstances() const { return static_cast<int>(instances.size()); }
};

// Knobs for what the sample metadata leaves open. Defaults follow the papers (see field comments).
struct WorkloadOptions {
  // Frame sampling rate for a video whose VideoMeta has frames == 0 and fps == 0, for ViT
  // encoders (Qwen2-VL samples videos at 2 fps).
  double default_vit_video_fps = 2.0;
  // Upper bound on frames sampled per clip for ViT encoders (0 = none).
  int max_vit_video_frames = 0;
  // Frame rate for a DiT when the video gives no frames/fps (DIP §7.1 after MovieGen: 16 FPS).
  double default_dit_video_fps = 16.0;
  // Longest clip a DiT trains on (DIP §7.1 after MovieGen: 16 s); longer clips are trimmed.
  // 0 = no limit.
  double max_dit_video_s = 16.0;
  // Whisper pads every window to max_source_positions; false = encoder sees only real frames.
  bool pad_audio_to_window = true;
};

// ---- per-item helpers (one image / video / audio clip through one module) ----

// ViT patch tokens of one image (before spatial merge), over all its crops under a tile rule.
// ImageMeta::patch_tokens > 0 is used as given (one crop). An image without a size (0×0) is
// taken at the module's image_size_px square (one crop).
StatusOr<int64_t> VitPatchTokensForImage(const spec::ModuleSpec& vit, const spec::ImageMeta& image);
// ViT passes one image makes (its attention units): 1, or under resize_rule anyres the
// best-fit grid's tiles + the base image, under tiles the grid's tiles + a thumbnail.
StatusOr<int64_t> VitCropsForImage(const spec::ModuleSpec& vit, const spec::ImageMeta& image);
// Tokens one image contributes to the LLM: patch grid merged spatial_merge × spatial_merge.
// DIP's setting (728 px, patch 14, merge 4) gives 52×52 patches -> 13×13 = 169 tokens. Tile
// rules: anyres base crop + unpadded (and, past anyres_max_tiles, downsampled) tile features +
// one newline per feature row; tiles (grid tiles + thumbnail) × merged tokens per tile.
StatusOr<int64_t> LlmTokensForImage(const spec::ModuleSpec& vit, const spec::ImageMeta& image);

// Frames a ViT samples from one clip (VideoMeta::frames, else duration · fps).
int64_t VitFramesForVideo(const spec::VideoMeta& video, const WorkloadOptions& options = {});
// ViT patch tokens of one clip: ⌈frames / temporal_patch⌉ · per-frame patches.
StatusOr<int64_t> VitPatchTokensForVideo(const spec::ModuleSpec& vit, const spec::VideoMeta& video,
                                         const WorkloadOptions& options = {});
// Tokens one clip contributes to the LLM (per-frame grid merged spatially).
StatusOr<int64_t> LlmTokensForVideo(const spec::ModuleSpec& vit, const spec::VideoMeta& video,
                                    const WorkloadOptions& options = {});

// DiT latent tokens of one clip (an image is a 1-frame clip).
StatusOr<int64_t> DitLatentTokensForVideo(const spec::ModuleSpec& dit, const spec::VideoMeta& video,
                                          const WorkloadOptions& options = {});

// Whisper mel frames of a clip: ⌈duration_s · frames_per_second⌉.
int64_t AudioMelFrames(const spec::ModuleSpec& audio, const spec::AudioMeta& clip);
// Encoder tokens per window (the attention units), after padding per options.
StatusOr<std::vector<int32_t>> AudioEncoderWindowTokens(const spec::ModuleSpec& audio,
                                                        const spec::AudioMeta& clip,
                                                        const WorkloadOptions& options = {});
// Tokens of one clip that reach the LLM: per window, the real (unpadded) frames /
// conv_downsample, then / output_pool (floored; Qwen2-Audio: 30 s -> 1500 -> 750).
StatusOr<int64_t> LlmTokensForAudio(const spec::ModuleSpec& audio, const spec::AudioMeta& clip);

// ---- per-sample and per-microbatch ----

// Tokens the sample contributes to LLM module `llm_module`: text + the modality tokens of every
// encoder that has a path to it in the model's edges.
StatusOr<int64_t> SampleLlmTokens(const spec::ModelSpec& model, int llm_module,
                                  const spec::Sample& sample, const WorkloadOptions& options = {});
// Same, for the first kLlm module of the model (FailedPrecondition if there is none).
StatusOr<int64_t> SampleLlmTokens(const spec::ModelSpec& model, const spec::Sample& sample,
                                  const WorkloadOptions& options = {});

// SampleLlmTokens for many samples: the encoders that reach the LLM module are found once (each
// SampleLlmTokens call walks the model's edges). Holds a reference to the model.
class LlmTokenCounter {
 public:
  // Errors: InvalidArgument when `llm_module` is not a module index.
  static StatusOr<LlmTokenCounter> Create(const spec::ModelSpec& model, int llm_module);
  StatusOr<int64_t> Tokens(const spec::Sample& sample, const WorkloadOptions& options = {}) const;

 private:
  LlmTokenCounter(const spec::ModelSpec& model, std::vector<int> encoders)
      : model_(&model), encoders_(std::move(encoders)) {}
  const spec::ModelSpec* model_;
  std::vector<int> encoders_;  // vit / audio encoders with a path to the LLM module
};

// Index of the first kLlm module, or -1.
int FirstLlmModule(const spec::ModelSpec& model);

// The workload of module `module` for the microbatch made of `sequence_indices` (indices into
// batch.sequences; when batch.sequences is empty each sample is its own sequence and the indices
// refer to batch.samples). Which items a module sees follows ModuleSpec::kind/modality and edges.
StatusOr<ModuleWorkload> DeriveModuleWorkload(const spec::ModelSpec& model, int module,
                                              const spec::Batch& batch,
                                              std::span<const int> sequence_indices,
                                              const WorkloadOptions& options = {});

}  // namespace weft::data
