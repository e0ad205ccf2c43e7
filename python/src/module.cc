// Entry point of the _weft extension module.
#include "bindings.h"

namespace weft::python {

[[noreturn]] void ThrowStatus(const Status& status) {
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kFailedPrecondition:
    case StatusCode::kResourceExhausted:
    case StatusCode::kUnimplemented:
      throw py::value_error(status.message());
    default:
      throw std::runtime_error(std::string(StatusCodeName(status.code())) + ": " +
                               status.message());
  }
}

}  // namespace weft::python

PYBIND11_MODULE(_weft, m) {
  m.doc() = "weft: planner / simulator for distributed training of multimodal LLMs";
  weft::python::RegisterSpec(m);
  weft::python::RegisterData(m);
  weft::python::RegisterCost(m);
  weft::python::RegisterStrategy(m);
  weft::python::RegisterPlan(m);
  weft::python::RegisterGraph(m);
  weft::python::RegisterService(m);
  weft::python::RegisterCp(m);
}
