#pragma once
// Test helpers of the report module: small timelines and a minimal XML well-formedness check.
#include <cctype>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "weft/graph/stage_graph.h"
#include "weft/sched/generators.h"
#include "weft/sim/simulator.h"
#include "weft/sim/timeline.h"

namespace weft::report::testing {

inline constexpr int64_t kMiB = int64_t{1} << 20;
inline constexpr int64_t kGiB = int64_t{1} << 30;

// A hand-made two-group timeline: vit F on g0 → llm F, llm B on g1 → vit B on g0, with two
// transfers and memory curves on both groups (times in ms below).
struct SmallCase {
  graph::StageGraph graph;
  sim::Timeline timeline;
};

inline SmallCase MakeSmallCase() {
  SmallCase c;
  graph::StageGraph& g = c.graph;
  g.SetModuleNames({"vit", "llm"});
  g.AddGroup({.first_gpu = 0, .num_gpus = 1, .dp = 2, .static_bytes = 2 * kGiB,
              .grad_sync_bytes = 100 * kMiB, .label = "enc/pp0"});
  g.AddGroup({.first_gpu = 1, .num_gpus = 1, .dp = 2, .static_bytes = 3 * kGiB,
              .label = "llm/pp1"});
  using spec::Pass;
  const auto add = [&](int group, int module, Pass pass, double latency_s) {
    return g.AddStage({.group = group, .module = module, .microbatch = 0, .pass = pass,
                       .latency_s = latency_s, .activation_alloc_bytes = kGiB,
                       .activation_free_bytes = kGiB});
  };
  const auto s0 = add(0, 0, Pass::kForward, 1e-3);
  const auto s1 = add(1, 1, Pass::kForward, 1e-3);
  const auto s2 = add(1, 1, Pass::kBackward, 2e-3);
  const auto s3 = add(0, 0, Pass::kBackward, 2e-3);
  g.AddEdge(s0, s1, 8 * kMiB);
  g.AddEdge(s1, s2, 0);
  g.AddEdge(s2, s3, 8 * kMiB);
  EXPECT_TRUE(g.Finalize().ok());

  sim::Timeline& t = c.timeline;
  t.stages = {{0, 1e-3}, {1.5e-3, 2.5e-3}, {2.5e-3, 4.5e-3}, {5e-3, 7e-3}};
  t.transfers = {
      {.edge = 0, .from = s0, .to = s1, .src_group = 0, .dst_group = 1, .start_s = 1e-3,
       .end_s = 1.5e-3, .bytes = 8 * kMiB},
      {.edge = 2, .from = s2, .to = s3, .src_group = 1, .dst_group = 0, .start_s = 4.5e-3,
       .end_s = 5e-3, .bytes = 8 * kMiB},
  };
  t.groups.resize(2);
  t.groups[0] = {.busy_s = 3e-3, .first_start_s = 0, .last_end_s = 7e-3, .grad_sync_start_s = 7e-3, .grad_sync_s = 0.5e-3,
                 .optimizer_s = 0.25e-3, .end_s = 7.75e-3, .static_bytes = 2 * kGiB,
                 .peak_bytes = 4 * kGiB,
                 .memory = {{0, 2 * kGiB}, {0, 3 * kGiB}, {5e-3, 4 * kGiB}, {7e-3, 2 * kGiB}}};
  t.groups[1] = {.busy_s = 3e-3, .first_start_s = 1.5e-3, .last_end_s = 4.5e-3,
                 .end_s = 4.5e-3, .static_bytes = 3 * kGiB, .peak_bytes = 5 * kGiB,
                 .memory = {{0, 3 * kGiB}, {1.5e-3, 4 * kGiB}, {2.5e-3, 5 * kGiB},
                            {4.5e-3, 3 * kGiB}}};
  t.iteration_time_s = 7.75e-3;
  t.pipeline_span_s = 7e-3;
  t.bubble_ratio = 1 - 6e-3 / 14e-3;
  t.lower_bound_s = 7.25e-3;
  t.capacity_bytes = 80 * kGiB;
  return c;
}

inline spec::ClusterSpec TestCluster() {
  spec::ClusterSpec c;
  c.name = "test";
  c.num_nodes = 2;
  c.gpus_per_node = 8;
  c.gpu = {.name = "test-gpu", .peak_bf16_flops_per_s = 1e15, .hbm_bandwidth_bytes_per_s = 2e12,
           .memory_capacity_bytes = 80 * kGiB};
  c.intra_node = {.bandwidth_bytes_per_s = 200e9, .latency_s = 5e-6};
  c.inter_node = {.bandwidth_bytes_per_s = 25e9, .latency_s = 10e-6};
  return c;
}

// A real simulated linear pipeline (P groups, m microbatches) under `kind`.
struct SimulatedCase {
  graph::StageGraph graph;
  sim::Timeline timeline;
};

inline SimulatedCase SimulatePipeline(int p,
                                      int m,
                                      sched::ScheduleKind kind,
                                      bool split_backward = false) {
  SimulatedCase c;
  auto g = sched::BuildPipelineGraph(
      {.num_groups = p,
       .num_microbatches = m,
       .split_backward = split_backward,
       .costs = {{.forward_s = 1e-3, .backward_input_s = 1e-3, .backward_weight_s = 1e-3,
                  .forward_flops = 1e12, .activation_bytes = 512 * kMiB, .send_bytes = 16 * kMiB}},
       .static_bytes_per_group = 10 * kGiB});
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  c.graph = *std::move(g);
  auto s = sched::MakeSchedule(kind, c.graph);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  auto t = sim::Simulate(c.graph, *s, TestCluster(), {.samples_per_iteration = 8.0 * m});
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  c.timeline = *std::move(t);
  return c;
}

// Minimal XML well-formedness check: tags nest and match, attributes are quoted, text has no raw
// '<' and every '&' starts an entity. Returns "" if well-formed, else what is wrong and where.
inline std::string XmlProblem(std::string_view xml) {
  std::vector<std::string> stack;
  size_t i = 0;
  const auto at = [&](size_t pos) { return fmt::format(" at offset {}", pos); };
  while (i < xml.size()) {
    if (xml[i] == '&') {
      const size_t semi = xml.find(';', i);
      if (semi == std::string_view::npos || semi - i > 10) return "bare '&'" + at(i);
      i = semi + 1;
      continue;
    }
    if (xml[i] != '<') {
      if (xml[i] == '>') return "raw '>' in text" + at(i);
      ++i;
      continue;
    }
    if (xml.substr(i, 4) == "<!--") {
      const size_t end = xml.find("-->", i);
      if (end == std::string_view::npos) return "unclosed comment" + at(i);
      i = end + 3;
      continue;
    }
    if (xml.substr(i, 2) == "<?" || xml.substr(i, 2) == "<!") {
      const size_t end = xml.find('>', i);
      if (end == std::string_view::npos) return "unclosed declaration" + at(i);
      i = end + 1;
      continue;
    }
    const bool closing = i + 1 < xml.size() && xml[i + 1] == '/';
    size_t k = i + (closing ? 2 : 1);
    const size_t name_start = k;
    while (k < xml.size() && (std::isalnum(static_cast<unsigned char>(xml[k])) ||
                              xml[k] == '-' || xml[k] == ':' || xml[k] == '_')) {
      ++k;
    }
    const std::string name(xml.substr(name_start, k - name_start));
    if (name.empty()) return "tag without a name" + at(i);
    bool self_closing = false;
    while (true) {  // attributes
      while (k < xml.size() && std::isspace(static_cast<unsigned char>(xml[k]))) ++k;
      if (k >= xml.size()) return "unclosed tag <" + name + at(i);
      if (xml[k] == '>') break;
      if (xml[k] == '/' && k + 1 < xml.size() && xml[k + 1] == '>') {
        self_closing = true;
        ++k;
        break;
      }
      if (closing) return "attributes on a closing tag </" + name + at(k);
      while (k < xml.size() && xml[k] != '=' && !std::isspace(static_cast<unsigned char>(xml[k])) &&
             xml[k] != '>') {
        if (xml[k] == '<' || xml[k] == '"') return "bad attribute name in <" + name + at(k);
        ++k;
      }
      if (k >= xml.size() || xml[k] != '=') return "attribute without a value in <" + name + at(k);
      ++k;
      if (k >= xml.size() || (xml[k] != '"' && xml[k] != '\'')) {
        return "unquoted attribute in <" + name + at(k);
      }
      const char quote = xml[k];
      const size_t end = xml.find(quote, k + 1);
      if (end == std::string_view::npos) return "unclosed attribute in <" + name + at(k);
      if (xml.substr(k + 1, end - k - 1).find('<') != std::string_view::npos) {
        return "raw '<' in an attribute of <" + name + at(k);
      }
      k = end + 1;
    }
    if (closing) {
      if (stack.empty() || stack.back() != name) {
        return "</" + name + "> does not close <" + (stack.empty() ? "" : stack.back()) + ">" +
               at(i);
      }
      stack.pop_back();
    } else if (!self_closing) {
      stack.push_back(name);
    }
    i = k + 1;
  }
  if (!stack.empty()) return "unclosed <" + stack.back() + "> at the end";
  return "";
}

inline int CountOccurrences(std::string_view text, std::string_view needle) {
  int n = 0;
  for (size_t pos = text.find(needle); pos != std::string_view::npos;
       pos = text.find(needle, pos + needle.size())) {
    ++n;
  }
  return n;
}

}  // namespace weft::report::testing
