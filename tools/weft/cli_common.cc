#include "cli_common.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <random>

#include <fmt/format.h>

#include "weft/common/text.h"
#include "weft/data/generators.h"
#include "weft/spec/preset.h"
#include "weft/strategy/strategy.h"

namespace weft::cli {
namespace {

// The value as typed, for a message: numbers as they are, anything else quoted and escaped.
std::string ValueForMessage(const std::string& text) {
  const bool plain = !text.empty() && text.size() <= 32 &&
                     text.find_first_not_of("0123456789+-.eEinfatyINFATY") == std::string::npos;
  return plain ? text : QuoteForMessage(text, 32);
}

// The folder `path` is in ("." for a bare name); a trailing '/' names the folder itself.
std::filesystem::path ParentFolder(const std::filesystem::path& path) {
  std::filesystem::path p = path;
  if (!p.has_filename() && p.has_parent_path() && p != p.root_path()) p = p.parent_path();
  return p.has_parent_path() ? p.parent_path() : std::filesystem::path(".");
}

// Why a missing folder cannot be made: its own folder `parent` is missing too (or not a folder).
std::string MissingFolderRule(const std::filesystem::path& parent) {
  std::error_code ec;
  return "missing, and so is its folder " + QuoteForMessage(parent.string(), 200) +
         (std::filesystem::exists(parent, ec) ? " (not a directory)" : "") +
         "; weft creates a missing output folder only inside an existing one (mkdir -p first)";
}

}  // namespace

std::string StrategyList() {
  std::string out;
  for (const auto& name : strategy::StrategyNames()) out += (out.empty() ? "" : ", ") + name;
  return out;
}

Status CheckStrategyName(const std::string& name) {
  if (name == "manual") return OkStatus();
  for (const auto& known : strategy::StrategyNames()) {
    if (known == name) return OkStatus();
  }
  return NotFoundError("unknown strategy " + QuoteForMessage(name) + "; known: " + StrategyList() +
                       ", manual (weft compare --list describes them)");
}

std::vector<std::pair<std::string, std::string>> StrategyDescriptions() {
  std::vector<std::pair<std::string, std::string>> rows;
  for (const auto& name : strategy::StrategyNames()) {
    auto s = strategy::MakeStrategy(name);
    std::string description = s.ok() ? std::string((*s)->Description()) : "";
    if (const size_t cut = description.find('\n'); cut != std::string::npos) {
      description.resize(cut);  // one line per strategy
    }
    rows.emplace_back(name, description);
  }
  rows.emplace_back("manual", "the user's placement (--placement FILE; docs/placements.md)");
  return rows;
}

std::string StrategyTable() {
  const auto rows = StrategyDescriptions();
  size_t width = 4;
  for (const auto& row : rows) width = std::max(width, row.first.size());
  std::string out;
  for (const auto& [name, description] : rows) {
    out += fmt::format("{:<{}}  {}\n", name, width, description);
  }
  return out;
}

std::string RangeText(int64_t lo, uint64_t hi, const std::string& note) {
  return fmt::format("[{}, {}]{}", lo, hi, note.empty() ? "" : " (" + note + ")");
}

std::string RangeText(double lo, double hi, const std::string& note) {
  return fmt::format("[{}, {}]{}", NumberForMessage(lo), NumberForMessage(hi),
                     note.empty() ? "" : " (" + note + ")");
}

std::string CheckIntegerText(const std::string& text, int64_t lo, uint64_t hi,
                             const std::string& note) {
  const std::string rule = "must be an integer in " + RangeText(lo, hi, note);
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  bool in_range = false;
  bool parsed = false;
  if (!text.empty() && text[0] == '-') {
    int64_t v = 0;
    auto [ptr, ec] = std::from_chars(begin, end, v);
    parsed = ptr == end && (ec == std::errc() || ec == std::errc::result_out_of_range);
    in_range = ec == std::errc() && v >= lo && (v < 0 || static_cast<uint64_t>(v) <= hi);
  } else {
    const char* digits = !text.empty() && text[0] == '+' ? begin + 1 : begin;
    uint64_t v = 0;
    auto [ptr, ec] = std::from_chars(digits, end, v);
    parsed = digits != end && ptr == end &&
             (ec == std::errc() || ec == std::errc::result_out_of_range);
    in_range = ec == std::errc() && v <= hi && (lo <= 0 || v >= static_cast<uint64_t>(lo));
  }
  if (!parsed) return ValueForMessage(text) + " is not an integer; " + rule;
  if (!in_range) return ValueForMessage(text) + " is out of range; " + rule;
  return "";
}

std::string CheckRealText(const std::string& text, double lo, double hi, const std::string& note) {
  const std::string rule = "must be a number in " + RangeText(lo, hi, note);
  double v = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ptr != end || (ec != std::errc() && ec != std::errc::result_out_of_range)) {
    return ValueForMessage(text) + " is not a number; " + rule;
  }
  if (ec == std::errc::result_out_of_range || !std::isfinite(v)) {
    return ValueForMessage(text) + " is not a finite number; " + rule;
  }
  if (v < lo || v > hi) return ValueForMessage(text) + " is out of range; " + rule;
  return "";
}

