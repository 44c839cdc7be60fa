// The microkernels as a list (docs/design.md §4.9): each transpose kernel of cpp/kernels is one
// function that moves `count` matrices described by TransposeArgs, plus a predicate saying which
// arguments it takes; kernels.def lists them, most specialised first, and that one list drives
// the dispatch of transpose.hpp's functions, the kernel tester (_core.kernel_run) and the
// kernel benchmarks. The list's later sections (bitmask, fp16-scan, stream-copy, spread,
// pixel-shuffle, yuv-split) have
// one argument struct each and an Entry per kernel (below). Internal to the extension.
#pragma once
#include <cstdint>
#include <vector>

#include "npupack/cpu.hpp"
#include "npupack/spread.hpp"
#include "pixel_shuffle.hpp"

namespace npupack {
namespace kernels {

// What a list entry does. kTranspose: the matrices of any public transpose function;
// kTransposeBatch: only transpose_batch's batches (the kernel needs equally spaced matrices, or
// is the batch form of a shape the single call leaves to another kernel); kTransposeFinite:
// a kTranspose kernel that also tests every fp16 half it moves for INF / NaN. The other
// sections of kernels.def, one signature each: kBitmaskCompress, kBitmaskDecompress (NVDLA's
// sparse weight compression, docs/nvdla.md §11; BitmaskArgs), kFp16Scan (the INF / NaN scans of
// convert.hpp; Fp16ScanArgs), kStreamCopy (stream.hpp's non-temporal copy; StreamCopyArgs),
// kSpread (spread.hpp's zero-padded blocks from one column of values; SpreadArgs),
// kPixelShuffle (the component order of interleaved pixel lines; PixelShuffleArgs), kYuvSplit
// (YUV 4:4:4 rows into the Y and UV lines of the N444 formats; YuvSplitArgs).
enum class Op : uint8_t {
  kTranspose,
  kTransposeBatch,
  kTransposeFinite,
  kBitmaskCompress,
  kBitmaskDecompress,
  kFp16Scan,
  kStreamCopy,
  kSpread,
  kPixelShuffle,
  kYuvSplit,
};
constexpr int kOpCount = 10;

// The instruction set a kernel is compiled for, narrowest first.
enum class Isa : uint8_t { kScalar, kSse2, kSsse3, kAvx2, kAvx512vbmi, kAvx512vbmi2, kAvx };

// One call: `count` rows x cols matrices of eb-byte elements (eb is the entry's), matrix i at
// src + i * src_step and dst + i * dst_step. Row r of the source is at src + r * src_stride, or
// src + src_rows[r] (a table of byte offsets), or src_ptrs[r]; column c of the destination at
// dst + c * dst_stride, or dst + dst_cols[c]; `stream`: non-temporal stores (dst_stride = rows *
// eb, dst 16-byte aligned). `ahead`: a source range the caller reads next, prefetched by the
// kernels that read each row once. `nonfinite` (kTransposeFinite): set when a half moved was
// fp16 INF or NaN.
struct TransposeArgs {
  const char* src = nullptr;
  int64_t src_stride = 0;
  const int64_t* src_rows = nullptr;
  const char* const* src_ptrs = nullptr;
  char* dst = nullptr;
  int64_t dst_stride = 0;
  const int64_t* dst_cols = nullptr;
  bool stream = false;
  int64_t rows = 0, cols = 0, count = 1, src_step = 0, dst_step = 0;
  const char* ahead = nullptr;
  int64_t ahead_bytes = 0;
  bool* nonfinite = nullptr;
  bool batch = false;  // a call of transpose_batch or transpose_batch_finite16
};

// The five ways a call addresses its two sides, as a bit set for the kernels' templates.
enum Sides : unsigned {
  kStrided = 1,     // strided rows -> strided columns
  kStreamed = 2,    // strided rows -> strided columns, non-temporal stores
  kToColTable = 4,  // strided rows -> column offset table
  kFromRowTable = 8,
  kFromRowPtrs = 16,
  kAnySides = 31,
};
inline Sides sides_of(const TransposeArgs& a) {
  if (a.src_ptrs) return kFromRowPtrs;
  if (a.src_rows) return kFromRowTable;
  if (a.dst_cols) return kToColTable;
  return a.stream ? kStreamed : kStrided;
}

// Runs a kernel: true when it prefetched TransposeArgs::ahead. Takes: whether it moves these
// arguments (shape, strides, sides; the element size is the entry's).
using RunFn = bool (*)(const TransposeArgs&);
using TakesFn = bool (*)(const TransposeArgs&);

struct KernelInfo {
  const char* name;  // <operation>_<element>_<tile>_<isa>, docs/design.md §4.9
  Op op;
  int elem;                  // element bytes
  int tile_rows, tile_cols;  // the block one step moves; 0: a run-time count (see the kernel)
  Isa isa;
  RunFn run;
  TakesFn takes;
};

#define NPUPACK_KERNEL(name, op, elem, tile_rows, tile_cols, isa, fn) \
  bool fn(const TransposeArgs&);                                      \
  bool fn##_takes(const TransposeArgs&);
#include "kernels.def"
#undef NPUPACK_KERNEL

// One call of a bitmask kernel: n elements of es bytes (1 or 2). Compress reads `dense` and
// writes the (n + 7) / 8 WMB bytes to wmb_out and the non-zero elements to data_out (at most
// data_bytes; bytes past the ones kept may be overwritten); decompress reads `wmb` and `data`
// (data_bytes) and writes the n elements to dense_out. A kernel starts at element `done` and DATA
// byte `pos` (0 for all but the scalar kernels) and advances them over the whole steps it moves;
// `done` stays a multiple of 8, so each WMB byte is written by one kernel.
struct BitmaskArgs {
  int es = 1;
  int64_t n = 0;
  const uint8_t* dense = nullptr;
  uint8_t* dense_out = nullptr;
  const uint8_t* wmb = nullptr;
  uint8_t* wmb_out = nullptr;
  const uint8_t* data = nullptr;
  uint8_t* data_out = nullptr;
  int64_t data_bytes = 0;
  int64_t done = 0, pos = 0;
};
using BitmaskFn = void (*)(BitmaskArgs&);

// One call of an fp16 scan: whether any of the n halves at `bits` (n a multiple of the entry's
// tile; the scalar entry: any n) passes (b & mask) == value, or (b & mask) > value when
// `greater` (masks within 0x7FFF).
struct Fp16ScanArgs {
  const uint16_t* bits = nullptr;
  int64_t n = 0;
  uint16_t mask = 0, value = 0;
  bool greater = false;
};
using Fp16ScanFn = bool (*)(const Fp16ScanArgs&);

// One non-temporal copy of n bytes from `done` on (dst + done 16-byte aligned): the kernel
// advances `done` over the steps it streams; the scalar entry copies the rest with plain stores.
struct StreamCopyArgs {
  char* dst = nullptr;
  const char* src = nullptr;
  int64_t n = 0, done = 0;
};
using StreamCopyFn = void (*)(StreamCopyArgs&);

// One SpreadPlan::run: `blocks` blocks of block_bytes at dst, block x written from the
// value_bytes at values + x * value_bytes by the plan's chunks; `stream`: non-temporal stores
// where dst is 16-byte aligned.
struct SpreadArgs {
  const char* values = nullptr;
  int64_t value_bytes = 0;
  char* dst = nullptr;
  int64_t block_bytes = 0, blocks = 0;
  const SpreadPlan::Chunk* chunks = nullptr;
  int64_t nchunks = 0;
  bool stream = false;
};
using SpreadFn = void (*)(const SpreadArgs&);

// One line of interleaved pixels (docs/nvdla.md §4): nbytes at dst (whole pixels of s->pixel
// bytes) from the same pixels at src (s->src_pixel bytes each: fewer where s adds zeros) in the
// component order of s; the vector kernels need pixels that divide 16.
struct PixelShuffleArgs {
  const unsigned char* src = nullptr;
  unsigned char* dst = nullptr;
  int64_t nbytes = 0;
  const PixelShuffle* s = nullptr;
};
using PixelShuffleFn = void (*)(const PixelShuffleArgs&);

// One row of n YUV 4:4:4 pixels (Y, U, V triples of the entry's element size) at yuv: the n Y
// values to y and the n pairs to uv, V before U when v_first.
struct YuvSplitArgs {
  const char* yuv = nullptr;
  int64_t n = 0;
  char* y = nullptr;
  char* uv = nullptr;
  bool v_first = false;
};
using YuvSplitFn = void (*)(const YuvSplitArgs&);

// An entry of a section after the transposes. Such a kernel takes every call of its op (the
// caller hands it whole steps where the section says so), so the first entry whose instruction
// set runs and is allowed is the choice; the section's scalar entry comes last.
template <class Fn>
struct Entry {
  const char* name;  // <operation>_<element>_<tile>_<isa>, docs/design.md §4.9
  Op op;
  int elem;  // element bytes; 0: 8- and 16-bit elements (x8x16)
  int tile;  // one step: bytes, elements (fp16-scan) or pixels (yuv-split); 0 for the scalar kernels
  Isa isa;
  Fn run;
};
using BitmaskKernelInfo = Entry<BitmaskFn>;
using Fp16ScanKernelInfo = Entry<Fp16ScanFn>;
using StreamCopyKernelInfo = Entry<StreamCopyFn>;
using SpreadKernelInfo = Entry<SpreadFn>;
using PixelShuffleKernelInfo = Entry<PixelShuffleFn>;
using YuvSplitKernelInfo = Entry<YuvSplitFn>;

#define NPUPACK_BITMASK_KERNEL(name, op, tile, isa, fn) void fn(BitmaskArgs&);
#define NPUPACK_FP16_SCAN_KERNEL(name, tile, isa, fn) bool fn(const Fp16ScanArgs&);
#define NPUPACK_STREAM_COPY_KERNEL(name, tile, isa, fn) void fn(StreamCopyArgs&);
#define NPUPACK_SPREAD_KERNEL(name, tile, isa, fn) void fn(const SpreadArgs&);
#define NPUPACK_PIXEL_SHUFFLE_KERNEL(name, tile, isa, fn) void fn(const PixelShuffleArgs&);
#define NPUPACK_YUV_SPLIT_KERNEL(name, elem, tile, isa, fn) void fn(const YuvSplitArgs&);
#include "kernels.def"
#undef NPUPACK_BITMASK_KERNEL
#undef NPUPACK_FP16_SCAN_KERNEL
#undef NPUPACK_STREAM_COPY_KERNEL
#undef NPUPACK_SPREAD_KERNEL
#undef NPUPACK_PIXEL_SHUFFLE_KERNEL
#undef NPUPACK_YUV_SPLIT_KERNEL

// The entries of each section in list order.
const std::vector<BitmaskKernelInfo>& bitmask_list();
const std::vector<Fp16ScanKernelInfo>& fp16_scan_list();
const std::vector<StreamCopyKernelInfo>& stream_copy_list();
const std::vector<SpreadKernelInfo>& spread_list();
const std::vector<PixelShuffleKernelInfo>& pixel_shuffle_list();
const std::vector<YuvSplitKernelInfo>& yuv_split_list();

// Whether this CPU runs an entry of `op` compiled for `isa` (the bitmask kernels also count bits
// with popcnt).
bool entry_runs(Op op, Isa isa);

// The first entry of `op` in its section whose instruction set this CPU runs and `path` allows
// (the scalar entry at the end always does), chosen once per (op, path).
const BitmaskKernelInfo& select_bitmask(Op op, KernelPath path = KernelPath::kAuto);
const Fp16ScanKernelInfo& select_fp16_scan(KernelPath path = KernelPath::kAuto);
const StreamCopyKernelInfo& select_stream_copy(KernelPath path = KernelPath::kAuto);
// The spread section has no scalar entry (SpreadPlan is the AVX2 kernel's program; without one
// the callers take another strategy): nullptr when no entry runs.
const SpreadKernelInfo* select_spread(KernelPath path = KernelPath::kAuto);
// The pixel-shuffle entry for pixels of `pixel` bytes: the scalar one unless the pixel divides 16.
const PixelShuffleKernelInfo& select_pixel_shuffle(int pixel, KernelPath path = KernelPath::kAuto);
// The yuv-split entry of elements of `elem` bytes (1 or 2).
const YuvSplitKernelInfo& select_yuv_split(int elem, KernelPath path = KernelPath::kAuto);

// Runs kernel k from a.done, then the scalar entry of its op over what k left (the tail shorter
// than a step, or short of DATA room): the whole call.
void run_bitmask(const BitmaskKernelInfo& k, BitmaskArgs& a);

// stream_copy (stream.hpp) with kernel k: the bytes up to dst's next 16-byte boundary with plain
// stores (all n of them when fewer than 16 would follow), k from there, then the scalar entry.
void run_stream_copy(const StreamCopyKernelInfo& k, char* dst, const char* src, int64_t n);

// Every kernel compiled for this architecture, in list order.
const std::vector<KernelInfo>& kernel_list();

// Whether this CPU runs `isa`, and whether a call asked for `path` may use it (KernelPath
// kAuto: all; a forced path: its own level and every narrower one; SSE2 counts as SSSE3's level,
// so kScalar leaves only the plain C++ kernels).
bool isa_runs(Isa isa);
bool isa_allowed(Isa isa, KernelPath path);
const char* isa_name(Isa isa);
const char* op_name(Op op);

// The first kernel of the list with this op (kTranspose calls of transpose_batch, a.batch, also
// consider kTransposeBatch), element size, an instruction set this CPU runs and `path` allows,
// that takes `a`; nullptr when none does.
const KernelInfo* select(Op op, int elem, const TransposeArgs& a, KernelPath path = KernelPath::kAuto);

}  // namespace kernels
}  // namespace npupack
