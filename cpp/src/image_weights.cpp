#include "npupack/image_weights.hpp"

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "npupack/checked.hpp"
#include "npupack/errors.hpp"
#include "npupack/parallel.hpp"
#include "image_weights_avx2.hpp"
#include "image_weights_ssse3.hpp"
#include "image_weights_vbmi.hpp"
#include "row_copy.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NPUPACK_IMAGE_SSSE3 1
#endif

namespace npupack {

namespace {

// The closed form of the image mapping (docs/nvdla.md §8.4, 8.5): kernel groups of kpg, then (f
// == 1) channel blocks of cpb, then row groups of f rows (the last one short), then the kernels
// of the group, then each kernel's rows of the row group, each row one block's channels.
struct Geometry {
  int64_t x;           // C' = cdata * S, elements per pre-extended row
  int64_t blocks;      // channel blocks of C' (1 when f > 1)
  int64_t row_groups;  // ceil(R / f)

  explicit Geometry(const ImageWeightsSpec& sp)
      : x(sp.cdata * sp.s),
        blocks(sp.f > 1 || sp.cpb >= sp.cdata * sp.s ? 1 : ceil_div(sp.cdata * sp.s, sp.cpb)),
        row_groups(ceil_div(sp.r, sp.f)) {}

  int64_t width(const ImageWeightsSpec& sp, int64_t cb) const {
    return blocks == 1 ? x : std::min(sp.cpb, x - cb * sp.cpb);
  }

  // Byte offset of row b of row group a, channel block cb, of kernel q of the group at k0 (kn kernels).
  int64_t row_offset(const ImageWeightsSpec& sp, int64_t k0, int64_t kn, int64_t cb, int64_t a, int64_t q,
                     int64_t b) const {
    const int64_t w = width(sp, cb), fa = std::min(sp.f, sp.r - a * sp.f);
    return (k0 * sp.r * x + cb * sp.cpb * sp.r * kn + a * sp.f * kn * w + q * fa * w + b * w) * sp.es;
  }
};

// Kernel k's R * S pixels of cdata components into px, element by element (any strides).
void interleave_scalar(const char* src, const ImageWeightsSpec& sp, int64_t k, char* px) {
  for (int64_t r = 0; r < sp.r; ++r) {
    for (int64_t s = 0; s < sp.s; ++s) {
      char* o = px + (r * sp.s + s) * sp.cdata * sp.es;
      for (int64_t c = 0; c < sp.cdata; ++c) {
        if (c < sp.c) {
          std::memcpy(o + c * sp.es, src + k * sp.stride[0] + c * sp.stride[1] + r * sp.stride[2] + s * sp.stride[3],
                      static_cast<size_t>(sp.es));
        } else {
          std::memset(o + c * sp.es, 0, static_cast<size_t>(sp.es));
        }
      }
    }
  }
}

#ifdef NPUPACK_IMAGE_SSSE3
// 16 bytes at p, of which only those before end are read (the rest 0).
__attribute__((target("ssse3"))) inline __m128i load16(const char* p, const char* end) {
  if (end - p >= 16) return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  alignas(16) char tmp[16] = {};
  std::memcpy(tmp, p, static_cast<size_t>(end - p));
  return _mm_load_si128(reinterpret_cast<const __m128i*>(tmp));
}

template <int B>
__attribute__((target("ssse3"))) inline __m128i unpack_lo(__m128i a, __m128i b) {
  if constexpr (B == 1) return _mm_unpacklo_epi8(a, b);
  if constexpr (B == 2) return _mm_unpacklo_epi16(a, b);
  return _mm_unpacklo_epi32(a, b);
}

template <int B>
__attribute__((target("ssse3"))) inline __m128i unpack_hi(__m128i a, __m128i b) {
  if constexpr (B == 1) return _mm_unpackhi_epi8(a, b);
  if constexpr (B == 2) return _mm_unpackhi_epi16(a, b);
  return _mm_unpackhi_epi32(a, b);
}

// Kernel k's planes (C-contiguous source ending at end) into pixels, 16 bytes of each plane at a
// time: two rounds of unpacks make 4-component pixels; 3 components drop the fourth by pshufb.
// Writes up to 64 bytes past the last pixel (px has that slack).
template <int ES>
__attribute__((target("ssse3"))) void interleave_ssse3(const char* src, const char* end, const ImageWeightsSpec& sp,
                                                      int64_t k, char* px) {
  constexpr int64_t kPixels = 16 / ES;
  const __m128i drop_fourth = ES == 1 ? _mm_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1)
                                      : _mm_setr_epi8(0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 12, 13, -1, -1, -1, -1);
  const char* planes = src + k * sp.stride[0];
  const int64_t n = sp.r * sp.s, cdata = sp.cdata;
  for (int64_t p = 0; p < n; p += kPixels) {
    __m128i v[4];
    for (int c = 0; c < 4; ++c) v[c] = c < sp.c ? load16(planes + c * sp.stride[1] + p * ES, end) : _mm_setzero_si128();
    char* o = px + p * cdata * ES;
    if (cdata == 1) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(o), v[0]);
    } else if (cdata == 2) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(o), unpack_lo<ES>(v[0], v[1]));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(o + 16), unpack_hi<ES>(v[0], v[1]));
    } else {
      const __m128i lo01 = unpack_lo<ES>(v[0], v[1]), hi01 = unpack_hi<ES>(v[0], v[1]);
      const __m128i lo23 = unpack_lo<ES>(v[2], v[3]), hi23 = unpack_hi<ES>(v[2], v[3]);
      const __m128i q[4] = {unpack_lo<2 * ES>(lo01, lo23), unpack_hi<2 * ES>(lo01, lo23),
                            unpack_lo<2 * ES>(hi01, hi23), unpack_hi<2 * ES>(hi01, hi23)};
      for (int i = 0; i < 4; ++i) {
        if (cdata == 4) {
          _mm_storeu_si128(reinterpret_cast<__m128i*>(o + 16 * i), q[i]);
        } else {
          _mm_storeu_si128(reinterpret_cast<__m128i*>(o + 12 * i), _mm_shuffle_epi8(q[i], drop_fourth));
        }
      }
    }
  }
}
#endif

