#pragma once
// ModelSpec: what is trained. A DAG of modules (encoders, projectors, backbone, decoders), each
// with its architecture and a frozen flag. Value types; no shared state.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "weft/common/status.h"

namespace weft::spec {

enum class ModuleKind {
  kVit,           // vision transformer encoder (patch embedding + bidirectional layers)
  kLlm,           // decoder-only language model (embedding + causal layers + LM head)
  kDit,           // diffusion transformer video/image decoder (latent patches, full attention)
  kAudioEncoder,  // Whisper-style encoder (mel frames -> conv downsample -> layers)
  kMlpProjector,  // connector between an encoder and the backbone (1..n linear layers)
};
std::string_view ModuleKindName(
    ModuleKind kind);  // "vit", "llm", "dit", "audio_encoder", "mlp_projector"
StatusOr<ModuleKind> ParseModuleKind(std::string_view name);

enum class Activation { kGelu, kSilu, kRelu, kQuickGelu };
std::string_view ActivationName(Activation a);
StatusOr<Activation> ParseActivation(std::string_view name);

// Which modality a module consumes; decides how a Sample's metadata turns into its workload.
enum class Modality { kText, kImage, kVideo, kAudio };
std::string_view ModalityName(Modality m);
StatusOr<Modality> ParseModality(std::string_view name);

// How images are resized before patching (ViT). kFixed: resized to image_size_px square (CLIP,
// EVA, SigLIP, DIP's 728 px). kNative: kept at native size, each side rounded to a multiple of
// patch_size * spatial_merge and the area capped at max_pixels (Qwen2-VL style). The tile rules
// cut an image into image_size_px tiles, each its own ViT pass (docs/data.md, docs/spec.md):
// kAnyRes: LLaVA-OneVision's AnyRes, the grid chosen from grid_pinpoints by best fit, plus the
// base image, LLM features capped at anyres_max_tiles tiles' worth; kTiles: InternVL's dynamic
// tiles, the grid of min_tiles..max_tiles closest to the image's aspect ratio, plus a thumbnail.
// Video frames under a tile rule are one image_size_px crop each.
enum class ResizeRule { kFixed, kNative, kAnyRes, kTiles };
std::string_view ResizeRuleName(ResizeRule rule);  // "fixed", "native", "anyres", "tiles"
StatusOr<ResizeRule> ParseResizeRule(std::string_view name);

// Most tiles one image may be cut into under a tile rule (grid_pinpoints, max_tiles).
inline constexpr int kMaxTilesPerImage = 1024;

// One AnyRes candidate resolution (LLaVA's image_grid_pinpoints entry), pixels.
struct GridPinpoint {
  int height_px = 0;
  int width_px = 0;
  bool operator==(const GridPinpoint&) const = default;
};

struct ModuleSpec {
  std::string name;  // unique within the model, e.g. "vision", "llm", "projector"
  ModuleKind kind = ModuleKind::kLlm;
  Modality modality = Modality::kText;  // input modality (encoders: image/video/audio)
  bool frozen = false;                  // no weight gradients / optimizer state

  // Transformer shape (unused for kMlpProjector except hidden_size / ffn_hidden_size).
  int num_layers = 0;
  int hidden_size = 0;
  int ffn_hidden_size = 0;
  int num_attention_heads = 0;
  int num_kv_groups = 0;   // GQA query groups; == num_attention_heads means MHA
  bool gated_mlp = false;  // SwiGLU-style (3 matrices) vs 2-matrix MLP
  Activation activation = Activation::kGelu;
  bool causal_attention = false;  // llm: true; encoders / dit: false
  bool qkv_bias = false;
  bool rms_norm = false;                // RMSNorm (1 vector) vs LayerNorm (2 vectors)
  int head_dim = 0;                     // per-head width; 0 = hidden_size / num_attention_heads
                                        // (Qwen3: 128 with hidden 5120 and 64 heads)
  bool linear_bias = false;             // biases on every linear (GPT, ViT, Whisper, DiT); qkv_bias
                                        // alone covers Qwen-style q/k/v-only biases
  bool qk_norm = false;                 // per-head norm on q and k (ViT-22B, InternViT, Qwen3)
  int learned_position_embeddings = 0;  // rows of a learned absolute position table
                                        // (GPT-3: 2048; 0 = RoPE / sinusoidal / none)

  // Text (kLlm).
  int vocab_size = 0;
  bool tied_embeddings = false;

