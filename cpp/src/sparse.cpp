#include "npupack/sparse.hpp"

#include <cstring>
#include <string>
#include <vector>

#include "npupack/cpu.hpp"
#include "npupack/errors.hpp"
#include "../kernels/sparse_kernels.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NPUPACK_X86 1
#endif
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace npupack {

using namespace sparse_kernels;

namespace {

#ifdef NPUPACK_X86
bool has_ssse3() { return cpu().ssse3 && cpu().popcnt; }
#endif

}  // namespace

namespace {

// Non-zero elements of [i0, i1). SSE2 (baseline on x86-64): zero lanes are counted in 8-bit
// (es = 1, at most 255 steps) or 16-bit (es = 2) accumulators, then summed.
int64_t count_range(const uint8_t* s, int64_t i0, int64_t i1, int es) {
  int64_t zeros = 0, i = i0;
#if defined(__SSE2__)
  const __m128i zero = _mm_setzero_si128();
  const int64_t lanes = 16 / es;
  while (i + lanes <= i1) {
    const int64_t steps_left = (i1 - i) / lanes;
    const int64_t steps = steps_left < 255 ? steps_left : 255;
    __m128i acc = zero;
    for (int64_t k = 0; k < steps; ++k, i += lanes) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i * es));
      acc = es == 1 ? _mm_sub_epi8(acc, _mm_cmpeq_epi8(v, zero)) : _mm_sub_epi16(acc, _mm_cmpeq_epi16(v, zero));
    }
    if (es == 2) acc = _mm_packus_epi16(acc, zero);  // each 16-bit count <= 255
    const __m128i sums = _mm_sad_epu8(acc, zero);
    zeros += _mm_cvtsi128_si64(sums) + _mm_cvtsi128_si64(_mm_unpackhi_epi64(sums, sums));
  }
#endif
  for (; i < i1; ++i) zeros += !nonzero(s + i * es, es);
  return (i1 - i0) - zeros;
}

}  // namespace

void sparse_count(const uint8_t* stream, int64_t n, int es, int64_t group_elems, int64_t* counts) {
  for (int64_t g = 0, i0 = 0; i0 < n; ++g, i0 += group_elems) {
    const int64_t i1 = n - i0 < group_elems ? n : i0 + group_elems;
    counts[g] = count_range(stream, i0, i1, es);
  }
}

int64_t sparse_compress(const uint8_t* stream, int64_t n, int es, uint8_t* wmb, uint8_t* data, int64_t data_cap,
                        KernelPath path) {
  // The first kernel of the list's bitmask-compress section this CPU and path run, then the
  // scalar one over its tail (docs/design.md §4.9).
  kernels::BitmaskArgs a;
  a.es = es;
  a.n = n;
  a.dense = stream;
  a.wmb_out = wmb;
  a.data_out = data;
  a.data_bytes = data_cap;
  kernels::run_bitmask(kernels::select_bitmask(kernels::Op::kBitmaskCompress, path), a);
  return a.pos;
}

// Groups of whole WMB bytes (every DC, Winograd and deconvolution stream: kernels per group are
// a multiple of 8) are compressed one call per group, so that a group's count is the DATA its
// call wrote and no second pass reads the WMB. Other sizes count the WMB bits afterwards.
int64_t sparse_compress_groups(const uint8_t* stream, int64_t n, int es, int64_t group_elems, uint8_t* wmb,
                               uint8_t* data, int64_t data_cap, int64_t* counts, KernelPath path) {
  if (group_elems % 8) {
    const int64_t written = sparse_compress(stream, n, es, wmb, data, data_cap, path);
    sparse_group_popcount(wmb, n, group_elems, counts);
    return written;
  }
  int64_t pos = 0;
  for (int64_t g = 0, i0 = 0; i0 < n; ++g, i0 += group_elems) {
    const int64_t len = n - i0 < group_elems ? n - i0 : group_elems;
    const int64_t written = sparse_compress(stream + i0 * es, len, es, wmb + i0 / 8, data + pos, data_cap - pos, path);
    counts[g] = written / es;
    pos += written;
  }
  return pos;
}

