// The one dtype gate of the bindings: the kernels move bytes, so an array of Python object
// pointers (or of strings, records or datetimes) would be copied as raw bytes, which breaks
// reference counts and, unpacked, forges pointers. Only plain numbers pass.
#pragma once

#include <pybind11/numpy.h>

#include <string>

namespace npupack_bindings {

inline void require_numeric(const pybind11::array& a, const char* name) {
  const char kind = a.dtype().kind();
  if (kind != 'b' && kind != 'i' && kind != 'u' && kind != 'f' && kind != 'c') {
    throw pybind11::type_error(std::string(name) + " has dtype " + pybind11::str(a.dtype()).cast<std::string>() +
                               ", which is not a number; the kernels move numeric elements only");
  }
}

}  // namespace npupack_bindings