  // Vision (kVit, kDit): patching.
  int patch_size = 0;     // pixels (vit) or latent cells (dit) per patch side
  int spatial_merge = 1;  // tokens merged per side before the backbone (4 => 16:1)
  int image_size_px = 0;  // kFixed resize target (square)
  ResizeRule resize_rule = ResizeRule::kFixed;
  int64_t max_pixels = 0;  // kNative area cap (0 = none)
  int in_channels = 3;     // image channels (vit) or latent channels (dit)
  int temporal_patch = 1;  // frames per patch in time (video vit / dit)
  // Tile rules (kAnyRes / kTiles); tiles are image_size_px squares.
  std::vector<GridPinpoint> grid_pinpoints;  // kAnyRes candidates (multiples of image_size_px)
  int anyres_max_tiles = 0;  // kAnyRes: LLM features kept <= this many tiles' worth (0 = all)
  int min_tiles = 1;         // kTiles: tile-grid sizes considered, min_tiles..max_tiles
  int max_tiles = 1;
  bool thumbnail = false;  // kTiles: + one whole-image tile when the grid has > 1 tile
  // Window attention (Qwen2.5-VL ViT): layers not listed in full_attention_layers attend within
  // attention_window_px x attention_window_px windows of the resized image (0 = every layer
  // attends to the whole image). Must be a multiple of patch_size * spatial_merge.
  int attention_window_px = 0;
  std::vector<int> full_attention_layers;  // 0-based layer indexes, increasing

  // Video decoder (kDit): VAE compression from pixels/frames to latents.
  int vae_spatial_downsample = 8;
  int vae_temporal_downsample = 4;
  int text_condition_hidden = 0;  // cross-attention context width (0 = no cross-attention)
  bool shared_adaln = false;      // adaLN-single (PixArt-α, MovieGen): one 6·h×h modulation
                                  // MLP for all layers + a 6·h table per layer, instead of
                                  // a 6·h×h modulation per layer (DiT paper)

  // Audio (kAudioEncoder).
  int mel_bins = 80;
  int frames_per_second = 100;      // mel frames per second of audio
  int conv_downsample = 2;          // frames per encoder token
  int max_source_positions = 1500;  // Whisper: 30 s window
  int output_pool = 1;              // encoder positions averaged into one output token after
                                    // the layers (Qwen2-Audio: 2, 50 -> 25 tokens/s)

  // Projector (kMlpProjector): input_size -> ffn_hidden_size -> output_size with num_layers
  // linear layers (1 or 2; 1 = a single input_size x output_size linear). hidden_size is the
  // output width (== output_size) so that "hidden_size" is the width of every module's output.
  int input_size = 0;
  int output_size = 0;

  // Derived (implemented in src/spec/model.cc).
  int64_t ParametersPerLayer() const;  // one transformer layer (or one projector linear)
  int64_t EmbeddingParameters()
      const;                       // patch/token embedding, position tables, LM head, final norm
  int64_t ParameterCount() const;  // whole module
  int HeadDim() const {
    if (head_dim > 0) return head_dim;
    return num_attention_heads > 0 ? hidden_size / num_attention_heads : 0;
  }
  bool IsTransformer() const { return kind != ModuleKind::kMlpProjector; }
  bool IsEncoder() const { return kind == ModuleKind::kVit || kind == ModuleKind::kAudioEncoder; }
  // Tokens one fixed-size image becomes at the module's output (kVit with kFixed resize):
  // (image_size_px / patch_size / spatial_merge)^2, e.g. 728 px, patch 14, merge 4 -> 169.
  int FixedImageTokens() const;
  // Encoder tokens for `seconds` of audio (kAudioEncoder), capped at max_source_positions.
  int AudioTokens(double seconds) const;
  // Window attention: true when layer `layer` attends within windows (attention_window_px > 0
  // and the layer is not in full_attention_layers).
  bool WindowedLayer(int layer) const;
  // Patches in one full attention window ((attention_window_px / patch_size)^2; 0 = none).
  int64_t WindowPatches() const;
  bool operator==(const ModuleSpec&) const = default;
  // "modules[i]" is prepended by ModelSpec::Validate; field paths here start at the field name.
  Status Validate() const;
  Status ValidateTiling() const;   // part of Validate (vit): the tile-rule fields
  Status ValidateWindows() const;  // part of Validate (vit): the window-attention fields
};

struct ModuleEdge {
  std::string from;  // producer module name
  std::string to;    // consumer module name
  bool operator==(const ModuleEdge&) const = default;
};

struct ModelSpec {
  std::string name;  // preset name or file stem
  std::string description;
  std::vector<ModuleSpec> modules;
  std::vector<ModuleEdge> edges;  // data flow; must form a DAG over `modules`

  // Index of a module by name, or nullopt.
  std::optional<int> FindModule(std::string_view module_name) const;
  // Modules in a topological order of `edges` (ties broken by declaration order).
  // Requires Validate().ok().
  std::vector<int> TopologicalOrder() const;
  std::vector<int> Predecessors(int module) const;
  std::vector<int> Successors(int module) const;
  // True if some module upstream of `module` (transitively) is trainable: then a frozen module
  // still needs an input-gradient backward (Cornstarch's frozen-status rule).
  bool HasTrainableUpstream(int module) const;
  int64_t ParameterCount() const;
  // Parameters of modules with frozen == false.
  int64_t TrainableParameterCount() const;
  bool operator==(const ModelSpec&) const = default;
  // Stops at the first problem: "modules[1].num_kv_groups = 3; must divide num_attention_heads
  // (32)".
  Status Validate() const;
  // Part of Validate: every module reaches an llm or dit module (when there is one), and every
  // projector has an encoder upstream.
  Status CheckDataFlow() const;
};

}  // namespace weft::spec
