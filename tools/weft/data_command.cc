// `weft data gen|stats|profile`: synthetic sample generation, dataset profiles and per-sample
// input shapes (thin over weft::data).
#include <algorithm>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "cli_common.h"
#include "weft/data/generators.h"
#include "weft/data/readers.h"
#include "weft/data/shapes.h"
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

struct DataProfileArgs {
  std::string input;  // generator profile name, else data file
  std::string model;
  int64_t num_samples = 0;  // 0 = all of a file, 1000 from a generator
  uint64_t seed = 0;
  int64_t max_video_frames = -1;  // -1 = the model's setup.max_video_frames
  bool json = false;
  std::string out;  // shape file
};

constexpr int64_t kDefaultGeneratedSamples = 1000;

// `count` of the indices [0, n) drawn without replacement (partial Fisher–Yates over
// std::mt19937_64, whose output is fixed by the standard), in file order.
std::vector<size_t> DrawIndices(size_t n, size_t count, uint64_t seed) {
  std::vector<size_t> index(n);
  for (size_t i = 0; i < n; ++i) index[i] = i;
  std::mt19937_64 engine(seed);
  for (size_t i = 0; i < count; ++i) std::swap(index[i], index[i + engine() % (n - i)]);
  index.resize(count);
  std::sort(index.begin(), index.end());
  return index;
}

int RunProfile(const DataProfileArgs& args) {
  if (!args.out.empty()) {
    if (Status s = CheckOutputFile(args.out, "--out"); !s.ok()) return ReportError(s);
  }
  auto model = spec::LoadModel(args.model);
  if (!model.ok()) return ReportError(model.status());
  std::vector<spec::Sample> samples;
  std::string source;
  const auto profiles = data::GeneratorProfileNames();
  if (std::find(profiles.begin(), profiles.end(), args.input) != profiles.end()) {
    const int64_t n = args.num_samples > 0 ? args.num_samples : kDefaultGeneratedSamples;
    auto generated = data::GenerateSamples(
        args.input, data::GeneratorOptions{.num_samples = n, .seed = args.seed});
    if (!generated.ok()) return ReportError(generated.status());
    samples = std::move(*generated);
    source = args.input + " (generator, seed " + std::to_string(args.seed) + ")";
  } else {
    auto read = data::ReadSamples(args.input);
    if (!read.ok()) {
      std::string known;
      for (auto p : profiles) known += (known.empty() ? "" : ", ") + std::string(p);
      return ReportError(Status(
          read.status().code(),
          std::string(read.status().message()) + " (and not a generator profile: " + known + ")"));
    }
    if (read->num_malformed > 0) {
      std::cerr << "weft: warning: " << args.input << ": skipped " << read->num_malformed
                << " malformed record(s); first: " << read->warnings.front().ToString() << "\n";
    }
    source = args.input;
    if (args.num_samples > 0 && static_cast<size_t>(args.num_samples) < read->samples.size()) {
      for (size_t i :
           DrawIndices(read->samples.size(), static_cast<size_t>(args.num_samples), args.seed)) {
        samples.push_back(std::move(read->samples[i]));
      }
      source += " (" + std::to_string(samples.size()) + " of " +
                std::to_string(read->samples.size()) + " samples, seed " +
                std::to_string(args.seed) + ")";
    } else {
      samples = std::move(read->samples);
    }
  }
  data::WorkloadOptions options;
  options.max_vit_video_frames = static_cast<int>(
      args.max_video_frames >= 0 ? args.max_video_frames
                                 : (model->setup ? model->setup->max_video_frames : 0));
  auto profile = data::ComputeDataProfile(samples, model->model, options);
  if (!profile.ok()) return ReportError(profile.status());
  auto shapes = data::ComputeSampleShapes(samples, model->model, options, args.model, source);
  if (!shapes.ok()) return ReportError(shapes.status());
  const int64_t context = model->setup ? model->setup->context_tokens : 0;
  int64_t over_context = 0;
  for (const auto& s : shapes->samples) over_context += context > 0 && s.llm_tokens > context;
  if (!args.out.empty()) {
    if (Status s = WriteFileAtomically(args.out, data::SampleShapesToJsonl(*shapes)); !s.ok())
      return ReportError(s);
  }
  std::ostream& report = args.out == "-" ? std::cerr : std::cout;  // the shape file owns stdout
  if (args.json) {
    nlohmann::ordered_json j;
    j["model"] = args.model;
    j["source"] = source;
    j["max_video_frames"] = options.max_vit_video_frames;
    j["context_tokens"] = context;
    j["samples_over_context"] = over_context;
    j["profile"] = nlohmann::ordered_json::parse(profile->ToJson());
    report << j.dump(2) << "\n";
  } else {
    report << source << ", model " << args.model << " (max video frames "
           << (options.max_vit_video_frames > 0 ? std::to_string(options.max_vit_video_frames)
                                                : "none")
           << ")\n"
           << profile->ToText();
    if (context > 0) {
      report << "samples longer than the context (" << context << " tokens): " << over_context
             << "\n";
    }
  }
  return 0;
}

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
    if (!with_model.ok()) {
      // Name the file and the model the samples did not fit (issue 34 item 17).
      return ReportError(Status(with_model.status().code(),
                                args.file + " with model " + args.model + ": " +
                                    std::string(with_model.status().message())));
    }
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
      "Sample metadata: synthetic generators, dataset profiles and per-sample input shapes.\n\n"
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

  auto profile_args = std::make_shared<DataProfileArgs>();
  CLI::App* prof = data_cmd->add_subcommand(
      "profile",
      "DFLOP's data profiler: the input shapes a model's preprocessing makes of each sample (per\n"
      "encoder/projector: instances = images, frames, audio windows, and their tokens; the LLM\n"
      "sequence length) as histograms, and with --out a per-sample shape file\n"
      "(weft.data_shapes/v1) an optimizer reads back. INPUT is a generator profile (" +
          profiles +
          ") or a data file.\n\n"
          "Example:\n  weft data profile dflop-mixed --model llava-ov-llama3-8b --samples 2000 "
          "--max-video-frames 32 --out shapes.jsonl\n");
  prof->add_option("input", profile_args->input, "generator profile or data file")
      ->required()
      ->check(InputFileCheck(kMaxDataFileBytes));
  prof->add_option("--model", profile_args->model, "model preset or spec file")
      ->required()
      ->check(InputFileCheck(kMaxSpecFileBytes));
  AddNumberOption(prof, "--samples", profile_args->num_samples, int64_t{0}, kMaxGeneratedSamples,
                  "samples: drawn from a generator, or a random subset of a file",
                  "0 = all of a file, 1000 from a generator");
  AddNumberOption(prof, "--seed", profile_args->seed, uint64_t{0}, ~uint64_t{0},
                  "seed of the generator or of the subset")
      ->capture_default_str();
  AddNumberOption(prof, "--max-video-frames", profile_args->max_video_frames, int64_t{-1},
                  int64_t{16384}, "frames a ViT samples per clip at most",
                  "-1 = the model's setup, 0 = no cap")
      ->capture_default_str();
  prof->add_flag("--json", profile_args->json, "machine-readable summary");
  prof->add_option("--out", profile_args->out,
                   "write the per-sample shape file (JSONL; '-' = stdout)");
  prof->callback([profile_args, &exit_code] { exit_code = RunProfile(*profile_args); });
}

}  // namespace weft::cli
