// NVDLA sparse weight compression: WMB (one mask bit per element, LSB first, continuous over all
// kernel groups), DATA (the non-zero elements back to back) and WGS (bytes of DATA per kernel
// group). An element is zero only if all its bits are zero (fp16 -0.0 is stored).
// Spec: docs/nvdla.md §11.
#pragma once
#include <cstdint>

#include "npupack/cpu.hpp"

namespace npupack {

// Non-zero elements of each kernel group of `group_elems` elements (the last one may be short):
// counts[g] for g < ceil(n / group_elems). es is 1 or 2 bytes.
void sparse_count(const uint8_t* stream, int64_t n, int es, int64_t group_elems, int64_t* counts);

// Writes ceil(n/8) bytes of WMB and the non-zero elements to data (capacity data_cap bytes,
// checked: throws LayoutError when too small, before writing past it). Returns the DATA bytes.
// `path` picks the kernel.
int64_t sparse_compress(const uint8_t* stream, int64_t n, int es, uint8_t* wmb, uint8_t* data, int64_t data_cap,
                        KernelPath path = KernelPath::kAuto);

// sparse_compress plus the non-zero elements of each kernel group of `group_elems` elements
// (the last one may be short) in counts[g], g < ceil(n / group_elems): the WGS entries divided
// by es.
int64_t sparse_compress_groups(const uint8_t* stream, int64_t n, int es, int64_t group_elems, uint8_t* wmb,
                               uint8_t* data, int64_t data_cap, int64_t* counts, KernelPath path = KernelPath::kAuto);

// The three surfaces of one stream, padded (docs/nvdla.md §11.1): sparse_compress_groups into wmb and
// data, then WMB zero from byte ceil(n/8) to wmb_size, DATA zero from the bytes written to
// round_up(written, align) (at least align; data_cap must hold it), and WGS the LE uint32 byte
// count of each kernel group, then zero to wgs_size. Throws LayoutError when wmb or wgs is too
// small (before anything is written), when data cannot hold the kept elements or their padding
// (nothing is written past data_cap), or when a group holds 4 GiB or more of data (WGS is not
// written). Returns the DATA bytes written (without the padding).
int64_t sparse_encode(const uint8_t* stream, int64_t n, int es, int64_t group_elems, uint8_t* wmb, int64_t wmb_size,
                      uint8_t* data, int64_t data_cap, uint8_t* wgs, int64_t wgs_size, int64_t align,
                      KernelPath path = KernelPath::kAuto);

// Set bits among the first n bits of wmb.
int64_t sparse_popcount(const uint8_t* wmb, int64_t n);

// Expands n elements from WMB + DATA into out (n * es bytes). Throws LayoutError if DATA holds
// fewer than popcount * es bytes; nothing is read past data + data_size.
// `path` picks the kernel.
void sparse_decompress(const uint8_t* data, int64_t data_size, const uint8_t* wmb, int64_t n, int es, uint8_t* out,
                       KernelPath path = KernelPath::kAuto);

// Set bits of each kernel group's range of the mask (the WGS entries divided by es).
void sparse_group_popcount(const uint8_t* wmb, int64_t n, int64_t group_elems, int64_t* counts);

}  // namespace npupack
