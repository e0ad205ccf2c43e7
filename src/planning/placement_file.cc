#include "weft/planning/placement_file.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "weft/common/strict_input.h"
#include "weft/common/text.h"
#include "weft/sched/generators.h"
#include "weft/spec/preset.h"
#include "weft/planning/iteration.h"
#include "weft/planning/graph_builder.h"
#include "weft/planning/mimo_config.h"

namespace weft::planning {
namespace {

constexpr int kMaxGpus = 1 << 20;

class Reader {
 public:
  explicit Reader(std::string_view source) : source_(source) {}

  Status Bad(std::string_view field, std::string_view rule) const {
    return InvalidArgumentError(fmt::format("{}: {}{}", source_, field, rule));
  }

  // A map whose keys are all in `known`.
  Status CheckKeys(const YAML::Node& node, std::string_view path,
                   const std::vector<std::string>& known) const {
    return CheckMapKeys(node, source_, path, known);
  }

  StatusOr<int> Int(const YAML::Node& node, std::string_view path, int min_value,
                    int max_value) const {
    return ReadBoundedInt(node, source_, path, min_value, max_value);
  }

 private:
  std::string source_;
};

// True when `ancestor` feeds `module` through the model's edges.
bool Feeds(const spec::ModelSpec& model, int ancestor, int module) {
  std::vector<int> stack = model.Predecessors(module);
  std::set<int> seen;
  while (!stack.empty()) {
    const int m = stack.back();
    stack.pop_back();
    if (m == ancestor) return true;
    if (!seen.insert(m).second) continue;
    for (int p : model.Predecessors(m)) stack.push_back(p);
  }
  return false;
}

}  // namespace

static StatusOr<PlacementSpec> ParsePlacementYamlImpl(std::string_view text,
                                                      std::string_view source,
                                                      const spec::ModelSpec& model,
                                                      const spec::ClusterSpec& cluster) {
  Reader rd(source);
  StatusOr<YAML::Node> loaded = LoadStrictYaml(text, source);
  if (!loaded.ok()) {
    // Every placement error starts "SOURCE: "; the strict reader's "SOURCE:LINE:COL: rule"
    // becomes "SOURCE: line LINE, column COL: rule".
    const std::string m = loaded.status().message();
    int line = 0, column = 0, used = 0;
    const std::string rest = m.substr(std::min(m.size(), source.size() + 1));
    if (m.rfind(std::string(source) + ":", 0) == 0 &&
        std::sscanf(rest.c_str(), "%d:%d: %n", &line, &column, &used) == 2 && used > 0) {
      return InvalidArgumentError(
          fmt::format("{}: line {}, column {}: {}", source, line, column, rest.substr(used)));
    }
    return loaded.status();
  }
  const YAML::Node root = *std::move(loaded);
  WEFT_RETURN_IF_ERROR(rd.CheckKeys(root, "(top level)", {"placement"}));
  const YAML::Node p = root["placement"];
  WEFT_RETURN_IF_ERROR(rd.CheckKeys(p, "placement", {"schedule", "microbatches", "modules"}));
  PlacementSpec out;
  out.source = std::string(source);
  if (p["schedule"]) {
    const std::string name = p["schedule"].as<std::string>("");
    const std::string canonical = name == "interleaved" ? "interleaved-1f1b" : name;
    auto kind = sched::ParseScheduleKind(canonical);
    if (!kind.ok()) {
      return rd.Bad("placement.schedule",
                    fmt::format(" = '{}'; must be one of 1f1b, gpipe, interleaved, zb-h1",
                                name.substr(0, 40)));
    }
    out.schedule = *kind;
  }
  if (p["microbatches"]) {
    WEFT_ASSIGN_OR_RETURN(out.num_microbatches,
                          rd.Int(p["microbatches"], "placement.microbatches", 1, 1 << 16));
  }
  const YAML::Node mods = p["modules"];
  if (!mods || !mods.IsMap()) {
    return rd.Bad("placement.modules", " must be a map from module name to its placement");
  }
  std::map<std::string, ModulePlacement> given;
  for (const auto& kv : mods) {
    const std::string name = kv.first.as<std::string>("");
    const std::string path = "placement.modules." + name;
    if (!model.FindModule(name)) {
      std::vector<std::string> names;
      for (const auto& m : model.modules) names.push_back(m.name);
      return rd.Bad(path, fmt::format(" is not a module of model '{}' (modules: {})",
                                      model.name, fmt::join(names, ", ")));
    }
    if (given.count(name)) return rd.Bad(path, " appears twice");
    const YAML::Node n = kv.second;
    WEFT_RETURN_IF_ERROR(rd.CheckKeys(
        n, path, {"tp", "cp", "dp", "pp", "virtual", "layers", "first_gpu", "on"}));
    ModulePlacement mp;
    mp.module = name;
    if (n["on"]) {
      for (const char* key : {"tp", "cp", "dp", "pp", "virtual", "layers", "first_gpu"}) {
        if (n[key]) {
          return rd.Bad(path + "." + key,
                        fmt::format(" is given with `on`; a module on another's groups takes "
                                    "the host's groups, TP, CP and DP and is one chunk"));
        }
      }
      mp.on = n["on"].as<std::string>("");
      given[name] = mp;
      continue;
    }
    if (n["tp"]) {
      WEFT_ASSIGN_OR_RETURN(mp.tp, rd.Int(n["tp"], path + ".tp", 1, 1024));
    }
    if (n["cp"]) {
      WEFT_ASSIGN_OR_RETURN(mp.cp, rd.Int(n["cp"], path + ".cp", 1, 1024));
    }
    if (n["dp"]) {
      WEFT_ASSIGN_OR_RETURN(mp.dp, rd.Int(n["dp"], path + ".dp", 1, kMaxGpus));
    }
    if (n["virtual"]) {
      WEFT_ASSIGN_OR_RETURN(mp.virtual_stages, rd.Int(n["virtual"], path + ".virtual", 1, 64));
    }
    if (!n["first_gpu"]) {
      return rd.Bad(path + ".first_gpu", " is missing; give the module's first GPU or `on`");
    }
    WEFT_ASSIGN_OR_RETURN(mp.first_gpu,
                          rd.Int(n["first_gpu"], path + ".first_gpu", 0, kMaxGpus));
    const int num_layers = model.modules[*model.FindModule(name)].num_layers;
    if (n["layers"]) {
      if (!n["layers"].IsSequence() || n["layers"].size() == 0) {
        return rd.Bad(path + ".layers", " must be a non-empty list of layer counts per stage");
      }
      int sum = 0;
      for (size_t k = 0; k < n["layers"].size(); ++k) {
        WEFT_ASSIGN_OR_RETURN(
            int l, rd.Int(n["layers"][k], fmt::format("{}.layers[{}]", path, k), 1, 1 << 20));
        mp.layers.push_back(l);
        sum += l;
      }
      if (sum != num_layers) {
        return rd.Bad(path + ".layers", fmt::format(" sums to {}; module '{}' has {} layers "
                                                    "(the stages must tile them)",
                                                    sum, name, num_layers));
      }
      if (n["pp"]) {
        WEFT_ASSIGN_OR_RETURN(int pp, rd.Int(n["pp"], path + ".pp", 1, 1 << 12));
        if (pp * mp.virtual_stages != static_cast<int>(mp.layers.size())) {
          return rd.Bad(path + ".layers",
                        fmt::format(" has {} entries; pp ({}) × virtual ({}) chunks need {}",
                                    mp.layers.size(), pp, mp.virtual_stages,
                                    pp * mp.virtual_stages));
        }
      } else if (mp.layers.size() % mp.virtual_stages != 0) {
        return rd.Bad(path + ".layers",
                      fmt::format(" has {} entries; must be a multiple of virtual ({})",
                                  mp.layers.size(), mp.virtual_stages));
      }
    } else {
      int pp = 1;
      if (n["pp"]) {
      WEFT_ASSIGN_OR_RETURN(pp, rd.Int(n["pp"], path + ".pp", 1, 1 << 12));
    }
      const int parts = pp * mp.virtual_stages;
      if (parts > num_layers) {
        return rd.Bad(path + ".pp", fmt::format(" × virtual = {} chunks; module '{}' has only {} "
                                                "layers",
                                                parts, name, num_layers));
      }
      for (int k = 0; k < parts; ++k) {
        mp.layers.push_back(num_layers / parts + (k < num_layers % parts ? 1 : 0));
      }
    }
    given[name] = mp;
  }
  for (const auto& m : model.modules) {
    auto it = given.find(m.name);
    if (it == given.end()) {
      return rd.Bad("placement.modules", fmt::format(" does not place module '{}'; every module "
                                                     "needs its GPUs or `on: <module>`",
                                                     m.name));
    }
    out.modules.push_back(it->second);
  }
  // Hosts: exist, are not hosted themselves; a hosted module takes the host's sizes.
  for (ModulePlacement& mp : out.modules) {
    if (mp.on.empty()) continue;
    const std::string path = "placement.modules." + mp.module + ".on";
    auto host = given.find(mp.on);
    if (host == given.end() || mp.on == mp.module) {
      return rd.Bad(path, fmt::format(" = '{}'; must name another module of the placement",
                                      mp.on.substr(0, 40)));
    }
    if (!host->second.on.empty()) {
      return rd.Bad(path, fmt::format(" = '{}', which is itself `on` '{}'; name a module with "
                                      "groups of its own",
                                      mp.on, host->second.on));
    }
    const int num_layers = model.modules[*model.FindModule(mp.module)].num_layers;
    mp.tp = host->second.tp;
    mp.cp = host->second.cp;
    mp.dp = host->second.dp;
    mp.layers = {num_layers};
  }
  // GPUs: inside the cluster, groups inside a node, modules do not overlap.
  const int gpus_per_node = cluster.gpus_per_node;
  std::vector<std::pair<std::pair<int, int>, std::string>> ranges;
  for (const ModulePlacement& mp : out.modules) {
    if (!mp.on.empty()) continue;
    const std::string path = "placement.modules." + mp.module;
    const int width = mp.tp * mp.cp;
    if (gpus_per_node > 0 && width > gpus_per_node) {
      return rd.Bad(path + ".tp", fmt::format(" × cp = {} GPUs per group; a node has {} (TP "
                                              "and CP stay inside a node)",
                                              width, gpus_per_node));
    }
    if (gpus_per_node > 0 && mp.first_gpu % width != 0 && gpus_per_node % width == 0) {
      return rd.Bad(path + ".first_gpu",
                    fmt::format(" = {}; must be a multiple of tp × cp ({}) so that no group "
                                "straddles a node",
                                mp.first_gpu, width));
    }
    const int64_t end = int64_t{mp.first_gpu} + int64_t{mp.PipelineSize()} * mp.dp * width;
    if (end > cluster.TotalGpus()) {
      return rd.Bad(path, fmt::format(": GPUs [{}, {}) (pp {} × dp {} × tp·cp {}) exceed the "
                                      "cluster's {} GPUs",
                                      mp.first_gpu, end, mp.PipelineSize(), mp.dp, width,
                                      cluster.TotalGpus()));
    }
    if (gpus_per_node > 0 && gpus_per_node % width != 0) {
      // Groups of a width that does not divide the node: check each group.
      for (int64_t g0 = mp.first_gpu; g0 < end; g0 += width) {
        if (g0 / gpus_per_node != (g0 + width - 1) / gpus_per_node) {
          return rd.Bad(path + ".tp", fmt::format(": the group at GPU {} straddles two nodes "
                                                  "({} GPUs per node)",
                                                  g0, gpus_per_node));
        }
      }
    }
    for (const auto& [range, other] : ranges) {
      if (mp.first_gpu < range.second && range.first < end) {
        return rd.Bad(path, fmt::format(": GPUs [{}, {}) overlap module '{}' GPUs [{}, {})",
                                        mp.first_gpu, end, other, range.first, range.second));
      }
    }
    ranges.push_back({{mp.first_gpu, static_cast<int>(end)}, mp.module});
  }
  // TP / CP / DP sizes against the model (heads divisible, ...), through ParallelConfig.
  spec::ParallelConfig parallel;
  for (const ModulePlacement& mp : out.modules) {
    parallel.modules.push_back(
        {.module = mp.module, .tp = mp.tp, .pp = mp.PipelineSize(), .dp = mp.dp, .cp = mp.cp});
  }
  if (Status s = parallel.Validate(model); !s.ok()) {
    // Name the placement's field: "parallel.modules[2].tp" -> "placement.modules.llm.tp".
    std::string m(s.message());
    for (size_t k = 0; k < out.modules.size(); ++k) {
      const std::string from = fmt::format("parallel.modules[{}]", k);
      if (auto at = m.find(from); at != std::string::npos) {
        m.replace(at, from.size(), "placement.modules." + out.modules[k].module);
      }
    }
    return InvalidArgumentError(fmt::format("{}: {}", source, m));
  }
  return out;
}

// Every error leaving the reader is one safe line (OneLineStatus: no raw input bytes).
StatusOr<PlacementSpec> ParsePlacementYaml(std::string_view text, std::string_view source,
                                           const spec::ModelSpec& model,
                                           const spec::ClusterSpec& cluster) {
  auto result = ParsePlacementYamlImpl(text, source, model, cluster);
  if (!result.ok()) return OneLineStatus(result.status());
  return result;
}

StatusOr<PlacementSpec> ReadPlacementFile(const std::string& path, const spec::ModelSpec& model,
                                          const spec::ClusterSpec& cluster) {
  WEFT_RETURN_IF_ERROR(CheckInputFile(path, spec::kMaxSpecFileBytes, "placement file"));
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError(fmt::format("cannot open placement file {}", QuoteForMessage(path)));
  std::stringstream text;
  text << in.rdbuf();
  // A Megatron MIMO parallelism config (module_parallelisms: ...) is a placement too.
  if (LooksLikeMimoConfig(text.str())) return ReadMimoConfigYaml(text.str(), path, model, cluster);
  return ParsePlacementYaml(text.str(), path, model, cluster);
}

StatusOr<Placement> BuildPlacement(const PlacementSpec& given, const spec::ModelSpec& model,
                                   const spec::ClusterSpec& cluster,
                                   const cost::CostModel& cost_model) {
  const int n = static_cast<int>(model.modules.size());
  if (static_cast<int>(given.modules.size()) != n) {
    return InvalidArgumentError("placement spec has " + std::to_string(given.modules.size()) +
                                " modules; the model has " + std::to_string(n));
  }
  // A hosted module takes its host's TP, CP and DP (one copy on every host replica), whoever
  // built the spec (the file reader does the same; strategies build specs in code).
  PlacementSpec spec = given;
  for (ModulePlacement& mp : spec.modules) {
    if (mp.on.empty()) continue;
    for (const ModulePlacement& host : given.modules) {
      if (host.module == mp.module || host.module != mp.on || !host.on.empty()) continue;
      mp.tp = host.tp, mp.cp = host.cp, mp.dp = host.dp;
    }
  }
  Placement placement;
  placement.unfolded = true;
  // Groups of modules with GPUs of their own: [module][stage][replica] -> group id.
  std::vector<std::vector<std::vector<graph::GroupId>>> group_of(n);
  for (int m = 0; m < n; ++m) {
    const ModulePlacement& mp = spec.modules[m];
    placement.parallel.push_back({.module = mp.module,
                                  .tp = mp.tp,
                                  .pp = mp.PipelineSize(),
                                  .dp = mp.dp,
                                  .cp = mp.cp});
    if (!mp.on.empty()) continue;
    const int width = mp.tp * mp.cp;
    group_of[m].assign(mp.PipelineSize(), std::vector<graph::GroupId>(mp.dp));
    for (int s = 0; s < mp.PipelineSize(); ++s) {
      for (int r = 0; r < mp.dp; ++r) {
        graph::DeviceGroup g;
        g.first_gpu = mp.first_gpu + (s * mp.dp + r) * width;
        g.num_gpus = width;
        g.dp = 1;
        g.label = mp.dp > 1 ? fmt::format("{}/r{}/pp{}", mp.module, r, s)
                            : fmt::format("{}/pp{}", mp.module, s);
        group_of[m][s][r] = static_cast<graph::GroupId>(placement.groups.size());
        placement.groups.push_back(g);
      }
    }
  }
  for (int m = 0; m < n; ++m) {
    const ModulePlacement& mp = spec.modules[m];
    if (mp.on.empty()) {
      const int pp = mp.PipelineSize();
      for (int r = 0; r < mp.dp; ++r) {
        int first = 0;
        for (int k = 0; k < static_cast<int>(mp.layers.size()); ++k) {
          placement.chunks.push_back({.module = m,
                                      .first_layer = first,
                                      .num_layers = mp.layers[k],
                                      .group = group_of[m][k % pp][r],
                                      .replica = r});
          first += mp.layers[k];
        }
      }
      continue;
    }
    const int host = *model.FindModule(mp.on);
    const bool after_host = Feeds(model, host, m);
    const int stage = after_host ? spec.modules[host].PipelineSize() - 1 : 0;
    for (int r = 0; r < mp.dp; ++r) {
      placement.chunks.push_back({.module = m,
                                  .first_layer = 0,
                                  .num_layers = model.modules[m].num_layers,
                                  .group = group_of[host][stage][r],
                                  .replica = r});
    }
  }
  // Chunk slots per group in data-flow order: the model's topological order, then layers.
  std::vector<int> topo_rank(n);
  const auto order = model.TopologicalOrder();
  for (int k = 0; k < static_cast<int>(order.size()); ++k) topo_rank[order[k]] = k;
  std::vector<std::vector<int>> by_group(placement.groups.size());
  for (int c = 0; c < static_cast<int>(placement.chunks.size()); ++c) {
    by_group[placement.chunks[c].group].push_back(c);
  }
  for (auto& ids : by_group) {
    std::sort(ids.begin(), ids.end(), [&](int a, int b) {
      const Chunk& x = placement.chunks[a];
      const Chunk& y = placement.chunks[b];
      return std::tie(topo_rank[x.module], x.first_layer) <
             std::tie(topo_rank[y.module], y.first_layer);
    });
    for (int k = 0; k < static_cast<int>(ids.size()); ++k) placement.chunks[ids[k]].chunk = k;
  }
  WEFT_RETURN_IF_ERROR(FillGroupStateBytes(model, cost_model, placement));
  WEFT_RETURN_IF_ERROR(placement.Validate(model));
  return placement;
}

std::string PlacementSpecToYaml(const PlacementSpec& spec, std::string_view header) {
  std::string out;
  if (!header.empty()) {
    size_t start = 0;
    while (start <= header.size()) {
      const size_t end = header.find('\n', start);
      const std::string_view line =
          header.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
      out += fmt::format("# {}\n", line);
      if (end == std::string_view::npos) break;
      start = end + 1;
    }
  }
  const std::string_view schedule = spec.schedule == sched::ScheduleKind::kInterleavedOneFOneB
                                        ? "interleaved"
                                        : sched::ScheduleKindName(spec.schedule);
  out += fmt::format("placement:\n  schedule: {}\n", schedule);
  if (spec.num_microbatches > 0) out += fmt::format("  microbatches: {}\n", spec.num_microbatches);
  out += "  modules:\n";
  for (const ModulePlacement& m : spec.modules) {
    if (!m.on.empty()) {
      out += fmt::format("    {}: {{on: {}}}\n", m.module, m.on);
      continue;
    }
    out += fmt::format("    {}: {{tp: {}, cp: {}, dp: {}", m.module, m.tp, m.cp, m.dp);
    if (m.virtual_stages > 1) out += fmt::format(", virtual: {}", m.virtual_stages);
    out += fmt::format(", layers: [{}], first_gpu: {}}}\n", fmt::join(m.layers, ", "), m.first_gpu);
  }
  return out;
}

}  // namespace weft::planning
