#include "npupack/grouped.hpp"

#include <cstring>
#include <string>
#include <vector>

#include "npupack/checked.hpp"
#include "npupack/errors.hpp"

namespace npupack {

int64_t grouped_bytes(const GroupedSpec& sp) {
  if (sp.k < 1 || sp.cg < 1 || sp.r < 1 || sp.s < 1 || sp.groups < 1 || sp.kpg < 1 || sp.cb < 1 ||
      (sp.elem_bytes != 1 && sp.elem_bytes != 2)) {
    throw LayoutError("grouped: dimensions, groups, kpg, cb must be >= 1 and elements 1 or 2 bytes");
  }
  if (sp.k % sp.groups) throw LayoutError("grouped: K is not divisible by groups");
  const int64_t c = checked_mul(sp.cg, sp.groups, "grouped");
  return checked_mul(checked_mul(checked_mul(checked_mul(sp.k, c, "grouped"), sp.r, "grouped"), sp.s, "grouped"),
                     sp.elem_bytes, "grouped");
}

void grouped_pack(const char* src, const GroupedSpec& sp, char* dst, int64_t dst_size, bool zeroed) {
  const int64_t need = grouped_bytes(sp);
  if (dst_size < need) {
    throw LayoutError("grouped: the output holds " + std::to_string(dst_size) + " bytes, " + std::to_string(need) +
                      " are needed");
  }
  if (!zeroed) std::memset(dst, 0, static_cast<size_t>(dst_size));
  const int64_t C = sp.cg * sp.groups, RS = sp.r * sp.s, kg = sp.k / sp.groups, eb = sp.elem_bytes;
  // DC element index (docs/nvdla.md §6.1): k0*C*RS + kn*c0*RS + ((r*S + s)*kn + (k - k0))*cn + (c - c0).
  std::vector<int64_t> c_base(static_cast<size_t>(C)), c_n(static_cast<size_t>(C));
  for (int64_t c = 0; c < C; ++c) {
    const int64_t c0 = (c / sp.cb) * sp.cb;
    c_n[static_cast<size_t>(c)] = C - c0 < sp.cb ? C - c0 : sp.cb;
    c_base[static_cast<size_t>(c)] = c0;
  }
  for (int64_t k = 0; k < sp.k; ++k) {
    const int64_t k0 = (k / sp.kpg) * sp.kpg, kn = sp.k - k0 < sp.kpg ? sp.k - k0 : sp.kpg;
    const int64_t g = k / kg;
    for (int64_t j = 0; j < sp.cg; ++j) {
      const int64_t c = g * sp.cg + j, c0 = c_base[static_cast<size_t>(c)], cn = c_n[static_cast<size_t>(c)];
      const int64_t base = k0 * C * RS + kn * c0 * RS + (k - k0) * cn + (c - c0);
      const char* w = src + k * sp.stride[0] + j * sp.stride[1];
      for (int64_t r = 0; r < sp.r; ++r) {
        for (int64_t s = 0; s < sp.s; ++s) {
          const int64_t e = base + (r * sp.s + s) * kn * cn;
          std::memcpy(dst + e * eb, w + r * sp.stride[2] + s * sp.stride[3], static_cast<size_t>(eb));
        }
      }
    }
  }
}

}  // namespace npupack
