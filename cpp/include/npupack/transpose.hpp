// 2-D element transpose, the inner kernel of every blocked layout whose logical and packed
// sides are contiguous along different loops (NVDLA atoms over W, DC channel blocks over R*S,
// clDNN weight blocks over i%16 and y*x).
#pragma once
#include <cstdint>

#include "npupack/cpu.hpp"

namespace npupack {

// dst[c*dst_stride + r*eb .. +eb] = src[r*src_stride + c*eb .. +eb] for r < rows, c < cols.
// Strides in bytes; eb in {1, 2, 4, 8}. Regions must not overlap.
void transpose(const char* src, int64_t src_stride, char* dst, int64_t dst_stride, int64_t rows, int64_t cols,
               int64_t eb);

// The same, for outputs far larger than the caches: for back-to-back 16- or 32-byte columns
// (dst_stride = rows * eb, aligned) with non-temporal stores, which need not read the
// destination lines in first; otherwise exactly transpose(). The caller issues stream_fence()
// (stream.hpp) before the data is read by anything else.
void transpose_stream(const char* src, int64_t src_stride, char* dst, int64_t dst_stride, int64_t rows,
                      int64_t cols, int64_t eb);

// `count` transpose_stream calls, matrix i at src + i * src_step and dst + i * dst_step (byte
// steps), the kernel chosen once for all of them: a strided pass of many small matrices (one
// 16 x 16 block per call) would otherwise pay the list's selection for each.
void transpose_stream_batch(const char* src, int64_t src_stride, int64_t src_step, char* dst, int64_t dst_stride,
                            int64_t dst_step, int64_t rows, int64_t cols, int64_t count, int64_t eb);

// transpose (stream = false) or transpose_stream (stream = true) of 16-bit elements that also
// tests every half it moves for fp16 INF/NaN (pack_checked's watch of a slab): 1 when all were
// finite, 0 when one was INF or NaN, and -1, with nothing moved, where the kernel those would
// choose does not test (no AVX2, fewer than 16 rows or 8 columns, 9..16 columns other than the
// 3x3 case of transpose_batch_finite16).
int transpose_finite16(const char* src, int64_t src_stride, char* dst, int64_t dst_stride, int64_t rows, int64_t cols,
                       bool stream);

// `count` such transposes, matrix i at src + i * src_step and dst + i * dst_step (byte steps):
// the kernel is chosen once for all of them. [ahead, ahead + ahead_bytes) is a source range the
// caller reads next; kernels that read each row once prefetch it between their blocks (else it
// is ignored, and the caller remains responsible for it). Returns whether it was prefetched.
// `path` (for tests) caps the kernels' instruction sets: kAvx2 keeps them off AVX-512, kSsse3 off
// AVX2 as well, kScalar leaves the plain C++ kernels only (docs/design.md §4.9).
// `stream`: where the kernel that moves the batch also takes it streamed (whole-line columns,
// Streaming::kWholeLines), its stores are non-temporal; the caller then issues stream_fence().
bool transpose_batch(const char* src, int64_t src_stride, int64_t src_step, char* dst, int64_t dst_stride,
                     int64_t dst_step, int64_t rows, int64_t cols, int64_t count, int64_t eb,
                     const char* ahead = nullptr, int64_t ahead_bytes = 0, KernelPath path = KernelPath::kAuto,
                     bool stream = false);

// transpose_batch of 16-bit elements that also tests every half it moves for fp16 INF/NaN, as
// transpose_finite16; only for the tap rotation kernels (rows back to back: 9 columns and 16 rows
// or more with AVX2, 9 or 25 columns and 32 rows or more with AVX-512 VBMI; fp16 DC weights of
// 3x3 and 5x5 kernels), -1 with nothing moved otherwise. `ahead` and
// `path` and `stream` as for transpose_batch.
int transpose_batch_finite16(const char* src, int64_t src_stride, int64_t src_step, char* dst, int64_t dst_stride,
                             int64_t dst_step, int64_t rows, int64_t cols, int64_t count, const char* ahead = nullptr,
                             int64_t ahead_bytes = 0, KernelPath path = KernelPath::kAuto, bool stream = false);

// True when transpose_batch runs a batch of rows x cols byte matrices in one SIMD kernel that
// reads each source row once (9..16 columns; 32 rows and more, or exactly 16 rows, two matrices
// per AVX2 register). On this CPU.
bool batch_reads_rows_once_u8(int64_t rows, int64_t cols);

// How packing rows x cols matrices of eb-byte elements (source rows src_stride bytes apart,
// destination columns dst_stride apart) into an output far larger than the caches uses streaming
// stores on this CPU (docs/performance.md §6):
// - kWholeLines: the kernel that moves them plainly streams them too, a batch in one call,
//   where the columns are whole 64-byte lines (the AVX-512 tap rotation kernels of 3x3 and 5x5 DC
//   weights; transpose_batch with stream = true; the plan also takes it for a column group whose
//   columns are 16 rows of 4 bytes, transpose_to_cols);
// - kPerMatrix: a streaming kernel takes the shape and the plain kernel is not one of the tap
//   rotation kernels of 3x3 and 5x5 weights, which beat the generic streaming kernels
//   (transpose_stream_batch);
// - kNo: plain stores.
enum class Streaming { kNo, kPerMatrix, kWholeLines };
Streaming transpose_streaming(int64_t src_stride, int64_t dst_stride, int64_t rows, int64_t cols, int64_t eb);

// transpose() with column c of the destination at dst + dst_cols[c] (a table of byte offsets).
// `stream`: an output far larger than the caches; the kernels that write each column whole as one
// 64-byte line (16 rows of 4-byte elements) store it non-temporally where every column starts a
// line, and the caller issues stream_fence().
void transpose_to_cols(const char* src, int64_t src_stride, char* dst, const int64_t* dst_cols, int64_t rows,
                       int64_t cols, int64_t eb, bool stream = false);

// The same, with row r of the source at src + src_rows[r].
void transpose_from_rows(const char* src, const int64_t* src_rows, char* dst, int64_t dst_stride, int64_t rows,
                         int64_t cols, int64_t eb);

// The same, with row r of the source at rows[r] (rows may repeat, e.g. a row of pad values).
void transpose_from_ptrs(const char* const* rows, char* dst, int64_t dst_stride, int64_t nrows, int64_t cols,
                         int64_t eb);

}  // namespace npupack
