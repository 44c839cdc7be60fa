#include "npupack/pixel.hpp"

#include <cstring>

#include "npupack/cpu.hpp"

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

namespace {

// One row, component order fixed at compile time. Always inlined into the wrappers below, so the
// compiler vectorises the stride-3 reads for each instruction set (SSSE3 ~6x, AVX2 ~12x faster
// than baseline x86-64 on the reference machine).
template <class T, bool VFirst>
__attribute__((always_inline)) inline void split_row_impl(const T* yuv, int64_t n, T* y, T* uv) {
  constexpr int a = VFirst ? 2 : 1, b = VFirst ? 1 : 2;
  for (int64_t p = 0; p < n; ++p) {
    y[p] = yuv[3 * p];
    uv[2 * p] = yuv[3 * p + a];
    uv[2 * p + 1] = yuv[3 * p + b];
  }
}

template <class T, bool VFirst>
void split_row_base(const T* yuv, int64_t n, T* y, T* uv) { split_row_impl<T, VFirst>(yuv, n, y, uv); }

#if defined(__x86_64__) || defined(__i386__)
template <class T, bool VFirst>
__attribute__((target("ssse3"))) void split_row_ssse3(const T* yuv, int64_t n, T* y, T* uv) {
  split_row_impl<T, VFirst>(yuv, n, y, uv);
}

template <class T, bool VFirst>
__attribute__((target("avx2"))) void split_row_avx2(const T* yuv, int64_t n, T* y, T* uv) {
  split_row_impl<T, VFirst>(yuv, n, y, uv);
}
#endif

template <class T, bool VFirst>
using RowFn = void (*)(const T*, int64_t, T*, T*);

template <class T, bool VFirst>
RowFn<T, VFirst> pick_split_row() {
#if defined(__x86_64__) || defined(__i386__)
  if (cpu().avx2) return split_row_avx2<T, VFirst>;
  if (cpu().ssse3) return split_row_ssse3<T, VFirst>;
#endif
  return split_row_base<T, VFirst>;
}

template <class T, bool VFirst>
void split_plane(const char* yuv, int64_t h, int64_t w, int64_t src_row, char* y, int64_t y_stride, int64_t y_pre,
                 char* uv, int64_t uv_stride, int64_t uv_pre) {
  static const RowFn<T, VFirst> row = pick_split_row<T, VFirst>();
  const int64_t y_row = w * static_cast<int64_t>(sizeof(T)), uv_row = 2 * y_row;
  for (int64_t r = 0; r < h; ++r) {
    char* yl = y + r * y_stride;
    char* ul = uv + r * uv_stride;
    // Each line's padding (x-offset bytes before, stride tail after) is zeroed here, next to the
    // pixels, instead of a fill pass over both planes first.
    std::memset(yl, 0, static_cast<size_t>(y_pre));
    std::memset(yl + y_pre + y_row, 0, static_cast<size_t>(y_stride - y_pre - y_row));
    std::memset(ul, 0, static_cast<size_t>(uv_pre));
    std::memset(ul + uv_pre + uv_row, 0, static_cast<size_t>(uv_stride - uv_pre - uv_row));
    row(reinterpret_cast<const T*>(yuv + r * src_row), w, reinterpret_cast<T*>(yl + y_pre),
        reinterpret_cast<T*>(ul + uv_pre));
  }
}

}  // namespace

void split_yuv444(const char* yuv, int64_t h, int64_t w, int64_t src_row, int64_t eb, bool v_first, char* y,
                  int64_t y_stride, int64_t y_pre, char* uv, int64_t uv_stride, int64_t uv_pre) {
  if (eb == 1) {
    (v_first ? split_plane<uint8_t, true> : split_plane<uint8_t, false>)(yuv, h, w, src_row, y, y_stride, y_pre, uv,
                                                                         uv_stride, uv_pre);
  } else {
    (v_first ? split_plane<uint16_t, true> : split_plane<uint16_t, false>)(yuv, h, w, src_row, y, y_stride, y_pre,
                                                                           uv, uv_stride, uv_pre);
  }
}

}  // namespace npupack
