#include "npupack/transpose.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "../kernels/kernel.hpp"
#include "npupack/convert.hpp"
#include "npupack/cpu.hpp"

// The public transposes build one call description and run the first kernel of the list
// (cpp/kernels/kernels.def) that takes it: the list's order is the dispatch (docs/design.md §4.9).
namespace npupack {

namespace {

using kernels::Op;
using kernels::TransposeArgs;

// Rows whose stride puts more than 8 of them in one set of the L1 (a 4 KiB index: planes of
// 4096 bytes, as in 64x64 int8 feature maps or 128x128 ones) evict one another between the
// kernel's steps, each of which reads a part of every row's line, so every line comes from L2
// once per step (docs/performance.md §5).
bool rows_alias(int64_t stride, int64_t rows) {
  if (rows < 16) return false;
  const int64_t n = std::min<int64_t>(rows, 64);
  uint64_t sets = 0;
  for (int64_t r = 0; r < n; ++r) sets |= uint64_t{1} << (((r * stride) >> 6) & 63);
  return n > 8 * __builtin_popcountll(sets);
}

// Such matrices (strided rows) run tile by tile: each tile's columns of every row are first
// copied into a buffer, line after line, whose rows are 16 KiB / rows apart, and run(b)
// transposes the tile (one matrix, not a batch) from there. False (nothing done) where that
// does not apply or the matrices are less than two tiles wide.
template <class Run>
bool run_staged(const TransposeArgs& a, int64_t eb, Run run) {
  if (a.src_rows || a.src_ptrs || !rows_alias(a.src_stride, a.rows)) return false;
  const int64_t line = std::max<int64_t>(64, (16 << 10) / a.rows / 64 * 64);
  const int64_t tile = line / eb;
  if (a.cols < 2 * tile) return false;
  thread_local std::vector<char> buf;
  buf.resize(static_cast<size_t>(a.rows * line));
  TransposeArgs b = a;
  b.batch = false;
  b.count = 1;
  b.src_step = b.dst_step = 0;
  b.ahead = nullptr;
  b.ahead_bytes = 0;
  b.src = buf.data();
  b.src_stride = line;
  for (int64_t i = 0; i < a.count; ++i) {
    const char* const src = a.src + i * a.src_step;
    char* const dst = a.dst + i * a.dst_step;
    for (int64_t c0 = 0; c0 < a.cols; c0 += tile) {
      b.cols = std::min(tile, a.cols - c0);
      for (int64_t r = 0; r < a.rows; ++r) {
        std::memcpy(buf.data() + r * line, src + r * a.src_stride + c0 * eb, static_cast<size_t>(b.cols * eb));
      }
      if (a.dst_cols != nullptr) {
        b.dst = dst;
        b.dst_cols = a.dst_cols + c0;
      } else {
        b.dst = dst + c0 * a.dst_stride;
      }
      run(b);
    }
  }
  return true;
}

// The kernel that moves `a` plainly where it also takes `a` streamed, with a.stream set; else
// null, a.stream cleared. A streamed batch is one call of the kernel that would move it anyway
// (the tap rotation kernels, whose stores are whole lines: common.hpp whole_lines); another
// kernel that takes it streamed would be a slower one.
const kernels::KernelInfo* streamed_as_plain(Op op, int64_t eb, TransposeArgs& a, KernelPath path) {
  a.stream = false;
  const kernels::KernelInfo* plain = kernels::select(op, static_cast<int>(eb), a, path);
  a.stream = true;
  const kernels::KernelInfo* k = kernels::select(op, static_cast<int>(eb), a, path);
  if (k != nullptr && k == plain) return k;
  a.stream = false;
  return nullptr;
}

// The first kernel of the list for `a` (kernels::select); the plain C++ kernels take every
// unstreamed call, so there always is one. Returns whether it prefetched a.ahead.
bool run_first(Op op, int64_t eb, const TransposeArgs& a, KernelPath path = KernelPath::kAuto) {
  const auto run = [&](const TransposeArgs& b) { return kernels::select(op, static_cast<int>(eb), b, path)->run(b); };
  if (run_staged(a, eb, run)) return false;
  return run(a);
}

TransposeArgs strided(const char* src, int64_t src_stride, char* dst, int64_t dst_stride, int64_t rows, int64_t cols) {
  TransposeArgs a;
  a.src = src;
  a.src_stride = src_stride;
  a.dst = dst;
  a.dst_stride = dst_stride;
  a.rows = rows;
  a.cols = cols;
  return a;
}

}  // namespace

void transpose(const char* src, int64_t src_stride, char* dst, int64_t dst_stride, int64_t rows, int64_t cols,
               int64_t eb) {
  run_first(Op::kTranspose, eb, strided(src, src_stride, dst, dst_stride, rows, cols));
}

void transpose_stream(const char* src, int64_t src_stride, char* dst, int64_t dst_stride, int64_t rows, int64_t cols,
                      int64_t eb) {
  // Only back-to-back columns (dst_stride = rows * eb) that one kernel pass writes whole (16 or 32
  // bytes, one store per column and block; 64 bytes of 32 halves, two stores in one step of the
  // 16x8 halves kernel), so that the stores fill each line in quick succession: a line written
  // in parts at different times would leave partial lines in the write-combining buffers, which
  // costs more than the read it saves. Non-temporal stores are aligned to their size. The
  // streaming kernels' takes hold the row counts each streams.
  transpose_stream_batch(src, src_stride, 0, dst, dst_stride, 0, rows, cols, 1, eb);
}

void transpose_stream_batch(const char* src, int64_t src_stride, int64_t src_step, char* dst, int64_t dst_stride,
                            int64_t dst_step, int64_t rows, int64_t cols, int64_t count, int64_t eb) {
  if (count <= 0) return;
  TransposeArgs a = strided(src, src_stride, dst, dst_stride, rows, cols);
  // The kernel is chosen once for every matrix, so its takes sees the step between them (a
  // whole-line kernel needs every matrix on a line, not only the first).
  a.count = count;
  a.dst_step = dst_step;
  const kernels::KernelInfo* k = nullptr;
  if (dst_stride == rows * eb && cols >= 8 && reinterpret_cast<uintptr_t>(dst) % 16 == 0 && dst_step % 16 == 0) {
    a.stream = true;
    k = kernels::select(Op::kTranspose, static_cast<int>(eb), a);
    if (k == nullptr) a.stream = false;
  }
  if (k == nullptr) k = kernels::select(Op::kTranspose, static_cast<int>(eb), a);
  // A staged tile takes the streamed kernel where one takes it, else the plain one.
  const auto tile = [eb](const TransposeArgs& b) {
    const kernels::KernelInfo* t = kernels::select(Op::kTranspose, static_cast<int>(eb), b);
    if (t != nullptr) return t->run(b);
    TransposeArgs plain = b;
    plain.stream = false;
    return kernels::select(Op::kTranspose, static_cast<int>(eb), plain)->run(plain);
  };
  a.count = 1;
  a.dst_step = 0;
  for (int64_t i = 0; i < count; ++i) {
    a.src = src + i * src_step;
    a.dst = dst + i * dst_step;
    if (!run_staged(a, eb, tile)) k->run(a);
  }
}

namespace {
// The tap rotation kernels of DC weights: the AVX2 ones of 9 columns, the AVX-512 ones of 9 or 25
// (the only AVX-512 VBMI transposes with a run-time column count).
bool rotates_taps(const kernels::KernelInfo& k) {
  return k.tile_cols == 9 || (k.isa == kernels::Isa::kAvx512vbmi && k.tile_cols == 0);
}
}  // namespace

Streaming transpose_streaming(int64_t src_stride, int64_t dst_stride, int64_t rows, int64_t cols, int64_t eb) {
  // Stand-in pointers (line-aligned): the kernels' takes read strides, counts and alignment,
  // never memory.
  alignas(64) static char probe[64];
  TransposeArgs a = strided(probe, src_stride, probe, dst_stride, rows, cols);
  a.count = 2;
  a.dst_step = 64;
  a.batch = true;
  if (streamed_as_plain(Op::kTranspose, eb, a, KernelPath::kAuto) != nullptr) return Streaming::kWholeLines;
  a = strided(probe, src_stride, probe, dst_stride, rows, cols);
  if (rotates_taps(*kernels::select(Op::kTranspose, static_cast<int>(eb), a))) return Streaming::kNo;
  a.stream = true;
  return kernels::select(Op::kTranspose, static_cast<int>(eb), a) != nullptr ? Streaming::kPerMatrix
                                                                              : Streaming::kNo;
}

namespace {

// The kTransposeFinite kernel for `a`, streamed first when a.stream, then not (a.stream
// cleared); null when none takes it.
const kernels::KernelInfo* pick_finite(TransposeArgs& a, KernelPath path) {
  const kernels::KernelInfo* k = kernels::select(Op::kTransposeFinite, 2, a, path);
  if (k == nullptr && a.stream) {
    a.stream = false;
    k = kernels::select(Op::kTransposeFinite, 2, a, path);
  }
  return k;
}

// A kTransposeFinite kernel on `a`: 1 all finite, 0 INF / NaN seen, -1 with nothing moved when
// no such kernel takes the call. Staged (run_staged), each tile's kernel sets its own flag; a
// tile that no testing kernel takes (a narrow last one) is moved plainly and its rows scanned.
int run_finite(TransposeArgs a, KernelPath path) {
  bool nonfinite = false;
  a.nonfinite = &nonfinite;
  const kernels::KernelInfo* k = pick_finite(a, path);
  if (k == nullptr) return -1;
  const auto tile = [&](const TransposeArgs& b) {
    TransposeArgs t = b;
    bool seen = false;
    t.nonfinite = &seen;
    if (const kernels::KernelInfo* f = pick_finite(t, path)) {
      f->run(t);
    } else {
      t.nonfinite = nullptr;
      kernels::select(Op::kTranspose, 2, t, path)->run(t);
      for (int64_t r = 0; r < t.rows && !seen; ++r) {
        seen = fp16_first_nonfinite(reinterpret_cast<const uint16_t*>(t.src + r * t.src_stride), t.cols, path) >= 0;
      }
    }
    nonfinite = nonfinite || seen;
    return false;
  };
  if (!run_staged(a, 2, tile)) k->run(a);
  return nonfinite ? 0 : 1;
}

}  // namespace

int transpose_finite16(const char* src, int64_t src_stride, char* dst, int64_t dst_stride, int64_t rows, int64_t cols,
                       bool stream) {
  TransposeArgs a = strided(src, src_stride, dst, dst_stride, rows, cols);
  a.stream = stream;
  return run_finite(a, KernelPath::kAuto);
}

namespace {

// A batch of short byte matrices whose rows lie back to back in the source and whose output rows
// continue from one matrix to the next (DC weights' short channel block: per kernel of a group,
// its few channels x taps) is one tall matrix once the matrices sit side by side. Gathered into
// a scratch buffer a slice at a time, each slice is one call of a kernel of many rows, where the
// matrices one by one take the small-matrix kernels (docs/design.md §3.3).
constexpr int64_t kSliceBytes = 32 * 1024;  // a slice and its output stay in L2

// Only where no batch kernel reads the rows once itself (16 rows of 9..16 taps: two matrices per
// register), where a slice holds two matrices or more, and where the tall matrix's columns do not
// overlap.
bool gathers(int64_t src_stride, int64_t dst_stride, int64_t dst_step, int64_t rows, int64_t cols, int64_t count,
             int64_t eb) {
  return eb == 1 && rows < 32 && count * rows >= 32 && cols >= 2 && 2 * rows * cols <= kSliceBytes &&
         src_stride == cols && dst_step == rows && dst_stride >= count * rows && !batch_reads_rows_once_u8(rows, cols);
}

void gather_batch(const char* src, int64_t src_step, char* dst, int64_t dst_stride, int64_t rows, int64_t cols,
                  int64_t count, KernelPath path) {
  const int64_t bytes = rows * cols;
  const int64_t per = kSliceBytes / bytes;
  thread_local std::vector<char> scratch;
  if (static_cast<int64_t>(scratch.size()) < std::min(per, count) * bytes) {
    scratch.resize(static_cast<size_t>(std::min(per, count) * bytes));
  }
  for (int64_t i = 0; i < count; i += per) {
    const int64_t n = std::min(per, count - i);
    for (int64_t j = 0; j < n; ++j) std::memcpy(scratch.data() + j * bytes, src + (i + j) * src_step, bytes);
    run_first(Op::kTranspose, 1, strided(scratch.data(), cols, dst + i * rows, dst_stride, n * rows, cols), path);
  }
}

}  // namespace

bool transpose_batch(const char* src, int64_t src_stride, int64_t src_step, char* dst, int64_t dst_stride,
                     int64_t dst_step, int64_t rows, int64_t cols, int64_t count, int64_t eb, const char* ahead,
                     int64_t ahead_bytes, KernelPath path, bool stream) {
  if (!stream && gathers(src_stride, dst_stride, dst_step, rows, cols, count, eb)) {
    gather_batch(src, src_step, dst, dst_stride, rows, cols, count, path);
    return false;
  }
  TransposeArgs a = strided(src, src_stride, dst, dst_stride, rows, cols);
  a.count = count;
  a.src_step = src_step;
  a.dst_step = dst_step;
  a.ahead = ahead;
  a.ahead_bytes = ahead_bytes;
  a.batch = true;
  if (stream) {
    if (const kernels::KernelInfo* k = streamed_as_plain(Op::kTranspose, eb, a, path)) return k->run(a);
  }
  return run_first(Op::kTranspose, eb, a, path);
}

int transpose_batch_finite16(const char* src, int64_t src_stride, int64_t src_step, char* dst, int64_t dst_stride,
                             int64_t dst_step, int64_t rows, int64_t cols, int64_t count, const char* ahead,
                             int64_t ahead_bytes, KernelPath path, bool stream) {
  TransposeArgs a = strided(src, src_stride, dst, dst_stride, rows, cols);
  a.count = count;
  a.src_step = src_step;
  a.dst_step = dst_step;
  a.ahead = ahead;
  a.ahead_bytes = ahead_bytes;
  a.batch = true;
  if (stream) streamed_as_plain(Op::kTransposeFinite, 2, a, path);  // a.stream where it streams
  return run_finite(a, path);
}

bool batch_reads_rows_once_u8(int64_t rows, int64_t cols) {
#if defined(__x86_64__) || defined(__i386__)
  return cpu().avx2 && cols >= 9 && cols <= 16 && (rows >= 32 || rows == 16);
#else
  (void)rows;
  (void)cols;
  return false;
#endif
}

void transpose_to_cols(const char* src, int64_t src_stride, char* dst, const int64_t* dst_cols, int64_t rows,
                       int64_t cols, int64_t eb, bool stream) {
  TransposeArgs a = strided(src, src_stride, dst, 0, rows, cols);
  a.dst_cols = dst_cols;
  a.stream = stream;
  run_first(Op::kTranspose, eb, a);
}

void transpose_from_ptrs(const char* const* rows, char* dst, int64_t dst_stride, int64_t nrows, int64_t cols,
                         int64_t eb) {
  TransposeArgs a = strided(nullptr, 0, dst, dst_stride, nrows, cols);
  a.src_ptrs = rows;
  run_first(Op::kTranspose, eb, a);
}

void transpose_from_rows(const char* src, const int64_t* src_rows, char* dst, int64_t dst_stride, int64_t rows,
                         int64_t cols, int64_t eb) {
  TransposeArgs a = strided(src, 0, dst, dst_stride, rows, cols);
  a.src_rows = src_rows;
  run_first(Op::kTranspose, eb, a);
}

}  // namespace npupack