// A kernel group's planes into pixels in one call (image_weights_avx2.hpp).
using GroupInterleave = void (*)(const char*, const char*, const ImageWeightsSpec&, int64_t, int64_t, char*);

#ifdef NPUPACK_IMAGE_SSSE3
template <int ES>
GroupInterleave group_interleave(int64_t cdata) {
  switch (cdata) {
    case 1: return image::interleave_group_avx2<ES, 1>;
    case 2: return image::interleave_group_avx2<ES, 2>;
    case 3: return image::interleave_group_avx2<ES, 3>;
    default: return image::interleave_group_avx2<ES, 4>;
  }
}
#endif

#ifdef NPUPACK_IMAGE_SHUFFLE
// The window tables of the last geometry packed on this thread (kernels' shape, components,
// post-extension, element size, kernels per window, pass): building the shuffle steps costs
// more than a small layer's whole pass, and a model's first layer is packed again and again.
const image::WindowTables& window_tables(const ImageWeightsSpec& sp, int64_t m, bool vbmi) {
  thread_local image::WindowTables t;
  const int64_t key[8] = {sp.c, sp.r, sp.s, sp.cdata, sp.f, sp.es, m, vbmi};
  if (std::equal(key, key + 8, t.key)) return t;
  const int64_t row_groups = ceil_div(sp.r, sp.f);
  t.first = image::row_table(sp, m, std::min(sp.f, sp.r));
  t.last = image::row_table(sp, m, sp.r - (row_groups - 1) * sp.f);
  t.fits = vbmi || (image::shuffle_table(t.first, m, t.first_st) && image::shuffle_table(t.last, m, t.last_st));
  std::copy(key, key + 8, t.key);
  return t;
}
#endif

}  // namespace