int64_t sparse_encode(const uint8_t* stream, int64_t n, int es, int64_t group_elems, uint8_t* wmb, int64_t wmb_size,
                      uint8_t* data, int64_t data_cap, uint8_t* wgs, int64_t wgs_size, int64_t align, KernelPath path) {
  const int64_t groups = n == 0 ? 0 : (n - 1) / group_elems + 1;
  if (wmb_size < (n + 7) / 8) throw LayoutError("sparse_encode: WMB buffer too small");
  if (wgs_size / 4 < groups) throw LayoutError("sparse_encode: WGS buffer too small");
  std::vector<int64_t> counts(static_cast<size_t>(groups));
  const int64_t written = sparse_compress_groups(stream, n, es, group_elems, wmb, data, data_cap, counts.data(), path);
  const int64_t padded = written <= align ? align : (written + align - 1) / align * align;
  if (padded > data_cap) throw LayoutError("sparse_encode: DATA buffer too small for its padding");
  std::memset(data + written, 0, static_cast<size_t>(padded - written));
  std::memset(wmb + (n + 7) / 8, 0, static_cast<size_t>(wmb_size - (n + 7) / 8));
  for (int64_t g = 0; g < groups; ++g) {  // every entry checked before WGS is written
    if (counts[g] * es > int64_t{0xFFFFFFFF}) {
      throw LayoutError("kernel_group_elements: a kernel group holds " + std::to_string(counts[g] * es) +
                        " bytes of non-zero data, more than a 32-bit WGS entry counts");
    }
  }
  for (int64_t g = 0; g < groups; ++g) {
    const uint32_t bytes = static_cast<uint32_t>(counts[g] * es);
    const uint8_t le[4] = {static_cast<uint8_t>(bytes), static_cast<uint8_t>(bytes >> 8),
                           static_cast<uint8_t>(bytes >> 16), static_cast<uint8_t>(bytes >> 24)};
    std::memcpy(wgs + 4 * g, le, 4);
  }
  std::memset(wgs + 4 * groups, 0, static_cast<size_t>(wgs_size - 4 * groups));
  return written;
}

namespace {

// Four words per iteration into four sums: with one sum, the loop runs at the latency of its
// add chain. Always inlined, so that the builtin becomes the popcnt instruction in a caller
// compiled for it.
__attribute__((always_inline)) inline int64_t popcount_bits(const uint8_t* wmb, int64_t n) {
  int64_t c, i = 0;
  int64_t part[4] = {0, 0, 0, 0};
  for (; i + 256 <= n; i += 256) {
    for (int k = 0; k < 4; ++k) {
      uint64_t w;
      std::memcpy(&w, wmb + i / 8 + 8 * k, 8);
      part[k] += __builtin_popcountll(w);
    }
  }
  c = part[0] + part[1] + part[2] + part[3];
  for (; i + 64 <= n; i += 64) {
    uint64_t w;
    std::memcpy(&w, wmb + i / 8, 8);
    c += __builtin_popcountll(w);
  }
  for (; i < n; ++i) c += (wmb[i >> 3] >> (i & 7)) & 1;
  return c;
}

#ifdef NPUPACK_X86
// The same loop compiled with the popcnt instruction (without it the builtin is a much slower
// bit-trick sequence).
__attribute__((target("popcnt"))) int64_t popcount_bits_hw(const uint8_t* wmb, int64_t n) {
  return popcount_bits(wmb, n);
}
#endif

}  // namespace

int64_t sparse_popcount(const uint8_t* wmb, int64_t n) {
#ifdef NPUPACK_X86
  if (has_ssse3()) return popcount_bits_hw(wmb, n);  // has_ssse3 also checks popcnt
#endif
  return popcount_bits(wmb, n);
}

void sparse_group_popcount(const uint8_t* wmb, int64_t n, int64_t group_elems, int64_t* counts) {
  for (int64_t g = 0, i0 = 0; i0 < n; ++g, i0 += group_elems) {
    const int64_t i1 = n - i0 < group_elems ? n : i0 + group_elems;
    int64_t c = 0, i = i0;
    for (; i < i1 && (i & 7); ++i) c += (wmb[i >> 3] >> (i & 7)) & 1;
    c += sparse_popcount(wmb + (i >> 3), i1 - i);
    counts[g] = c;
  }
}

void sparse_decompress(const uint8_t* data, int64_t data_size, const uint8_t* wmb, int64_t n, int es, uint8_t* out,
                       KernelPath path) {
  const int64_t need = sparse_popcount(wmb, n) * es;
  if (need > data_size) {
    throw LayoutError("decompress: the WMB marks " + std::to_string(need) + " bytes of non-zero data, DATA holds " +
                      std::to_string(data_size));
  }
  kernels::BitmaskArgs a;
  a.es = es;
  a.n = n;
  a.dense_out = out;
  a.wmb = wmb;
  a.data = data;
  a.data_bytes = data_size;
  kernels::run_bitmask(kernels::select_bitmask(kernels::Op::kBitmaskDecompress, path), a);
}

}  // namespace npupack
