#pragma once
// Private helpers shared by the report formats.
#include <cstdint>
#include <string>
#include <string_view>

#include "weft/graph/stage_graph.h"

namespace weft::report::internal {

inline constexpr double kBytesPerGiB = 1073741824.0;

// Escapes & < > " ' for HTML/XML text and attribute values. Control characters other than tab,
// newline and carriage return (invalid in XML 1.0) become U+FFFD.
std::string XmlEscape(std::string_view text);

// A field of RFC 4180 CSV: quoted (with "" for ") when it holds , " CR or LF.
std::string CsvField(std::string_view text);

// A JSON-safe copy: invalid UTF-8 sequences replaced by U+FFFD.
std::string SanitizeUtf8(std::string_view text);

// Shortest readable number: up to `significant` significant digits, no trailing zeros.
std::string FormatNumber(double value, int significant = 4);

// Colour of a stage box, "#rrggbb": hue by module, lightness by pass (forward light, backward
// darker, weight-gradient darkest). Deterministic.
std::string StageColor(int module, spec::Pass pass);
// Base colour of a module (the legend).
std::string ModuleColor(int module);
// Colour and dash pattern ("" = solid) of the i-th series of a chart: kSeriesColors distinct
// colours (a chart of every strategy gives each its own), then the colours again dashed, so no
// two series of a chart look alike.
inline constexpr int kSeriesColors = 15;
std::string SeriesColor(int index);
std::string SeriesDash(int index);

// "vit" from StageGraph::module_names(), or "m<index>" if unnamed.
std::string ModuleName(const graph::StageGraph& graph, int module);
// "3" or "3.1" (microbatch.sub_microbatch when the sub-microbatch is > 0).
std::string MicrobatchLabel(const graph::Stage& stage);
// The group's label, or "g<id>" if it has none.
std::string GroupLabel(const graph::StageGraph& graph, graph::GroupId group);

// A "nice" tick step (1, 2 or 5 × 10^k) so that `range` spans about `target_ticks` ticks.
double NiceStep(double range, int target_ticks);

}  // namespace weft::report::internal

#include "weft/common/status.h"
#include "weft/sim/timeline.h"

namespace weft::report::internal {

// InvalidArgument unless `timeline` was simulated from `graph`: same numbers of stages and
// groups, every transfer names existing stages and groups, stage times are finite.
Status CheckTimelineMatchesGraph(const graph::StageGraph& graph, const sim::Timeline& timeline);

}  // namespace weft::report::internal

#include <utility>
#include <vector>

#include "weft/report/comparison.h"

namespace weft::report::internal {

// Strategy names in tables are one line: newlines, CRs and tabs become spaces.
std::string OneLine(std::string_view text);

// The cells of the summary table (TextTable and the HTML report share them).
// Rows follow Comparison::RankedOrder; the best row's name ends in kBestMark; an out-of-memory
// row's speedup cell is "oom"; the last column is the configuration (StrategyConfiguration::Brief).
inline constexpr std::string_view kBestMark = " *";
struct SummaryCells {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;  // one per strategy, header.size() cells
  std::vector<int> strategy;                   // per row: its index in comparison.strategies
  std::vector<std::pair<std::string, std::string>> errors;  // (strategy, message)
};
SummaryCells MakeSummaryCells(const Comparison& comparison);

}  // namespace weft::report::internal
