// `weft data gen|stats`: synthetic sample generation and dataset profiles (thin over weft::data).
#include <iostream>
#include <memory>
#include <string>

#include "cli_common.h"
#include "weft/data/generators.h"
#include "weft/data/readers.h"
#include "weft/data/stats.h"
#include "weft/spec/preset.h"

namespace weft::cli {
namespace {

// data gen buffers every sample before writing (atomically): ~300 bytes of memory each.
constexpr int64_t kMaxGeneratedSamples = 2'000'000;

struct DataGenArgs {
  std::string profile;
  int64_t num_samples = 1000;
  uint64_t seed = 0;
  int64_t iteration = 0;
  std::string out = "-";
};

struct DataStatsArgs {
  std::string file;
  std::string format;  // empty = detect
  std::string model;   // optional preset name or spec file
  bool json = false;
  bool show_warnings = false;
};

int RunGen(const DataGenArgs& args) {
  if (Status s = CheckOutputFile(args.out, "--out"); !s.ok()) return ReportError(s);
  auto samples = data::GenerateSamples(
      args.profile, data::GeneratorOptions{.num_samples = args.num_samples, .seed = args.seed,
                                           .iteration = args.iteration});
  if (!samples.ok()) return ReportError(samples.status());
  Status written = WriteFileAtomically(args.out, data::SamplesToJsonl(*samples));
  if (!written.ok()) return ReportError(written);
  return 0;
}

int RunStats(const DataStatsArgs& args) {
  StatusOr<data::ReadResult> read = [&]() -> StatusOr<data::ReadResult> {
    if (args.format.empty()) return data::ReadSamples(args.file);
    WEFT_ASSIGN_OR_RETURN(data::DataFormat format, data::ParseDataFormat(args.format));
    return data::ReadSamples(args.file, format);
  }();
  if (!read.ok()) return ReportError(read.status());
  // Malformed records are skipped by the readers; say so on stderr (progress/diagnostics channel).
  if (read->num_malformed > 0) {
    std::cerr << "weft: warning: " << args.file << ": skipped " << read->num_malformed
              << " malformed record(s); first: " << read->warnings.front().ToString() << "\n";
    if (args.show_warnings) {
      for (const auto& w : read->warnings) std::cerr << "  " << w.ToString() << "\n";
    }
  }
  data::DataProfile profile;
  if (!args.model.empty()) {
    auto model = spec::LoadModel(args.model);
    if (!model.ok()) return ReportError(model.status());
    auto with_model = data::ComputeDataProfile(read->samples, model->model);
    if (!with_model.ok()) return ReportError(with_model.status());
    profile = std::move(*with_model);
  } else {
    profile = data::ComputeDataProfile(read->samples);
  }
  if (args.json) {
    std::cout << profile.ToJson() << "\n";
  } else {
    std::cout << args.file << " (" << data::DataFormatName(read->format) << ")\n" << profile.ToText();
  }
  return 0;
}

}  // namespace

void RegisterDataCommand(CLI::App& app, int& exit_code) {
  CLI::App* data_cmd = app.add_subcommand(
      "data",
      "Sample metadata: synthetic generators and dataset profiles.\n\n"
      "Example:\n  weft data gen --profile obelics --n 1000 --seed 7 > obelics.jsonl\n"
      "  weft data stats obelics.jsonl\n");
  data_cmd->require_subcommand(1);

  std::string profiles;
  for (auto p : data::GeneratorProfileNames()) profiles += (profiles.empty() ? "" : ", ") + std::string(p);
  auto gen_args = std::make_shared<DataGenArgs>();
  CLI::App* gen = data_cmd->add_subcommand(
      "gen",
      "Draw synthetic samples mimicking a published dataset, as weft JSONL (one sample per line).\n"
      "Profiles: " + profiles + ".\n\n"
      "Example:\n  weft data gen --profile rise-and-fall --n 64 --seed 1 --iteration 3 --out it3.jsonl\n");
  gen->add_option("--profile", gen_args->profile, "generator profile (" + profiles + ")")->required();
  AddNumberOption(gen, "--n", gen_args->num_samples, int64_t{0}, kMaxGeneratedSamples,
                  "number of samples",
                  "about 300 MB and 4 s per million; for more, concatenate calls with "
                  "--iteration 0, 1, 2, ...")
      ->capture_default_str();
  AddNumberOption(gen, "--seed", gen_args->seed, uint64_t{0}, ~uint64_t{0},
                  "random seed (same seed => same output)")
      ->capture_default_str();
  AddNumberOption(gen, "--iteration", gen_args->iteration, int64_t{0}, int64_t{1'000'000'000},
                  "training iteration (mixed into the seed; rise-and-fall bounds)")
      ->capture_default_str();
  gen->add_option("--out", gen_args->out, "output file ('-' = stdout)");
  gen->callback([gen_args, &exit_code] { exit_code = RunGen(*gen_args); });

  std::string formats;
  for (auto f : data::DataFormatNames()) formats += (formats.empty() ? "" : ", ") + std::string(f);
  auto stats_args = std::make_shared<DataStatsArgs>();
  CLI::App* stats = data_cmd->add_subcommand(
      "stats",
      "Profile a dataset file: count, mean, min, p50, p90, max of images/sample, text tokens,\n"
      "text tokens/image, image megapixels, video and audio seconds (and, with --model, the tokens\n"
      "each module sees). Any supported format: " + formats + ".\n\n"
      "Example:\n  weft data stats ../shared/data/video/msrvtt_10k_clip_metadata.jsonl --json\n");
  stats->add_option("file", stats_args->file, "dataset file")
      ->required()
      ->check(InputFileCheck(kMaxDataFileBytes));
  stats->add_option("--format", stats_args->format, "force a format (" + formats + ")");
  stats->add_option("--model", stats_args->model, "model preset or spec file: add per-module tokens")
      ->check(ModelInputCheck());
  stats->add_flag("--json", stats_args->json, "machine-readable output");
  stats->add_flag("--warnings", stats_args->show_warnings, "list every malformed record on stderr");
  stats->callback([stats_args, &exit_code] { exit_code = RunStats(*stats_args); });
}

}  // namespace weft::cli
