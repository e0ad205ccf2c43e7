#pragma once
// Shared helpers of the weft CLI subcommands (thin layer over the library).
#include <CLI/CLI.hpp>

#include <filesystem>
#include <functional>
#include <exception>
#include <initializer_list>
#include <mutex>
#include <stdexcept>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "weft/common/status.h"
#include "weft/common/text.h"
#include "weft/data/readers.h"
#include "weft/plan/plan_json.h"
#include "weft/spec/preset.h"

namespace weft::cli {

// Prints "weft: error: <message>" on one line to stderr and returns the exit code:
// 2 for bad input (IsUserError), 1 for internal failures.
int ReportError(const Status& status);

// Writes `content` to `path` atomically (temp file + rename), so a failure never leaves a
// half-written file. "-" writes to stdout.
Status WriteFileAtomically(const std::string& path, const std::string& content);

// Files written as one unit: each Write puts its content in a temporary file beside its path at
// once (so many large outputs need not wait in memory; a missing folder is made when its own
// folder exists, else Write fails naming the rule), Commit
// renames them all at the end; destruction without Commit removes the temporaries and the
// directories Write made. A rename that fails inside Commit leaves the files renamed before it
// in place. "-" is stdout, printed by Commit. Write may be called from several threads (distinct
// paths).
class StagedFiles {
 public:
  StagedFiles() = default;
  StagedFiles(const StagedFiles&) = delete;
  StagedFiles& operator=(const StagedFiles&) = delete;
  ~StagedFiles();
  Status Write(const std::string& path, std::string_view content);
  Status Commit();

