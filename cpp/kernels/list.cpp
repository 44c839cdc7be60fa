// The kernel list (kernels.def) as a table, and the first-match selection over it.
#include <array>
#include <cstring>

#include "kernel.hpp"

namespace npupack {
namespace kernels {

const std::vector<KernelInfo>& kernel_list() {
  static const std::vector<KernelInfo> list = {
#define NPUPACK_KERNEL(name, op, elem, tile_rows, tile_cols, isa, fn) \
  {name, op, elem, tile_rows, tile_cols, isa, fn, fn##_takes},
#include "kernels.def"
#undef NPUPACK_KERNEL
  };
  return list;
}

bool isa_runs(Isa isa) {
  switch (isa) {
    case Isa::kScalar: return true;
#if defined(__x86_64__) || defined(__i386__)
    case Isa::kSse2: return true;
#else
    case Isa::kSse2: return false;
#endif
    case Isa::kSsse3: return cpu().ssse3;
    case Isa::kAvx2: return cpu().avx2;
    case Isa::kAvx512vbmi: return cpu().avx512vbmi && cpu().avx2;
    case Isa::kAvx512vbmi2: return cpu().avx512vbmi2;
    case Isa::kAvx: return cpu().avx;
  }
  return false;
}

bool isa_allowed(Isa isa, KernelPath path) {
  switch (isa) {
    case Isa::kScalar: return true;
    case Isa::kSse2:
    case Isa::kSsse3: return allows(path, KernelPath::kSsse3);
    case Isa::kAvx:
    case Isa::kAvx2: return allows(path, KernelPath::kAvx2);
    case Isa::kAvx512vbmi:
    case Isa::kAvx512vbmi2: return allows(path, KernelPath::kAvx512);
  }
  return false;
}

const char* isa_name(Isa isa) {
  static const char* const names[] = {"scalar", "sse2", "ssse3", "avx2", "avx512vbmi", "avx512vbmi2", "avx"};
  return names[static_cast<int>(isa)];
}

const char* op_name(Op op) {
  static const char* const names[] = {"transpose",        "transpose-batch",    "transpose-finite",
                                        "bitmask-compress", "bitmask-decompress", "fp16-scan",
                                        "stream-copy",      "spread",             "pixel-shuffle",
                                        "yuv-split"};
  return names[static_cast<int>(op)];
}

namespace {

// The candidates of one (op set, element size, path): the entries that pass every test but the
// kernel's own, in list order, filtered once so that a call only asks the kernels' predicates.
constexpr int kPaths = 5, kSets = 3;  // sets: transpose, transpose + transpose-batch, finite
int elem_index(int elem) { return elem == 1 ? 0 : elem == 2 ? 1 : elem == 4 ? 2 : 3; }

const std::vector<const KernelInfo*>& candidates(int set, int elem, KernelPath path) {
  static const auto table = [] {
    std::array<std::vector<const KernelInfo*>, kSets * 4 * kPaths> t;
    for (int s = 0; s < kSets; ++s) {
      for (int e = 0; e < 4; ++e) {
        for (int p = 0; p < kPaths; ++p) {
          for (const KernelInfo& k : kernel_list()) {
            const bool op_ok = s == 0   ? k.op == Op::kTranspose
                               : s == 1 ? k.op == Op::kTranspose || k.op == Op::kTransposeBatch
                                        : k.op == Op::kTransposeFinite;
            if (op_ok && elem_index(k.elem) == e && isa_runs(k.isa) && isa_allowed(k.isa, static_cast<KernelPath>(p))) {
              t[static_cast<size_t>((s * 4 + e) * kPaths + p)].push_back(&k);
            }
          }
        }
      }
    }
    return t;
  }();
  return table[static_cast<size_t>((set * 4 + elem_index(elem)) * kPaths + static_cast<int>(path))];
}

}  // namespace

const KernelInfo* select(Op op, int elem, const TransposeArgs& a, KernelPath path) {
  const int set = op == Op::kTransposeFinite ? 2 : a.batch || op == Op::kTransposeBatch ? 1 : 0;
  for (const KernelInfo* k : candidates(set, elem, path)) {
    if (k->takes(a)) return k;
  }
  return nullptr;
}

const std::vector<BitmaskKernelInfo>& bitmask_list() {
  static const std::vector<BitmaskKernelInfo> list = {
#define NPUPACK_BITMASK_KERNEL(name, op, tile, isa, fn) {name, op, 0, tile, isa, fn},
#include "kernels.def"
#undef NPUPACK_BITMASK_KERNEL
  };
  return list;
}

const std::vector<Fp16ScanKernelInfo>& fp16_scan_list() {
  static const std::vector<Fp16ScanKernelInfo> list = {
#define NPUPACK_FP16_SCAN_KERNEL(name, tile, isa, fn) {name, Op::kFp16Scan, 2, tile, isa, fn},
#include "kernels.def"
#undef NPUPACK_FP16_SCAN_KERNEL
  };
  return list;
}

const std::vector<StreamCopyKernelInfo>& stream_copy_list() {
  static const std::vector<StreamCopyKernelInfo> list = {
#define NPUPACK_STREAM_COPY_KERNEL(name, tile, isa, fn) {name, Op::kStreamCopy, 1, tile, isa, fn},
#include "kernels.def"
#undef NPUPACK_STREAM_COPY_KERNEL
  };
  return list;
}

const std::vector<SpreadKernelInfo>& spread_list() {
  static const std::vector<SpreadKernelInfo> list = {
#define NPUPACK_SPREAD_KERNEL(name, tile, isa, fn) {name, Op::kSpread, 1, tile, isa, fn},
#include "kernels.def"
#undef NPUPACK_SPREAD_KERNEL
  };
  return list;
}

const std::vector<PixelShuffleKernelInfo>& pixel_shuffle_list() {
  static const std::vector<PixelShuffleKernelInfo> list = {
#define NPUPACK_PIXEL_SHUFFLE_KERNEL(name, tile, isa, fn) {name, Op::kPixelShuffle, 1, tile, isa, fn},
#include "kernels.def"
#undef NPUPACK_PIXEL_SHUFFLE_KERNEL
  };
  return list;
}

const std::vector<YuvSplitKernelInfo>& yuv_split_list() {
  static const std::vector<YuvSplitKernelInfo> list = {
#define NPUPACK_YUV_SPLIT_KERNEL(name, elem, tile, isa, fn) {name, Op::kYuvSplit, elem, tile, isa, fn},
#include "kernels.def"
#undef NPUPACK_YUV_SPLIT_KERNEL
  };
  return list;
}

bool entry_runs(Op op, Isa isa) {
  if (isa == Isa::kScalar) return true;
  const bool bitmask = op == Op::kBitmaskCompress || op == Op::kBitmaskDecompress;
  return isa_runs(isa) && (!bitmask || cpu().popcnt);
}

namespace {
// The choice of every (op, path) of one section, made once: sparse_compress_groups asks per
// kernel group.
template <class Fn>
const Entry<Fn>* select_entry(const std::vector<Entry<Fn>>& list, Op op, KernelPath path) {
  static const auto table = [&list] {
    std::array<const Entry<Fn>*, kOpCount * kPaths> t{};
    for (int p = 0; p < kPaths; ++p) {
      for (const Entry<Fn>& k : list) {
        auto& slot = t[static_cast<size_t>(static_cast<int>(k.op) * kPaths + p)];
        if (!slot && entry_runs(k.op, k.isa) && isa_allowed(k.isa, static_cast<KernelPath>(p))) slot = &k;
      }
    }
    return t;
  }();
  return table[static_cast<size_t>(static_cast<int>(op) * kPaths + static_cast<int>(path))];
}
}  // namespace

const BitmaskKernelInfo& select_bitmask(Op op, KernelPath path) { return *select_entry(bitmask_list(), op, path); }

const Fp16ScanKernelInfo& select_fp16_scan(KernelPath path) {
  return *select_entry(fp16_scan_list(), Op::kFp16Scan, path);
}

const StreamCopyKernelInfo& select_stream_copy(KernelPath path) {
  return *select_entry(stream_copy_list(), Op::kStreamCopy, path);
}

const SpreadKernelInfo* select_spread(KernelPath path) { return select_entry(spread_list(), Op::kSpread, path); }

const PixelShuffleKernelInfo& select_pixel_shuffle(int pixel, KernelPath path) {
  return *select_entry(pixel_shuffle_list(), Op::kPixelShuffle, 16 % pixel == 0 ? path : KernelPath::kScalar);
}

const YuvSplitKernelInfo& select_yuv_split(int elem, KernelPath path) {
  // Two element sizes in one section: the choice per (element, path), made once.
  static const auto table = [] {
    std::array<const YuvSplitKernelInfo*, 2 * kPaths> t{};
    for (int p = 0; p < kPaths; ++p) {
      for (const YuvSplitKernelInfo& k : yuv_split_list()) {
        auto& slot = t[static_cast<size_t>((k.elem - 1) * kPaths + p)];
        if (!slot && entry_runs(k.op, k.isa) && isa_allowed(k.isa, static_cast<KernelPath>(p))) slot = &k;
      }
    }
    return t;
  }();
  return *table[static_cast<size_t>((elem == 2 ? 1 : 0) * kPaths + static_cast<int>(path))];
}

void run_stream_copy(const StreamCopyKernelInfo& k, char* dst, const char* src, int64_t n) {
  StreamCopyArgs a;
  a.dst = dst;
  a.src = src;
  a.n = n;
  if (k.isa != Isa::kScalar) {
    const int64_t head = static_cast<int64_t>((16 - (reinterpret_cast<uintptr_t>(dst) & 15)) & 15);
    if (n >= head + 16) {
      std::memcpy(dst, src, static_cast<size_t>(head));
      a.done = head;
      k.run(a);
    }
  }
  select_stream_copy(KernelPath::kScalar).run(a);
}

void run_bitmask(const BitmaskKernelInfo& k, BitmaskArgs& a) {
  k.run(a);
  if (k.isa != Isa::kScalar) select_bitmask(k.op, KernelPath::kScalar).run(a);
}

}  // namespace kernels
}  // namespace npupack
