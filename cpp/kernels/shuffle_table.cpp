// The shuffle controls of the gather and spread kernels (shuffle.hpp), built once. Portable C++:
// only the kernels that read them are x86.
#include <vector>

#include "shuffle.hpp"

#if defined(__x86_64__) || defined(__i386__)
namespace npupack {
namespace kernels {

__attribute__((noinline)) const ShuffleTable& shuffle_table(int n, int eb, bool spread) {
  static const std::vector<ShuffleTable> tables = [] {
    std::vector<ShuffleTable> t(32);
    for (int dir = 0; dir < 2; ++dir) {
      for (int e = 1; e <= 2; ++e) {
        for (int cols = 2; cols <= 7; ++cols) {
          ShuffleTable& g = t[static_cast<size_t>(dir * 16 + (e - 1) * 8 + cols)];
          const int w = cols * e;  // bytes per row (gather) or per interleaved column (spread)
          for (int j = 0; j < cols; ++j) {
            for (int q = 0; q < cols; ++q) {
              for (int b = 0; b < 16; ++b) {
                int at;  // the byte's place in register q, or -1
                if (dir == 0) {
                  const int from = (b / e) * w + j * e + b % e;  // row b / e, column j
                  at = from / 16 == q ? from % 16 : -1;
                } else {
                  const int t16 = 16 * j + b;  // element t16 / w of the rows, row (t16 % w) / e
                  at = (t16 % w) / e == q ? (t16 / w) * e + t16 % e : -1;
                }
                g.ctrl[j][q][b] = at < 0 ? 0x80 : static_cast<uint8_t>(at);
              }
            }
          }
        }
      }
    }
    return t;
  }();
  return tables[static_cast<size_t>((spread ? 16 : 0) + (eb - 1) * 8 + n)];
}

}  // namespace kernels
}  // namespace npupack
#endif  // x86
