// `weft cp`: token distribution over context-parallel ranks for a multimodal attention mask
// (Cornstarch §4.3): per method, each rank's key-block work, the imbalance and the attention time
// the cost model predicts per rank (thin over weft::cp and weft::cost).
#include <algorithm>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "weft/cost/cp_attention.h"
#include "weft/cp/distribution.h"
#include "weft/cp/mask.h"
#include "weft/spec/preset.h"

namespace weft::cli {
namespace {

struct CpArgs {
  int64_t tokens = 0;
  std::string mask;
  std::string layout_file;
  int ranks = 0;
  std::string methods = "lpt,zigzag,ring,random";
  std::string json_file;
  uint64_t seed = 0;
  int block_tokens = cp::kDefaultBlockTokens;
  int modality_segments = 8;
  std::string model = "llama3-70b";
  std::string module = "llm";
  std::string cluster = "a40";
  int tp = 1;
};

StatusOr<cp::Layout> LoadLayout(const CpArgs& a) {
  if (!a.layout_file.empty()) {
    std::ifstream in(a.layout_file);
    if (!in) return NotFoundError(fmt::format("--layout {}: cannot open the file", a.layout_file));
    std::stringstream text;
    text << in.rdbuf();
    auto layout = cp::ParseLayoutJson(text.str());
    if (!layout.ok()) return layout.status().WithPrefix(a.layout_file);
    return layout;
  }
  if (a.tokens <= 0) {
    return InvalidArgumentError(fmt::format("--tokens = {}; must be > 0", a.tokens));
  }
  WEFT_ASSIGN_OR_RETURN(cp::MaskKind kind, cp::ParseMaskKind(a.mask));
  return cp::MakeLayout(kind, {.tokens = a.tokens,
                               .modality_segments = a.modality_segments,
                               .seed = a.seed});
}

int Run(const CpArgs& a) {
  if (a.mask.empty() == a.layout_file.empty()) {
    return ReportError(InvalidArgumentError("give exactly one of --mask EP|EE|MP and --layout FILE"));
  }
  if (a.ranks < 1) {
    return ReportError(InvalidArgumentError(fmt::format("--ranks = {}; must be >= 1", a.ranks)));
  }
  if (!a.json_file.empty()) {
    if (Status s = CheckOutputFile(a.json_file, "--json"); !s.ok()) return ReportError(s);
  }
  auto methods = cp::ParseMethods(a.methods);
  if (!methods.ok()) return ReportError(methods.status().WithPrefix("--method"));
  auto layout = LoadLayout(a);
  if (!layout.ok()) return ReportError(layout.status());
  auto workloads = cp::ComputeBlockWorkloads(*layout, a.block_tokens);
  if (!workloads.ok()) return ReportError(workloads.status());
  if (a.ranks > workloads->Blocks()) {
    return ReportError(InvalidArgumentError(fmt::format(
        "--ranks = {}; must be <= blocks ({} of {} tokens): every rank needs a block", a.ranks,
        workloads->Blocks(), a.block_tokens)));
  }
  auto preset = spec::LoadModel(a.model);
  if (!preset.ok()) return ReportError(preset.status());
  auto module_index = preset->model.FindModule(a.module);
  if (!module_index) {
    return ReportError(NotFoundError(
        fmt::format("--module = \"{}\"; not a module of model {}", a.module, a.model)));
  }
  const spec::ModuleSpec& module = preset->model.modules[*module_index];
  auto cluster = spec::LoadCluster(a.cluster);
  if (!cluster.ok()) return ReportError(cluster.status());

  const std::string source = a.layout_file.empty() ? a.mask : a.layout_file;
  nlohmann::json out = {
      {"layout", {{"source", source}, {"tokens", layout->Tokens()},
                  {"segments", layout->segments.size()}, {"documents", layout->Documents()},
                  {"seed", a.seed}}},
      {"block_tokens", a.block_tokens}, {"blocks", workloads->Blocks()}, {"ranks", a.ranks},
      {"model", preset->model.name}, {"module", module.name}, {"cluster", cluster->name},
      {"tp", a.tp}, {"methods", nlohmann::json::array()}};
  std::string text = fmt::format(
      "{}: {}; {} blocks of {} tokens over {} ranks\nattention of one {} {} layer on {} (tp {})\n",
      source, layout->BriefReport(), workloads->Blocks(), a.block_tokens, a.ranks,
      preset->model.name, module.name, cluster->name, a.tp);
  for (cp::Method method : *methods) {
    auto d = cp::Distribute(workloads->key_blocks,
                            {.ranks = a.ranks, .method = method, .seed = a.seed});
    if (!d.ok()) return ReportError(d.status());
    auto times = cost::CpAttentionForward(module, *workloads, *d, a.tp, *cluster);
    if (!times.ok()) return ReportError(times.status());
    const double worst_s =
        *std::max_element(times->rank_forward_s.begin(), times->rank_forward_s.end());
    text += fmt::format(
        "\n{}: imbalance {:.3f}, worst rank {:.3f} ms (balanced {:.3f} ms), K/V all-gather "
        "{:.3f} ms\n{:>6} {:>8} {:>12} {:>10}\n",
        cp::MethodName(method), d->Imbalance(), worst_s * 1e3, times->balanced_forward_s * 1e3,
        times->kv_all_gather_s * 1e3, "rank", "blocks", "key_blocks", "attn_ms");
    nlohmann::json ranks = nlohmann::json::array();
    for (int r = 0; r < a.ranks; ++r) {
      text += fmt::format("{:>6} {:>8} {:>12} {:>10.3f}\n", r, d->blocks_of_rank[r].size(),
                          d->load_of_rank[r], times->rank_forward_s[r] * 1e3);
      ranks.push_back({{"rank", r}, {"blocks", d->blocks_of_rank[r]},
                       {"key_blocks", d->load_of_rank[r]},
                       {"attention_forward_s", times->rank_forward_s[r]}});
    }
    out["methods"].push_back({{"method", cp::MethodName(method)},
                              {"imbalance", d->Imbalance()},
                              {"max_key_blocks", d->MaxLoad()},
                              {"mean_key_blocks", d->MeanLoad()},
                              {"worst_attention_forward_s", worst_s},
                              {"balanced_attention_forward_s", times->balanced_forward_s},
                              {"kv_all_gather_s", times->kv_all_gather_s},
                              {"ranks", ranks}});
  }
  if (!a.json_file.empty()) {
    if (Status s = WriteFileAtomically(a.json_file, out.dump(2) + "\n"); !s.ok()) {
      return ReportError(s);
    }
  }
  if (a.json_file != "-") std::cout << text;
  return 0;
}

}  // namespace

void RegisterCpCommand(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<CpArgs>();
  CLI::App* cmd = app.add_subcommand(
      "cp",
      "Context-parallel token distribution for a multimodal attention mask (Cornstarch BAM): "
      "per method, each rank's key-block work, the imbalance (max/mean) and the predicted "
      "attention time per rank.\n\n"
      "Examples:\n  weft cp --tokens 65536 --mask EE --ranks 8\n"
      "  weft cp --layout layout.json --ranks 4 --method lpt,zigzag --json out.json\n"
      "  (layout.json: [[\"text\", 1000], [1, 576], [\"text\", 200], [2, 1500], [\"text\", 800]])");
  AddNumberOption(cmd, "--tokens", args->tokens, int64_t{0}, cp::kMaxLayoutTokens,
                  "sequence length for --mask");
  cmd->add_option("--mask", args->mask,
                  "EP (encoder outputs prepended), EE (embedded) or MP (multimodal packing)");
  cmd->add_option("--layout", args->layout_file,
                  "explicit layout: JSON list of [kind, length], kind \"text\" or a modality index "
                  "1..61; or {\"documents\": [list, ...]} for packed samples")
      ->check(InputFileCheck(kMaxSpecFileBytes));
  AddNumberOption(cmd, "--ranks", args->ranks, 1, 4096, "context-parallel ranks G")->required();
  cmd->add_option("--method", args->methods, "comma list of lpt, zigzag, ring, random")
      ->capture_default_str();
  cmd->add_option("--json", args->json_file, "write per-rank block lists and loads to FILE (- = stdout)");
  AddNumberOption(cmd, "--seed", args->seed, uint64_t{0}, ~uint64_t{0},
                  "layout and random-distribution seed")
      ->capture_default_str();
  AddNumberOption(cmd, "--block-tokens", args->block_tokens, 1, 1 << 20, "tokens per block")
      ->capture_default_str();
  AddNumberOption(cmd, "--segments", args->modality_segments, 1, 4096,
                  "EE: modality segments in the text")
      ->capture_default_str();
  cmd->add_option("--model", args->model, "model preset whose layer prices the attention")
      ->capture_default_str();
  cmd->add_option("--module", args->module, "module of --model")->capture_default_str();
  cmd->add_option("--cluster", args->cluster, "cluster preset")->capture_default_str();
  AddNumberOption(cmd, "--tp", args->tp, 1, 1024, "tensor-parallel size (heads per rank)")
      ->capture_default_str();
  cmd->callback([args, &exit_code] { exit_code = Run(*args); });
}

}  // namespace weft::cli
