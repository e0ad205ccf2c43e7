#pragma once
// Shared helpers of the _weft bindings: Status → Python exceptions, value ↔ dict conversions.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>
#include <utility>

#include "weft/common/status.h"
#include "weft/spec/workload.h"

namespace weft::python {

namespace py = pybind11;

// Throws ValueError for user errors (bad input, unknown name, infeasible request) and
// RuntimeError for the rest, with the Status message.
[[noreturn]] void ThrowStatus(const Status& status);

inline void Check(const Status& status) {
  if (!status.ok()) ThrowStatus(status);
}
template <typename T>
T Unwrap(StatusOr<T> value) {
  if (!value.ok()) ThrowStatus(value.status());
  return std::move(*value);
}

py::dict SampleToDict(const spec::Sample& sample);
spec::Sample SampleFromDict(const py::dict& d);
py::dict BatchToDict(const spec::Batch& batch);
spec::Batch BatchFromDict(const py::dict& d);

void RegisterSpec(py::module_& m);
void RegisterData(py::module_& m);
void RegisterCost(py::module_& m);
void RegisterStrategy(py::module_& m);
void RegisterPlan(py::module_& m);
void RegisterGraph(py::module_& m);
void RegisterService(py::module_& m);
void RegisterCp(py::module_& m);

}  // namespace weft::python