void check_image_weights(const ImageWeightsSpec& sp, const BlockedLayout& full, int64_t dst_size) {
  if (sp.k < 1 || sp.c < 1 || sp.r < 1 || sp.s < 1 || sp.kpg < 1 || sp.cpb < 1) {
    throw LayoutError("image weights: dimensions, kernels per group and channels per block must be >= 1");
  }
  if (sp.cdata < 1 || sp.cdata > 4 || sp.c > sp.cdata) {
    throw LayoutError("image weights: C must be <= the pixel format's components, 1 to 4");
  }
  if (sp.f != 1 && sp.f != 2 && sp.f != 4) throw LayoutError("image weights: the post-extension factor is 1, 2 or 4");
  if (sp.es != 1 && sp.es != 2) throw LayoutError("image weights: elements of 1 or 2 bytes");
  const Geometry geo(sp);
  if (sp.f > 1 && geo.x > sp.cpb) throw LayoutError("image weights: post-extension needs C' within one channel block");
  const auto& d = full.dims();
  const int64_t nbytes = checked_mul(checked_mul(checked_mul(sp.k, sp.r, "image weights"), geo.x, "image weights"),
                                     sp.es, "image weights");
  if (d.size() != 4 || d[0].extent != sp.k || d[1].extent != geo.x || d[2].extent != sp.r || d[3].extent != 1 ||
      full.elem_bytes() != sp.es || full.nbytes() != nbytes) {
    throw LayoutError("image weights: the descriptor is not the dense (K, C', R, 1) mapping of the elements");
  }
  if (nbytes > dst_size) {
    throw LayoutError("image weights: the output holds " + std::to_string(dst_size) + " bytes, " +
                      std::to_string(nbytes) + " are needed");
  }
  // The closed form must be the descriptor's: `full` must be the image mapping itself, dim for dim
  // and loop for loop (a sampled offset or two would let a reordered or swizzled descriptor through).
  // A tile above its extent maps as the extent: kpg and cpb are clamped so that no size is computed
  // from a huge one. Building the mapping to compare costs more than a small layer's pass, so the
  // last descriptor that passed is remembered per thread: by its id (never reused; a descriptor
  // never changes) and the parameters it was compared for.
  const int64_t key[8] = {sp.k, sp.r, geo.x, sp.f, std::min(sp.kpg, sp.k), std::min(sp.cpb, geo.x), sp.es,
                          static_cast<int64_t>(full.id())};
  thread_local int64_t passed[8] = {};
  if (std::equal(key, key + 8, passed)) return;
  const auto dim = [](const char* name, int64_t extent, int64_t tile) {
    DimSpec d;
    d.name = name, d.extent = extent;
    if (tile) d.tiles = {tile}, d.ragged = true;
    return d;
  };
  const auto loops = [](std::initializer_list<std::pair<int, int>> nest) {
    std::vector<AxisSpec> order;
    for (const auto& [index, level] : nest) {
      AxisSpec a;
      a.dim = index, a.level = level;
      order.push_back(a);
    }
    return order;
  };
  const bool post = sp.f > 1;
  const std::vector<DimSpec> dims{dim("K", sp.k, std::min(sp.kpg, sp.k)),
                                  dim("C", geo.x, post ? 0 : std::min(sp.cpb, geo.x)), dim("R", sp.r, post ? sp.f : 0),
                                  dim("S", 1, 0)};
  // Post-extension: K/kpg, R/f, kpg, f, C', S; else the DC mapping of (K, C', R, 1): K/kpg,
  // C'/cpb, R, S, kpg, cpb.
  const std::vector<AxisSpec> order = post ? loops({{0, 0}, {2, 0}, {0, 1}, {2, 1}, {1, 0}, {3, 0}})
                                           : loops({{0, 0}, {1, 0}, {2, 0}, {3, 0}, {0, 1}, {1, 1}});
  const BlockedLayout want(dims, order, sp.es);
  bool same = want.axes().size() == full.axes().size() && want.nbytes() == full.nbytes();
  for (size_t i = 0; same && i < want.axes().size(); ++i) {
    const auto &x = want.axes()[i], &y = full.axes()[i];
    same = x.dim == y.dim && x.level == y.level && x.extent == y.extent && x.weight == y.weight && x.stride == y.stride;
  }
  for (size_t i = 0; same && i < dims.size(); ++i) {
    const DimSpec &x = want.dims()[i], &y = full.dims()[i];
    const auto storage = [](const DimSpec& v) { return v.storage ? v.storage : v.pad_lo + v.extent; };
    same = x.extent == y.extent && x.tiles == y.tiles && x.ragged == y.ragged && x.pad_lo == y.pad_lo &&
           storage(x) == storage(y) && x.divisors == y.divisors;
  }
  if (!same) throw LayoutError("image weights: the descriptor is not the image mapping the pass writes");
  std::copy(key, key + 8, passed);
}

