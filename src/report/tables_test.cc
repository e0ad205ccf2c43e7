#include "weft/report/tables.h"

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "test_util.h"

namespace weft::report {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

Comparison ThreeStrategies() {
  Comparison c{.model = "qwen2-vl-7b", .cluster = "h800x32", .num_gpus = 32,
               .data_profile = "llava-665k", .num_iterations = 3, .baseline = "megatron"};
  StrategyResult megatron{.name = "megatron", .description = "1F1B, uniform layer split"};
  StrategyResult dip{.name = "dip", .description = "MCTS-searched schedule"};
  for (int i = 0; i < 3; ++i) {
    megatron.iterations.push_back({.iteration = i, .iteration_time_s = 2.0 + 0.1 * i,
                                   .samples_per_s = 16, .tokens_per_s = 40000, .mfu = 0.3,
                                   .bubble_ratio = 0.25, .peak_memory_bytes = 60 * testing::kGiB,
                                   .lower_bound_s = 1.5});
    dip.iterations.push_back({.iteration = i, .iteration_time_s = 1.6 + 0.1 * i,
                              .samples_per_s = 20, .tokens_per_s = 50000, .mfu = 0.38,
                              .bubble_ratio = 0.1, .peak_memory_bytes = 70 * testing::kGiB,
                              .lower_bound_s = 1.5, .plan_time_s = 0.4});
  }
  megatron.configuration = {.modules = {{.module = "vision",
                                         .tp = 1,
                                         .pp = 1,
                                         .dp = 4,
                                         .layers_per_stage = {32},
                                         .recompute = "none"},
                                        {.module = "llm",
                                         .tp = 4,
                                         .pp = 2,
                                         .dp = 4,
                                         .layers_per_stage = {14, 14},
                                         .recompute = "none"}},
                            .microbatches_min = 8,
                            .microbatches_max = 8};
  c.strategies = {megatron, dip, {.name = "cornstarch", .error = "needs >= 2 encoders"}};
  return c;
}

// ThreeStrategies plus "colocated", the fastest of all but out of memory in one iteration.
Comparison WithOomStrategy() {
  Comparison c = ThreeStrategies();
  StrategyResult oom{.name = "colocated", .description = "every module on every rank"};
  for (int i = 0; i < 3; ++i) {
    oom.iterations.push_back({.iteration = i,
                              .iteration_time_s = 1.0,
                              .samples_per_s = 30,
                              .mfu = 0.5,
                              .peak_memory_bytes = 90 * testing::kGiB,
                              .oom = i == 1});
  }
  c.strategies.push_back(oom);
  return c;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Splits one CSV record (no embedded newlines) honouring quotes.
std::vector<std::string> CsvRecord(const std::string& line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char ch = line[i];
    if (quoted) {
      if (ch == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else if (ch == '"') {
        quoted = false;
      } else {
        fields.back() += ch;
      }
    } else if (ch == '"') {
      quoted = true;
    } else if (ch == ',') {
      fields.emplace_back();
    } else {
      fields.back() += ch;
    }
  }
  return fields;
}

TEST(ComparisonJson, HasTheDocumentedKeysWithMeanTimeAndPerIterationArrays) {
  const nlohmann::json j = ComparisonJson(ThreeStrategies());
  EXPECT_EQ(j["schema"], "weft.compare/v1");
  EXPECT_EQ(j["model"], "qwen2-vl-7b");
  EXPECT_EQ(j["num_gpus"], 32);
  EXPECT_EQ(j["baseline"], "megatron");
  EXPECT_EQ(j["best"], "dip");
  ASSERT_EQ(j["strategies"].size(), 3u);
  for (const auto& s : j["strategies"]) {
    for (const char* key : {"name",
                            "description",
                            "rank",
                            "status",
                            "best",
                            "configuration",
                            "error",
                            "iteration_time_s",
                            "iteration_time_p50_s",
                            "iteration_time_p90_s",
                            "throughput_samples_per_s",
                            "throughput_tokens_per_s",
                            "mfu",
                            "bubble_ratio",
                            "peak_memory_bytes",
                            "lower_bound_s",
                            "gap_to_lower_bound",
                            "oom",
                            "plan_time_s",
                            "speedup_vs_baseline",
                            "iterations"}) {
      EXPECT_TRUE(s.contains(key)) << s["name"] << " lacks " << key;
    }
  }
  // Ranked: dip (1.7 s) before megatron (2.1 s), the failed one last.
  EXPECT_EQ(j["strategies"][0]["name"], "dip");
  EXPECT_EQ(j["strategies"][0]["rank"], 1);
  EXPECT_EQ(j["strategies"][0]["best"], true);
  EXPECT_EQ(j["strategies"][0]["status"], "ok");
  EXPECT_EQ(j["strategies"][1]["best"], false);
  EXPECT_EQ(j["strategies"][2]["status"], "error");
  const auto& megatron = j["strategies"][1];
  EXPECT_DOUBLE_EQ(megatron["iteration_time_s"].get<double>(), 2.1);
  EXPECT_DOUBLE_EQ(megatron["iteration_time_p50_s"].get<double>(), 2.1);
  EXPECT_DOUBLE_EQ(megatron["lower_bound_s"].get<double>(), 1.5);
  EXPECT_EQ(megatron["peak_memory_bytes"].get<int64_t>(), 60 * testing::kGiB);
  EXPECT_EQ(megatron["oom"], false);
  EXPECT_TRUE(megatron["error"].is_null());
  EXPECT_EQ(megatron["iterations"]["iteration_time_s"].size(), 3u);
  EXPECT_DOUBLE_EQ(megatron["iterations"]["iteration_time_s"][2].get<double>(), 2.2);
  const auto& dip = j["strategies"][0];
  EXPECT_TRUE(dip["configuration"].is_null());  // not recorded
  EXPECT_NEAR(dip["speedup_vs_baseline"].get<double>(), 2.1 / 1.7, 1e-12);
  EXPECT_DOUBLE_EQ(dip["plan_time_s"].get<double>(), 0.4);
  const auto& failed = j["strategies"][2];
  EXPECT_EQ(failed["error"], "needs >= 2 encoders");
  EXPECT_TRUE(failed["iteration_time_s"].is_null());
  EXPECT_TRUE(failed["speedup_vs_baseline"].is_null());
  EXPECT_TRUE(failed["oom"].is_null());
}

TEST(ComparisonJson, CarriesTheConfigurationAsFields) {
  const nlohmann::json j = ComparisonJson(ThreeStrategies());
  const nlohmann::json& config = j["strategies"][1]["configuration"];
  ASSERT_TRUE(config.is_object()) << config;
  ASSERT_EQ(config["modules"].size(), 2u);
  const nlohmann::json& llm = config["modules"][1];
  EXPECT_EQ(llm["module"], "llm");
  EXPECT_EQ(llm["tp"], 4);
  EXPECT_EQ(llm["cp"], 1);
  EXPECT_EQ(llm["pp"], 2);
  EXPECT_EQ(llm["dp"], 4);
  EXPECT_EQ(llm["layers_per_stage"], nlohmann::json({14, 14}));
  EXPECT_EQ(llm["chunks_per_rank"], 1);
  EXPECT_EQ(llm["copies"], 1);
  EXPECT_EQ(llm["recompute"], "none");
  EXPECT_EQ(config["microbatches_min"], 8);
  EXPECT_EQ(config["microbatches_max"], 8);
  EXPECT_EQ(config["brief"],
            "vision tp1 pp1 dp4 [32] | llm tp4 pp2 dp4 [14,14] | mb 8 | recompute none");
}

TEST(ComparisonJson, OomStrategyIsRankedAfterTheFeasibleOnesWithoutSpeedup) {
  const nlohmann::json j = ComparisonJson(WithOomStrategy());
  std::vector<std::string> names;
  for (const auto& s : j["strategies"]) names.push_back(s["name"]);
  EXPECT_EQ(names, (std::vector<std::string>{"dip", "megatron", "colocated", "cornstarch"}));
  const nlohmann::json& oom = j["strategies"][2];
  EXPECT_EQ(oom["status"], "oom");
  EXPECT_EQ(oom["oom"], true);
  EXPECT_EQ(oom["best"], false);
  EXPECT_TRUE(oom["speedup_vs_baseline"].is_null());
  EXPECT_DOUBLE_EQ(oom["iteration_time_s"].get<double>(), 1.0);  // the time is still reported
  EXPECT_EQ(j["best"], "dip");
}

TEST(ComparisonJson, InvalidUtf8IsReplacedNotThrown) {
  Comparison c = ThreeStrategies();
  c.strategies[0].name = "bad\xff\xfename";
  std::string dumped;
  ASSERT_NO_THROW(dumped = ComparisonJsonString(c));
  const nlohmann::json back = nlohmann::json::parse(dumped);
  EXPECT_EQ(back["strategies"][1]["name"], "bad\xEF\xBF\xBD\xEF\xBF\xBDname");
}

TEST(TextTable, AlignsColumnsRanksRowsAndListsErrors) {
  const std::string text = TextTable(ThreeStrategies());
  const std::vector<std::string> lines = Lines(text);
  ASSERT_GE(lines.size(), 6u);
  EXPECT_THAT(lines[0], HasSubstr("model qwen2-vl-7b | cluster h800x32 | 32 GPUs"));
  EXPECT_THAT(lines[1], HasSubstr("strategy"));
  EXPECT_THAT(lines[1], HasSubstr("speedup"));
  // The configuration is the last column, left-aligned: it starts at the same column in the
  // header and in every row.
  EXPECT_EQ(lines[2], std::string(lines[1].size(), '-'));  // the rule ends with the header
  const size_t config_at = lines[1].find("configuration");
  ASSERT_NE(config_at, std::string::npos);
  EXPECT_EQ(lines[1].size(), config_at + std::string("configuration").size());
  EXPECT_EQ(lines[4].substr(config_at),
            "vision tp1 pp1 dp4 [32] | llm tp4 pp2 dp4 [14,14] | mb 8 | recompute none");
  EXPECT_EQ(lines[3].substr(config_at), "-");  // not recorded
  EXPECT_EQ(lines[5].substr(config_at), "-");  // failed
  // Right-aligned numbers: the "time mean s" column ends where its header ends.
  const size_t mean_end = lines[1].find("time mean s") + std::string("time mean s").size();
  // Ranked: dip (best, marked) first, then megatron, the failed one last.
  EXPECT_EQ(lines[3].substr(0, 6), "dip * ");
  EXPECT_EQ(lines[3].substr(mean_end - 3, 3), "1.7");
  EXPECT_THAT(lines[3], HasSubstr("1.24x"));
  EXPECT_EQ(lines[4].substr(0, 9), "megatron ");
  EXPECT_EQ(lines[4].substr(mean_end - 3, 3), "2.1");
  EXPECT_THAT(lines[4], HasSubstr("1.00x"));
  EXPECT_THAT(lines[4], HasSubstr("60.00"));  // peak GiB
  EXPECT_THAT(lines[4], HasSubstr("40.0"));   // gap to lower bound: 2.1/1.5 - 1 = 40 %
  EXPECT_THAT(lines[5].substr(0, 10), HasSubstr("cornstarch"));
  EXPECT_THAT(text, HasSubstr("error: cornstarch: needs >= 2 encoders"));
}

TEST(TextTable, OomRowPrintsOomInsteadOfASpeedupAndIsNotBest) {
  const std::vector<std::string> lines = Lines(TextTable(WithOomStrategy()));
  ASSERT_GE(lines.size(), 7u);
  const size_t speedup_end = lines[1].find("speedup") + std::string("speedup").size();
  EXPECT_EQ(lines[3].substr(0, 6), "dip * ");
  EXPECT_EQ(lines[5].substr(0, 10), "colocated ");
  EXPECT_EQ(lines[5].substr(speedup_end - 3, 3), "oom");
  EXPECT_THAT(lines[5], Not(HasSubstr("x ")));
  EXPECT_THAT(lines[6].substr(0, 10), HasSubstr("cornstarch"));
}

TEST(TextTable, NoBestMarkWhenEveryResultRanOutOfMemory) {
  Comparison c = WithOomStrategy();
  c.strategies.erase(c.strategies.begin(), c.strategies.begin() + 2);  // colocated, cornstarch
  c.baseline = "";
  const std::vector<std::string> lines = Lines(TextTable(c));
  ASSERT_GE(lines.size(), 5u);
  EXPECT_EQ(lines[3].substr(0, 10), "colocated ");  // OOM before the failed one
  EXPECT_THAT(lines[3], Not(HasSubstr("colocated *")));
  EXPECT_THAT(lines[3], HasSubstr("oom"));
  EXPECT_EQ(lines[4].substr(0, 11), "cornstarch ");
  EXPECT_EQ(c.BestStrategy(), -1);
}

TEST(TextTable, ExplainsGapLowerBoundUnderTheRows) {
  const std::vector<std::string> lines = Lines(TextTable(ThreeStrategies()));
  const auto legend = std::find(lines.begin(), lines.end(), std::string(kGapLegend));
  ASSERT_NE(legend, lines.end());
  EXPECT_EQ(legend - lines.begin(), 6);  // title, header, rule, three rows, then the legend
  ASSERT_LT(legend - lines.begin() + 1, static_cast<long>(lines.size()));
  EXPECT_EQ(*(legend + 1), kRankLegend);
}

TEST(TextTable, NewlinesInNamesDoNotBreakRows) {
  Comparison c = ThreeStrategies();
  c.strategies[1].name = "d\nip";
  EXPECT_EQ(Lines(TextTable(c)).size(), Lines(TextTable(ThreeStrategies())).size());
}

TEST(SummaryCsv, OneQuotedRecordPerStrategyWithTheHeaderFieldCount) {
  Comparison c = ThreeStrategies();
  c.strategies[0].name = "megatron, \"1f1b\"";
  c.baseline = c.strategies[0].name;
  const std::vector<std::string> lines = Lines(SummaryCsv(c));
  ASSERT_EQ(lines.size(), 4u);
  const std::vector<std::string> header = CsvRecord(lines[0]);
  EXPECT_EQ(header.front(), "strategy");
  EXPECT_EQ(header.back(), "error");
  for (size_t i = 1; i < lines.size(); ++i) {
    EXPECT_EQ(CsvRecord(lines[i]).size(), header.size()) << lines[i];
  }
  EXPECT_EQ(CsvRecord(lines[2])[0], "megatron, \"1f1b\"");  // ranked after dip
  EXPECT_DOUBLE_EQ(std::stod(CsvRecord(lines[2])[1]), 2.1);
  EXPECT_EQ(CsvRecord(lines[3]).back(), "needs >= 2 encoders");
}

TEST(SummaryCsv, HasBestConfigurationAndOomColumns) {
  const std::vector<std::string> lines = Lines(SummaryCsv(WithOomStrategy()));
  ASSERT_EQ(lines.size(), 5u);
  const std::vector<std::string> header = CsvRecord(lines[0]);
  const auto column = [&](const std::string& name) {
    return static_cast<size_t>(std::find(header.begin(), header.end(), name) - header.begin());
  };
  ASSERT_LT(column("configuration"), header.size());
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 1; i < lines.size(); ++i) rows.push_back(CsvRecord(lines[i]));
  EXPECT_EQ(rows[0][0], "dip");
  EXPECT_EQ(rows[0][column("best")], "1");
  EXPECT_EQ(rows[1][0], "megatron");
  EXPECT_EQ(rows[1][column("best")], "0");
  EXPECT_EQ(rows[1][column("configuration")],
            "vision tp1 pp1 dp4 [32] | llm tp4 pp2 dp4 [14,14] | mb 8 | recompute none");
  EXPECT_EQ(rows[2][0], "colocated");
  EXPECT_EQ(rows[2][column("oom")], "1");
  EXPECT_EQ(rows[2][column("speedup_vs_baseline")], "oom");
  EXPECT_EQ(rows[3][0], "cornstarch");
  EXPECT_EQ(rows[3][column("speedup_vs_baseline")], "");
}

TEST(IterationsCsv, OneRecordPerStrategyIteration) {
  const std::vector<std::string> lines = Lines(IterationsCsv(ThreeStrategies()));
  ASSERT_EQ(lines.size(), 1u + 3 + 3);
  const size_t fields = CsvRecord(lines[0]).size();
  for (const std::string& line : lines) EXPECT_EQ(CsvRecord(line).size(), fields);
  EXPECT_EQ(CsvRecord(lines[1])[0], "dip");  // ranked: the faster strategy first
  EXPECT_EQ(CsvRecord(lines[1])[1], "0");
  EXPECT_DOUBLE_EQ(std::stod(CsvRecord(lines[1])[2]), 1.6);
  EXPECT_EQ(CsvRecord(lines[4])[0], "megatron");
  EXPECT_THAT(IterationsCsv(ThreeStrategies()), Not(HasSubstr("cornstarch")));
}

}  // namespace
}  // namespace weft::report
