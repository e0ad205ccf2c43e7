#include "cli_common.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>

#include "weft/strategy/strategy.h"

namespace weft::cli {

std::string StrategyList() {
  std::string out;
  for (const auto& name : strategy::StrategyNames()) out += (out.empty() ? "" : ", ") + name;
  return out;
}

int ReportError(const Status& status) {
  std::string message = status.message();
  for (char& c : message) {
    if (c == '\n') c = ' ';
  }
  std::cerr << "weft: error: " << message << "\n";
  return IsUserError(status) ? 2 : 1;
}

Status WriteFileAtomically(const std::string& path, const std::string& content) {
  if (path == "-") {
    std::cout << content;
    std::cout.flush();
    return OkStatus();
  }
  namespace fs = std::filesystem;
  fs::path target(path);
  std::error_code ec;
  if (target.has_parent_path() && !fs::exists(target.parent_path(), ec)) {
    fs::create_directories(target.parent_path(), ec);
    if (ec) return NotFoundError(path + ": cannot create directory: " + ec.message());
  }
  std::random_device rd;
  fs::path tmp = target;
  tmp += ".tmp" + std::to_string(rd());
  {
    std::ofstream out(tmp, std::ios::binary);
    if (!out) return NotFoundError(path + ": cannot open for writing");
    out << content;
    out.flush();
    if (!out) {
      fs::remove(tmp, ec);
      return InternalError(path + ": write failed");
    }
  }
  fs::rename(tmp, target, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return InternalError(path + ": rename failed: " + ec.message());
  }
  return OkStatus();
}

}  // namespace weft::cli
