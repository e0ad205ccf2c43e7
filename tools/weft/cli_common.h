#pragma once
// Shared helpers of the weft CLI subcommands (thin layer over the library).
#include <CLI/CLI.hpp>

#include <string>

#include "weft/common/status.h"

namespace weft::cli {

// Prints "weft: error: <message>" on one line to stderr and returns the exit code:
// 2 for bad input (IsUserError), 1 for internal failures.
int ReportError(const Status& status);

// Writes `content` to `path` atomically (temp file + rename), so a failure never leaves a
// half-written file. "-" writes to stdout.
Status WriteFileAtomically(const std::string& path, const std::string& content);

// "megatron-1f1b, megatron-vpp, ..." (every registered strategy, for help texts).
std::string StrategyList();

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

}  // namespace weft::cli
