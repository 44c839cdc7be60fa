#include "npupack/pack.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "npupack/checked.hpp"
#include "npupack/errors.hpp"

namespace npupack {

namespace {

template <int EB>
struct Elem;
template <> struct Elem<1> { using T = uint8_t; };
template <> struct Elem<2> { using T = uint16_t; };
template <> struct Elem<4> { using T = uint32_t; };
template <> struct Elem<8> { using T = uint64_t; };

// Copies n elements from src (step sstep bytes) to dst (step dstep bytes).
using RunFn = void (*)(const char*, int64_t, char*, int64_t, int64_t);

template <int EB>
void copy_run(const char* src, int64_t sstep, char* dst, int64_t dstep, int64_t n) {
  using T = typename Elem<EB>::T;
  if (sstep == EB && dstep == EB) {
    std::memcpy(dst, src, static_cast<size_t>(n) * EB);
    return;
  }
  // memcpy of one element compiles to a plain load/store and avoids alignment assumptions.
  for (int64_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, src + i * sstep, EB);
    std::memcpy(dst + i * dstep, &v, EB);
  }
}

RunFn run_for(int64_t eb) {
  switch (eb) {
    case 1: return copy_run<1>;
    case 2: return copy_run<2>;
    case 4: return copy_run<4>;
    default: return copy_run<8>;
  }
}

// Walks the layout's nest in memory order. For each loop it knows the logical byte step and
// the packed byte stride, and it stops each loop at the last position that is inside the
// logical extent (padded positions are skipped: pack pre-fills them, unpack ignores them).
class Walker {
 public:
  Walker(const BlockedLayout& L, const std::vector<int64_t>& logical_strides, bool to_packed)
      : L_(L), to_packed_(to_packed), run_(run_for(L.elem_bytes())) {
    const auto& axes = L.axes();
    lstep_.resize(axes.size());
    for (size_t a = 0; a < axes.size(); ++a) lstep_[a] = axes[a].weight * logical_strides[axes[a].dim];
    idx_.assign(axes.size(), 0);
    base_.assign(L.dims().size(), 0);
  }

  void run(const char* logical_in, char* logical_out, const char* packed_in, char* packed_out) {
    lin_ = logical_in; lout_ = logical_out; pin_ = packed_in; pout_ = packed_out;
    rec(0, 0, 0);
  }

 private:
  int64_t count(size_t a) const {
    const auto& ax = L_.axes()[a];
    const int64_t left = L_.dims()[ax.dim].extent - base_[ax.dim];
    return std::min(ax.extent, ceil_div(left, ax.weight));
  }

  void copy(int64_t loff, int64_t lstep, int64_t poff, int64_t pstep, int64_t n) {
    if (to_packed_) run_(lin_ + loff, lstep, pout_ + poff, pstep, n);
    else run_(pin_ + poff, pstep, lout_ + loff, lstep, n);
  }

  void rec(size_t a, int64_t loff, int64_t poff) {
    const auto& axes = L_.axes();
    const size_t last = axes.size() - 1;
    const int64_t n = count(a);
    const int64_t stride = L_.stride_at(a, idx_.data());
    if (a == last) {
      copy(loff, lstep_[a], poff, stride, n);
      return;
    }
    const int dim = axes[a].dim;
    const int64_t saved = base_[dim];
    if (a + 1 == last) {
      // Two innermost loops in one place: saves a call per inner run, which matters when the
      // inner run is short (an atom of 8 or 16 channels, a block of 3 input channels).
      for (int64_t i = 0; i < n; ++i) {
        idx_[a] = i;
        base_[dim] = saved + i * axes[a].weight;
        copy(loff + i * lstep_[a], lstep_[last], poff + i * stride, L_.stride_at(last, idx_.data()), count(last));
      }
    } else {
      for (int64_t i = 0; i < n; ++i) {
        idx_[a] = i;
        base_[dim] = saved + i * axes[a].weight;
        rec(a + 1, loff + i * lstep_[a], poff + i * stride);
      }
    }
    base_[dim] = saved;
    idx_[a] = 0;
  }

