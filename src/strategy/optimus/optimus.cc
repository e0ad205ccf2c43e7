// Optimus (coarse-grained bubble scheduling): encoders and backbone each spread over all P ranks;
// every rank runs the encoder forward work of the whole batch first, then the backbone's 1F1B,
// then the encoder backward work.
#include <algorithm>

#include "weft/data/workload.h"
#include "weft/sched/generators.h"
#include "weft/strategy/baselines.h"
#include "weft/strategy/common.h"
#include "weft/strategy/module_sets.h"

namespace weft::strategy {
namespace {

// Per group: every encoder forward of the batch (microbatch order), then the backbone's
// stages in 1F1B order (rank r = group index along the backbone chain: min(P−r−1, m) warmup
// forwards, then alternate), then every encoder backward.
StatusOr<sched::Schedule> OptimusOrder(const graph::StageGraph& g,
                                       const std::vector<bool>& is_encoder) {
  const int p = g.num_groups();
  sched::Schedule out;
  out.name = "optimus";
  out.order.resize(p);
  for (int gi = 0; gi < p; ++gi) {
    std::vector<graph::StageId> enc_f, enc_b, llm_f, llm_b;
    for (int s = 0; s < g.num_stages(); ++s) {
      const auto& st = g.stage(s);
      if (st.group != gi) continue;
      const bool fwd = st.pass == spec::Pass::kForward;
      if (is_encoder[st.module]) {
        (fwd ? enc_f : enc_b).push_back(s);
      } else {
        (fwd ? llm_f : llm_b).push_back(s);
      }
    }
    auto by_flow = [&](graph::StageId a, graph::StageId b) {
      const auto& x = g.stage(a);
      const auto& y = g.stage(b);
      if (x.microbatch != y.microbatch) return x.microbatch < y.microbatch;
      if (x.sub_microbatch != y.sub_microbatch) return x.sub_microbatch < y.sub_microbatch;
      // Forward chunks in layer order, backward chunks in reverse.
      if (x.chunk != y.chunk)
        return x.pass == spec::Pass::kForward ? x.chunk < y.chunk : x.chunk > y.chunk;
      // Same slot: forward in data-flow order, backward in reverse.
      return x.pass == spec::Pass::kForward ? a < b : a > b;
    };
    std::stable_sort(enc_f.begin(), enc_f.end(), by_flow);
    std::stable_sort(enc_b.begin(), enc_b.end(), by_flow);
    std::stable_sort(llm_f.begin(), llm_f.end(), by_flow);
    std::stable_sort(llm_b.begin(), llm_b.end(), by_flow);
    auto& o = out.order[gi];
    o.insert(o.end(), enc_f.begin(), enc_f.end());
    const size_t warmup = std::min<size_t>(std::max(0, p - gi - 1), llm_f.size());
    size_t f = 0, b = 0;
    for (; f < warmup; ++f) o.push_back(llm_f[f]);
    while (f < llm_f.size() || b < llm_b.size()) {
      if (f < llm_f.size()) o.push_back(llm_f[f++]);
      if (b < llm_b.size()) o.push_back(llm_b[b++]);
    }
    o.insert(o.end(), enc_b.begin(), enc_b.end());
  }
  return out;
}

class OptimusStrategy final : public Strategy {
 public:
  std::string_view Name() const override { return "optimus"; }
  std::string_view Description() const override {
    return "Optimus coarse-grained: encoder and LLM chains each over all P ranks; all encoder "
           "forwards first, LLM 1F1B, encoder backwards last";
  }

  StatusOr<StaticPlan> Prepare(const Job& job) const override {
    WEFT_RETURN_IF_ERROR(job.Validate());
    WEFT_ASSIGN_OR_RETURN(ModuleSides sides, SplitEncoderSide(job.model));
    if (sides.encoders.empty()) {
      return FailedPreconditionError("optimus: model '" + job.model.name +
                                     "' has no encoder upstream of its LLM backbone");
    }
    const int p = job.PipelineSize();
    WEFT_ASSIGN_OR_RETURN(Placement enc,
                          ChainPlacement(job, sides.encoders, p, UnitWeight::kParameters));
    WEFT_ASSIGN_OR_RETURN(Placement llm,
                          ChainPlacement(job, sides.backbone, p, UnitWeight::kParameters));
    Placement placement = std::move(enc);
    for (Chunk c : llm.chunks) {
      c.chunk += 1;  // backbone slots after the encoder slot
      placement.chunks.push_back(c);
    }
    WEFT_RETURN_IF_ERROR(FillGroupStateBytes(job.model, *job.cost_model, placement));
    return MakeStaticPlan(std::move(placement), Description(), job.model);
  }

  StatusOr<IterationPlan> PlanIteration(const Job& job, const StaticPlan& plan,
                                        const IterationInput& input) const override {
    WEFT_ASSIGN_OR_RETURN(ModuleSides sides, SplitEncoderSide(job.model));
    std::vector<bool> is_encoder(job.model.modules.size(), false);
    for (int m : sides.encoders) is_encoder[m] = true;
    return PlanReplicas(job, plan, input,
                        [&](const graph::StageGraph& g) -> StatusOr<sched::Schedule> {
                          return OptimusOrder(g, is_encoder);
                        });
  }
};

}  // namespace

std::unique_ptr<Strategy> MakeOptimusStrategy() { return std::make_unique<OptimusStrategy>(); }

}  // namespace weft::strategy
