// Exceptions of the C++ core. The bindings map LayoutError to npupack.LayoutError (a
// ValueError) so that every size or stride rule broken in C++ reaches Python as a clear error.
#pragma once
#include <stdexcept>

namespace npupack {

class LayoutError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

}  // namespace npupack