CLI::Validator InputFileCheck(int64_t max_bytes) {
  return CLI::Validator(
      [max_bytes](std::string& value) -> std::string {
        // Preset and profile names are not files (the library resolves them first).
        for (const auto& p : spec::ListPresets()) {
          if (p.name == value) return "";
        }
        for (auto p : data::GeneratorProfileNames()) {
          if (p == value) return "";
        }
        std::error_code ec;
        if (!std::filesystem::exists(std::filesystem::symlink_status(value, ec)) &&
            !std::filesystem::exists(value, ec)) {
          return "";  // the library names what is missing, with the known names
        }
        Status s = CheckInputFile(value, max_bytes, "file");
        return s.ok() ? "" : s.message();
      },
      "", "input file");
}

CLI::Validator ModelInputCheck() {
  const CLI::Validator files = InputFileCheck(kMaxSpecFileBytes);
  return CLI::Validator(
      [files](std::string& value) -> std::string {
        // A checkpoint directory stands for its config.json (spec::LoadModel reads it).
        std::error_code ec;
        const std::filesystem::path config = std::filesystem::path(value) / "config.json";
        if (std::filesystem::is_directory(value, ec)) {
          if (!std::filesystem::exists(config, ec)) {
            return QuoteForMessage(value, 200) +
                   ": is a directory without a config.json; give a preset, a spec file, a "
                   "Hugging Face config.json or a checkpoint directory holding one";
          }
          std::string file = config.string();
          return files(file);
        }
        std::string copy = value;
        return files(copy);
      },
      "", "model input");
}

Status CheckOutputFile(const std::string& path, const std::string& flag) {
  if (path == "-") return OkStatus();
  namespace fs = std::filesystem;
  const std::string name = flag + " " + QuoteForMessage(path, 200);
  if (path.empty()) return InvalidArgumentError(flag + ": empty path");
  fs::path target(path);
  std::error_code ec;
  const fs::file_status st = fs::status(target, ec);
  if (fs::is_directory(st)) {
    return InvalidArgumentError(name + ": is a directory; give a file path");
  }
  if (fs::exists(st) && !fs::is_regular_file(st)) {
    return InvalidArgumentError(name + ": exists and is not a regular file");
  }
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  WEFT_RETURN_IF_ERROR(CheckOutputDir(dir.string(), flag + " directory"));
  return OkStatus();
}

Status CheckOutputs(OutputFlags files, OutputFlags dirs) {
  for (const auto& [flag, path] : files) {
    if (!path.empty()) WEFT_RETURN_IF_ERROR(CheckOutputFile(path, flag));
  }
  for (const auto& [flag, dir] : dirs) {
    if (!dir.empty()) WEFT_RETURN_IF_ERROR(CheckOutputDir(dir, flag));
  }
  return OkStatus();
}

Status CheckOutputDir(const std::string& dir, const std::string& flag) {
  namespace fs = std::filesystem;
  const std::string name = flag + " " + QuoteForMessage(dir, 200);
  if (dir.empty()) return InvalidArgumentError(flag + ": empty path");
  std::error_code ec;
  const fs::file_status st = fs::status(dir, ec);
  if (fs::exists(st)) {
    if (!fs::is_directory(st)) return InvalidArgumentError(name + ": not a directory");
    if (::access(dir.c_str(), W_OK | X_OK) != 0) {
      return InvalidArgumentError(name + ": directory is not writable");
    }
    return OkStatus();
  }
  // Missing: it is made when the output is written, and only inside an existing folder.
  const fs::path parent = ParentFolder(dir);
  if (!fs::is_directory(parent, ec)) {
    return InvalidArgumentError(name + ": " + MissingFolderRule(parent));
  }
  if (::access(parent.c_str(), W_OK | X_OK) != 0) {
    return InvalidArgumentError(name + ": missing, and its folder " +
                                QuoteForMessage(parent.string(), 200) +
                                " is not writable");
  }
  return OkStatus();
}

