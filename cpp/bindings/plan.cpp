// Python access to the fast path's plan (npupack.plan): the text and the strategy of the plan
// that pack or unpack runs on a layout, built from the descriptor alone (no tensor).
// Spec: docs/design.md §3.12 (the plan and the strategy list).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <string>

#include "npupack/errors.hpp"
#include "npupack/layout.hpp"
#include "npupack/pack.hpp"

namespace py = pybind11;

namespace {

// The pad element's bytes (empty: zero), checked against the layout's element size.
std::string pad_of(const npupack::BlockedLayout& L, const py::bytes& pad) {
  std::string bytes = pad;
  if (!bytes.empty() && static_cast<int64_t>(bytes.size()) != L.elem_bytes()) {
    throw npupack::LayoutError("pad must be one element (" + std::to_string(L.elem_bytes()) + " bytes)");
  }
  return bytes;
}

}  // namespace

void bind_plan(py::module_& m) {
  m.def(
      "plan_describe",
      [](const npupack::BlockedLayout& L, bool to_packed, const py::bytes& pad) {
        const std::string p = pad_of(L, pad);
        return npupack::describe_plan(L, to_packed, p.empty() ? nullptr : p.data());
      },
      py::arg("layout"), py::arg("to_packed"), py::arg("pad") = py::bytes(),
      "Text of the plan pack (to_packed) or unpack runs on a C-contiguous tensor of this layout");
  m.def(
      "plan_strategy",
      [](const npupack::BlockedLayout& L, bool to_packed, const py::bytes& pad) {
        const std::string p = pad_of(L, pad);
        return npupack::plan_strategy(L, to_packed, p.empty() ? nullptr : p.data());
      },
      py::arg("layout"), py::arg("to_packed"), py::arg("pad") = py::bytes(),
      "Name of the strategy of that plan");
  m.def("plan_strategies", &npupack::plan_strategies, "Names of the ordered strategy list, in the order tried");
}
