#include "weft/algo/milp.h"

#include <chrono>
#include <cmath>
#include <mutex>

#include <coin/Cbc_C_Interface.h>
#include <fmt/format.h>

namespace weft::algo {
namespace {

// CBC spells infinity as DBL_MAX.
double ToCbc(double bound) {
  if (bound == kMilpInfinity) return std::numeric_limits<double>::max();
  if (bound == -kMilpInfinity) return -std::numeric_limits<double>::max();
  return bound;
}

// CBC's CbcMain driver (used by Cbc_solve) keeps static state, so concurrent solves in one process
// are serialized. This is the one process-wide object in weft::algo, and it holds no data.
std::mutex& CbcMutex() {
  static std::mutex mutex;
  return mutex;
}

// Owns a Cbc_Model.
struct CbcModelDeleter {
  void operator()(Cbc_Model* model) const { Cbc_deleteModel(model); }
};

Status CheckTerms(const std::vector<LinearTerm>& terms, int num_variables,
                  const std::string& where) {
  for (size_t t = 0; t < terms.size(); ++t) {
    if (terms[t].variable < 0 || terms[t].variable >= num_variables) {
      return InvalidArgumentError(fmt::format("{}.terms[{}].variable = {}; must be in [0, {})",
                                              where, t, terms[t].variable, num_variables));
    }
    if (!std::isfinite(terms[t].coefficient)) {
      return InvalidArgumentError(fmt::format("{}.terms[{}].coefficient = {}; must be finite",
                                              where, t, terms[t].coefficient));
    }
  }
  return OkStatus();
}

}  // namespace

int MilpModel::AddVariable(double lower, double upper, bool integer, std::string name) {
  variables_.push_back({lower, upper, integer, std::move(name)});
  return static_cast<int>(variables_.size()) - 1;
}

int MilpModel::AddConstraint(std::vector<LinearTerm> terms, double lower, double upper,
                             std::string name) {
  constraints_.push_back({std::move(terms), lower, upper, std::move(name)});
  return static_cast<int>(constraints_.size()) - 1;
}

void MilpModel::SetObjective(std::vector<LinearTerm> terms, ObjectiveSense sense, double offset) {
  objective_ = std::move(terms);
  sense_ = sense;
  objective_offset_ = offset;
}

Status MilpModel::Validate() const {
  for (size_t v = 0; v < variables_.size(); ++v) {
    const Variable& var = variables_[v];
    if (std::isnan(var.lower) || std::isnan(var.upper) || var.lower > var.upper ||
        var.lower == kMilpInfinity || var.upper == -kMilpInfinity) {
      return InvalidArgumentError(fmt::format(
          "milp.variables[{}] ('{}') bounds = [{}, {}]; must satisfy lower <= upper, no NaN", v,
          var.name, var.lower, var.upper));
    }
  }
  for (size_t c = 0; c < constraints_.size(); ++c) {
    const Constraint& con = constraints_[c];
    const std::string where = fmt::format("milp.constraints[{}] ('{}')", c, con.name);
    WEFT_RETURN_IF_ERROR(CheckTerms(con.terms, num_variables(), where));
    if (std::isnan(con.lower) || std::isnan(con.upper) || con.lower > con.upper ||
        con.lower == kMilpInfinity || con.upper == -kMilpInfinity) {
      return InvalidArgumentError(fmt::format(
          "{} bounds = [{}, {}]; must satisfy lower <= upper, no NaN", where, con.lower, con.upper));
    }
  }
  WEFT_RETURN_IF_ERROR(CheckTerms(objective_, num_variables(), "milp.objective"));
  if (!std::isfinite(objective_offset_)) {
    return InvalidArgumentError(
        fmt::format("milp.objective_offset = {}; must be finite", objective_offset_));
  }
  return OkStatus();
}

Status MilpOptions::Validate(int num_variables) const {
  if (!(time_limit_s >= 0) || std::isinf(time_limit_s)) {
    return InvalidArgumentError(
        fmt::format("milp_options.time_limit_s = {}; must be finite and >= 0", time_limit_s));
  }
  if (!(relative_gap >= 0) || std::isinf(relative_gap)) {
    return InvalidArgumentError(
        fmt::format("milp_options.relative_gap = {}; must be finite and >= 0", relative_gap));
  }
  if (max_nodes < 0) {
    return InvalidArgumentError(fmt::format("milp_options.max_nodes = {}; must be >= 0", max_nodes));
  }
  if (!warm_start.empty() && static_cast<int>(warm_start.size()) != num_variables) {
    return InvalidArgumentError(
        fmt::format("milp_options.warm_start has {} values; must be empty or one per variable ({})",
                    warm_start.size(), num_variables));
  }
  return OkStatus();
}

std::string_view MilpStatusName(MilpStatus status) {
  switch (status) {
    case MilpStatus::kOptimal: return "OPTIMAL";
    case MilpStatus::kFeasible: return "FEASIBLE";
    case MilpStatus::kInfeasible: return "INFEASIBLE";
    case MilpStatus::kUnbounded: return "UNBOUNDED";
    case MilpStatus::kTimeLimit: return "TIME_LIMIT";
    case MilpStatus::kError: return "ERROR";
  }
  return "UNKNOWN";
}

std::string MilpResult::BriefReport() const {
  return fmt::format("{} objective {:g} bound {:g} in {:.3f} s, {} nodes", MilpStatusName(status),
                     objective_value, best_bound, solve_time_s, nodes);
}

StatusOr<MilpResult> SolveMilp(const MilpModel& model, const MilpOptions& options) {
  WEFT_RETURN_IF_ERROR(model.Validate());
  WEFT_RETURN_IF_ERROR(options.Validate(model.num_variables()));

  const auto start = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(CbcMutex());
  std::unique_ptr<Cbc_Model, CbcModelDeleter> cbc(Cbc_newModel());
  Cbc_Model* m = cbc.get();

  const int n = model.num_variables();
  std::vector<double> objective(n, 0.0);
  for (const LinearTerm& t : model.objective()) objective[t.variable] += t.coefficient;
  for (int v = 0; v < n; ++v) {
    const auto& var = model.variables()[v];
    Cbc_addCol(m, var.name.empty() ? fmt::format("x{}", v).c_str() : var.name.c_str(),
               ToCbc(var.lower), ToCbc(var.upper), objective[v], var.integer ? 1 : 0, 0, nullptr,
               nullptr);
  }
  std::vector<int> cols;
  std::vector<double> coefs;
  for (int c = 0; c < model.num_constraints(); ++c) {
    const auto& con = model.constraints()[c];
    cols.clear();
    coefs.clear();
    for (const LinearTerm& t : con.terms) {
      cols.push_back(t.variable);
      coefs.push_back(t.coefficient);
    }
    const std::string name = con.name.empty() ? fmt::format("c{}", c) : con.name;
    const int nz = static_cast<int>(cols.size());
    if (con.lower == con.upper) {
      Cbc_addRow(m, name.c_str(), nz, cols.data(), coefs.data(), 'E', con.lower);
      continue;
    }
    if (con.lower != -kMilpInfinity) {
      Cbc_addRow(m, (name + "_lo").c_str(), nz, cols.data(), coefs.data(), 'G', con.lower);
    }
    if (con.upper != kMilpInfinity) {
      Cbc_addRow(m, (name + "_up").c_str(), nz, cols.data(), coefs.data(), 'L', con.upper);
    }
  }
  Cbc_setObjSense(m, model.sense() == ObjectiveSense::kMinimize ? 1.0 : -1.0);
  Cbc_setLogLevel(m, options.log_level);
  if (options.time_limit_s > 0) Cbc_setMaximumSeconds(m, options.time_limit_s);
  if (options.max_nodes > 0) Cbc_setMaximumNodes(m, options.max_nodes);
  Cbc_setAllowableFractionGap(m, options.relative_gap);
  if (options.lightweight) {
    Cbc_setParameter(m, "preprocess", "off");
    Cbc_setParameter(m, "cuts", "off");
    Cbc_setParameter(m, "heuristicsOnOff", "off");
  }
  if (!options.warm_start.empty()) {
    std::vector<int> idx(n);
    for (int v = 0; v < n; ++v) idx[v] = v;
    Cbc_setMIPStartI(m, n, idx.data(), options.warm_start.data());
  }

  Cbc_solve(m);

  MilpResult result;
  const double* best = Cbc_bestSolution(m);
  const bool has_integers = Cbc_getNumIntegers(m) > 0;
  if (Cbc_isProvenInfeasible(m)) {
    result.status = MilpStatus::kInfeasible;
  } else if (Cbc_isContinuousUnbounded(m)) {
    result.status = MilpStatus::kUnbounded;
  } else if (Cbc_isProvenOptimal(m)) {
    result.status = MilpStatus::kOptimal;
  } else if (Cbc_isAbandoned(m)) {
    result.status = MilpStatus::kError;
  } else if (best != nullptr) {
    result.status = MilpStatus::kFeasible;
  } else {
    result.status = MilpStatus::kTimeLimit;
  }
  const bool solved = result.status == MilpStatus::kOptimal || result.status == MilpStatus::kFeasible;
  if (solved) {
    // A pure LP has no "best integer solution"; its column solution is the answer.
    const double* x = best != nullptr ? best : (!has_integers ? Cbc_getColSolution(m) : nullptr);
    if (x != nullptr) {
      result.values.assign(x, x + n);
      double value = model.objective_offset();
      for (const LinearTerm& t : model.objective()) value += t.coefficient * result.values[t.variable];
      result.objective_value = value;
    } else {
      result.status = MilpStatus::kTimeLimit;
    }
  }
  result.best_bound = Cbc_getBestPossibleObjValue(m) + model.objective_offset();
  if (result.status == MilpStatus::kOptimal && has_integers) {
    // Report the proven bound in the caller's sense even if CBC's sign convention differs.
    if (options.relative_gap == 0) result.best_bound = result.objective_value;
  }
  result.nodes = Cbc_getNodeCount(m);
  result.solve_time_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace weft::algo