 private:
  struct Staged {
    std::filesystem::path target, temp;
  };
  std::mutex mu_;
  std::random_device random_;
  std::vector<Staged> staged_;
  std::vector<std::filesystem::path> created_dirs_;  // by Write, outermost first
  bool committed_ = false;
  std::string stdout_;
};

// "megatron-1f1b, megatron-vpp, ..." (every registered strategy, for help texts).
std::string StrategyList();
// OK for a registered strategy or `manual`; else NotFound naming the known ones (name quoted).
Status CheckStrategyName(const std::string& name);
// (name, one-line description) of every strategy and `manual`.
std::vector<std::pair<std::string, std::string>> StrategyDescriptions();
// One line per strategy, "name  description" (weft compare --list).
std::string StrategyTable();

// --- Numeric flags: one place for every range (docs/cli.md lists them) -------------------------
// The value's text is checked when the command line is parsed, before any work: not a number of
// the flag's kind, or outside [lo, hi], exits 2 with one line naming the flag, the value (quoted
// and escaped if it is not a number) and the rule, e.g.
//   weft: error: --gpus: -1 is out of range; must be in [0, 16384] (0 = the model's setup)
// `note` says what special values mean; the range is appended to the help text.
// Empty when `text` is an integer in [lo, hi], else the reason (without the flag name).
std::string CheckIntegerText(const std::string& text, int64_t lo, uint64_t hi,
                             const std::string& note);
// Empty when `text` is a finite number in [lo, hi], else the reason.
std::string CheckRealText(const std::string& text, double lo, double hi, const std::string& note);
std::string RangeText(int64_t lo, uint64_t hi, const std::string& note);
std::string RangeText(double lo, double hi, const std::string& note);

template <typename T>
CLI::Option* AddNumberOption(CLI::App* cmd, const std::string& flag, T& value, T lo, T hi,
                             const std::string& help, const std::string& note = "") {
  std::string range;
  CLI::Validator check;
  if constexpr (std::is_integral_v<T>) {
    range = RangeText(static_cast<int64_t>(lo), static_cast<uint64_t>(hi), note);
    check = CLI::Validator(
        [lo, hi, note](std::string& text) {
          return CheckIntegerText(text, static_cast<int64_t>(lo), static_cast<uint64_t>(hi), note);
        },
        "", "range");
  } else {
    range = RangeText(static_cast<double>(lo), static_cast<double>(hi), note);
    check = CLI::Validator(
        [lo, hi, note](std::string& text) { return CheckRealText(text, lo, hi, note); }, "",
        "range");
  }
  return cmd->add_option(flag, value, help + " " + range)->check(check);
}

// --- Input and output paths, checked before any work -----------------------------------------
// The limits are the library's (spec::kMaxSpecFileBytes, data::kMaxDataFileBytes,
// plan::kMaxPlanFileBytes), so a flag and the reader behind it agree.
using spec::kMaxSpecFileBytes;
using data::kMaxDataFileBytes;
using plan::kMaxPlanFileBytes;
// A validator for an option naming a preset/profile or a file: a value that exists on disk and is
// not a preset or profile name must be a regular file of at most `max_bytes` (so /dev/zero or a
// FIFO cannot hang or exhaust memory).
CLI::Validator InputFileCheck(int64_t max_bytes);
// InputFileCheck for --model: also a checkpoint directory holding a Hugging Face config.json.
CLI::Validator ModelInputCheck();
// The one rule for every output path (docs/cli.md "Output paths"): a missing folder is made only
// inside an existing one (`out/p.json` makes out/ in the working directory; `/nonexistent/x/p.json`
// is refused). The checks create nothing; StagedFiles::Write makes the folder and removes it
// again when the run fails.
// OK when `path` can be written: its directory exists or can be made by that rule, and `path` is
// not a directory or other non-file. "-" is stdout.
Status CheckOutputFile(const std::string& path, const std::string& flag);
// OK when `dir` is a writable directory, or is missing and its folder is a writable directory.
Status CheckOutputDir(const std::string& dir, const std::string& flag);
// Every given output of a command, before its work: files and directories as (flag, path) pairs;
// empty paths are skipped. The first problem, else OK.
using OutputFlags = std::initializer_list<std::pair<std::string, std::string>>;
Status CheckOutputs(OutputFlags files, OutputFlags dirs = {});

// Progress lines on stderr: "\r<line>\033[K" on a terminal, plain lines otherwise (logs stay
// readable, errors never start with escape codes). Clear() ends the progress display.
std::function<void(const std::string&)> ProgressPrinter();
// The non-empty items of a comma-separated list ("a,,b" -> {"a", "b"}).
inline std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// Parses "1,2,4" into integers; InvalidArgument naming the flag on a bad element.
template <typename T>
StatusOr<std::vector<T>> ParseList(const std::string& flag, const std::string& text,
                                   long long max) {
  std::vector<T> out;
  for (const std::string& item : SplitList(text)) {
    try {
      size_t used = 0;
      const long long v = std::stoll(item, &used);
      if (used != item.size() || v < 1 || v > max) throw std::invalid_argument(item);
      out.push_back(static_cast<T>(v));
    } catch (const std::exception&) {
      return InvalidArgumentError(flag + " = " + QuoteForMessage(text) + ": " +
                                  QuoteForMessage(item) + " is not an integer in [1, " +
                                  std::to_string(max) + "]");
    }
  }
  return out;
}


void ClearProgress();
// Progress only where someone watches: ProgressPrinter() when stderr is a terminal, nothing
// otherwise (logs, pipes and tests stay clean). ClearProgress() ends the line.
std::function<void(const std::string&)> TerminalProgress();


// Each subcommand file defines one Register function; the callback stores its exit code.
// (one Register<Name>Command(CLI::App& app, int& exit_code) per subcommand file; main.cc calls each)
void RegisterCostCommand(CLI::App& app, int& exit_code);
void RegisterDataCommand(CLI::App& app, int& exit_code);
void RegisterPresetsCommand(CLI::App& app, int& exit_code);
void RegisterValidateCommand(CLI::App& app, int& exit_code);
void RegisterExportCommand(CLI::App& app, int& exit_code);
void RegisterCompareCommand(CLI::App& app, int& exit_code);
void RegisterSimulateCommand(CLI::App& app, int& exit_code);
void RegisterPlanCommand(CLI::App& app, int& exit_code);
void RegisterBenchCommand(CLI::App& app, int& exit_code);
void RegisterCpCommand(CLI::App& app, int& exit_code);
void RegisterOptimizeCommand(CLI::App& app, int& exit_code);
void RegisterImportCommand(CLI::App& app, int& exit_code);
void RegisterTuneCommand(CLI::App& app, int& exit_code);

}  // namespace weft::cli
