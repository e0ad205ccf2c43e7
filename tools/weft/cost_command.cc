// `weft cost`: per-layer latency and memory of every module of a model on a cluster (thin over
// weft::cost), and `weft cost --validate DIR`: the model's error against measured GPU timings.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli_common.h"
#include "weft/common/text.h"
#include "weft/cost/cost_model.h"
#include "weft/cost/fit.h"
#include "weft/cost/validation.h"
#include "weft/spec/preset.h"

namespace weft::cli {
namespace {

constexpr int kMaxTp = 1024;
constexpr int64_t kMaxTokens = int64_t{1} << 24;  // analytic costs: larger is only slower

struct CostArgs {
  std::string model;
  std::string cluster;
  int tp = 1;
  bool sequence_parallel = false;
  int64_t tokens = 0;
  int images = -1;
  bool json = false;
  std::string validate_dir;
  std::string validate_table;
  double min_tokens = 512;
  std::string fit_dir;
  std::string out;
};

// Tokens through each module: --images N sends N fixed-resolution images through every ViT and
// N × (LLM tokens per image) + --tokens text through projectors / the LLM; other modules get
// --tokens as one sequence (audio encoders: one 30 s window).
StatusOr<cost::TokenShape> ShapeFor(const spec::ModelSpec& model, const spec::ModuleSpec& m,
                                    const CostArgs& args) {
  const int images = std::max(0, args.images);
  int64_t image_llm_tokens = 0;
  for (const spec::ModuleSpec& other : model.modules) {
    if (other.kind == spec::ModuleKind::kVit) {
      image_llm_tokens += static_cast<int64_t>(images) * other.FixedImageTokens();
    }
  }
  switch (m.kind) {
    case spec::ModuleKind::kVit: {
      if (images == 0) return cost::TokenShape{};
      const int side = m.patch_size > 0 ? m.image_size_px / m.patch_size : 0;
      return cost::TokenShape::Uniform(static_cast<int64_t>(side) * side, images);
    }
    case spec::ModuleKind::kMlpProjector:
      return image_llm_tokens > 0 ? cost::TokenShape::Uniform(image_llm_tokens / std::max(1, images), images)
                                  : cost::TokenShape{};
    case spec::ModuleKind::kLlm:
      return cost::TokenShape::Uniform(args.tokens + image_llm_tokens);
    case spec::ModuleKind::kAudioEncoder:
      return cost::TokenShape::Uniform(m.max_source_positions);
    case spec::ModuleKind::kDit:
      return cost::TokenShape::Uniform(args.tokens);
  }
  return cost::TokenShape{};
}

int RunValidate(const CostArgs& args) {
  StatusOr<std::vector<cost::ValidationPoint>> points = std::vector<cost::ValidationPoint>{};
  if (!args.validate_table.empty()) {
    if (args.cluster.empty()) {
      return ReportError(InvalidArgumentError("--validate-table needs --cluster"));
    }
    auto cluster = spec::LoadCluster(args.cluster);
    if (!cluster.ok()) return ReportError(cluster.status());
    points = cost::ValidateHarnessTable(args.validate_table, *cluster);
  } else {
    points = cost::ValidateAll(args.validate_dir, {}, args.min_tokens);
  }
  if (!points.ok()) return ReportError(points.status());
  const auto summary = cost::Summarize(*points);
  if (args.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& s : summary) {
      out.push_back({{"source", s.source},
                     {"gpu", s.gpu},
                     {"model", s.model},
                     {"op", s.op},
                     {"tokens", s.range},
                     {"points", s.count},
                     {"median_error", s.median_error},
                     {"p90_error", s.p90_error},
                     {"max_error", s.max_error},
                     {"median_signed_error", s.median_signed_error}});
    }
    std::cout << out.dump(2) << "\n";
  } else {
    std::cout << (args.validate_table.empty()
                      ? fmt::format("Model error vs measured timings (compute ops split at {} "
                                    "tokens; vidur (preset): the GPU's cluster preset, in-sample "
                                    "where it was fitted; vidur LOMO: efficiencies refitted "
                                    "without the model shown):\n\n",
                                    args.min_tokens)
                      : fmt::format("Model error on {} vs {}:\n\n", args.cluster,
                                    args.validate_table))
              << cost::SummaryMarkdown(summary);
  }
  return 0;
}

// The text of a cluster given by preset name or file path (what --out rewrites).
StatusOr<std::string> ClusterText(const std::string& name_or_path) {
  if (std::filesystem::is_regular_file(name_or_path)) {
    std::ifstream in(name_or_path, std::ios::binary);
    std::stringstream buffer;
    buffer << in.rdbuf();
    if (!in) return NotFoundError(fmt::format("{}: cannot read", name_or_path));
    return buffer.str();
  }
  return spec::PresetYaml(name_or_path);
}

// `weft cost --fit DIR --cluster NAME [--out FILE]`: fits the cluster's efficiencies to the
// vidur profiles of its GPU (the cluster's name: a40, a100, h100), prints them with the in-sample
// and leave-one-model-out error, and writes the preset with the fitted line to --out.
int RunFit(const CostArgs& args) {
  if (args.cluster.empty()) {
    return ReportError(InvalidArgumentError("--fit needs --cluster (a40, a100, h100, ...)"));
  }
  auto cluster = spec::LoadCluster(args.cluster);
  if (!cluster.ok()) return ReportError(cluster.status());
  // The output path is checked before the fit: a bad one fails now and writes nothing.
  if (!args.out.empty()) {
    if (Status s = CheckOutputFile(args.out, "--out"); !s.ok()) return ReportError(s);
  }
  auto all = cost::FindVidurProfiles(args.fit_dir);
  if (!all.ok()) return ReportError(all.status());
  const std::string gpu = cluster->name;
  const std::vector<cost::VidurProfile> profiles = cost::ProfilesOf(*all, gpu);
  if (profiles.empty()) {
    return ReportError(InvalidArgumentError(fmt::format(
        "--cluster {}: no vidur profile {}/vidur/compute_{}_*_mlp.csv to fit on (profiled GPUs: "
        "{})",
        args.cluster, args.fit_dir, gpu, fmt::join(cost::ProfiledGpus(*all), ", "))));
  }
  std::vector<cost::LoadedProfile> loaded;
  for (const cost::VidurProfile& p : profiles) {
    auto profile = cost::LoadVidurProfile(p);
    if (!profile.ok()) return ReportError(profile.status());
    loaded.push_back(*std::move(profile));
  }
  const cost::FitOptions fit_options{.min_tokens = args.min_tokens};
  auto fit = cost::FitEfficiency(loaded, *cluster, {}, fit_options);
  if (!fit.ok()) return ReportError(fit.status());
  spec::ClusterSpec fitted = *cluster;
  fitted.efficiency = fit->efficiency;
  // In-sample error, and leave-one-model-out where the GPU has >= 2 models.
  std::vector<cost::ValidationPoint> points;
  for (const cost::LoadedProfile& p : loaded) {
    auto before = cost::PredictProfile(p, *cluster, {}, "before (preset)", args.min_tokens);
    auto after = cost::PredictProfile(p, fitted, {}, "fitted, in-sample", args.min_tokens);
    points.insert(points.end(), before.begin(), before.end());
    points.insert(points.end(), after.begin(), after.end());
  }
  for (const cost::LomoFold& fold : cost::LeaveOneModelOutFolds(static_cast<int>(loaded.size()))) {
    std::vector<cost::LoadedProfile> fit_on;
    for (int i : fold.fit_on) fit_on.push_back(loaded[i]);
    auto fold_fit = cost::FitEfficiency(fit_on, *cluster, {}, fit_options);
    if (!fold_fit.ok()) return ReportError(fold_fit.status());
    spec::ClusterSpec refit = *cluster;
    refit.efficiency = fold_fit->efficiency;
    auto held = cost::PredictProfile(loaded[fold.held_out], refit, {}, "LOMO", args.min_tokens);
    points.insert(points.end(), held.begin(), held.end());
  }
  const auto summary = cost::Summarize(points);
  const std::string command =
      fmt::format("weft cost --fit {} --cluster {}", args.fit_dir, args.cluster);
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  const std::string date =
      fmt::format("{:04}-{:02}-{:02}", utc.tm_year + 1900, utc.tm_mon + 1, utc.tm_mday);
  if (!args.out.empty()) {
    auto text = ClusterText(args.cluster);
    if (!text.ok()) return ReportError(text.status());
    auto updated = cost::ApplyFitToPresetYaml(*text, *fit, command, date);
    if (!updated.ok()) return ReportError(updated.status().WithPrefix(args.cluster));
    // The written preset must parse back to the fitted efficiencies.
    auto check = spec::ParseClusterYaml(*updated, args.out);
    if (!check.ok()) return ReportError(check.status());
    if (check->efficiency != fit->efficiency) {
      return ReportError(
          InternalError(fmt::format("{}: written efficiencies do not read back", args.out)));
    }
    if (Status s = WriteFileAtomically(args.out, *updated); !s.ok()) return ReportError(s);
  }
  if (args.json) {
    nlohmann::json params = nlohmann::json::array();
    for (const auto& p : fit->parameters) {
      params.push_back({{"name", p.name},
                        {"ops", p.ops},
                        {"points", p.points},
                        {"before", p.before},
                        {"after", p.after},
                        {"at_bound", p.at_bound}});
    }
    nlohmann::json errors = nlohmann::json::array();
    for (const auto& s : summary) {
      errors.push_back({{"fit", s.source},
                        {"model", s.model},
                        {"op", s.op},
                        {"tokens", s.range},
                        {"points", s.count},
                        {"median_error", s.median_error},
                        {"p90_error", s.p90_error},
                        {"median_signed_error", s.median_signed_error}});
    }
    std::cout << nlohmann::json{{"cluster", args.cluster},
                                {"gpu", gpu},
                                {"files", fit->files},
                                {"min_tokens", args.min_tokens},
                                {"date", date},
                                {"efficiency",
                                 {{"compute", fit->efficiency.compute},
                                  {"memory", fit->efficiency.memory},
                                  {"network", fit->efficiency.network},
                                  {"residual", fit->efficiency.residual},
                                  {"embedding", fit->efficiency.embedding}}},
                                {"parameters", params},
                                {"errors", errors}}
                     .dump(2)
              << "\n";
    return 0;
  }
  std::cout << fmt::format("Fit of {} ({}) to {} vidur profile(s), tokens >= {}:\n  {}\n\n",
                           args.cluster, gpu, fit->files.size(), args.min_tokens,
                           fmt::join(fit->files, "\n  "))
            << fit->Report() << "\n"
            << fit->PresetLine() << "\n\n"
            << (loaded.size() < 2
                    ? "One model on this GPU: leave-one-model-out is impossible; the fitted "
                      "rows are in-sample.\n\n"
                    : "")
            << cost::SummaryMarkdown(summary)
            << (args.out.empty() ? "" : fmt::format("\nwrote {}\n", args.out));
  return 0;
}

int Run(const CostArgs& args) {
  if (!args.fit_dir.empty()) return RunFit(args);
  if (!args.out.empty()) return ReportError(InvalidArgumentError("--out needs --fit DIR"));
  if (!args.validate_dir.empty() || !args.validate_table.empty()) return RunValidate(args);
  if (args.model.empty()) {
    return ReportError(InvalidArgumentError("--model is required (or --validate DIR)"));
  }
  auto preset = spec::LoadModel(args.model);
  if (!preset.ok()) return ReportError(preset.status());
  // --cluster defaults to the model's setup cluster, as in compare / simulate / plan.
  std::string cluster_name =
      !args.cluster.empty() ? args.cluster : preset->setup ? preset->setup->cluster : "";
  if (cluster_name.empty()) {  // as planning::MakeJobSetup: stated, never silent
    cluster_name = "h100";
    std::cerr << "note: no cluster given and the model names none: h100 assumed (--cluster to "
                 "choose)\n";
  }
  auto cluster = spec::LoadCluster(cluster_name);
  if (!cluster.ok()) return ReportError(cluster.status());
  const spec::ModelSpec& model = preset->model;
  // --tp must divide the attention heads of every transformer module (no silent fallback).
  for (const spec::ModuleSpec& m : model.modules) {
    if (m.IsTransformer() && m.num_attention_heads % args.tp != 0) {
      std::string valid;
      for (int tp = 1; tp <= kMaxTp; ++tp) {
        bool divides = true;
        for (const spec::ModuleSpec& other : model.modules) {
          if (other.IsTransformer() && other.num_attention_heads % tp != 0) divides = false;
        }
        if (divides) valid += (valid.empty() ? "" : ", ") + std::to_string(tp);
      }
      return ReportError(InvalidArgumentError(fmt::format(
          "--tp: {} does not divide the {} attention heads of module {}; valid --tp for {}: {}",
          args.tp, m.num_attention_heads, m.name, model.name, valid)));
    }
  }
  CostArgs a = args;
  if (a.tokens == 0) {
    a.tokens = preset->setup && preset->setup->context_tokens > 0 ? preset->setup->context_tokens : 4096;
  }
  if (a.images < 0) a.images = 0;
  cost::CostModel cost_model(*cluster);
  nlohmann::json out = {{"model", model.name}, {"cluster", cluster->name}, {"tp", a.tp},
                        {"sequence_parallel", a.sequence_parallel}, {"modules", nlohmann::json::array()}};
  double total_fwd = 0, total_bwd = 0, total_state = 0, total_act = 0;
  std::string text;
  for (int mi = 0; mi < static_cast<int>(model.modules.size()); ++mi) {
    const spec::ModuleSpec& m = model.modules[mi];
    auto shape = ShapeFor(model, m, a);
    if (!shape.ok()) return ReportError(shape.status());
    if (shape->tokens == 0) {
      text += fmt::format("\n{} ({}): no tokens for this workload\n", m.name, spec::ModuleKindName(m.kind));
      continue;
    }
    spec::ModuleParallel par{.module = m.name, .tp = a.tp, .sequence_parallel = a.sequence_parallel};
    auto mode = cost::BackwardModeOf(model, mi);
    if (!mode.ok()) return ReportError(mode.status());
    text += fmt::format("\n{} ({}, {} layers, tp {}, {} tokens, backward {})\n", m.name,
                        spec::ModuleKindName(m.kind), m.num_layers, par.tp, shape->tokens,
                        cost::BackwardModeName(*mode));
    text += fmt::format("{:>6} {:>10} {:>10} {:>10} {:>11} {:>11} {:>11} {:>11}\n", "layer",
                        "fwd_ms", "bwd_in_ms", "bwd_w_ms", "act_MiB", "act_sel_MiB",
                        "act_full_MiB", "state_MiB");
    nlohmann::json layers = nlohmann::json::array();
    cost::CostTotals module_total;
    for (int layer = 0; layer < m.num_layers; ++layer) {
      auto lc = cost_model.Layer(model, mi, layer, *shape, par);
      if (!lc.ok()) return ReportError(lc.status().WithPrefix(fmt::format("module {}", m.name)));
      module_total.Accumulate(*lc);
      const bool print = layer < 2 || layer == m.num_layers - 1;
      if (print || a.json) {
        nlohmann::json row = {{"layer", layer}, {"forward_s", lc->forward_s},
                              {"backward_input_s", lc->backward_input_s},
                              {"backward_weight_s", lc->backward_weight_s},
                              {"forward_flops", lc->forward_flops},
                              {"activation_bytes", {{"none", lc->activation_bytes[0]},
                                                    {"selective", lc->activation_bytes[1]},
                                                    {"full", lc->activation_bytes[2]},
                                                    {"offload", lc->activation_bytes[3]}}},
                              {"state_bytes", lc->StateBytes()}, {"parameters", lc->parameters}};
        layers.push_back(row);
      }
      if (print) {
        text += fmt::format("{:>6} {:>10.3f} {:>10.3f} {:>10.3f} {:>11.1f} {:>11.1f} {:>11.1f} {:>11.1f}\n",
                            layer, lc->forward_s * 1e3, lc->backward_input_s * 1e3,
                            lc->backward_weight_s * 1e3, lc->activation_bytes[0] / 1048576.0,
                            lc->activation_bytes[1] / 1048576.0, lc->activation_bytes[2] / 1048576.0,
                            lc->StateBytes() / 1048576.0);
      } else if (layer == 2 && m.num_layers > 3) {
        text += fmt::format("{:>6}\n", "...");
      }
    }
    text += fmt::format("{:>6} {:>10.3f} {:>10.3f} {:>10.3f} {:>11.1f} {:>11.1f} {:>11.1f} {:>11.1f}\n",
                        "total", module_total.forward_s * 1e3, module_total.backward_input_s * 1e3,
                        module_total.backward_weight_s * 1e3,
                        module_total.activation_bytes[0] / 1048576.0,
                        module_total.activation_bytes[1] / 1048576.0,
                        module_total.activation_bytes[2] / 1048576.0,
                        module_total.StateBytes() / 1048576.0);
    total_fwd += module_total.forward_s;
    total_bwd += module_total.BackwardS(spec::Recompute::kNone);
    total_state += module_total.StateBytes();
    total_act += module_total.activation_bytes[0];
    out["modules"].push_back({{"name", m.name},
                              {"kind", spec::ModuleKindName(m.kind)},
                              {"tp", par.tp},
                              {"tokens", shape->tokens},
                              {"backward", cost::BackwardModeName(*mode)},
                              {"layers", layers},
                              {"total",
                               {{"forward_s", module_total.forward_s},
                                {"backward_s", module_total.BackwardS(spec::Recompute::kNone)},
                                {"forward_flops", module_total.forward_flops},
                                {"activation_bytes", module_total.activation_bytes[0]},
                                {"state_bytes", module_total.StateBytes()}}}});
  }
  out["total"] = {{"forward_s", total_fwd}, {"backward_s", total_bwd},
                  {"state_bytes", total_state}, {"activation_bytes", total_act}};
  if (a.json) {
    std::cout << out.dump(2) << "\n";
  } else {
    std::cout << fmt::format("{} on {} (one TP rank, all layers on one device, no recompute)\n",
                             model.name, cluster->name)
              << text
              << fmt::format("\nTOTAL fwd {:.3f} ms, bwd {:.3f} ms, state {:.2f} GiB, activations {:.2f} GiB\n",
                             total_fwd * 1e3, total_bwd * 1e3, total_state / 1073741824.0,
                             total_act / 1073741824.0);
  }
  return 0;
}

}  // namespace

