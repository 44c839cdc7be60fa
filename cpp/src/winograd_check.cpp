// Checks of a Winograd spec and its descriptor before anything is written (docs/nvdla.md §9.6).
#include <algorithm>
#include <string>

#include "npupack/checked.hpp"
#include "npupack/errors.hpp"
#include "npupack/winograd.hpp"

namespace npupack {

namespace {

int64_t target_bytes(WgTarget t) { return t == WgTarget::I8 ? 1 : 2; }

}  // namespace

void check_winograd(const WinogradSpec& sp, const BlockedLayout& full, int64_t dst_size) {
  if (sp.k < 1 || sp.c < 1 || sp.r < 1 || sp.s < 1 || sp.sy < 1 || sp.sx < 1 || sp.kpg < 1) {
    throw LayoutError("winograd: dimensions, strides and kernels per group must be >= 1");
  }
  if (ceil_div(sp.r, sp.sy) != 3 || ceil_div(sp.s, sp.sx) != 3) {
    throw LayoutError("winograd: the kernel does not become 3x3 after channel extension");
  }
  if (sp.c_pad < sp.c || sp.c_pad % 4) throw LayoutError("winograd: c_pad must be >= C and a multiple of 4");
  const int64_t c_ext = checked_mul(checked_mul(sp.c_pad, sp.sy, "winograd"), sp.sx, "winograd");
  const auto& d = full.dims();
  const int64_t es = target_bytes(sp.target);
  if (d.size() != 4 || d[0].extent != sp.k || d[1].extent != c_ext || d[2].extent != 4 || d[3].extent != 4 ||
      full.elem_bytes() != es) {
    throw LayoutError("winograd: the descriptor is not (K, C_ext, 4, 4) of the target's elements");
  }
  if (full.nbytes() > dst_size) {
    throw LayoutError("winograd: the output holds " + std::to_string(dst_size) + " bytes, " +
                      std::to_string(full.nbytes()) + " are needed");
  }
  // The order the kernels write (in a kernel group the rows of the 4-channel blocks one after
  // the other, a row of kn cubes, each c fastest, then s, then r) must be the descriptor's:
  // checked at the corners of the first and the last kernel group. A small layer's pass costs
  // about as much as these lookups, so the last descriptor that passed is remembered per thread,
  // as the image pass does: by its id (never reused) and the parameters it was checked for.
  const int64_t key[5] = {sp.k, sp.kpg, c_ext, es, static_cast<int64_t>(full.id())};
  thread_local int64_t passed[5] = {};
  if (std::equal(key, key + 5, passed)) return;
  for (const int64_t k0 : {int64_t{0}, (sp.k - 1) / sp.kpg * sp.kpg}) {
    const int64_t kn = std::min(sp.kpg, sp.k - k0), c0 = c_ext - 4;
    const int64_t start[4] = {k0, 0, 0, 0}, first[4] = {k0, c0, 0, 0}, next[4] = {k0, c0, 0, 1},
                  lane[4] = {k0, c0 + 1, 0, 0}, last[4] = {k0 + kn - 1, c0 + 3, 3, 3};
    const int64_t at = full.offset_of(first);
    if (at != full.offset_of(start) + c0 / 4 * kn * 64 * es || full.offset_of(lane) != at + es ||
        full.offset_of(next) != at + 4 * es || full.offset_of(last) != at + (kn * 64 - 1) * es) {
      throw LayoutError("winograd: the descriptor does not hold 4x4x4 cubes, kernels of a group in a row");
    }
  }
  std::copy(key, key + 5, passed);
}

}  // namespace npupack
