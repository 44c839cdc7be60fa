// Kneron's high/low byte formats (4W4C8BHL, 1W16C8BHL, 16W1C8BHL): every 16-scalar entry of
// int16 values becomes two 16-byte entries, the low entry holding bits 7..1 of each value and the
// high entry bits 15..8 (bit 0 is not stored). Spec docs/kneron.md §7.4.
#pragma once
#include <cstdint>

namespace npupack {

// In place: each of the `entries` 32-byte entries of buf holds 16 little-endian int16 values
// and becomes their low entry (16 bytes) then their high entry (16 bytes).
void highlow_split(uint8_t* buf, int64_t entries);
// The inverse: bit 0 of every value comes back as 0.
void highlow_merge(const uint8_t* in, int16_t* out, int64_t entries);

}  // namespace npupack