std::function<void(const std::string&)> ProgressPrinter() {
  if (::isatty(STDERR_FILENO)) {
    return [](const std::string& m) { std::cerr << "\r" << m << "\033[K" << std::flush; };
  }
  return [](const std::string& m) { std::cerr << m << "\n"; };
}

std::function<void(const std::string&)> TerminalProgress() {
  if (::isatty(STDERR_FILENO)) return ProgressPrinter();
  return [](const std::string&) {};
}

void ClearProgress() {
  if (::isatty(STDERR_FILENO)) std::cerr << "\r\033[K" << std::flush;
}

int ReportError(const Status& status) {
  // One line: control bytes (newlines included) escaped, very long messages cut.
  std::string message = EscapeForMessage(status.message(), 2000);
  std::cerr << "weft: error: " << message << "\n";
  return IsUserError(status) ? 2 : 1;
}

Status WriteFileAtomically(const std::string& path, const std::string& content) {
  StagedFiles files;
  WEFT_RETURN_IF_ERROR(files.Write(path, content));
  return files.Commit();
}

StagedFiles::~StagedFiles() {
  std::error_code ignored;
  for (const Staged& f : staged_) std::filesystem::remove(f.temp, ignored);
  // Directories made for files that were not committed, deepest first; one that holds anything
  // else is left (remove fails on it).
  if (!committed_) {
    for (auto it = created_dirs_.rbegin(); it != created_dirs_.rend(); ++it) {
      std::filesystem::remove(*it, ignored);
    }
  }
}

Status StagedFiles::Write(const std::string& path, std::string_view content) {
  namespace fs = std::filesystem;
  if (path == "-") {
    std::lock_guard<std::mutex> lock(mu_);
    stdout_ += content;
    return OkStatus();
  }
  const std::string name = QuoteForMessage(path, 200);
  fs::path target(path);
  std::error_code ec;
  if (fs::is_directory(target, ec)) {
    return InvalidArgumentError(name + ": is a directory; give a file path");
  }
  fs::path tmp = target;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (target.has_parent_path() && !fs::exists(target.parent_path(), ec)) {
      // One missing folder is made, inside an existing one (CheckOutputDir's rule); an
      // uncommitted run removes it again.
      const fs::path dir = target.parent_path();
      const fs::path parent = ParentFolder(dir);
      if (!fs::is_directory(parent, ec)) {
        return InvalidArgumentError(name + ": folder " + QuoteForMessage(dir.string(), 200) +
                                    " is " + MissingFolderRule(parent));
      }
      if (!fs::create_directory(dir, ec) && ec) {
        return InvalidArgumentError(name + ": cannot create directory: " + ec.message());
      }
      created_dirs_.push_back(dir);
    }
    tmp += ".tmp" + std::to_string(random_()) + "." + std::to_string(staged_.size());
    // Kept before it is written: a failure below still removes it.
    staged_.push_back({target, tmp});
  }
  std::ofstream out(tmp, std::ios::binary);
  if (!out) return InvalidArgumentError(name + ": cannot open for writing");
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
  out.flush();
  if (!out) return ResourceExhaustedError(name + ": write failed (disk full?)");
  return OkStatus();
}

Status StagedFiles::Commit() {
  namespace fs = std::filesystem;
  std::lock_guard<std::mutex> lock(mu_);
  if (!stdout_.empty()) {
    std::cout << stdout_;
    std::cout.flush();
    stdout_.clear();
  }
  while (!staged_.empty()) {
    std::error_code ec;
    fs::rename(staged_.front().temp, staged_.front().target, ec);
    if (ec) {
      return InvalidArgumentError(QuoteForMessage(staged_.front().target.string(), 200) +
                                  ": cannot replace the file: " + ec.message());
    }
    staged_.erase(staged_.begin());
  }
  committed_ = true;
  return OkStatus();
}

}  // namespace weft::cli
