#include "weft/strategy/module_sets.h"

#include "weft/data/workload.h"

namespace weft::strategy {

StatusOr<ModuleSides> SplitEncoderSide(const spec::ModelSpec& model) {
  const int llm = data::FirstLlmModule(model);
  if (llm < 0) {
    return FailedPreconditionError("model '" + model.name + "' has no llm module");
  }
  // Modules that reach the LLM: reverse search from it.
  std::vector<bool> upstream(model.modules.size(), false);
  std::vector<int> stack = {llm};
  while (!stack.empty()) {
    const int m = stack.back();
    stack.pop_back();
    for (int p : model.Predecessors(m)) {
      if (!upstream[p]) {
        upstream[p] = true;
        stack.push_back(p);
      }
    }
  }
  ModuleSides sides;
  for (int m : model.TopologicalOrder()) {
    (upstream[m] ? sides.encoders : sides.backbone).push_back(m);
  }
  return sides;
}

}  // namespace weft::strategy
