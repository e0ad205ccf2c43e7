#include "weft/data/workload.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>
#include <string>

#include <fmt/format.h>

namespace weft::data {
namespace internal {

using spec::ModelSpec;
using spec::ModuleKind;
using spec::ModuleSpec;
using spec::Modality;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

std::string ModuleLabel(const ModelSpec& model, int module) {
  return "modules[" + std::to_string(module) + "] (" + model.modules[module].name + ")";
}

// Index of a module by name (edges refer to names); -1 if absent. Models are small: linear scan.
int IndexOf(const ModelSpec& model, const std::string& name) {
  for (size_t i = 0; i < model.modules.size(); ++i) {
    if (model.modules[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

// True if `to` is reachable from `from` along edges (a module reaches itself).
bool Reaches(const ModelSpec& model, int from, int to) {
  std::vector<bool> seen(model.modules.size(), false);
  std::vector<int> stack = {from};
  seen[from] = true;
  while (!stack.empty()) {
    int m = stack.back();
    stack.pop_back();
    if (m == to) return true;
    for (const auto& edge : model.edges) {
      if (edge.from != model.modules[m].name) continue;
      int next = IndexOf(model, edge.to);
      if (next >= 0 && !seen[next]) {
        seen[next] = true;
        stack.push_back(next);
      }
    }
  }
  return false;
}

bool HasVit(const ModelSpec& model, Modality modality) {
  return std::any_of(model.modules.begin(), model.modules.end(), [&](const ModuleSpec& m) {
    return m.kind == ModuleKind::kVit && m.modality == modality;
  });
}

// A ViT encodes images if its modality is image, or if no image ViT exists (one ViT for both, as
// Qwen2-VL and LLaVA-OneVision); symmetric for videos.
bool VitTakesImages(const ModelSpec& model, const ModuleSpec& vit) {
  return vit.modality == Modality::kImage || !HasVit(model, Modality::kImage);
}
bool VitTakesVideos(const ModelSpec& model, const ModuleSpec& vit) {
  return vit.modality == Modality::kVideo || !HasVit(model, Modality::kVideo);
}

// Resized (height, width) in pixels of an image under the ViT's resize rule.
StatusOr<std::pair<int64_t, int64_t>> ResizedImagePx(const ModuleSpec& vit, int width_px,
                                                     int height_px) {
  if (vit.patch_size <= 0) {
    return InvalidArgumentError(vit.name + ".patch_size = " + std::to_string(vit.patch_size) +
                                "; must be > 0 to derive image tokens");
  }
  if (width_px < 0 || height_px < 0) {
    return InvalidArgumentError("image size " + std::to_string(width_px) + "x" +
                                std::to_string(height_px) + "; must be >= 0");
  }
  bool unknown_size = width_px == 0 || height_px == 0;
  if (vit.resize_rule != spec::ResizeRule::kNative || unknown_size) {
    // kFixed, and one crop of a tile rule (a video frame; an image's tiles: ImageCrops).
    if (vit.image_size_px <= 0) {
      return InvalidArgumentError(
          vit.name + ".image_size_px = " + std::to_string(vit.image_size_px) +
          (unknown_size ? "; must be > 0 for an image without a size"
                        : "; must be > 0 for resize_rule fixed"));
    }
    return std::pair<int64_t, int64_t>{vit.image_size_px, vit.image_size_px};
  }
  // kNative: each side rounded to a multiple of patch·merge, the area capped at max_pixels
  // (keeping the aspect ratio, sides floored to the factor), never below one factor.
  const int64_t factor = static_cast<int64_t>(vit.patch_size) * std::max(1, vit.spatial_merge);
  auto round_to = [&](double side) {
    return std::max<int64_t>(factor, std::llround(side / factor) * factor);
  };
  int64_t h = round_to(height_px);
  int64_t w = round_to(width_px);
  if (vit.max_pixels > 0 && h * w > vit.max_pixels) {
    double beta = std::sqrt(static_cast<double>(height_px) * width_px / vit.max_pixels);
    h = std::max<int64_t>(factor, static_cast<int64_t>(std::floor(height_px / beta / factor)) * factor);
    w = std::max<int64_t>(factor, static_cast<int64_t>(std::floor(width_px / beta / factor)) * factor);
  }
  return std::pair<int64_t, int64_t>{h, w};
}

// Patch grid (rows, cols) of one image/frame.
StatusOr<std::pair<int64_t, int64_t>> PatchGrid(const ModuleSpec& vit, int width_px,
                                                int height_px) {
  WEFT_ASSIGN_OR_RETURN(auto hw, ResizedImagePx(vit, width_px, height_px));
  return std::pair<int64_t, int64_t>{hw.first / vit.patch_size, hw.second / vit.patch_size};
}

int64_t MergedGridTokens(const ModuleSpec& vit, std::pair<int64_t, int64_t> grid) {
  const int64_t m = std::max(1, vit.spatial_merge);
  return CeilDiv(grid.first, m) * CeilDiv(grid.second, m);
}

// Σ w² over the attention windows of one rows x cols patch grid (one temporal slice): windows
// of attention_window_px square, counted in merged units as Qwen2.5-VL's window index does
// (a partial window at the bottom / right edge keeps what is left).
double GridWindowSumSquared(const ModuleSpec& vit, int64_t rows, int64_t cols) {
  const int64_t m = std::max(1, vit.spatial_merge);
  const int64_t unit = vit.patch_size > 0 ? vit.attention_window_px / vit.patch_size / m : 0;
  if (unit <= 0) return static_cast<double>(rows * cols) * static_cast<double>(rows * cols);
  auto sum_sq_blocks = [&](int64_t merged) {
    const int64_t full = merged / unit, rest = merged % unit;
    return static_cast<double>(full) * static_cast<double>(unit * unit) +
           static_cast<double>(rest * rest);
  };
  const double m2 = static_cast<double>(m * m);
  return m2 * m2 * sum_sq_blocks(CeilDiv(rows, m)) * sum_sq_blocks(CeilDiv(cols, m));
}

// Σ w² of a unit of `tokens` patches whose grid is unknown (ImageMeta::patch_tokens): full
// windows of WindowPatches() each.
double EstimatedWindowSumSquared(const ModuleSpec& vit, int64_t tokens) {
  const double t = static_cast<double>(tokens);
  return t * std::min(t, static_cast<double>(vit.WindowPatches()));
}

// What one image becomes under the ViT's resize rule: `crops` ViT passes of rows x cols patches
// each, and the tokens handed to the LLM.
struct ImageCrops {
  int64_t crops = 1;
  int64_t rows = 0, cols = 0;  // patch grid of one crop
  int64_t llm_tokens = 0;
};

// LLaVA's select_best_resolution: the pinpoint that keeps the most of the image's resolution
// when the image is scaled to fit it (aspect kept), then the one that wastes the fewest pixels;
// the first listed wins a tie.
const spec::GridPinpoint& BestPinpoint(const ModuleSpec& vit, int64_t width, int64_t height) {
  const spec::GridPinpoint* best = &vit.grid_pinpoints.front();
  int64_t best_effective = -1, best_waste = 0;
  for (const spec::GridPinpoint& p : vit.grid_pinpoints) {
    const double scale = std::min(static_cast<double>(p.width_px) / static_cast<double>(width),
                                  static_cast<double>(p.height_px) / static_cast<double>(height));
    const auto scaled_w = static_cast<int64_t>(static_cast<double>(width) * scale);
    const auto scaled_h = static_cast<int64_t>(static_cast<double>(height) * scale);
    const int64_t effective = std::min(scaled_w * scaled_h, width * height);
    const int64_t waste = static_cast<int64_t>(p.width_px) * p.height_px - effective;
    if (effective > best_effective || (effective == best_effective && waste < best_waste)) {
      best = &p;
      best_effective = effective;
      best_waste = waste;
    }
  }
  return *best;
}

// LLaVA-OneVision AnyRes (resize_rule anyres). The ViT encodes the best pinpoint's tiles plus
// the base image (tiles + 1 crops). The LLM gets the base crop's features, then the tiles'
// feature map (side x side per tile, side = image_size/patch/merge) with the padding rows or
// columns of the letterboxed image removed, one newline token per row, and, when the map holds
// more than anyres_max_tiles tiles' worth (ratio = sqrt(h·w / (N·side²)) > 1.1), the map
// bilinearly downsampled to floor(h/ratio) x floor(w/ratio).
ImageCrops AnyResCrops(const ModuleSpec& vit, int64_t width, int64_t height) {
  const spec::GridPinpoint& best = BestPinpoint(vit, width, height);
  const int64_t grid_rows = best.height_px / vit.image_size_px;
  const int64_t grid_cols = best.width_px / vit.image_size_px;
  const int64_t side = vit.image_size_px / vit.patch_size;
  const int64_t merged = CeilDiv(side, std::max(1, vit.spatial_merge));
  int64_t h = merged * grid_rows, w = merged * grid_cols;
  // Unpad: the image was scaled to fit the pinpoint and centred; drop the padding.
  if (width * h > w * height) {  // wider than the grid: padding above and below
    const int64_t content_h = height * w / width;
    h -= 2 * ((h - content_h) / 2);
  } else {
    const int64_t content_w = width * h / height;
    w -= 2 * ((w - content_w) / 2);
  }
  int64_t features = h * w, newlines = h;
  if (vit.anyres_max_tiles > 0) {
    const double ratio = std::sqrt(static_cast<double>(h * w) /
                                   static_cast<double>(vit.anyres_max_tiles * merged * merged));
    if (ratio > 1.1) {
      const auto down_h = static_cast<int64_t>(std::floor(static_cast<double>(h) / ratio));
      const auto down_w = static_cast<int64_t>(std::floor(static_cast<double>(w) / ratio));
      features = down_h * down_w;
      newlines = down_h;
    }
  }
  return ImageCrops{.crops = grid_rows * grid_cols + 1,
                    .rows = side,
                    .cols = side,
                    .llm_tokens = merged * merged + features + newlines};
}

// InternVL's dynamic tiles (resize_rule tiles): among the grids of cols x rows tiles with
// min_tiles <= cols·rows <= max_tiles (taken by increasing tile count, then columns), the one
// whose aspect ratio cols/rows is closest to the image's; a later grid with an equally close
// ratio wins when the image has more than half of that grid's pixels. A thumbnail (the whole
// image as one more tile) is added when the grid has more than one tile.
ImageCrops DynamicTileCrops(const ModuleSpec& vit, int64_t width, int64_t height) {
  const double aspect = static_cast<double>(width) / static_cast<double>(height);
  const double area = static_cast<double>(width) * static_cast<double>(height);
  const double tile_area = static_cast<double>(vit.image_size_px) * vit.image_size_px;
  int64_t best_tiles = 1;
  double best_diff = std::numeric_limits<double>::infinity();
  for (int n = vit.min_tiles; n <= vit.max_tiles; ++n) {
    for (int cols = 1; cols <= n; ++cols) {
      if (n % cols != 0) continue;
      const int rows = n / cols;
      const double diff = std::fabs(aspect - static_cast<double>(cols) / rows);
      if (diff < best_diff) {
        best_diff = diff;
        best_tiles = n;
      } else if (diff == best_diff && area > 0.5 * tile_area * n) {
        best_tiles = n;
      }
    }
  }
  const int64_t side = vit.image_size_px / vit.patch_size;
  const int64_t merged = CeilDiv(side, std::max(1, vit.spatial_merge));
  const int64_t crops = best_tiles + (vit.thumbnail && best_tiles > 1 ? 1 : 0);
  return ImageCrops{
      .crops = crops, .rows = side, .cols = side, .llm_tokens = crops * merged * merged};
}

// One image through the ViT's resize rule. ImageMeta::patch_tokens > 0 is one crop of that many
// patches (rows = 0: grid unknown).
StatusOr<ImageCrops> CropsOfImage(const ModuleSpec& vit, const spec::ImageMeta& image) {
  const int64_t m = std::max(1, vit.spatial_merge);
  if (image.patch_tokens > 0) {
    return ImageCrops{
        .crops = 1, .rows = 0, .cols = 0, .llm_tokens = CeilDiv(image.patch_tokens, m * m)};
  }
  const bool tiled =
      vit.resize_rule == spec::ResizeRule::kAnyRes || vit.resize_rule == spec::ResizeRule::kTiles;
  if (tiled && image.width_px > 0 && image.height_px > 0 && vit.patch_size > 0 &&
      vit.image_size_px >= vit.patch_size) {
    if (vit.resize_rule == spec::ResizeRule::kAnyRes && !vit.grid_pinpoints.empty()) {
      return AnyResCrops(vit, image.width_px, image.height_px);
    }
    if (vit.resize_rule == spec::ResizeRule::kTiles && vit.min_tiles >= 1 &&
        vit.max_tiles >= vit.min_tiles) {
      return DynamicTileCrops(vit, image.width_px, image.height_px);
    }
  }
  WEFT_ASSIGN_OR_RETURN(auto grid, PatchGrid(vit, image.width_px, image.height_px));
  return ImageCrops{.crops = 1,
                    .rows = grid.first,
                    .cols = grid.second,
                    .llm_tokens = MergedGridTokens(vit, grid)};
}

// `label()` names the segment in the error (made only then: this runs per sample and item).
template <typename Label>
Status CheckSegment(int64_t tokens, const Label& label) {
  if (tokens > std::numeric_limits<int32_t>::max()) {
    return InvalidArgumentError(label() + " has " + std::to_string(tokens) +
                                " tokens; must fit in int32");
  }
  return OkStatus();
}

// The attention units of an encoder-like module for one sample: `emit(tokens, item)` per unit
// (in order; items numbered per sample, an item without tokens keeps its number). `llm_view` =
// true gives the tokens handed on to the LLM (projector view).
template <typename Emit>
Status ForEachEncoderUnit(const ModelSpec& model, const ModuleSpec& enc,
                          const spec::Sample& sample, const WorkloadOptions& options,
                          bool llm_view, const Emit& emit) {
  int32_t item = 0;
  // Window attention is priced on the ViT's own instances only (the projector and LLM attend
  // as usual); `window_sq` is Σ w² of the unit's windows.
  const bool windows = !llm_view && enc.kind == ModuleKind::kVit && enc.attention_window_px > 0;
  auto check = [&](int64_t tokens, const char* what) {
    return CheckSegment(
        tokens, [&] { return std::string(what) + " of sample " + std::to_string(sample.id); });
  };
  auto push = [&](int64_t tokens, const char* what, double window_sq = 0) -> Status {
    WEFT_RETURN_IF_ERROR(check(tokens, what));
    if (tokens > 0) emit(static_cast<int32_t>(tokens), item, window_sq);
    ++item;
    return OkStatus();
  };
  switch (enc.kind) {
    case ModuleKind::kVit: {
      if (VitTakesImages(model, enc)) {
        for (const auto& image : sample.images) {
          WEFT_ASSIGN_OR_RETURN(const ImageCrops crops, CropsOfImage(enc, image));
          if (llm_view) {
            WEFT_RETURN_IF_ERROR(push(crops.llm_tokens, "an image"));
            continue;
          }
          // Each crop (tile, base image, thumbnail) is one ViT pass of the item.
          const int64_t patches =
              crops.rows > 0 ? crops.rows * crops.cols : static_cast<int64_t>(image.patch_tokens);
          WEFT_RETURN_IF_ERROR(check(patches, "an image"));
          double window_sq = 0;
          if (windows) {
            window_sq = crops.rows > 0 ? GridWindowSumSquared(enc, crops.rows, crops.cols)
                                       : EstimatedWindowSumSquared(enc, patches);
          }
          if (patches > 0) {
            for (int64_t c = 0; c < crops.crops; ++c) {
              emit(static_cast<int32_t>(patches), item, window_sq);
            }
          }
          ++item;
        }
      }
      if (VitTakesVideos(model, enc)) {
        for (const auto& video : sample.videos) {
          const int64_t frames = VitFramesForVideo(video, options);
          if (frames <= 0) continue;
          WEFT_ASSIGN_OR_RETURN(auto grid, PatchGrid(enc, video.width_px, video.height_px));
          const int64_t per_frame =
              llm_view ? MergedGridTokens(enc, grid) : grid.first * grid.second;
          const double frame_window_sq =
              windows ? GridWindowSumSquared(enc, grid.first, grid.second) : 0;
          if (enc.temporal_patch > 1) {
            // Video-aware ViT (3-D patches, Qwen2-VL): the clip is one attention unit (its
            // windows, if any, are per temporal slice).
            const int64_t slices = CeilDiv(frames, enc.temporal_patch);
            WEFT_RETURN_IF_ERROR(
                push(slices * per_frame, "a video", static_cast<double>(slices) * frame_window_sq));
          } else {
            // Image encoder applied frame by frame (SigLIP in LLaVA-OneVision): one unit a frame.
            // One entry per frame: refuse a count that would not fit memory (a malformed
            // sample, not a clip anyone trains on).
            constexpr int64_t kMaxFramesPerVideo = int64_t{1} << 14;
            if (frames > kMaxFramesPerVideo) {
              return InvalidArgumentError(fmt::format(
                  "sample {}: a video of {} frames through '{}' (frame by frame); at most {} "
                  "frames per video (set fewer frames, a lower fps or max_vit_video_frames)",
                  sample.id, frames, enc.name, kMaxFramesPerVideo));
            }
            for (int64_t f = 0; f < frames; ++f) {
              WEFT_RETURN_IF_ERROR(push(per_frame, "a video frame", frame_window_sq));
            }
          }
        }
      }
      return OkStatus();
    }
    case ModuleKind::kAudioEncoder: {
      for (const auto& clip : sample.audios) {
        if (llm_view) {
          WEFT_ASSIGN_OR_RETURN(int64_t tokens, LlmTokensForAudio(enc, clip));
          WEFT_RETURN_IF_ERROR(push(tokens, "an audio clip"));
        } else {
          WEFT_ASSIGN_OR_RETURN(auto units, AudioEncoderWindowTokens(enc, clip, options));
          for (int32_t w : units) emit(w, item, 0.0);
          ++item;
        }
      }
      return OkStatus();
    }
    case ModuleKind::kDit: {
      if (enc.modality == Modality::kImage) {
        for (const auto& image : sample.images) {
          spec::VideoMeta still{.frames = 1, .width_px = image.width_px, .height_px = image.height_px};
          WEFT_ASSIGN_OR_RETURN(int64_t tokens, DitLatentTokensForVideo(enc, still, options));
          WEFT_RETURN_IF_ERROR(push(tokens, "an image"));
        }
      } else {
        for (const auto& video : sample.videos) {
          WEFT_ASSIGN_OR_RETURN(int64_t tokens, DitLatentTokensForVideo(enc, video, options));
          WEFT_RETURN_IF_ERROR(push(tokens, "a video"));
        }
      }
      return OkStatus();
    }
    default:
      return InternalError("ForEachEncoderUnit called on module " + enc.name);
  }
}

// Per-item workload of an encoder-like module for one sample: appends one instance per
// attention unit (ForEachEncoderUnit).
Status AppendEncoderInstances(const ModelSpec& model, const ModuleSpec& enc,
                              const spec::Sample& sample, const WorkloadOptions& options,
                              bool llm_view, std::vector<WorkloadInstance>& out) {
  return ForEachEncoderUnit(model, enc, sample, options, llm_view,
                            [&](int32_t tokens, int32_t item, double window_sq) {
                              out.push_back(WorkloadInstance{.segment_tokens = {tokens},
                                                             .segment_samples = {},
                                                             .item = item,
                                                             .window_sum_squared = window_sq});
                            });
}

// The vit / audio encoders that reach `llm_module` (their LLM-view tokens join a sample's text).
std::vector<int> EncodersReaching(const ModelSpec& model, int llm_module) {
  std::vector<int> encoders;
  for (size_t e = 0; e < model.modules.size(); ++e) {
    const auto& enc = model.modules[e];
    if (enc.kind != ModuleKind::kVit && enc.kind != ModuleKind::kAudioEncoder) continue;
    if (Reaches(model, static_cast<int>(e), llm_module)) encoders.push_back(static_cast<int>(e));
  }
  return encoders;
}


// Encoders feeding a projector: walk predecessors through projectors to the first non-projector.
std::vector<int> UpstreamEncoders(const ModelSpec& model, int projector) {
  std::vector<int> result;
  std::vector<bool> seen(model.modules.size(), false);
  std::vector<int> stack = {projector};
  seen[projector] = true;
  while (!stack.empty()) {
    int m = stack.back();
    stack.pop_back();
    for (const auto& edge : model.edges) {
      if (edge.to != model.modules[m].name) continue;
      int prev = IndexOf(model, edge.from);
      if (prev < 0 || seen[prev]) continue;
      seen[prev] = true;
      if (model.modules[prev].kind == ModuleKind::kMlpProjector) {
        stack.push_back(prev);
      } else if (model.modules[prev].kind == ModuleKind::kVit ||
                 model.modules[prev].kind == ModuleKind::kAudioEncoder) {
        result.push_back(prev);
      }
    }
  }
  std::sort(result.begin(), result.end());
  return result;
}

}  // namespace internal

using internal::CeilDiv;

int64_t ModuleWorkload::TotalTokens() const {
  int64_t total = 0;
  for (const auto& instance : instances) {
    for (int32_t s : instance.segment_tokens) total += s;
  }
  return total;
}

double ModuleWorkload::WindowSumSquaredTokens() const {
  double total = 0;
  for (const auto& instance : instances) total += instance.window_sum_squared;
  return total;
}

double ModuleWorkload::SumSquaredTokens() const {
  double total = 0;
  for (const auto& instance : instances) {
    for (int32_t s : instance.segment_tokens) total += static_cast<double>(s) * s;
  }
  return total;
}

StatusOr<int64_t> VitPatchTokensForImage(const spec::ModuleSpec& vit, const spec::ImageMeta& image) {
  if (image.patch_tokens > 0) return static_cast<int64_t>(image.patch_tokens);
  WEFT_ASSIGN_OR_RETURN(const internal::ImageCrops crops, internal::CropsOfImage(vit, image));
  return crops.crops * crops.rows * crops.cols;
}

StatusOr<int64_t> VitCropsForImage(const spec::ModuleSpec& vit, const spec::ImageMeta& image) {
  WEFT_ASSIGN_OR_RETURN(const internal::ImageCrops crops, internal::CropsOfImage(vit, image));
  return crops.crops;
}

StatusOr<int64_t> LlmTokensForImage(const spec::ModuleSpec& vit, const spec::ImageMeta& image) {
  WEFT_ASSIGN_OR_RETURN(const internal::ImageCrops crops, internal::CropsOfImage(vit, image));
  return crops.llm_tokens;
}

int64_t VitFramesForVideo(const spec::VideoMeta& video, const WorkloadOptions& options) {
  int64_t frames = video.frames;
  if (frames <= 0) {
    const double fps = video.fps > 0 ? video.fps : options.default_vit_video_fps;
    frames = video.duration_s > 0 ? std::max<int64_t>(1, std::llround(video.duration_s * fps)) : 0;
  }
  if (options.max_vit_video_frames > 0) frames = std::min<int64_t>(frames, options.max_vit_video_frames);
  return frames;
}

StatusOr<int64_t> VitPatchTokensForVideo(const spec::ModuleSpec& vit, const spec::VideoMeta& video,
                                         const WorkloadOptions& options) {
  WEFT_ASSIGN_OR_RETURN(auto grid, internal::PatchGrid(vit, video.width_px, video.height_px));
  return CeilDiv(VitFramesForVideo(video, options), std::max(1, vit.temporal_patch)) * grid.first *
         grid.second;
}

StatusOr<int64_t> LlmTokensForVideo(const spec::ModuleSpec& vit, const spec::VideoMeta& video,
                                    const WorkloadOptions& options) {
  WEFT_ASSIGN_OR_RETURN(auto grid, internal::PatchGrid(vit, video.width_px, video.height_px));
  return CeilDiv(VitFramesForVideo(video, options), std::max(1, vit.temporal_patch)) *
         internal::MergedGridTokens(vit, grid);
}

StatusOr<int64_t> DitLatentTokensForVideo(const spec::ModuleSpec& dit, const spec::VideoMeta& video,
                                          const WorkloadOptions& options) {
  if (dit.patch_size <= 0 || dit.vae_spatial_downsample <= 0 || dit.vae_temporal_downsample <= 0) {
    return InvalidArgumentError(dit.name + ": patch_size, vae_spatial_downsample and "
                                "vae_temporal_downsample must be > 0 to derive latent tokens");
  }
  // DIP §7.1 after MovieGen: clips are transcoded to default_dit_video_fps and trimmed to
  // max_dit_video_s. A clip given only by frames (no fps, no duration) is taken as sampled.
  double duration_s = video.duration_s;
  if (video.frames > 0 && video.fps > 0) duration_s = video.frames / video.fps;
  int64_t frames = 0;
  if (duration_s > 0) {
    if (options.max_dit_video_s > 0) duration_s = std::min(duration_s, options.max_dit_video_s);
    frames = std::max<int64_t>(1, std::llround(duration_s * options.default_dit_video_fps));
  } else if (video.frames > 0) {
    frames = video.frames;
    if (options.max_dit_video_s > 0) {
      frames = std::min<int64_t>(
          frames, std::llround(options.max_dit_video_s * options.default_dit_video_fps));
    }
  }
  if (frames <= 0) return int64_t{0};
  int64_t h = video.height_px, w = video.width_px;
  if (h <= 0 || w <= 0) {
    if (dit.image_size_px <= 0) {
      return InvalidArgumentError(dit.name + ".image_size_px = " +
                                  std::to_string(dit.image_size_px) +
                                  "; must be > 0 for a video without a size");
    }
    h = w = dit.image_size_px;
  }
  const int64_t latent_frames = CeilDiv(frames, dit.vae_temporal_downsample);
  const int64_t latent_h = CeilDiv(h, dit.vae_spatial_downsample);
  const int64_t latent_w = CeilDiv(w, dit.vae_spatial_downsample);
  return CeilDiv(latent_frames, std::max(1, dit.temporal_patch)) * CeilDiv(latent_h, dit.patch_size) *
         CeilDiv(latent_w, dit.patch_size);
}

int64_t AudioMelFrames(const spec::ModuleSpec& audio, const spec::AudioMeta& clip) {
  if (clip.duration_s <= 0) return 0;
  return static_cast<int64_t>(std::ceil(clip.duration_s * audio.frames_per_second - 1e-9));
}

namespace {
Status CheckAudioModule(const spec::ModuleSpec& audio) {
  if (audio.frames_per_second <= 0 || audio.conv_downsample <= 0 || audio.max_source_positions <= 0) {
    return InvalidArgumentError(audio.name + ": frames_per_second, conv_downsample and "
                                "max_source_positions must be > 0 to derive audio tokens");
  }
  return OkStatus();
}
}  // namespace

StatusOr<std::vector<int32_t>> AudioEncoderWindowTokens(const spec::ModuleSpec& audio,
                                                        const spec::AudioMeta& clip,
                                                        const WorkloadOptions& options) {
  WEFT_RETURN_IF_ERROR(CheckAudioModule(audio));
  const int64_t window_frames = static_cast<int64_t>(audio.max_source_positions) * audio.conv_downsample;
  std::vector<int32_t> windows;
  for (int64_t left = AudioMelFrames(audio, clip); left > 0; left -= window_frames) {
    const int64_t frames = std::min(left, window_frames);
    windows.push_back(options.pad_audio_to_window
                          ? audio.max_source_positions
                          : static_cast<int32_t>(CeilDiv(frames, audio.conv_downsample)));
  }
  return windows;
}

StatusOr<int64_t> LlmTokensForAudio(const spec::ModuleSpec& audio, const spec::AudioMeta& clip) {
  WEFT_ASSIGN_OR_RETURN(auto windows, AudioEncoderWindowTokens(audio, clip,
                                                               WorkloadOptions{.pad_audio_to_window = false}));
  // output_pool positions are averaged into one token per window (Qwen2-Audio's AvgPool1d(2)
  // after the layers: floor(positions / 2)).
  const int64_t pool = std::max(1, audio.output_pool);
  int64_t total = 0;
  for (int32_t w : windows) total += w / pool;
  return total;
}

int FirstLlmModule(const spec::ModelSpec& model) {
  for (size_t i = 0; i < model.modules.size(); ++i) {
    if (model.modules[i].kind == spec::ModuleKind::kLlm) return static_cast<int>(i);
  }
  return -1;
}

StatusOr<LlmTokenCounter> LlmTokenCounter::Create(const spec::ModelSpec& model, int llm_module) {
  if (llm_module < 0 || llm_module >= static_cast<int>(model.modules.size())) {
    return InvalidArgumentError("llm module index " + std::to_string(llm_module) +
                                " out of range [0, " + std::to_string(model.modules.size()) + ")");
  }
  return LlmTokenCounter(model, internal::EncodersReaching(model, llm_module));
}

StatusOr<int64_t> LlmTokenCounter::Tokens(const spec::Sample& sample,
                                          const WorkloadOptions& options) const {
  int64_t tokens = std::max(0, sample.text_tokens);
  for (int e : encoders_) {
    WEFT_RETURN_IF_ERROR(internal::ForEachEncoderUnit(
        *model_, model_->modules[e], sample, options, /*llm_view=*/true,
        [&](int32_t unit, int32_t, double) { tokens += unit; }));
  }
  return tokens;
}

StatusOr<int64_t> SampleLlmTokens(const spec::ModelSpec& model, int llm_module,
                                  const spec::Sample& sample, const WorkloadOptions& options) {
  WEFT_ASSIGN_OR_RETURN(const LlmTokenCounter counter, LlmTokenCounter::Create(model, llm_module));
  return counter.Tokens(sample, options);
}

StatusOr<int64_t> SampleLlmTokens(const spec::ModelSpec& model, const spec::Sample& sample,
                                  const WorkloadOptions& options) {
  const int llm = FirstLlmModule(model);
  if (llm < 0) return FailedPreconditionError("model " + model.name + " has no llm module");
  return SampleLlmTokens(model, llm, sample, options);
}

StatusOr<ModuleWorkload> DeriveModuleWorkload(const spec::ModelSpec& model, int module,
                                              const spec::Batch& batch,
                                              std::span<const int> sequence_indices,
                                              const WorkloadOptions& options) {
  const int num_modules = static_cast<int>(model.modules.size());
  if (module < 0 || module >= num_modules) {
    return InvalidArgumentError("module = " + std::to_string(module) + "; must be in [0, " +
                                std::to_string(num_modules) + ")");
  }
  const int num_samples = static_cast<int>(batch.samples.size());
  const bool packed = !batch.sequences.empty();
  const int num_sequences = packed ? static_cast<int>(batch.sequences.size()) : num_samples;
  // Samples of each selected sequence, validated.
  std::vector<std::span<const int>> sequences;
  sequences.reserve(sequence_indices.size());
  for (size_t k = 0; k < sequence_indices.size(); ++k) {
    const int s = sequence_indices[k];
    if (s < 0 || s >= num_sequences) {
      return InvalidArgumentError("sequence_indices[" + std::to_string(k) + "] = " +
                                  std::to_string(s) + "; must be in [0, " +
                                  std::to_string(num_sequences) + ")");
    }
    if (!packed) {
      sequences.push_back(sequence_indices.subspan(k, 1));
      continue;
    }
    const auto& members = batch.sequences[s].sample_indices;
    for (size_t j = 0; j < members.size(); ++j) {
      if (members[j] < 0 || members[j] >= num_samples) {
        return InvalidArgumentError("batch.sequences[" + std::to_string(s) + "].sample_indices[" +
                                    std::to_string(j) + "] = " + std::to_string(members[j]) +
                                    "; must be in [0, " + std::to_string(num_samples) + ")");
      }
    }
    sequences.push_back(members);
  }

  ModuleWorkload workload{.module = module, .instances = {}};
  const auto& spec_module = model.modules[module];
  switch (spec_module.kind) {
    case spec::ModuleKind::kLlm: {
      WEFT_ASSIGN_OR_RETURN(const LlmTokenCounter counter, LlmTokenCounter::Create(model, module));
      for (const auto& members : sequences) {
        WorkloadInstance instance;
        for (int i : members) {
          const spec::Sample& sample = batch.samples[i];
          WEFT_ASSIGN_OR_RETURN(int64_t tokens, counter.Tokens(sample, options));
          WEFT_RETURN_IF_ERROR(internal::CheckSegment(
              tokens, [&] { return "sample " + std::to_string(sample.id); }));
          if (tokens > 0) {
            instance.segment_tokens.push_back(static_cast<int32_t>(tokens));
            instance.segment_samples.push_back(i);
          }
        }
        if (!instance.segment_tokens.empty()) workload.instances.push_back(std::move(instance));
      }
      break;
    }
    case spec::ModuleKind::kMlpProjector: {
      const std::vector<int> encoders = internal::UpstreamEncoders(model, module);
      if (encoders.empty()) {
        return FailedPreconditionError(internal::ModuleLabel(model, module) +
                                       " is a projector with no vit/audio encoder upstream");
      }
      for (const auto& members : sequences) {
        for (int i : members) {
          const size_t first = workload.instances.size();
          for (int e : encoders) {
            WEFT_RETURN_IF_ERROR(internal::AppendEncoderInstances(
                model, model.modules[e], batch.samples[i], options, /*llm_view=*/true,
                workload.instances));
          }
          if (encoders.size() > 1) {  // items of several encoders do not share numbers
            for (size_t k = first; k < workload.instances.size(); ++k) workload.instances[k].item = -1;
          }
          for (size_t k = first; k < workload.instances.size(); ++k) {
            workload.instances[k].segment_samples = {i};
          }
        }
      }
      break;
    }
    default: {
      for (const auto& members : sequences) {
        for (int i : members) {
          const size_t first = workload.instances.size();
          WEFT_RETURN_IF_ERROR(internal::AppendEncoderInstances(
              model, spec_module, batch.samples[i], options, /*llm_view=*/false,
              workload.instances));
          for (size_t k = first; k < workload.instances.size(); ++k) {
            workload.instances[k].segment_samples = {i};
          }
        }
      }
      break;
    }
  }
  return workload;
}

}  // namespace weft::data
