// libFuzzer target: the plan reader (weft.plan/v3 JSON, data tables included) and, for a plan it
// accepts, the validator and a write/read round trip; the same input through the measured-record
// reader (weft.measured/v1, the runtime's feedback) and, when it accepts it, its round trip.
// A plan the reader accepts is also mutated in its meaning, not its syntax (byte mutations
// rarely get past the JSON reader to the validator's rules): a few single edits chosen by a hash
// of the input — an action dropped or moved, a stage's microbatch / chunk / pass set out of or
// within the tables, a buffer's shape or rows changed, a compute's inputs, outputs, instances or
// recompute mix changed, a peer changed — each validated (a one-line error or OK) and, when its
// JSON reads back, validated again with the same verdict (the reader keeps what it reads).
#include <array>
#include <cstdint>

#include "fuzz_common.h"
#include "weft/plan/measured.h"
#include "weft/plan/plan_json.h"
#include "weft/plan/validator.h"

namespace {

using weft::plan::Action;
using weft::plan::ExecutionPlan;

// splitmix64: the edits' choices, seeded by the input's bytes (deterministic per input).
struct Choices {
  uint64_t state;
  uint64_t Next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  int Below(size_t n) { return n == 0 ? 0 : static_cast<int>(Next() % n); }
  template <typename T, size_t N>
  T Pick(const std::array<T, N>& values) {
    return values[Below(N)];
  }
};

// One semantic edit of `plan`; false when the plan has nothing it applies to.
bool Mutate(ExecutionPlan& plan, Choices& c) {
  if (plan.ranks.empty()) return false;
  auto& rank = plan.ranks[c.Below(plan.ranks.size())];
  const int num_mb = static_cast<int>(plan.data.microbatches.size());
  constexpr std::array<int, 6> kIndices = {-1, 0, 1, 2, 999, 1 << 30};
  switch (c.Below(10)) {
    case 0:  // drop an action
      if (rank.actions.empty()) return false;
      rank.actions.erase(rank.actions.begin() + c.Below(rank.actions.size()));
      return true;
    case 1: {  // move an action
      if (rank.actions.size() < 2) return false;
      const int from = c.Below(rank.actions.size()), to = c.Below(rank.actions.size());
      const Action a = rank.actions[from];
      rank.actions.erase(rank.actions.begin() + from);
      rank.actions.insert(rank.actions.begin() + to, a);
      return true;
    }
    case 2: {  // a stage's microbatch, chunk, sub-microbatch, module or pass
      if (rank.actions.empty()) return false;
      Action& a = rank.actions[c.Below(rank.actions.size())];
      weft::plan::StageRef& s = a.stage;
      // (A compute's pass is its kind's: JSON has no field for another.)
      switch (c.Below(weft::plan::IsCompute(a.kind) ? 4 : 5)) {
        case 0:
          s.microbatch = c.Below(2) ? c.Pick(kIndices) : c.Below(num_mb + 2);
          break;
        case 1:
          s.chunk = c.Pick(kIndices);
          break;
        case 2:
          s.sub_microbatch = c.Pick(kIndices);
          break;
        case 3:
          s.module = c.Below(plan.module_names.size() + 1);
          break;
        default:
          s.pass = static_cast<weft::spec::Pass>(c.Below(4));
          break;
      }
      return true;
    }
    case 3: {  // a buffer's shape
      if (rank.buffers.empty()) return false;
      weft::plan::Buffer& b = rank.buffers[c.Below(rank.buffers.size())];
      const int64_t rows = b.rows;
      const std::array<std::vector<int64_t>, 6> shapes = {
          std::vector<int64_t>{0},    {}, {rows}, {rows, 0}, {rows + 1, 64},
          {int64_t{1} << 40, 1 << 20}};
      b.tensor.shape = shapes[c.Below(shapes.size())];
      return true;
    }
    case 4: {  // a buffer's rows
      if (rank.buffers.empty()) return false;
      rank.buffers[c.Below(rank.buffers.size())].rows =
          c.Pick(std::array<int64_t, 5>{-1, 0, 1, 144, int64_t{1} << 50});
      return true;
    }
    case 5:
    case 6:
    case 7: {  // a compute's inputs, outputs, instances or recompute mix
      std::vector<Action*> computes;
      for (Action& a : rank.actions) {
        if (weft::plan::IsCompute(a.kind)) computes.push_back(&a);
      }
      if (computes.empty()) return false;
      Action& a = *computes[c.Below(computes.size())];
      switch (c.Below(5)) {
        case 0:
          a.inputs.clear();
          break;
        case 1:
          a.outputs.clear();
          break;
        case 2:
          a.instance_begin = c.Pick(kIndices);
          a.instance_end = c.Pick(kIndices);
          break;
        case 3:
          a.kind = c.Pick(std::array<weft::plan::ActionKind, 4>{
              weft::plan::ActionKind::kForward, weft::plan::ActionKind::kBackward,
              weft::plan::ActionKind::kBackwardInput, weft::plan::ActionKind::kBackwardWeight});
          a.stage.pass = weft::plan::PassOf(a.kind);
          break;
        default:
          a.recompute_layers[c.Below(4)] = static_cast<int16_t>(c.Below(101) - 1);
          break;
      }
      return true;
    }
    case 8: {  // a transfer's peer or buffer
      std::vector<Action*> posts;
      for (Action& a : rank.actions) {
        if (a.buffer >= 0) posts.push_back(&a);
      }
      if (posts.empty()) return false;
      Action& a = *posts[c.Below(posts.size())];
      if (c.Below(2)) {
        a.peer = c.Below(plan.ranks.size() + 1);
      } else if (!rank.buffers.empty()) {
        a.buffer = rank.buffers[c.Below(rank.buffers.size())].id;
      }
      return true;
    }
    default: {  // a table entry: a rank's chunk layers or slot, a microbatch's instances
      if (plan.data.ranks.empty()) return false;
      auto& chunks = plan.data.ranks[c.Below(plan.data.ranks.size())].chunks;
      if (chunks.empty()) return false;
      weft::plan::ChunkData& chunk = chunks[c.Below(chunks.size())];
      if (c.Below(2)) {
        chunk.num_layers = c.Below(6);
      } else {
        chunk.chunk = c.Below(3);
      }
      return true;
    }
  }
}

// Validates a mutated plan and, when its JSON reads back, the read plan: the same verdict.
void CheckMutated(const ExecutionPlan& plan) {
  auto report = weft::plan::ValidatePlan(plan);
  if (!report.ok()) weft::fuzz::CheckError(report.status());
  auto back = weft::plan::PlanFromJson(weft::plan::PlanToJson(plan));
  if (!back.ok()) {
    weft::fuzz::CheckError(back.status());
    return;
  }
  auto again = weft::plan::ValidatePlan(*back);
  if (again.ok() != report.ok() ||
      (!again.ok() && again.status().message() != report.status().message())) {
    std::fprintf(stderr, "a mutated plan validates differently after JSON: %s / %s\n",
                 report.ok() ? "OK" : report.status().message().c_str(),
                 again.ok() ? "OK" : again.status().message().c_str());
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = weft::fuzz::AsText(data, size);
  weft::StatusOr<std::vector<weft::plan::MeasuredIteration>> measured =
      weft::plan::MeasuredFromJson(text);
  if (!measured.ok()) {
    weft::fuzz::CheckError(measured.status());
  } else {
    auto again = weft::plan::MeasuredFromJson(weft::plan::MeasuredToJson(*measured));
    if (!again.ok() || *again != *measured) {
      std::fprintf(stderr, "written measured record does not read back equal: %s\n",
                   again.ok() ? "different values" : again.status().message().c_str());
      std::abort();
    }
  }
  weft::StatusOr<weft::plan::ExecutionPlan> plan = weft::plan::PlanFromJson(text);
  if (!plan.ok()) {
    weft::fuzz::CheckError(plan.status());
    return 0;
  }
  auto report = weft::plan::ValidatePlan(*plan);
  if (!report.ok()) weft::fuzz::CheckError(report.status());
  const std::string json = weft::plan::PlanToJson(*plan);
  auto again = weft::plan::PlanFromJson(json);
  if (!again.ok()) {
    std::fprintf(stderr, "written plan does not read back: %s\n", again.status().message().c_str());
    std::abort();
  }
  // FNV-1a of the input seeds the semantic edits.
  uint64_t hash = 0xCBF29CE484222325ULL;
  for (size_t i = 0; i < size; ++i) hash = (hash ^ data[i]) * 0x100000001B3ULL;
  Choices choices{hash};
  for (int k = 0; k < 8; ++k) {
    ExecutionPlan mutated = *plan;
    if (Mutate(mutated, choices)) CheckMutated(mutated);
  }
  return 0;
}
