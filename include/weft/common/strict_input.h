#pragma once
// Strict reading of YAML and JSON input, shared by the spec reader (models, clusters), the
// placement and MIMO-config readers, the data readers and the plan reader: duplicate and unknown
// keys are errors, unknown names get a "did you mean", and every failure is one line quoting the
// input safely.
// Free functions; thread-safe.
#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "weft/common/status.h"

namespace weft {

// `status` with its message made one safe line: control bytes (newlines included) escaped as \xNN
// and the text cut at `max_chars` ("... (N bytes)"). Readers apply it at their boundary so that
// no input byte reaches a terminal raw, whatever path the message took.
Status OneLineStatus(const Status& status, size_t max_chars = 1000);
std::string OneLineMessage(std::string_view message, size_t max_chars = 1000);

// " (did you mean 'x'?)" for the candidate closest to `word` (edit distance at most
// max(2, |word|/3)), else "".
std::string DidYouMean(std::string_view word, const std::vector<std::string>& candidates);

// The most nodes one YAML input may expand to, each alias counted as a copy of the node it names
// (a scalar, null, sequence or map is one node). Bounds an alias bomb: 10 levels of 10 aliases
// is a 300-byte file that expands to 10^10 nodes, which a reader walking the tree would visit.
// Every YAML file in presets/ and tests/ is under 2 KB, so under 2,000 nodes.
inline constexpr int64_t kMaxYamlNodes = int64_t{1} << 20;

// THE way weft reads YAML (model and cluster specs, placements, MIMO configs): parses `text` as
// exactly one YAML document. InvalidArgument, one line starting "SOURCE:LINE:COL: ", when
//   - it is not YAML ("malformed YAML: ..."),
//   - a second document follows the first ("a second YAML document starts here; ..."),
//   - aliases expand it past kMaxYamlNodes nodes ("aliases expand the document past ..."),
//   - an alias names a node that contains it (a cycle no reader could walk),
//   - a mapping anywhere has a key twice (CheckNoDuplicateKeys).
// The alias count is made on the parser's events before any tree is walked, so a bomb is refused
// in time linear in the file size. An empty input is a null node, as yaml-cpp reads it.
StatusOr<YAML::Node> LoadStrictYaml(std::string_view text, std::string_view source);

// OK when no mapping anywhere under `node` has a key twice; else InvalidArgument
// "SOURCE:LINE:COL: PATH appears twice (first at line L); keys must be unique". (yaml-cpp keeps
// both entries of a duplicated key, and a reader would silently take one of them.)
Status CheckNoDuplicateKeys(const YAML::Node& node, std::string_view source);

// `node` is a map whose keys are unique and all in `known`.
Status CheckMapKeys(const YAML::Node& node, std::string_view source, std::string_view path,
                    const std::vector<std::string>& known);

// `node` is a whole integer scalar in [min_value, max_value].
StatusOr<int> ReadBoundedInt(const YAML::Node& node, std::string_view source,
                             std::string_view path, int min_value, int max_value);

// Parses `text` as JSON into `out`; InvalidArgument (no source prefix) when it is not JSON ("not
// valid JSON (byte N): ...") or when an object has a key twice ("key \"k\" appears twice in one
// object; keys must be unique"; nlohmann would keep the last value silently).
// `error_byte` (optional) receives the 0-based byte offset of a syntax error.
Status ParseJsonRejectingDuplicates(std::string_view text, nlohmann::json* out,
                                    size_t* error_byte = nullptr);

// The first key of JSON object `obj` that is not in `known`, or nullptr.
const std::string* FirstUnknownKey(const nlohmann::json& obj, const std::vector<std::string>& known);

}  // namespace weft
