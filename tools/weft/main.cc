// weft: planner, simulator and runtime for distributed training of multimodal LLMs.
#include <CLI/CLI.hpp>

#include <iostream>

#include "cli_common.h"
#include "weft/common/allocator.h"
#include "weft/common/text.h"

int main(int argc, char** argv) {
  weft::KeepFreedMemoryForReuse();
  CLI::App app{
      "weft - plan, simulate and compare distributed training of multimodal LLMs.\n\n"
      "Example:\n  weft presets\n  weft cost --model vlm-s --cluster h800 --tp 2\n"
      "  weft cp --tokens 65536 --mask EE --ranks 8\n"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "weft 0.1.0");
  int exit_code = 0;
  weft::cli::RegisterCostCommand(app, exit_code);
  weft::cli::RegisterDataCommand(app, exit_code);
  weft::cli::RegisterPresetsCommand(app, exit_code);
  weft::cli::RegisterValidateCommand(app, exit_code);
  weft::cli::RegisterExportCommand(app, exit_code);
  weft::cli::RegisterCompareCommand(app, exit_code);
  weft::cli::RegisterSimulateCommand(app, exit_code);
  weft::cli::RegisterPlanCommand(app, exit_code);
  weft::cli::RegisterBenchCommand(app, exit_code);
  weft::cli::RegisterCpCommand(app, exit_code);
  weft::cli::RegisterOptimizeCommand(app, exit_code);
  weft::cli::RegisterImportCommand(app, exit_code);
  weft::cli::RegisterTuneCommand(app, exit_code);
  // A first word that is no subcommand is named, with the known ones (CLI11 would say "A
  // subcommand is required").
  if (argc > 1 && argv[1][0] != '-') {
    std::string known;
    bool found = false;
    for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
      known += (known.empty() ? "" : ", ") + sub->get_name();
      found = found || sub->check_name(argv[1]);
    }
    if (!found) {
      std::cerr << "weft: error: unknown subcommand " << weft::QuoteForMessage(argv[1], 40)
                << "; known: " << known << " (weft --help describes them)\n";
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // CLI11's messages quote the user's text as typed: one line, control bytes escaped.
    std::cerr << "weft: error: " << weft::EscapeForMessage(e.what(), 2000) << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "weft: internal error: " << e.what() << "\n";
    return 1;
  }
  return exit_code;
}