void image_weights_pack(const char* src, int64_t src_bytes, const ImageWeightsSpec& sp, const BlockedLayout& full,
                        char* dst, int64_t dst_size) {
  check_image_weights(sp, full, dst_size);
  const Geometry geo(sp);
  const int64_t n = sp.r * sp.s, es = sp.es;
  const bool dense = sp.stride[3] == es && sp.stride[2] == sp.s * es && sp.stride[1] == n * es &&
                     sp.stride[0] == sp.c * n * es && src_bytes >= sp.k * sp.c * n * es;
#ifdef NPUPACK_IMAGE_SSSE3
  const bool vector = dense && cpu().ssse3 && allows(sp.path, KernelPath::kSsse3);
  const GroupInterleave group_avx2 = !vector || !cpu().avx2 || !allows(sp.path, KernelPath::kAvx2) ? nullptr
                                     : es == 1 ? group_interleave<1>(sp.cdata)
                                               : group_interleave<2>(sp.cdata);
#else
  (void)dense;
  const GroupInterleave group_avx2 = nullptr;
#endif
  // A kernel group's pixels are made first, then its rows copied in output order: the copies
  // then read stores that have long left the store buffer (reading a row right after the vector
  // stores that made it stalls on store forwarding), and the writes run front to back. The
  // spec's fields are copied to locals: stores through char pointers would make the compiler
  // reload them.
  // kpg above K maps as K (one group): clamped, so that no size below is computed from it.
  const int64_t kpg = std::min(sp.kpg, sp.k), k = sp.k, groups = ceil_div(k, kpg), kernel_px = n * sp.cdata * es;
  const int64_t x = geo.x, f = sp.f, r = sp.r, cpb = sp.cpb, blocks = geo.blocks, row_groups = geo.row_groups;
#ifdef NPUPACK_IMAGE_SHUFFLE
  // Row groups that fit a window: permuted (VBMI, else SSSE3 shuffles) instead of interleaved.
  int64_t m = vector && blocks == 1 ? image::kernels_per_window(sp) : 0;
#ifdef NPUPACK_IMAGE_VBMI
  const bool vbmi = m > 0 && cpu().avx512vbmi && allows(sp.path, KernelPath::kAvx512);
#else
  const bool vbmi = false;
#endif
  // The shuffles pay where a step makes several kernels' row groups; one kernel's (5x5, 7x7)
  // costs a step's loop and tail for each of its row groups, and interleaving its planes, many
  // pixels per plane load, does better.
  if (!vbmi && m < 2) m = 0;
  // Bound here, on the calling thread: the workers read this thread's tables.
  const image::WindowTables& tables = m > 0 ? window_tables(sp, m, vbmi) : image::WindowTables::none();
  if (m > 0 && !tables.fits) m = 0;
  const image::RowTable &first = tables.first, &last = tables.last;  // inner row groups; the last
  const image::ShuffleTable &first_st = tables.first_st, &last_st = tables.last_st;
#endif
  auto work = [&](int64_t g0, int64_t g1) {
    std::vector<char> px(static_cast<size_t>(kpg * kernel_px + 128));  // the vector passes' slack
    for (int64_t g = g0; g < g1; ++g) {
      const int64_t k0 = g * kpg, kn = std::min(kpg, k - k0);
#ifdef NPUPACK_IMAGE_SHUFFLE
      if (m > 0) {  // row group after row group, each a run of kn row groups: the group in order
        for (int64_t a = 0; a < row_groups; ++a) {
          const bool inner = a + 1 < row_groups;
          char* d = dst + geo.row_offset(sp, k0, kn, 0, a, 0, 0);
#ifdef NPUPACK_IMAGE_VBMI
          if (vbmi) {
            image::row_groups_vbmi(src, src + src_bytes, sp, k0, kn, a, m, inner ? first : last, d);
            continue;
          }
#endif
          image::row_groups_ssse3(src, src + src_bytes, sp, k0, kn, a, m, inner ? first : last,
                                  inner ? first_st : last_st, d);
        }
        continue;
      }
#endif
      if (group_avx2) group_avx2(src, src + src_bytes, sp, k0, kn, px.data());
      for (int64_t q = 0; q < kn && !group_avx2; ++q) {
        char* kp = px.data() + q * kernel_px;
#ifdef NPUPACK_IMAGE_SSSE3
        if (vector && es == 1) interleave_ssse3<1>(src, src + src_bytes, sp, k0 + q, kp);
        else if (vector) interleave_ssse3<2>(src, src + src_bytes, sp, k0 + q, kp);
        else interleave_scalar(src, sp, k0 + q, kp);
#else
        interleave_scalar(src, sp, k0 + q, kp);
#endif
      }
      for (int64_t cb = 0; cb < blocks; ++cb) {
        const int64_t w = geo.width(sp, cb);
        for (int64_t a = 0; a < row_groups; ++a) {  // kn rows of a row group (or block), back to back
          const int64_t row = (blocks == 1 ? std::min(f, r - a * f) * x : w) * es;
          char* d = dst + geo.row_offset(sp, k0, kn, cb, a, 0, 0);
          detail::copy_rows(px.data() + (a * f * x + cb * cpb) * es, kernel_px, d, row, kn, static_cast<size_t>(row));
        }
      }
    }
  };
  const int64_t grain = std::max<int64_t>(1, kParallelBytes / 4 / std::max<int64_t>(1, kpg * kernel_px));
  if (full.nbytes() < kParallelBytes) work(0, groups);
  else parallel_for(groups, grain, work);
}

}  // namespace npupack