void RegisterCostCommand(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<CostArgs>();
  CLI::App* cmd = app.add_subcommand(
      "cost",
      "Per-layer latency (fwd, bwd-input, bwd-weight) and memory (activations per recompute "
      "strategy, parameter+gradient+optimizer state) of every module on one TP rank.\n\n"
      "Examples:\n  weft cost --model vlm-s --cluster h800 --tp 2 --images 4 --tokens 1024\n"
      "  weft cost --model tiny-vlm            # cluster: the model's setup cluster\n"
      "  weft cost --model llama3-8b --cluster h100 --tokens 8192 --json\n"
      "  weft cost --validate ../shared/data/gpu_timings   # error table vs measured timings\n"
      "  weft cost --fit ../shared/data/gpu_timings --cluster a40 --out presets/clusters/a40.yaml");
  cmd->add_option("--model", args->model,
                  "model preset name, YAML/JSON spec, Hugging Face config.json or a "
                  "checkpoint directory holding one")
      ->check(ModelInputCheck());
  cmd->add_option("--cluster", args->cluster,
                  "cluster preset name or YAML/JSON file (default: the model's setup cluster)")
      ->check(InputFileCheck(kMaxSpecFileBytes));
  AddNumberOption(cmd, "--tp", args->tp, 1, kMaxTp,
                  "tensor-parallel size; must divide every transformer module's attention heads")
      ->capture_default_str();
  cmd->add_flag("--sp", args->sequence_parallel, "Megatron sequence parallelism");
  AddNumberOption(cmd, "--tokens", args->tokens, int64_t{0}, kMaxTokens,
                  "text tokens for the LLM; DiT tokens", "0 = the preset's context, else 4096");
  AddNumberOption(cmd, "--images", args->images, 0, 65536,
                  "images at the model's fixed resolution through the vision encoder");
  cmd->add_flag("--json", args->json, "machine-readable output");
  cmd->add_option("--validate", args->validate_dir,
                  "print the model's error vs the gpu_timings directory instead");
  cmd->add_option("--validate-table", args->validate_table,
                  "print the model's error on --cluster vs a bench/gpu_harness.py CSV instead")
      ->check(InputFileCheck(kMaxDataFileBytes));
  cmd->add_option("--fit", args->fit_dir,
                  "fit --cluster's efficiencies to the vidur profiles of its GPU in this "
                  "gpu_timings directory and print them (docs/cost_model.md)");
  cmd->add_option("--out", args->out, "--fit: write the cluster preset with the fitted line here");
  AddNumberOption(cmd, "--min-tokens", args->min_tokens, 0.0, static_cast<double>(kMaxTokens),
                  "--validate: compute points split at this token count (< and >=); --fit: "
                  "smallest token count fitted")
      ->capture_default_str();
  cmd->callback([args, &exit_code] { exit_code = Run(*args); });
}

}  // namespace weft::cli