  const BlockedLayout& L_;
  bool to_packed_;
  RunFn run_;
  std::vector<int64_t> lstep_, idx_, base_;
  const char* lin_ = nullptr;
  char* lout_ = nullptr;
  const char* pin_ = nullptr;
  char* pout_ = nullptr;
};

void check_args(const BlockedLayout& L, const std::vector<int64_t>& logical_strides, int64_t packed_size) {
  if (logical_strides.size() != L.dims().size()) {
    throw LayoutError("logical tensor has " + std::to_string(logical_strides.size()) +
                      " dimensions, the layout has " + std::to_string(L.dims().size()));
  }
  if (packed_size < L.nbytes()) {
    throw LayoutError("packed buffer holds " + std::to_string(packed_size) + " bytes, the layout needs " +
                      std::to_string(L.nbytes()));
  }
}

void fill_holes(const BlockedLayout& L, char* packed, const char* pad) {
  if (!L.has_holes()) return;
  const int64_t eb = L.elem_bytes();
  const bool zero = pad == nullptr || std::all_of(pad, pad + eb, [](char c) { return c == 0; });
  if (zero) {
    std::memset(packed, 0, static_cast<size_t>(L.nbytes()));
    return;
  }
  for (int64_t off = 0; off < L.nbytes(); off += eb) std::memcpy(packed + off, pad, static_cast<size_t>(eb));
}

// Calls f(logical byte offset, index) for every logical index, last dim fastest.
template <class F>
void for_each_index(const BlockedLayout& L, const std::vector<int64_t>& logical_strides, F f) {
  const auto& dims = L.dims();
  std::vector<int64_t> idx(dims.size(), 0);
  for (int64_t e = 0; e < L.elements(); ++e) {
    int64_t loff = 0;
    for (size_t i = 0; i < dims.size(); ++i) loff += idx[i] * logical_strides[i];
    f(loff, idx.data());
    for (size_t i = dims.size(); i-- > 0;) {
      if (++idx[i] < dims[i].extent) break;
      idx[i] = 0;
    }
  }
}

}  // namespace

void pack(const BlockedLayout& L, const char* logical, const std::vector<int64_t>& logical_strides,
          char* packed, int64_t packed_size, const char* pad) {
  check_args(L, logical_strides, packed_size);
  fill_holes(L, packed, pad);
  Walker(L, logical_strides, true).run(logical, nullptr, nullptr, packed);
}

void unpack(const BlockedLayout& L, const char* packed, int64_t packed_size, char* logical,
            const std::vector<int64_t>& logical_strides) {
  check_args(L, logical_strides, packed_size);
  Walker(L, logical_strides, false).run(nullptr, logical, packed, nullptr);
}

void pack_reference(const BlockedLayout& L, const char* logical, const std::vector<int64_t>& logical_strides,
                    char* packed, int64_t packed_size, const char* pad) {
  check_args(L, logical_strides, packed_size);
  fill_holes(L, packed, pad);
  const size_t eb = static_cast<size_t>(L.elem_bytes());
  for_each_index(L, logical_strides, [&](int64_t loff, const int64_t* idx) {
    std::memcpy(packed + L.offset_of(idx), logical + loff, eb);
  });
}

void unpack_reference(const BlockedLayout& L, const char* packed, int64_t packed_size, char* logical,
                      const std::vector<int64_t>& logical_strides) {
  check_args(L, logical_strides, packed_size);
  const size_t eb = static_cast<size_t>(L.elem_bytes());
  for_each_index(L, logical_strides, [&](int64_t loff, const int64_t* idx) {
    std::memcpy(logical + loff, packed + L.offset_of(idx), eb);
  });
}

}  // namespace npupack
