// The Winograd weight transform t = G g G^T (docs/nvdla.md §9.4) in float64, one channel per
// lane: the one definition of the arithmetic, for every path and vector width.
#pragma once

namespace npupack {
namespace wg {

// Four or eight channels side by side. GCC/Clang vector arithmetic: in the baseline build Lanes4
// becomes SSE2 pairs; inlined into an AVX2 or AVX-512 kernel, one 256- or 512-bit operation.
using Lanes4 = double __attribute__((vector_size(32)));
using Lanes8 = double __attribute__((vector_size(64)));

// G = [[1,0,0],[.5,.5,.5],[.5,-.5,.5],[0,0,1]]; g[j] = tap j, t[i] = output i. Scaling by 0.5 is
// exact, so this is the matrix product whatever the association; zero results are made +0
// (`+ 0.0`) because the sign of a computed zero depends only on the evaluation order
// (docs/nvdla.md §9.4).
template <class V>
__attribute__((always_inline)) inline void transform(const V g[9], V t[16]) {
  V a[12];  // a = G g, 4x3
  for (int j = 0; j < 3; ++j) {
    const V g0 = g[j], g1 = g[3 + j], g2 = g[6 + j];
    a[j] = g0;
    a[3 + j] = 0.5 * (g0 + g1 + g2);
    a[6 + j] = 0.5 * (g0 - g1 + g2);
    a[9 + j] = g2;
  }
  for (int i = 0; i < 4; ++i) {
    const V a0 = a[3 * i], a1 = a[3 * i + 1], a2 = a[3 * i + 2];
    t[4 * i] = a0 + 0.0;
    t[4 * i + 1] = 0.5 * (a0 + a1 + a2) + 0.0;
    t[4 * i + 2] = 0.5 * (a0 - a1 + a2) + 0.0;
    t[4 * i + 3] = a2 + 0.0;
  }
}

}  // namespace wg
}  // namespace npupack
