// Bindings: Cornstarch's bitfield attention mask, token layouts and the block distribution over
// context-parallel ranks (weft::cp), so the runtime distributes tokens exactly as the planner does.
#include "bindings.h"
#include "weft/cp/distribution.h"
#include "weft/cp/mask.h"

namespace weft::python {

void RegisterCp(py::module_& m) {
  m.def(
      "cp_make_layout",
      [](const std::string& mask, int64_t tokens, uint64_t seed, int modality_segments,
         int64_t min_document_tokens, int64_t max_document_tokens) {
        const cp::MaskKind kind = Unwrap(cp::ParseMaskKind(mask));
        return cp::LayoutToJson(Unwrap(cp::MakeLayout(
            kind, {.tokens = tokens,
                   .modality_segments = modality_segments,
                   .min_document_tokens = min_document_tokens,
                   .max_document_tokens = max_document_tokens,
                   .seed = seed})));
      },
      py::arg("mask"), py::arg("tokens"), py::arg("seed") = 0, py::arg("modality_segments") = 8,
      py::arg("min_document_tokens") = 4096, py::arg("max_document_tokens") = 16384,
      "A random EP / EE / MP layout (Cornstarch Fig. 11) as layout JSON.");
  m.def(
      "cp_token_mask",
      [](const std::string& layout_json) {
        const cp::TokenMask mask = cp::BuildTokenMask(Unwrap(cp::ParseLayoutJson(layout_json)));
        // Bit 62 is the highest bit set, so every word fits a signed 64-bit integer.
        std::vector<int64_t> bits(mask.bits.begin(), mask.bits.end());
        py::dict d;
        d["bits"] = bits;
        d["document"] = mask.document;
        return d;
      },
      py::arg("layout_json"),
      "Per-token BAM words (bit 0 text, 1..61 modalities, 62 causal) and document indices.");
  m.def(
      "cp_distribute",
      [](const std::string& layout_json, int ranks, const std::string& method, uint64_t seed,
         int block_tokens) {
        const cp::Layout layout = Unwrap(cp::ParseLayoutJson(layout_json));
        const cp::BlockWorkloads w = Unwrap(cp::ComputeBlockWorkloads(layout, block_tokens));
        const cp::Distribution d = Unwrap(cp::Distribute(
            w.key_blocks, {.ranks = ranks, .method = Unwrap(cp::ParseMethod(method)), .seed = seed}));
        py::dict out;
        out["tokens"] = layout.Tokens();
        out["block_tokens"] = block_tokens;
        out["key_blocks"] = w.key_blocks;
        out["attended_keys"] = w.attended_keys;
        out["blocks_of_rank"] = d.blocks_of_rank;
        out["load_of_rank"] = d.load_of_rank;
        out["imbalance"] = d.Imbalance();
        return out;
      },
      py::arg("layout_json"), py::arg("ranks"), py::arg("method") = "lpt", py::arg("seed") = 0,
      py::arg("block_tokens") = cp::kDefaultBlockTokens,
      "Per-block workloads and the block distribution over `ranks` context-parallel ranks.");
}

}  // namespace weft::python
