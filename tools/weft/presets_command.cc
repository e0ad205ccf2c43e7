// `weft presets [list]` and `weft presets show NAME`: the built-in models and clusters
// (thin over weft::spec).
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "weft/data/generators.h"
#include "weft/spec/preset.h"
#include "weft/strategy/strategy.h"

namespace weft::cli {
namespace {

struct ListArgs {
  bool json = false;
  std::string kind;  // "", "models", "clusters"
};

struct ShowArgs {
  std::string name;
  bool expanded = false;
};

std::string FormatParams(int64_t params) {
  if (params >= 1'000'000'000) return fmt::format("{:.2f}B", params / 1e9);
  if (params >= 1'000'000) return fmt::format("{:.1f}M", params / 1e6);
  if (params >= 1'000) return fmt::format("{:.1f}K", params / 1e3);
  return fmt::format("{}", params);
}

// One line per data generator profile (docs/data.md has the sources of the numbers).
std::string DataProfileDescription(std::string_view profile) {
  static const std::pair<std::string_view, std::string_view> kDescriptions[] = {
      {"laion", "1 web image per sample, short captions (LAION-2B)"},
      {"obelics", "interleaved web documents, ~2.5 images and ~816 text tokens each (OBELICS)"},
      {"coco-llava", "1 COCO-sized image with ~359 instruction tokens (LLaVA-Instruct)"},
      {"video", "short and long captioned clips (InternVid, ShareGPT4Video)"},
      {"audio", "speech utterances and 10 s clips (LibriSpeech, AudioCaps)"},
      {"mixed", "single-image, multi-image and video SFT mix (LLaVA-OneVision-like)"},
      {"rise-and-fall", "one document per sequence, image count rising then falling (DIP 7.1)"},
      {"cornstarch", "1000 text tokens + one 1280x720 image + one 30 s audio clip (Cornstarch)"},
      {"dflop-mixed", "DFLOP Table 2: LLaVA-Wild, AI2D, InfoVQA, M4-Instruct, LLaVA-Video-178K"},
  };
  for (const auto& [name, description] : kDescriptions) {
    if (name == profile) return std::string(description);
  }
  return "see docs/data.md";
}

int RunListOther(const ListArgs& args) {
  std::vector<std::pair<std::string, std::string>> rows;
  if (args.kind == "strategies") {
    rows = StrategyDescriptions();
  } else {
    for (auto p : data::GeneratorProfileNames()) {
      rows.emplace_back(std::string(p), DataProfileDescription(p));
    }
  }
  if (args.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& [name, d] : rows) out.push_back({{"name", name}, {"description", d}});
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  size_t width = 4;
  for (const auto& row : rows) width = std::max(width, row.first.size());
  std::cout << fmt::format("{:<{}}  {}\n", "NAME", width, "DESCRIPTION");
  for (const auto& [name, d] : rows) std::cout << fmt::format("{:<{}}  {}\n", name, width, d);
  return 0;
}

int RunList(const ListArgs& args) {
  if (args.kind == "strategies" || args.kind == "data") return RunListOther(args);
  const std::vector<spec::PresetInfo> presets = spec::ListPresets();
  auto wanted = [&](const spec::PresetInfo& p) {
    if (args.kind.empty()) return true;
    return (args.kind == "models") == (p.kind == spec::PresetKind::kModel);
  };
  if (args.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const spec::PresetInfo& p : presets) {
      if (!wanted(p)) continue;
      nlohmann::json entry = {{"kind", spec::PresetKindName(p.kind)},
                              {"name", p.name},
                              {"description", p.description}};
      if (p.kind == spec::PresetKind::kModel) entry["parameters"] = p.parameter_count;
      if (p.kind == spec::PresetKind::kCluster) entry["gpus"] = p.total_gpus;
      out.push_back(std::move(entry));
    }
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  size_t width = 4;
  for (const spec::PresetInfo& p : presets) width = std::max(width, p.name.size());
  std::cout << fmt::format("{:<8} {:<{}} {:>9}  {}\n", "KIND", "NAME", width, "PARAMS",
                           "DESCRIPTION");
  for (const spec::PresetInfo& p : presets) {
    if (!wanted(p)) continue;
    const std::string size = p.kind == spec::PresetKind::kModel
                                 ? FormatParams(p.parameter_count)
                                 : fmt::format("{} GPUs", p.total_gpus);
    std::cout << fmt::format("{:<8} {:<{}} {:>9}  {}\n", spec::PresetKindName(p.kind), p.name,
                             width, size, p.description);
  }
  return 0;
}

int RunShow(const ShowArgs& args) {
  if (!args.expanded) {
    StatusOr<std::string> yaml = spec::PresetYaml(args.name);
    if (!yaml.ok()) return ReportError(yaml.status());
    std::cout << *yaml;
    return 0;
  }
  // Expanded: `use:` references resolved, every field written out.
  if (StatusOr<spec::ModelPreset> model = spec::LoadModel(args.name); model.ok()) {
    std::cout << spec::ModelToYaml(*model);
    return 0;
  } else if (model.status().code() != StatusCode::kNotFound) {
    return ReportError(model.status());
  }
  StatusOr<spec::ClusterSpec> cluster = spec::LoadCluster(args.name);
  if (cluster.ok()) {
    std::cout << spec::ClusterToYaml(*cluster);
    return 0;
  }
  if (cluster.status().code() == StatusCode::kNotFound) {
    // One message for both kinds, with the closest name over all presets.
    return ReportError(spec::PresetYaml(args.name).status());
  }
  return ReportError(cluster.status());
}

}  // namespace

void RegisterPresetsCommand(CLI::App& app, int& exit_code) {
  CLI::App* presets = app.add_subcommand(
      "presets",
      "List the built-in model and cluster presets, or print one as YAML; --kind strategies\n"
      "and --kind data list the strategies and the data profiles.\n\n"
      "Examples:\n  weft presets\n  weft presets --json --kind models\n"
      "  weft presets --kind strategies\n  weft presets --kind data\n"
      "  weft presets show vlm-s\n  weft presets show vlm-s --expanded > my-vlm.yaml\n");
  auto list_args = std::make_shared<ListArgs>();
  presets->add_flag("--json", list_args->json, "machine-readable list");
  presets->add_option("--kind", list_args->kind,
                      "only this kind: models, clusters, strategies (with one line each) or data "
                      "(the --data generator profiles)")
      ->check(CLI::IsMember({"models", "clusters", "strategies", "data"}));

  auto show_args = std::make_shared<ShowArgs>();
  CLI::App* show = presets->add_subcommand(
      "show",
      "Print a preset's YAML (the schema is in docs/spec.md).\n\n"
      "Examples:\n  weft presets show h800\n  weft presets show cs-valm-mm --expanded\n");
  show->add_option("name", show_args->name, "preset name")->required();
  show->add_flag("--expanded", show_args->expanded,
                 "resolve `use:` references; write every field that differs from its kind default (parses back to the same spec)");
  show->callback([show_args, &exit_code] { exit_code = RunShow(*show_args); });

  presets->callback([presets, list_args, &exit_code] {
    if (presets->get_subcommands().empty()) exit_code = RunList(*list_args);
  });
}

}  // namespace weft::cli
