#pragma once
// Launchable outputs of a configuration (`weft tune --emit FORMAT`, docs/tune.md): the argument
// list of Megatron-LM, Megatron MIMO's `module_parallelisms` config, the `[parallelism]` of a
// torchtitan TOML (with weft's torch pipelining CSV where the schedule is weft's own), or weft's
// own flags for strategies no stock framework runs. Each is derived from a planner (the strategy
// at the chosen configuration), so it says what weft simulated; what a framework cannot express
// is said in the file's comment header, never dropped silently.
// Thread-safety: reentrant.
#include <string>
#include <string_view>
#include <vector>

#include "weft/common/status.h"
#include "weft/cost/cost_model.h"
#include "weft/planning/planner.h"

namespace weft::strategy {

enum class LaunchFormat { kMegatron, kMimo, kTorchtitan, kWeft };
std::string_view LaunchFormatName(LaunchFormat format);  // "megatron", "mimo", "torchtitan", "weft"
StatusOr<LaunchFormat> ParseLaunchFormat(std::string_view name);

// The formats that run strategy `name` in a stock framework today (kWeft always applies: weft's
// runtime, python -m weft.train). docs/cli.md has the table.
std::vector<LaunchFormat> LaunchFormatsFor(std::string_view strategy);

struct LaunchFile {
  std::string text;
  // A second file the first names (torchtitan: weft's schedule as torch's CSV); empty = none.
  std::string companion_text;
};

// `recompute`: the uniform level the memory policy kept for the configuration.
// `companion_path`: where the caller writes LaunchFile::companion_text (the TOML names it).
// FailedPrecondition naming the reason when the format cannot run the strategy's plan.
StatusOr<LaunchFile> EmitLaunch(LaunchFormat format,
                                const planning::Planner& planner,
                                spec::Recompute recompute,
                                std::string_view header,
                                std::string_view companion_path = "");

}  // namespace weft::strategy
