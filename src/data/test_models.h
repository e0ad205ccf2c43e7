#pragma once
// Hand-built ModelSpecs for the data module's tests (independent of the preset files).
#include "weft/spec/model.h"

namespace weft::data::testing {

// DIP's VLM setting: ViT at 728 px fixed, patch 14, merge 4 -> projector -> LLM.
inline spec::ModelSpec DipVlm() {
  spec::ModelSpec model;
  model.name = "test-vlm";
  spec::ModuleSpec vit;
  vit.name = "vision";
  vit.kind = spec::ModuleKind::kVit;
  vit.modality = spec::Modality::kImage;
  vit.num_layers = 2;
  vit.hidden_size = 64;
  vit.patch_size = 14;
  vit.spatial_merge = 4;
  vit.image_size_px = 728;
  vit.resize_rule = spec::ResizeRule::kFixed;
  spec::ModuleSpec proj;
  proj.name = "projector";
  proj.kind = spec::ModuleKind::kMlpProjector;
  proj.modality = spec::Modality::kImage;
  spec::ModuleSpec llm;
  llm.name = "llm";
  llm.kind = spec::ModuleKind::kLlm;
  llm.modality = spec::Modality::kText;
  model.modules = {vit, proj, llm};
  model.edges = {{"vision", "projector"}, {"projector", "llm"}};
  return model;
}

// Qwen2-VL-like native-resolution ViT (patch 14, merge 2, temporal patch 2, area cap).
inline spec::ModuleSpec NativeVit(int64_t max_pixels = 0) {
  spec::ModuleSpec vit;
  vit.name = "vision";
  vit.kind = spec::ModuleKind::kVit;
  vit.modality = spec::Modality::kImage;
  vit.patch_size = 14;
  vit.spatial_merge = 2;
  vit.image_size_px = 448;
  vit.resize_rule = spec::ResizeRule::kNative;
  vit.max_pixels = max_pixels;
  vit.temporal_patch = 2;
  return vit;
}

// LLaVA-OneVision's SigLIP: 384 px crops of 14 px patches (27 x 27 = 729 tokens), AnyRes over
// the published 36 pinpoints (384..2304 px per side), anyres_max_9.
inline spec::ModuleSpec AnyResVit() {
  spec::ModuleSpec vit;
  vit.name = "vision";
  vit.kind = spec::ModuleKind::kVit;
  vit.modality = spec::Modality::kImage;
  vit.patch_size = 14;
  vit.image_size_px = 384;
  vit.resize_rule = spec::ResizeRule::kAnyRes;
  for (int rows = 1; rows <= 6; ++rows) {
    for (int cols = 1; cols <= 6; ++cols) vit.grid_pinpoints.push_back({384 * rows, 384 * cols});
  }
  vit.anyres_max_tiles = 9;
  return vit;
}

// InternVL 2.5's InternViT: 448 px tiles of 14 px patches, pixel shuffle 0.5 (2 x 2 merge:
// 256 tokens a tile), 1..12 dynamic tiles + a thumbnail.
inline spec::ModuleSpec DynamicTileVit() {
  spec::ModuleSpec vit;
  vit.name = "vision";
  vit.kind = spec::ModuleKind::kVit;
  vit.modality = spec::Modality::kImage;
  vit.patch_size = 14;
  vit.spatial_merge = 2;
  vit.image_size_px = 448;
  vit.resize_rule = spec::ResizeRule::kTiles;
  vit.min_tiles = 1;
  vit.max_tiles = 12;
  vit.thumbnail = true;
  return vit;
}

inline spec::ModuleSpec Whisper() {
  spec::ModuleSpec audio;
  audio.name = "audio";
  audio.kind = spec::ModuleKind::kAudioEncoder;
  audio.modality = spec::Modality::kAudio;
  audio.frames_per_second = 100;
  audio.conv_downsample = 2;
  audio.max_source_positions = 1500;
  return audio;
}

// Cornstarch-style: vision and audio encoders, each with a projector, into one LLM.
inline spec::ModelSpec VisionAudioLlm() {
  spec::ModelSpec model = DipVlm();
  model.name = "test-val";
  model.modules.push_back(Whisper());
  spec::ModuleSpec aproj;
  aproj.name = "audio_projector";
  aproj.kind = spec::ModuleKind::kMlpProjector;
  aproj.modality = spec::Modality::kAudio;
  model.modules.push_back(aproj);
  model.edges.push_back({"audio", "audio_projector"});
  model.edges.push_back({"audio_projector", "llm"});
  return model;
}

// Text-to-video: text encoder LLM -> DiT (latent patches 2x2, VAE 8x spatial, 4x temporal).
inline spec::ModelSpec T2v() {
  spec::ModelSpec model;
  model.name = "test-t2v";
  spec::ModuleSpec text;
  text.name = "text";
  text.kind = spec::ModuleKind::kLlm;
  text.modality = spec::Modality::kText;
  spec::ModuleSpec dit;
  dit.name = "dit";
  dit.kind = spec::ModuleKind::kDit;
  dit.modality = spec::Modality::kVideo;
  dit.patch_size = 2;
  dit.vae_spatial_downsample = 8;
  dit.vae_temporal_downsample = 4;
  dit.temporal_patch = 1;
  dit.image_size_px = 256;
  model.modules = {text, dit};
  model.edges = {{"text", "dit"}};
  return model;
}

}  // namespace weft::data::testing
