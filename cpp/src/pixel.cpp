#include "npupack/pixel.hpp"

namespace npupack {

int64_t pack_10bit(const uint16_t* comps, int64_t pixels, const int* shifts, uint32_t* words) {
  // Check a chunk first, then pack it: the common all-valid case runs two tight loops.
  constexpr int64_t kChunk = 1024;
  for (int64_t p0 = 0; p0 < pixels; p0 += kChunk) {
    const int64_t p1 = p0 + kChunk < pixels ? p0 + kChunk : pixels;
    unsigned bad = 0;
    for (int64_t p = p0; p < p1; ++p) {
      const uint16_t* c = comps + 4 * p;
      bad |= (c[0] > 1023) | (c[1] > 1023) | (c[2] > 1023) | (c[3] > 3);
    }
    if (bad) {
      for (int64_t p = p0; p < p1; ++p) {
        const uint16_t* c = comps + 4 * p;
        if (c[0] > 1023 || c[1] > 1023 || c[2] > 1023 || c[3] > 3) return p;
      }
    }
    for (int64_t p = p0; p < p1; ++p) {
      const uint16_t* c = comps + 4 * p;
      words[p] = (uint32_t{c[0]} << shifts[0]) | (uint32_t{c[1]} << shifts[1]) | (uint32_t{c[2]} << shifts[2]) |
                 (uint32_t{c[3]} << shifts[3]);
    }
  }
  return -1;
}

void unpack_10bit(const uint32_t* words, int64_t pixels, const int* shifts, uint16_t* comps) {
  for (int64_t p = 0; p < pixels; ++p) {
    const uint32_t w = words[p];
    uint16_t* c = comps + 4 * p;
    c[0] = static_cast<uint16_t>((w >> shifts[0]) & 1023);
    c[1] = static_cast<uint16_t>((w >> shifts[1]) & 1023);
    c[2] = static_cast<uint16_t>((w >> shifts[2]) & 1023);
    c[3] = static_cast<uint16_t>((w >> shifts[3]) & 3);
  }
}

}  // namespace npupack
