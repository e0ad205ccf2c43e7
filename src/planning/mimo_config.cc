#include "weft/planning/mimo_config.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <tuple>

#include "weft/data/workload.h"
#include "weft/spec/parallel.h"
#include "weft/common/strict_input.h"

namespace weft::planning {
namespace {

constexpr int kMaxRanks = 1 << 20;
constexpr const char* kLanguageKey = "llm";
constexpr const char* kLanguageKeyCore = "language";  // Megatron Core's MIMO_LANGUAGE_MODULE_KEY
const std::vector<std::string> kModuleFields = {
    "tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size",
    "expert_tensor_parallel_size", "data_parallel_size", "rank_offset"};

Status Bad(std::string_view source, std::string_view what) {
  return InvalidArgumentError(fmt::format("{}: {}", source, what));
}

bool IsLanguageKey(std::string_view name) {
  return name == kLanguageKey || name == kLanguageKeyCore;
}

std::string Field(const MimoModuleParallelism& m, std::string_view field) {
  return fmt::format("module_parallelisms.{}.{}", m.name, field);
}

StatusOr<int> ReadInt(const YAML::Node& node, std::string_view source, std::string_view path,
                      int min_value) {
  return ReadBoundedInt(node, source, path, min_value, kMaxRanks);
}

Status CheckKeys(const YAML::Node& node, std::string_view source, std::string_view path,
                 const std::vector<std::string>& known) {
  return CheckMapKeys(node, source, path, known);
}

std::string ModuleNames(const spec::ModelSpec& model) {
  std::vector<std::string> names;
  for (const auto& m : model.modules) names.push_back(m.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

// The named module an unnamed module `m` belongs to: the nearest named module that feeds it,
// else the nearest one it feeds. -1 with `why` set when there is none or it is ambiguous.
int HostOf(const spec::ModelSpec& model, int m, const std::set<int>& named, std::string* why) {
  for (bool up : {true, false}) {
    std::set<int> seen = {m};
    std::vector<int> frontier = {m};
    while (!frontier.empty()) {
      std::vector<int> next;
      std::set<int> hits;
      for (int x : frontier) {
        for (int y : up ? model.Predecessors(x) : model.Successors(x)) {
          if (!seen.insert(y).second) continue;
          if (named.count(y)) {
            hits.insert(y);
          } else {
            next.push_back(y);
          }
        }
      }
      if (hits.size() == 1) return *hits.begin();
      if (hits.size() > 1) {
        std::vector<std::string> names;
        for (int h : hits) names.push_back(model.modules[h].name);
        *why = fmt::format("is {} both {}; name it in module_parallelisms",
                           up ? "fed by" : "feeding", fmt::join(names, " and "));
        return -1;
      }
      frontier = std::move(next);
    }
  }
  *why = "is not named and no named module feeds it or takes its output; name it (or map it "
         "with `modules:`)";
  return -1;
}

std::vector<int> EvenLayers(int num_layers, int parts) {
  std::vector<int> layers;
  for (int k = 0; k < parts; ++k) {
    layers.push_back(num_layers / parts + (k < num_layers % parts ? 1 : 0));
  }
  return layers;
}

bool IsPowerOfTwo(int n) { return n > 0 && (n & (n - 1)) == 0; }

}  // namespace

int MimoLanguageModule(const spec::ModelSpec& model) {
  const int llm = data::FirstLlmModule(model);
  if (llm >= 0) return llm;
  const auto order = model.TopologicalOrder();
  return order.empty() ? -1 : order.back();
}

bool LooksLikeMimoConfig(std::string_view text) {
  // A file that is not strict YAML is not a MIMO config; the placement reader then refuses it with
  // the same LoadStrictYaml error.
  try {
    const StatusOr<YAML::Node> root = LoadStrictYaml(text, "");
    return root.ok() && root->IsMap() && (*root)["module_parallelisms"];
  } catch (const YAML::Exception&) {
    return false;
  }
}

static StatusOr<MimoConfig> ParseMimoConfigYamlImpl(std::string_view text,
                                                    std::string_view source,
                                                    const spec::ModelSpec& model) {
  WEFT_ASSIGN_OR_RETURN(const YAML::Node root, LoadStrictYaml(text, source));
  WEFT_RETURN_IF_ERROR(CheckKeys(root, source, "(top level)",
                                 {"module_parallelisms", "modules", "special_token_ids"}));
  const YAML::Node mods = root["module_parallelisms"];
  if (!mods.IsMap() || mods.size() == 0) {
    return Bad(source, "module_parallelisms must be a non-empty map from module name to its "
                       "parallelism");
  }
  if (root["special_token_ids"] && !root["special_token_ids"].IsMap()) {
    return Bad(source, "special_token_ids must be a map (weft ignores it)");
  }
  // `modules:` mapping: config name -> model module.
  std::map<std::string, std::string> mapping;
  if (const YAML::Node map = root["modules"]) {
    if (!map.IsMap()) return Bad(source, "modules must be a map from config name to module");
    for (const auto& kv : map) {
      const std::string key = kv.first.as<std::string>("");
      const std::string value = kv.second.IsScalar() ? kv.second.Scalar() : "";
      if (!mods[key]) {
        return Bad(source, fmt::format("modules.{} is not a module of module_parallelisms", key));
      }
      if (!model.FindModule(value)) {
        return Bad(source, fmt::format("modules.{} = '{}' is not a module of model '{}' "
                                       "(modules: {})",
                                       key, value.substr(0, 40), model.name, ModuleNames(model)));
      }
      if (!mapping.emplace(key, value).second) {
        return Bad(source, fmt::format("modules.{} appears twice", key));
      }
    }
  }
  MimoConfig out;
  out.source = std::string(source);
  std::map<std::string, std::string> taken;  // model module -> config name
  for (const auto& kv : mods) {
    MimoModuleParallelism m;
    m.name = kv.first.as<std::string>("");
    const std::string path = "module_parallelisms." + m.name;
    if (std::any_of(out.modules.begin(), out.modules.end(),
                    [&](const auto& o) { return o.name == m.name; })) {
      return Bad(source, fmt::format("{} appears twice; keys must be unique", path));
    }
    const YAML::Node n = kv.second;
    WEFT_RETURN_IF_ERROR(CheckKeys(n, source, path, kModuleFields));
    auto size = [&](const char* key, int* value) -> Status {
      if (!n[key]) return OkStatus();
      WEFT_ASSIGN_OR_RETURN(*value, ReadInt(n[key], source, path + "." + key, 1));
      return OkStatus();
    };
    WEFT_RETURN_IF_ERROR(size("tensor_model_parallel_size", &m.tp));
    WEFT_RETURN_IF_ERROR(size("pipeline_model_parallel_size", &m.pp));
    WEFT_RETURN_IF_ERROR(size("context_parallel_size", &m.cp));
    int etp = 1;
    WEFT_RETURN_IF_ERROR(size("expert_tensor_parallel_size", &etp));
    if (etp != 1) {
      return Bad(source, fmt::format("{}.expert_tensor_parallel_size = {}; must be 1 (weft's "
                                     "models have no experts)",
                                     path, etp));
    }
    if (n["data_parallel_size"] && !n["data_parallel_size"].IsNull()) {
      WEFT_ASSIGN_OR_RETURN(m.dp, ReadInt(n["data_parallel_size"], source,
                                          path + ".data_parallel_size", 1));
    }
    if (n["rank_offset"]) {
      WEFT_ASSIGN_OR_RETURN(m.rank_offset,
                            ReadInt(n["rank_offset"], source, path + ".rank_offset", 0));
    }
    if (auto it = mapping.find(m.name); it != mapping.end()) {
      m.module = it->second;
    } else if (IsLanguageKey(m.name)) {
      const int lm = MimoLanguageModule(model);
      if (lm < 0) return Bad(source, fmt::format("{}: model '{}' has no modules", path, model.name));
      m.module = model.modules[lm].name;
    } else if (model.FindModule(m.name)) {
      m.module = m.name;
    } else {
      return Bad(source, fmt::format("{} is not a module of model '{}' (modules: {}; `{}` is the "
                                     "language module; map other names with `modules: {{{}: "
                                     "<module>}}`)",
                                     path, model.name, ModuleNames(model), kLanguageKey, m.name));
    }
    if (auto [it, fresh] = taken.emplace(m.module, m.name); !fresh) {
      return Bad(source, fmt::format("{} and module_parallelisms.{} both stand for module '{}'",
                                     path, it->second, m.module));
    }
    out.modules.push_back(std::move(m));
  }
  return out;
}

// Every error leaving the reader is one safe line (OneLineStatus: no raw input bytes).
StatusOr<MimoConfig> ParseMimoConfigYaml(std::string_view text, std::string_view source,
                                         const spec::ModelSpec& model) {
  auto result = ParseMimoConfigYamlImpl(text, source, model);
  if (!result.ok()) return OneLineStatus(result.status());
  return result;
}

Status CheckMimoConfig(const MimoConfig& config, const spec::ModelSpec& model,
                       const spec::ClusterSpec& cluster) {
  const std::string& src = config.source;
  // Megatron-Bridge: the language module is present and every DP is set.
  const MimoModuleParallelism* language = nullptr;
  std::vector<std::string> names;
  for (const auto& m : config.modules) {
    names.push_back(m.name);
    if (IsLanguageKey(m.name)) language = &m;
  }
  if (language == nullptr) {
    return Bad(src, fmt::format("module_parallelisms has no language module '{}' (Megatron "
                                "requires it; found: {})",
                                kLanguageKey, fmt::join(names, ", ")));
  }
  for (const auto& m : config.modules) {
    if (m.dp <= 0) {
      return Bad(src, fmt::format("{} is not set; a heterogeneous MIMO deployment needs every "
                                  "module's DP (Megatron-Bridge)",
                                  Field(m, "data_parallel_size")));
    }
  }
  // No overlapping rank ranges.
  std::vector<const MimoModuleParallelism*> by_offset;
  for (const auto& m : config.modules) by_offset.push_back(&m);
  std::stable_sort(by_offset.begin(), by_offset.end(),
                   [](auto* a, auto* b) { return a->rank_offset < b->rank_offset; });
  for (size_t k = 1; k < by_offset.size(); ++k) {
    const auto& prev = *by_offset[k - 1];
    const auto& cur = *by_offset[k];
    if (cur.rank_offset < prev.rank_offset + int64_t{prev.Ranks()}) {
      return Bad(src, fmt::format("{} = {}: ranks [{}, {}) overlap module '{}' ranks [{}, {}); "
                                  "rank ranges must not overlap",
                                  Field(cur, "rank_offset"), cur.rank_offset, cur.rank_offset,
                                  int64_t{cur.rank_offset} + cur.Ranks(), prev.name,
                                  prev.rank_offset, int64_t{prev.rank_offset} + prev.Ranks()));
    }
  }
  // Megatron-Bridge's cross-module rules.
  for (const auto& m : config.modules) {
    if (!IsPowerOfTwo(m.tp)) {
      return Bad(src, fmt::format("{} = {}; must be a power of two (Megatron-Bridge, for "
                                  "cross-module communication)",
                                  Field(m, "tensor_model_parallel_size"), m.tp));
    }
  }
  for (size_t a = 0; a < config.modules.size(); ++a) {
    for (size_t b = a + 1; b < config.modules.size(); ++b) {
      const auto& x = config.modules[a];
      const auto& y = config.modules[b];
      if (x.dp % y.dp != 0 && y.dp % x.dp != 0) {
        return Bad(src, fmt::format("{} = {} and module '{}' DP {} do not divide one another; "
                                    "one must divide the other (Megatron-Bridge)",
                                    Field(y, "data_parallel_size"), y.dp, x.name, x.dp));
      }
    }
  }
  for (const auto& m : config.modules) {
    if (&m != language && m.dp < language->dp) {
      return Bad(src, fmt::format("{} = {} < the language module's DP {}; an encoder's DP must "
                                  "be at least the LLM's (Megatron-Bridge, embedding alignment)",
                                  Field(m, "data_parallel_size"), m.dp, language->dp));
    }
  }
  // The world size is the job's GPUs (gaps between ranges are idle GPUs, as Megatron-Bridge
  // allows them).
  const MimoModuleParallelism* last = by_offset.back();
  for (const auto* m : by_offset) {
    if (int64_t{m->rank_offset} + m->Ranks() > int64_t{last->rank_offset} + last->Ranks()) {
      last = m;
    }
  }
  const int64_t world = int64_t{last->rank_offset} + last->Ranks();
  if (world != cluster.TotalGpus()) {
    return Bad(src, fmt::format("module_parallelisms.{}: world size max(rank_offset + tp·cp·pp·"
                                "dp) = {}, the end of '{}'s ranks [{}, {}); the job has {} GPUs "
                                "(--gpus); they must be equal",
                                last->name, world, last->name, last->rank_offset, world,
                                cluster.TotalGpus()));
  }
  // weft's rules: groups inside a node, PP within the layers, TP against the heads.
  const int per_node = cluster.gpus_per_node;
  for (const auto& m : config.modules) {
    const int width = m.tp * m.cp;
    if (per_node > 0 && width > per_node) {
      return Bad(src, fmt::format("{} × context_parallel_size = {} GPUs per group; a node has "
                                  "{} (TP and CP stay inside a node)",
                                  Field(m, "tensor_model_parallel_size"), width, per_node));
    }
    if (per_node > 0) {
      for (int64_t g0 = m.rank_offset; g0 < int64_t{m.rank_offset} + m.Ranks(); g0 += width) {
        if (g0 / per_node != (g0 + width - 1) / per_node) {
          return Bad(src, fmt::format("{} = {}: the TP·CP group at rank {} straddles two nodes "
                                      "({} GPUs per node)",
                                      Field(m, "rank_offset"), m.rank_offset, g0, per_node));
        }
      }
    }
    const int layers = model.modules[*model.FindModule(m.module)].num_layers;
    if (m.pp > layers) {
      return Bad(src, fmt::format("{} = {}; module '{}' has only {} layers",
                                  Field(m, "pipeline_model_parallel_size"), m.pp, m.module,
                                  layers));
    }
  }
  spec::ParallelConfig parallel;
  for (const auto& m : config.modules) {
    parallel.modules.push_back({.module = m.module, .tp = m.tp, .pp = m.pp, .dp = m.dp,
                                .cp = m.cp});
  }
  if (Status s = parallel.Validate(model); !s.ok()) {
    std::string msg(s.message());
    // "parallel.modules[1].tp = 3; ..." -> "module_parallelisms.llm.tensor_model_parallel_size".
    for (size_t k = 0; k < config.modules.size(); ++k) {
      for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
               {".tp", "tensor_model_parallel_size"},
               {".cp", "context_parallel_size"},
               {".pp", "pipeline_model_parallel_size"},
               {".dp", "data_parallel_size"},
               {"", ""}}) {
        const std::string key = fmt::format("parallel.modules[{}]{}", k, from);
        if (auto at = msg.find(key); at != std::string::npos) {
          msg.replace(at, key.size(),
                      to.empty() ? "module_parallelisms." + config.modules[k].name
                                 : Field(config.modules[k], to));
          break;
        }
      }
    }
    return Bad(src, msg);
  }
  // Every module of the model is named or belongs to a named neighbour.
  std::set<int> named;
  for (const auto& m : config.modules) named.insert(*model.FindModule(m.module));
  for (int i = 0; i < static_cast<int>(model.modules.size()); ++i) {
    if (named.count(i)) continue;
    std::string why;
    if (HostOf(model, i, named, &why) < 0) {
      return Bad(src, fmt::format("module_parallelisms: module '{}' of model '{}' {}",
                                  model.modules[i].name, model.name, why));
    }
  }
  return OkStatus();
}

StatusOr<PlacementSpec> MimoConfigToPlacementSpec(const MimoConfig& config,
                                                  const spec::ModelSpec& model,
                                                  const spec::ClusterSpec& cluster) {
  WEFT_RETURN_IF_ERROR(CheckMimoConfig(config, model, cluster));
  std::map<int, const MimoModuleParallelism*> by_module;
  std::set<int> named;
  for (const auto& m : config.modules) {
    const int i = *model.FindModule(m.module);
    by_module[i] = &m;
    named.insert(i);
  }
  PlacementSpec spec;
  spec.source = config.source;
  spec.schedule = sched::ScheduleKind::kOneFOneB;
  for (int i = 0; i < static_cast<int>(model.modules.size()); ++i) {
    ModulePlacement mp;
    mp.module = model.modules[i].name;
    if (auto it = by_module.find(i); it != by_module.end()) {
      const auto& m = *it->second;
      mp.tp = m.tp;
      mp.cp = m.cp;
      mp.dp = m.dp;
      mp.first_gpu = m.rank_offset;
      mp.layers = EvenLayers(model.modules[i].num_layers, m.pp);
    } else {
      std::string why;
      const int host = HostOf(model, i, named, &why);
      const auto& h = *by_module.at(host);
      mp.on = model.modules[host].name;
      mp.tp = h.tp;
      mp.cp = h.cp;
      mp.dp = h.dp;
      mp.layers = {model.modules[i].num_layers};
    }
    spec.modules.push_back(std::move(mp));
  }
  return spec;
}

StatusOr<PlacementSpec> ReadMimoConfigYaml(std::string_view text, std::string_view source,
                                           const spec::ModelSpec& model,
                                           const spec::ClusterSpec& cluster) {
  WEFT_ASSIGN_OR_RETURN(MimoConfig config, ParseMimoConfigYaml(text, source, model));
  return MimoConfigToPlacementSpec(config, model, cluster);
}

namespace {

// Groups and chunks of a placement in a comparable form.
using ChunkKey = std::tuple<int, int, int, int, int, int, int>;
std::vector<ChunkKey> Canonical(const Placement& p) {
  std::vector<ChunkKey> out;
  for (const Chunk& c : p.chunks) {
    const auto& g = p.groups[c.group];
    out.emplace_back(c.module, c.replica, c.first_layer, c.num_layers, g.first_gpu, g.num_gpus,
                     c.chunk);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

StatusOr<MimoConfig> MimoConfigOfPlacement(const Placement& placement,
                                           const spec::ModelSpec& model,
                                           const spec::ClusterSpec& cluster,
                                           const cost::CostModel& cost_model) {
  const int n = static_cast<int>(model.modules.size());
  if (!placement.unfolded) {
    return InvalidArgumentError(
        "its placement is one pipeline shared by all modules with one data-parallel size "
        "(folded; Megatron-LM's single chain); a MIMO config gives every module rank ranges of "
        "its own");
  }
  for (int m = 0; m < n; ++m) {
    if (placement.IsReplicated(m)) {
      return InvalidArgumentError(fmt::format("module '{}' has a full copy on every pipeline "
                                              "stage; a MIMO config cannot express that",
                                              model.modules[m].name));
    }
  }
  // Modules that share a group form one MIMO module (encoder + projector).
  std::vector<std::set<int>> groups_of(n);
  for (const Chunk& c : placement.chunks) groups_of[c.module].insert(c.group);
  std::vector<int> comp(n);
  for (int m = 0; m < n; ++m) comp[m] = m;
  auto find = [&](int x) {
    while (comp[x] != x) x = comp[x] = comp[comp[x]];
    return x;
  };
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n; ++b) {
      for (int g : groups_of[a]) {
        if (groups_of[b].count(g)) {
          comp[find(a)] = find(b);
          break;
        }
      }
    }
  }
  const int language = MimoLanguageModule(model);
  MimoConfig config;
  config.source = "(emitted)";
  for (int root = 0; root < n; ++root) {
    std::vector<int> members;
    std::set<int> groups;
    for (int m = 0; m < n; ++m) {
      if (find(m) == root) {
        members.push_back(m);
        groups.insert(groups_of[m].begin(), groups_of[m].end());
      }
    }
    if (members.empty()) continue;
    // The module that spans the component's groups: the language module, else the one with
    // the most layers.
    int primary = -1;
    for (int m : members) {
      if (groups_of[m] != groups) continue;
      if (primary < 0 || m == language ||
          (primary != language && model.modules[m].num_layers > model.modules[primary].num_layers)) {
        primary = m;
      }
    }
    if (primary < 0) {
      std::vector<std::string> names;
      for (int m : members) names.push_back(model.modules[m].name);
      return InvalidArgumentError(fmt::format(
          "modules {} share pipeline ranks and none spans all of them; a MIMO config gives each "
          "module rank ranges of its own",
          fmt::join(names, ", ")));
    }
    if (std::find(members.begin(), members.end(), language) != members.end() &&
        primary != language) {
      return InvalidArgumentError(fmt::format(
          "the language module '{}' shares ranks with '{}' without spanning them; a MIMO config "
          "gives the language module ranks of its own",
          model.modules[language].name, model.modules[primary].name));
    }
    const auto& par = placement.parallel[primary];
    MimoModuleParallelism mm;
    mm.module = model.modules[primary].name;
    mm.name = primary == language ? kLanguageKey : mm.module;
    mm.tp = par.tp;
    mm.cp = par.cp;
    mm.dp = placement.NumReplicas(primary);
    const auto chunks = placement.ChunksOf(primary, 0);
    std::set<int> stage_groups;
    std::vector<int> layers;
    for (int c : chunks) {
      stage_groups.insert(placement.chunks[c].group);
      layers.push_back(placement.chunks[c].num_layers);
    }
    if (stage_groups.size() != chunks.size()) {
      return InvalidArgumentError(fmt::format("module '{}' has several chunks on one group "
                                              "(virtual pipeline stages); a MIMO config has one "
                                              "chunk per stage",
                                              mm.module));
    }
    mm.pp = static_cast<int>(chunks.size());
    const auto even = EvenLayers(model.modules[primary].num_layers, mm.pp);
    if (layers != even) {
      return InvalidArgumentError(fmt::format(
          "module '{}' splits its layers [{}] over {} stages, not evenly [{}] as Megatron does "
          "(a MIMO config has no layer split)",
          mm.module, fmt::join(layers, ", "), mm.pp, fmt::join(even, ", ")));
    }
    int first = -1;
    for (int g : groups) {
      if (placement.groups[g].num_gpus != mm.tp * mm.cp) {
        return InvalidArgumentError(fmt::format("module '{}' sits on a group of {} GPUs with "
                                                "tp·cp = {}",
                                                mm.module, placement.groups[g].num_gpus,
                                                mm.tp * mm.cp));
      }
      if (first < 0 || placement.groups[g].first_gpu < first) first = placement.groups[g].first_gpu;
    }
    mm.rank_offset = std::max(0, first);
    config.modules.push_back(std::move(mm));
  }
  // In data-flow order (encoders before the language module, as MIMO examples list them).
  std::vector<int> rank(n);
  const auto order = model.TopologicalOrder();
  for (int k = 0; k < static_cast<int>(order.size()); ++k) rank[order[k]] = k;
  std::stable_sort(config.modules.begin(), config.modules.end(), [&](const auto& a,
                                                                     const auto& b) {
    return rank[*model.FindModule(a.module)] < rank[*model.FindModule(b.module)];
  });
  if (Status s = CheckMimoConfig(config, model, cluster); !s.ok()) {
    // "(emitted): module_parallelisms.x ..." -> the rule the placement breaks.
    std::string msg(s.message());
    const std::string prefix = config.source + ": ";
    if (msg.rfind(prefix, 0) == 0) msg = msg.substr(prefix.size());
    return InvalidArgumentError("its MIMO config would fail Megatron's or weft's checks: " + msg);
  }
  // Round trip: the config read back must give the same groups and chunks.
  WEFT_ASSIGN_OR_RETURN(PlacementSpec spec, MimoConfigToPlacementSpec(config, model, cluster));
  WEFT_ASSIGN_OR_RETURN(Placement back, BuildPlacement(spec, model, cluster, cost_model));
  if (Canonical(back) != Canonical(placement)) {
    return InvalidArgumentError(
        "a MIMO config read back gives another placement (ranks not in Megatron's order TP, "
        "CP, DP, PP from fastest, or a module sharing groups not where its neighbour's "
        "modality submodule would be)");
  }
  return config;
}

std::string MimoConfigToYaml(const MimoConfig& config, std::string_view header) {
  std::string out;
  size_t begin = 0;
  while (begin < header.size()) {
    size_t end = header.find('\n', begin);
    if (end == std::string_view::npos) end = header.size();
    out += fmt::format("# {}\n", header.substr(begin, end - begin));
    begin = end + 1;
  }
  out += "module_parallelisms:\n";
  std::vector<std::pair<std::string, std::string>> mapping;
  for (const auto& m : config.modules) {
    out += fmt::format("  {}:\n", m.name);
    out += fmt::format("    tensor_model_parallel_size: {}\n", m.tp);
    out += fmt::format("    pipeline_model_parallel_size: {}\n", m.pp);
    out += fmt::format("    context_parallel_size: {}\n", m.cp);
    out += fmt::format("    data_parallel_size: {}\n", m.dp);
    out += fmt::format("    rank_offset: {}\n", m.rank_offset);
    if (m.name != m.module) mapping.emplace_back(m.name, m.module);
  }
  if (!mapping.empty()) {
    out += "modules:\n";
    for (const auto& [name, module] : mapping) out += fmt::format("  {}: {}\n", name, module);
  }
  return out;
}

std::string DescribeMimoConfig(const MimoConfig& config) {
  std::vector<std::string> parts;
  for (const auto& m : config.modules) {
    parts.push_back(fmt::format("{} [{}, {}) TP{}·PP{}·CP{}·DP{}", m.name, m.rank_offset,
                                m.rank_offset + m.Ranks(), m.tp, m.pp, m.cp, m.dp));
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace weft::planning
