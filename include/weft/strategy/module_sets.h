#pragma once
// Which modules sit on the encoder side of the backbone and which on the backbone side.
#include <vector>

#include "weft/common/status.h"
#include "weft/spec/model.h"

namespace weft::strategy {

struct ModuleSides {
  std::vector<int> encoders;  // modules with a path to the first LLM (topological order)
  std::vector<int> backbone;  // the first LLM and every other module (topological order)
};

// FailedPrecondition if the model has no kLlm module.
StatusOr<ModuleSides> SplitEncoderSide(const spec::ModelSpec& model);

}  // namespace weft::strategy
