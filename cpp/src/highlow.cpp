#include "npupack/highlow.hpp"

namespace npupack {

void highlow_split(const int16_t* in, uint8_t* out, int64_t entries) {
  for (int64_t e = 0; e < entries; ++e) {
    const int16_t* v = in + e * 16;
    uint8_t* lo = out + e * 32;
    uint8_t* hi = lo + 16;
    for (int k = 0; k < 16; ++k) {
      const uint16_t u = static_cast<uint16_t>(v[k]);
      lo[k] = static_cast<uint8_t>((u >> 1) & 0x7F);
      hi[k] = static_cast<uint8_t>(u >> 8);
    }
  }
}

void highlow_merge(const uint8_t* in, int16_t* out, int64_t entries) {
  for (int64_t e = 0; e < entries; ++e) {
    const uint8_t* lo = in + e * 32;
    const uint8_t* hi = lo + 16;
    int16_t* v = out + e * 16;
    for (int k = 0; k < 16; ++k) {
      const uint16_t u = static_cast<uint16_t>(((lo[k] & 0x7F) | (hi[k] << 7)) << 1);
      v[k] = static_cast<int16_t>(u);
    }
  }
}

}  // namespace npupack
