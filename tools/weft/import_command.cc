// `weft import hf CONFIG [--out model.yaml] [--json]`: a Hugging Face config.json (or the
// checkpoint directory holding it) as weft YAML, with the source of every derived value as a
// comment, and a per-module summary (thin over weft::spec::LoadHfConfig).
#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_common.h"
#include "weft/spec/hf_config.h"

namespace weft::cli {
namespace {

struct ImportArgs {
  std::string config;
  std::string out;
  bool json = false;
  std::vector<std::string> freeze;
  int64_t max_pixels = 0;
  std::string name;
};

std::string Params(int64_t params) {
  if (params >= 1'000'000'000) return fmt::format("{:.3f}B", params / 1e9);
  if (params >= 1'000'000) return fmt::format("{:.2f}M", params / 1e6);
  return fmt::format("{}", params);
}

std::string OrDash(int value) { return value > 0 ? std::to_string(value) : "-"; }

nlohmann::json ModuleJson(const spec::ModuleSpec& m) {
  nlohmann::json j = {{"name", m.name},
                      {"kind", spec::ModuleKindName(m.kind)},
                      {"layers", m.num_layers},
                      {"hidden_size", m.hidden_size},
                      {"ffn_hidden_size", m.ffn_hidden_size},
                      {"params", m.ParameterCount()},
                      {"frozen", m.frozen}};
  if (m.IsTransformer()) {
    j["heads"] = m.num_attention_heads;
    j["kv_heads"] = m.num_kv_groups;
    j["head_dim"] = m.HeadDim();
  } else {
    j["input_size"] = m.input_size;
    j["output_size"] = m.output_size;
  }
  if (m.kind == spec::ModuleKind::kLlm) j["vocab_size"] = m.vocab_size;
  return j;
}

int RunImportHf(const ImportArgs& args) {
  if (!args.out.empty()) {
    if (Status s = CheckOutputFile(args.out, "--out"); !s.ok()) return ReportError(s);
  }
  spec::HfImportOptions options;
  options.freeze = args.freeze;
  options.max_pixels = args.max_pixels;
  options.name = args.name;
  StatusOr<spec::HfImport> imported = spec::LoadHfConfig(args.config, options);
  if (!imported.ok()) return ReportError(imported.status());
  const spec::ModelSpec& model = imported->preset.model;
  if (!args.out.empty()) {
    if (Status s = WriteFileAtomically(args.out, spec::HfImportToYaml(*imported)); !s.ok()) {
      return ReportError(s);
    }
  }
  // The YAML on stdout leaves the summary to stderr.
  std::ostream& summary = args.out == "-" ? std::cerr : std::cout;
  if (args.json) {
    nlohmann::json out = {{"model", model.name},
                          {"model_type", imported->model_type},
                          {"source", args.config},
                          {"modules", nlohmann::json::array()},
                          {"total_params", model.ParameterCount()},
                          {"notes", imported->notes}};
    for (const spec::ModuleSpec& m : model.modules) out["modules"].push_back(ModuleJson(m));
    if (!args.out.empty()) out["out"] = args.out;
    summary << out.dump(2) << "\n";
    return 0;
  }
  summary << fmt::format("{} (model_type {}) from {}\n", model.name, imported->model_type,
                         args.config);
  summary << fmt::format("{:<16} {:<14} {:>6} {:>7} {:>7} {:>6} {:>4} {:>8} {:>10}\n", "MODULE",
                         "KIND", "LAYERS", "HIDDEN", "FFN", "HEADS", "KV", "VOCAB", "PARAMS");
  for (const spec::ModuleSpec& m : model.modules) {
    const bool t = m.IsTransformer();
    summary << fmt::format("{:<16} {:<14} {:>6} {:>7} {:>7} {:>6} {:>4} {:>8} {:>10}{}\n", m.name,
                           spec::ModuleKindName(m.kind), m.num_layers, m.hidden_size,
                           OrDash(m.ffn_hidden_size), t ? OrDash(m.num_attention_heads) : "-",
                           t ? OrDash(m.num_kv_groups) : "-", OrDash(m.vocab_size),
                           Params(m.ParameterCount()), m.frozen ? "  frozen" : "");
  }
  summary << fmt::format("{:<16} {:>74}\n", "total", Params(model.ParameterCount()));
  for (const std::string& note : imported->notes) summary << "note: " << note << "\n";
  if (!args.out.empty() && args.out != "-") summary << "wrote " << args.out << "\n";
  return 0;
}

}  // namespace

void RegisterImportCommand(CLI::App& app, int& exit_code) {
  CLI::App* import =
      app.add_subcommand("import", "Import a model from another tool's format (docs/spec.md).");
  import->require_subcommand(1);
  auto args = std::make_shared<ImportArgs>();
  CLI::App* hf = import->add_subcommand(
      "hf",
      "A Hugging Face config.json (or the checkpoint directory holding it) as a weft model:\n"
      "prints per module the layers, widths, heads and parameters; --out writes the YAML with\n"
      "the config field behind every value. Any --model flag also takes the config directly.\n\n"
      "Examples:\n  weft import hf Qwen2.5-VL-7B-Instruct/config.json\n"
      "  weft import hf ./llava-onevision-qwen2-7b-ov-hf --out llava-ov-7b.yaml --freeze vision\n"
      "  weft import hf config.json --json\n");
  hf->add_option("config", args->config, "config.json or a directory holding one")
      ->required()
      ->check(ModelInputCheck());
  hf->add_option("--out", args->out, "write the weft YAML here (- = stdout)");
  hf->add_flag("--json", args->json, "the summary as JSON (keys modules, total_params)");
  hf->add_option("--freeze", args->freeze,
                 "module to mark frozen (repeatable): vision, projector, llm, audio, ...");
  AddNumberOption(hf, "--max-pixels", args->max_pixels, int64_t{0}, int64_t{1} << 28,
                  "Qwen2-VL image area cap in pixels",
                  "0 = preprocessor_config.json beside the config, else the processor default");
  hf->add_option("--name", args->name, "model name (default: the config's directory name)");
  hf->callback([args, &exit_code] { exit_code = RunImportHf(*args); });
}

}  // namespace weft::cli
