// The fast pack/unpack executor over a BlockedLayout (internal to pack.cpp).
#pragma once
#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "npupack/checked.hpp"
#include "npupack/cpu.hpp"
#include "npupack/layout.hpp"
#include "npupack/prefetch.hpp"
#include "npupack/spread.hpp"
#include "npupack/stream.hpp"
#include "npupack/transpose.hpp"

namespace npupack {
namespace detail {

template <int EB>
struct Elem;
template <> struct Elem<1> { using T = uint8_t; };
template <> struct Elem<2> { using T = uint16_t; };
template <> struct Elem<4> { using T = uint32_t; };
template <> struct Elem<8> { using T = uint64_t; };

// Copies n elements from src (step sstep bytes) to dst (step dstep bytes).
using RunFn = void (*)(const char*, int64_t, char*, int64_t, int64_t);

template <int EB>
void copy_run(const char* src, int64_t sstep, char* dst, int64_t dstep, int64_t n) {
  using T = typename Elem<EB>::T;
  if (sstep == EB && dstep == EB) {
    std::memcpy(dst, src, static_cast<size_t>(n) * EB);
    return;
  }
  // memcpy of one element compiles to a plain load/store and avoids alignment assumptions.
  for (int64_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, src + i * sstep, EB);
    std::memcpy(dst + i * dstep, &v, EB);
  }
}

inline RunFn run_for(int64_t eb) {
  switch (eb) {
    case 1: return copy_run<1>;
    case 2: return copy_run<2>;
    case 4: return copy_run<4>;
    default: return copy_run<8>;
  }
}

// Executes a layout as a plan of loops. Adjacent loops that are contiguous on both sides are
// merged; when the logical side is contiguous along a loop other than the innermost one (NCHW
// input: W; KCRS weights: R*S), that loop is moved next to the innermost and the pair runs as a
// blocked 2-D transpose. Loops over padded or ragged dims stop at the logical extent (pack has
// pre-filled the holes, unpack ignores them). Loop order does not change any element's address,
// only the order of the writes.
class Executor {
 public:
  Executor(const BlockedLayout& L, const std::vector<int64_t>& logical_strides, bool to_packed,
           const char* pad = nullptr)
      : L_(L), to_packed_(to_packed), eb_(L.elem_bytes()), run_(run_for(L.elem_bytes())), has_pad_(pad != nullptr) {
    const auto& axes = L.axes();
    const auto& dims = L.dims();
    std::vector<int64_t> padded(dims.size(), 1);
    for (const auto& ax : axes) padded[ax.dim] *= ax.extent;
    for (size_t a = 0; a < axes.size(); ++a) {
      const auto& ax = axes[a];
      const auto& d = dims[ax.dim];
      const bool exact = !d.ragged && d.pad_lo == 0 && padded[ax.dim] == d.extent;
      // A loop of extent 1 always sits at index 0: it moves nothing and would only hide the
      // loops around it from merging and pairing (a single component read as a strided view).
      if (ax.extent == 1 && exact) continue;
      loops_.push_back(Loop{static_cast<int>(a), ax.dim, ax.extent, ax.weight,
                            ax.weight * logical_strides[ax.dim], ax.stride, exact});
    }
    if (loops_.empty()) {
      const auto& ax = axes.back();
      loops_.push_back(Loop{static_cast<int>(axes.size() - 1), ax.dim, 1, ax.weight,
                            ax.weight * logical_strides[ax.dim], ax.stride, true});
    }
    merge_contiguous();
    widen_elements();
    // The pad value, repeated to the (widened) element size.
    if (has_pad_) {
      for (int64_t i = 0; i < eb_; ++i) pad_[static_cast<size_t>(i)] = pad[i % L.elem_bytes()];
    }
    transpose_ = move_transpose_partner();
    // The column grouping, the row tables and the tiled plans run x over its whole extent.
    const bool whole_x = transpose_ && loops_[loops_.size() - 2].exact;
    if (whole_x && !L.ragged()) group_transpose_columns();
    if (whole_x && !L.ragged() && group_ < 2) group_transpose_rows();
    tiles_ = whole_x && plan_tile_blocks();
    nest_ = whole_x ? plan_tiled_nest() : loops_.size();
    prefetch_slabs_ = to_packed_ && outer_slabs(true) && c_contiguous(logical_strides);
    // Outputs this large do not stay in the caches for a reader anyway.
    stream_ = to_packed_ && L.nbytes() >= kStreamTransposeBytes;
    idx_.assign(axes.size(), 0);
    base_.assign(dims.size(), 0);
    // Offsets are kept relative to padded coordinates; element (p - pad_lo) is logical index 0.
    for (size_t i = 0; i < dims.size(); ++i) origin_ -= dims[i].pad_lo * logical_strides[i];
  }

  void run(const char* logical_in, char* logical_out, const char* packed_in, char* packed_out) {
    lin_ = logical_in; lout_ = logical_out; pin_ = packed_in; pout_ = packed_out;
    rec(0, origin_, 0);
    if (stream_) stream_fence();
  }

  // Bytes of the (C-contiguous) logical tensor.
  int64_t logical_bytes() const {
    int64_t bytes = L_.elem_bytes();
    for (const auto& d : L_.dims()) bytes *= d.extent;
    return bytes;
  }

  // Iterations of the outermost loop that may run on separate threads (each thread on its own
  // copy of the executor, over a sub-range): 0 when the plan has no independent outer loop.
  int64_t outer_steps() const {
    const size_t n = loops_.size();
    if (n < 3 || (group_ > 1 && 1 + group_ >= n) || (tiles_ && n == 3)) return 0;  // tile_blocks runs loops_[0]
    return loops_[0].extent;
  }

  // The outer loop's iterations each read one contiguous range of a C-contiguous logical tensor:
  // the loop is the outer count of its slowest dim (DC weights: one kernel group per step), or
  // of a dim that only dims of extent 1 precede or that the slower dims were merged into
  // (feature data: one surface of C-blocks per step), unless `slowest` asks for the first case.
  bool outer_slabs(bool slowest = false) const {
    if (outer_steps() == 0) return false;
    const Loop& lp = loops_[0];
    if (L_.axes()[lp.axis].level != 0 || L_.dims()[lp.dim].pad_lo != 0) return false;
    if (lp.dim == 0) return true;
    if (slowest) return false;
    bool ones = true;
    for (int d = 0; d < lp.dim; ++d) ones = ones && L_.dims()[d].extent == 1;
    return ones || (lp.exact && lp.extent * lp.lstep == logical_bytes());
  }

  // Logical byte range [lo, hi) that outer iteration i reads (outer_slabs() holds), empty for an
  // iteration that holds only padding.
  std::pair<int64_t, int64_t> outer_slab(int64_t i) const {
    const Loop& lp = loops_[0];
    const int64_t end = logical_bytes();
    return {std::min(i * lp.lstep, end), std::min((i + 1) * lp.lstep, end)};
  }

  // run() restricted to outer iterations [lo, hi).
  void run_outer(int64_t lo, int64_t hi, const char* logical_in, char* logical_out, const char* packed_in,
                 char* packed_out) {
    lin_ = logical_in; lout_ = logical_out; pin_ = packed_in; pout_ = packed_out;
    const Loop& lp = loops_[0];
    const Range r = range(lp);
    const int64_t ps = pstride(lp);
    const int64_t saved = base_[lp.dim];
    for (int64_t i = std::max(lo, r.lo); i < std::min(hi, r.hi); ++i) {
      enter(lp, i, saved);
      outer_i_ = i;
      rec(1, origin_ + i * lp.lstep, i * ps);
    }
    if (!lp.exact) {  // as rec leaves it: the next call starts from the same state
      base_[lp.dim] = saved;
      idx_[lp.axis] = 0;
    }
    if (stream_) stream_fence();
  }

 private:
  struct Loop {
    int axis;        // innermost layout axis of this loop (stride and count are taken from it)
    int dim;
    int64_t extent;  // full loop count
    int64_t weight;  // logical-index weight of one step
    int64_t lstep;   // logical byte step
    int64_t pstep;   // packed byte step (non-ragged layouts)
    bool exact;      // always runs its full extent and influences no other loop's count or stride
  };

  void merge_contiguous() {
    std::vector<Loop> merged;
    for (const Loop& lp : loops_) {
      if (!merged.empty()) {
        Loop& outer = merged.back();
        const bool packed_ok = L_.ragged() || outer.pstep == lp.extent * lp.pstep;
        if (outer.exact && lp.exact && outer.lstep == lp.extent * lp.lstep && packed_ok) {
          outer.axis = lp.axis;
          outer.dim = lp.dim;
          outer.extent *= lp.extent;
          outer.weight = lp.weight;
          outer.lstep = lp.lstep;
          outer.pstep = lp.pstep;
          continue;
        }
      }
      merged.push_back(lp);
    }
    loops_.swap(merged);
  }

  // An innermost loop of 2..8 bytes contiguous on both sides and always run whole (clDNN's 1x1
  // weights: i%4 of os_is_yx_osv16_isv4, 4 bytes) is one element of that size: its rows then
  // move as single elements (a transpose of 4-byte elements over o%16 and i/4) instead of a
  // 4-byte copy per row.
  void widen_elements() {
    if (loops_.size() < 2 || L_.ragged()) return;
    const Loop& in = loops_.back();
    const int64_t bytes = in.extent * eb_;
    if (!in.exact || in.lstep != eb_ || in.pstep != eb_ || (bytes != 2 && bytes != 4 && bytes != 8)) return;
    loops_.pop_back();
    eb_ = bytes;
    run_ = run_for(eb_);
  }

  bool move_transpose_partner() {
    const size_t n = loops_.size();
    if (n < 2) return false;
    const Loop& inner = loops_.back();
    if (inner.lstep == eb_ || L_.axes()[inner.axis].stride != eb_) return false;
    for (size_t m = n - 1; m-- > 0;) {
      // A partner padded only at the end (os_is_yx_isv16_osv16 with I % 16 != 0: i%16 of the
      // last block) transposes its valid columns, range(x) starting at 0; the columns past them
      // are holes, which the fill pass writes (fills_holes needs every loop but `in` exact).
      const auto& d = L_.dims()[loops_[m].dim];
      if ((loops_[m].exact || (!d.ragged && d.pad_lo == 0)) && loops_[m].lstep == eb_) {
        Loop partner = loops_[m];
        loops_.erase(loops_.begin() + static_cast<std::ptrdiff_t>(m));
        loops_.insert(loops_.end() - 1, partner);
        return true;
      }
    }
    return false;
  }

  // When loops other than the partner continue the logical-contiguous run (os_is_yx_isv16_osv16 on
  // 3x3 kernels: y*x of 9 elements, then i%16 at a step of 9), transposing only the partner gives
  // tiny 16x9 blocks. Grouping them makes one wide transpose whose destination columns are found
  // through a table of packed offsets.
  void group_transpose_columns() {
    const size_t n = loops_.size();
    const Loop& in = loops_.back();
    int64_t span = loops_[n - 2].extent * eb_;
    if (to_packed_ && eb_ == 1 && n >= 3 && loops_[n - 3].exact && loops_[n - 3].lstep == span &&
        batch_reads_rows_once_u8(in.extent, loops_[n - 2].extent)) {
      // The loop just outside already continues the run: batch_pairs gives it to a narrow
      // kernel that reads each row once. A byte group of 16 rows would take the SSE2 16x8
      // blocks, which read 8 bytes of each row per block. 16-bit groups run tall_u16, which
      // beats batching them, and stay grouped, as does unpacking (tall_u8 over a row table).
      return;
    }
    size_t group = 1;
    for (bool grew = true; grew;) {
      grew = false;
      for (size_t m = 0; m + 1 + group < n; ++m) {
        const Loop& lp = loops_[m];
        if (lp.exact && lp.lstep == span && span * lp.extent * in.extent <= kGroupBytes) {
          span *= lp.extent;
          Loop moved = lp;
          loops_.erase(loops_.begin() + static_cast<std::ptrdiff_t>(m));
          loops_.insert(loops_.end() - 1 - static_cast<std::ptrdiff_t>(group), moved);
          ++group;
          grew = true;
          break;
        }
      }
    }
    if (group < 2) return;
    group_ = group;
    // Packed offset of every column (the group's loops read as one mixed-radix column index,
    // ordered by logical step).
    std::vector<const Loop*> by_step;
    for (size_t g = n - 1 - group; g < n - 1; ++g) by_step.push_back(&loops_[g]);
    std::sort(by_step.begin(), by_step.end(), [](const Loop* a, const Loop* b) { return a->lstep > b->lstep; });
    // Expanded digit by digit, slowest first (the group's loops tile the columns exactly),
    // instead of a division per digit and column, which is slow.
    col_poff_.assign(1, 0);
    for (const Loop* lp : by_step) {
      std::vector<int64_t> more;
      more.reserve(col_poff_.size() * static_cast<size_t>(lp->extent));
      for (int64_t base : col_poff_) {
        for (int64_t j = 0; j < lp->extent; ++j) more.push_back(base + j * lp->pstep);
      }
      col_poff_.swap(more);
    }
  }

  // Rows of a transposed pair too short for the SIMD blocks (clDNN's isv4 and isv2 weights:
  // i%4 of a 3x3 kernel is 4 rows of 9 taps) may continue in the packed buffer through loops
  // further out (o%16 in os_is_yx_osv16_isv4 steps 4 bytes on). Folding those loops into the rows
  // makes one transpose of 32 and more rows, whose source rows are found through a table of
  // logical offsets, instead of one scalar 4 x taps transpose per step.
  void group_transpose_rows() {
    if (!loops_.back().exact || loops_.back().extent * eb_ >= kShortRowBytes) return;
    std::vector<int64_t> rows(static_cast<size_t>(loops_.back().extent));
    for (size_t r = 0; r < rows.size(); ++r) rows[r] = static_cast<int64_t>(r) * loops_.back().lstep;
    int64_t span = loops_.back().extent * eb_;  // packed bytes of the rows so far
    for (bool grew = true; grew && span < kRowGroupBytes;) {
      grew = false;
      for (size_t m = 0; m + 2 < loops_.size(); ++m) {
        const Loop lp = loops_[m];
        if (!lp.exact || lp.pstep != span) continue;
        std::vector<int64_t> more;
        more.reserve(rows.size() * static_cast<size_t>(lp.extent));
        for (int64_t j = 0; j < lp.extent; ++j) {
          for (int64_t r : rows) more.push_back(j * lp.lstep + r);
        }
        rows.swap(more);
        span *= lp.extent;
        loops_.erase(loops_.begin() + static_cast<std::ptrdiff_t>(m));
        grew = true;
        break;
      }
    }
    if (static_cast<int64_t>(rows.size()) == loops_.back().extent) return;
    loops_.back().extent = static_cast<int64_t>(rows.size());
    row_off_.swap(rows);
  }

  // A transposed pair whose rows are `in`'s steps and whose columns are x's: neither a column
  // group nor a row table (the tiled, batched and hole-filling plans assume this).
  bool plain_pair() const { return transpose_ && group_ < 2 && row_off_.empty(); }

  void inner_group(int64_t loff, int64_t poff) {
    const Loop& in = loops_.back();
    const Range rin = range(in);
    const int64_t rows = rin.n(), cols = static_cast<int64_t>(col_poff_.size());
    loff += rin.lo * in.lstep;
    poff += rin.lo * eb_;
    if (to_packed_) {
      transpose_to_cols(lin_ + loff, in.lstep, pout_ + poff, col_poff_.data(), rows, cols, eb_);
    } else {
      transpose_from_rows(pin_ + poff, col_poff_.data(), lout_ + loff, in.lstep, cols, rows, eb_);
    }
  }

  // nin logical rows (`lstep` apart) of nx elements to nx packed columns of `room` elements
  // (`dstride` apart). Rows nin..room-1 read the row of pad values set up by pad_rows(room, >= nx):
  // writing the block whole lets the SIMD blocks apply even to 3 rows.
  void pack_columns(const char* rows, int64_t lstep, int64_t nin, int64_t room, char* dst, int64_t dstride,
                    int64_t nx) {
    if (nin == room) return transpose(rows, lstep, dst, dstride, nin, nx, eb_);
    for (int64_t r = 0; r < nin; ++r) row_ptrs_[static_cast<size_t>(r)] = rows + r * lstep;
    transpose_from_ptrs(row_ptrs_.data(), dst, dstride, room, nx, eb_);
  }

  // row_ptrs_ = `room` rows all pointing at a row of pad values (the caller sets the valid ones).
  void pad_rows(int64_t room, int64_t cols) {
    if (static_cast<int64_t>(pad_row_.size()) < cols * eb_) {
      const size_t n = static_cast<size_t>(cols * eb_), eb = static_cast<size_t>(eb_);
      pad_row_.assign(n, 0);
      if (has_pad_) {  // the pattern, then doubling copies
        std::memcpy(pad_row_.data(), pad_, eb);
        for (size_t done = eb; done < n; done *= 2) {
          std::memcpy(pad_row_.data() + done, pad_row_.data(), std::min(done, n - done));
        }
      }
    }
    row_ptrs_.assign(static_cast<size_t>(room), pad_row_.data());
  }

 public:
  // fp16 INF/NaN test fused into packing (pack_checked): the row copies of rows contiguous on
  // both sides (1x1 DC weights: one 64-byte channel block per kernel), the 16-row transposes
  // (NVDLA fp16 feature data: 16 channels x H*W per surface) and the 3x3 rotation kernel (3x3
  // DC weights) test the halves they move, and count the bytes they tested, so that the caller
  // knows whether a slab was covered whole.
  void watch_fp16(bool on) { watch_ = on && to_packed_ && eb_ == 2; }
  void clear_watch() { watched_ = 0; nonfinite_ = false; }
  int64_t watched_bytes() const { return watched_; }

 private:
  // A watched move's verdict: `finite` 1 (all halves finite) or 0 (INF or NaN seen) over `bytes`
  // tested; -1 (transpose_finite16: nothing moved) records nothing and returns false.
  bool record_watch(int finite, int64_t bytes) {
    if (finite < 0) return false;
    nonfinite_ |= finite == 0;
    watched_ += bytes;
    return true;
  }

 public:
  bool saw_nonfinite() const { return nonfinite_; }

  // True when packing writes every hole itself: the only holes are the tails of the innermost
  // loop's blocks (every other dim exact, no padding, no stride gaps) and the transpose path
  // writes those tails whole. pack() then skips the separate fill pass.
  bool fills_holes() {
    if (to_packed_ && row_gaps_possible()) return row_gaps_ = true;
    if (tiles_ && tiles_cover_all()) return true;
    if (!to_packed_ || !plain_pair() || L_.ragged()) return false;
    const auto& dims = L_.dims();
    const Loop& in = loops_.back();
    int64_t elements = 1;
    for (size_t i = 0; i < dims.size(); ++i) {
      if (static_cast<int>(i) == in.dim) {
        // Split into its outer count and this one tile only: then its holes are exactly the
        // tail of the last block along `in`. (With more tiles, whole blocks at other levels are
        // holes that the walk never visits.)
        if (dims[i].pad_lo != 0 || dims[i].storage != dims[i].extent || dims[i].tiles.size() != 1) return false;
      }
      elements *= dims[i].extent;
    }
    for (const Loop& lp : loops_) {
      if (!lp.exact && lp.dim != in.dim) return false;
    }
    // No gaps: the packed size is that of the blocked extents (the innermost dim rounded up).
    int64_t blocked = L_.elem_bytes();
    for (const auto& ax : L_.axes()) blocked *= ax.extent;
    return blocked == L_.nbytes() && elements > 0;
  }

 private:
  // Two loops left after merging, both exact, the inner one contiguous on both sides and the
  // outer one striding further than a row: the holes are exactly the gaps between rows (and a
  // zero pad value fills them).
  bool row_gaps_possible() const {
    if (loops_.size() != 2 || transpose_ || L_.ragged() || !zero_pad()) return false;
    const Loop& x = loops_[0];
    const Loop& in = loops_[1];
    // Only the copy loop for two different dims zeroes the gaps (two levels of one dim take the
    // general path, which does not).
    return x.dim != in.dim && x.exact && in.exact && in.lstep == eb_ && in.pstep == eb_ &&
           x.pstep > in.extent * eb_;
  }

  bool zero_pad() const {
    if (!has_pad_) return true;
    for (int64_t i = 0; i < eb_; ++i) {
      if (pad_[i] != 0) return false;
    }
    return true;
  }

  // The loop's digits whose blocks hold valid elements: [lo, hi). Blocks before pad_lo or past
  // the logical end hold only padding (pre-filled by pack, ignored by unpack).
  struct Range {
    int64_t lo, hi;
    int64_t n() const { return hi - lo; }
  };
  Range range(const Loop& lp) const {
    if (lp.exact) return {0, lp.extent};
    const auto& d = L_.dims()[lp.dim];
    const int64_t start = d.pad_lo - base_[lp.dim], end = d.pad_lo + d.extent - base_[lp.dim];
    const int64_t lo = start > 0 ? start / lp.weight : 0;
    return {lo, std::min(lp.extent, ceil_div(end, lp.weight))};
  }

  int64_t pstride(const Loop& lp) const { return L_.ragged() ? L_.stride_at(lp.axis, idx_.data()) : lp.pstep; }

  void enter(const Loop& lp, int64_t i, int64_t saved) {
    if (lp.exact) return;
    idx_[lp.axis] = i;
    base_[lp.dim] = saved + i * lp.weight;
  }

  void copy(int64_t loff, int64_t lstep, int64_t poff, int64_t pstep, int64_t n) {
    if (to_packed_) run_(lin_ + loff, lstep, pout_ + poff, pstep, n);
    else run_(pin_ + poff, pstep, lout_ + loff, lstep, n);
  }

  // n rows of `row` bytes. The atom and channel-block sizes (32, 64, 128 bytes) and the short
  // inner blocks of clDNN's 1x1 weights (i%4, i%8, i%16: 4, 8, 16 bytes) get a copy of constant
  // size, which compiles to a move or a few instead of a memcpy call per row.
  template <size_t N>
  static void copy_rows_n(const char* src, int64_t sstep, char* dst, int64_t dstep, int64_t n) {
    if (sstep > static_cast<int64_t>(N) && n >= 8) {
      // Rows far apart (1x1 DC weights: one channel block of each kernel of a group) are more
      // read streams than the hardware prefetchers follow; the rows' next blocks are read by the
      // next few calls, so ask for the line kRowsAhead bytes on in each row.
      for (int64_t i = 0; i < n; ++i) {
        __builtin_prefetch(src + i * sstep + kRowsAhead);
        std::memcpy(dst + i * dstep, src + i * sstep, N);
      }
      return;
    }
    for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * dstep, src + i * sstep, N);
  }
  // n rows of `row` bytes, W <= row < 2 * W: two overlapping moves of W bytes per row (3x3
  // kernels swapped whole, as in ioyx: 9 or 18 bytes), instead of a memcpy call per row.
  template <size_t W>
  static void copy_rows_overlap(const char* src, int64_t sstep, char* dst, int64_t dstep, int64_t n, size_t row) {
    for (int64_t i = 0; i < n; ++i) {
      std::memcpy(dst + i * dstep, src + i * sstep, W);
      std::memcpy(dst + i * dstep + row - W, src + i * sstep + row - W, W);
    }
  }
  // copy_rows_n for the rows of a DC channel block (64 or 128 bytes), with the pending prefetch
  // range (next_slab_part) spread over the rows: one row's share of lines before each row.
  template <size_t N>
  static void copy_rows_ahead(const char* src, int64_t sstep, char* dst, int64_t dstep, int64_t n, Ahead ahead) {
    for (int64_t i = 0; i < n; ++i) {
      ahead.step();
      std::memcpy(dst + i * dstep, src + i * sstep, N);
    }
  }
  // copy_rows_ahead for rows of `row` bytes (a multiple of 16) of 16-bit elements, returning
  // whether every element moved is finite as binary16 (kFp16NonFinite): the test rides on
  // the copy's loads instead of a second pass over the slab. N > 0: rows of exactly N bytes
  // (channel blocks of 64 or 128 bytes), unrolled, with 32-byte moves where the CPU has AVX2;
  // 0: any multiple of 16. An exponent of all ones is a magnitude (h & 0x7FFF) of 0x7C00 or more,
  // so the loop keeps only the largest magnitude per lane and compares once at the end (and + max
  // per vector instead of and + compare + or), which makes the test almost free next to the copy.
  template <int64_t N>
  static bool copy_rows_finite16(const char* src, int64_t sstep, char* dst, int64_t dstep, int64_t n, int64_t row,
                                 Ahead ahead) {
#if defined(__x86_64__) || defined(__i386__)
    if constexpr (N > 0 && N % 32 == 0) {
      if (cpu().avx2) return copy_rows_finite16_avx2<N>(src, sstep, dst, dstep, n, ahead);
    }
#endif
    return copy_rows_max16<Halves16, N>(src, sstep, dst, dstep, n, row, ahead);
  }
#if defined(__x86_64__) || defined(__i386__)
  template <int64_t N>
  __attribute__((target("avx2"))) static bool copy_rows_finite16_avx2(const char* src, int64_t sstep, char* dst,
                                                                      int64_t dstep, int64_t n, Ahead ahead) {
    return copy_rows_max16<Halves32, N>(src, sstep, dst, dstep, n, N, ahead);
  }
#endif
  // 16 or 32 bytes of 16-bit lanes as GCC vector types: copy_rows_max16 is one loop for both
  // widths, which compiles to SSE2 or AVX2 moves as the function it is inlined into is targeted
  // (plain C++ elsewhere).
  typedef int16_t Halves16 __attribute__((vector_size(16)));
  typedef int16_t Halves32 __attribute__((vector_size(32)));
  template <class Vec, int64_t N>
  __attribute__((always_inline)) static inline bool copy_rows_max16(const char* src, int64_t sstep, char* dst,
                                                                    int64_t dstep, int64_t n, int64_t row,
                                                                    Ahead ahead) {
    if (N > 0) row = N;
    const Vec mag = Vec{} + 0x7FFF;
    Vec top{};
    for (int64_t i = 0; i < n; ++i) {
      ahead.step();
      const char* s = src + i * sstep;
      char* d = dst + i * dstep;
#pragma GCC unroll 8
      for (int64_t b = 0; b < row; b += static_cast<int64_t>(sizeof(Vec))) {
        Vec v;
        std::memcpy(&v, s + b, sizeof v);
        std::memcpy(d + b, &v, sizeof v);
        const Vec m = v & mag;
        top = top > m ? top : m;
      }
    }
    // Any lane over the largest finite magnitude (0x7BFF), reduced through 64-bit words.
    const Vec over = top > (Vec{} + 0x7BFF);
    uint64_t words[sizeof(Vec) / 8];
    std::memcpy(words, &over, sizeof words);
    uint64_t any = 0;
    for (uint64_t w : words) any |= w;
    return any == 0;
  }
  // The pending prefetch range (next_slab_part), handed to a kernel that takes it over `steps`.
  Ahead take_ahead(int64_t steps) {
    const Ahead ahead(pf_hi_ > pf_lo_ ? lin_ + pf_lo_ : nullptr, pf_hi_ - pf_lo_, steps);
    pf_lo_ = pf_hi_ = 0;
    return ahead;
  }
  static void copy_rows(const char* src, int64_t sstep, char* dst, int64_t dstep, int64_t n, size_t row) {
    if (row > 4 && row < 32 && row != 8 && row != 16) {
      if (row < 8) return copy_rows_overlap<4>(src, sstep, dst, dstep, n, row);
      if (row < 16) return copy_rows_overlap<8>(src, sstep, dst, dstep, n, row);
      return copy_rows_overlap<16>(src, sstep, dst, dstep, n, row);
    }
    switch (row) {
      case 4: return copy_rows_n<4>(src, sstep, dst, dstep, n);
      case 8: return copy_rows_n<8>(src, sstep, dst, dstep, n);
      case 16: return copy_rows_n<16>(src, sstep, dst, dstep, n);
      case 32: return copy_rows_n<32>(src, sstep, dst, dstep, n);
      case 64: return copy_rows_n<64>(src, sstep, dst, dstep, n);
      case 128: return copy_rows_n<128>(src, sstep, dst, dstep, n);
      default:
        for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * dstep, src + i * sstep, row);
    }
  }

  void inner_pair(int64_t loff, int64_t poff) {
    const Loop& x = loops_[loops_.size() - 2];
    const Loop& in = loops_.back();
    Range rx = range(x);
    const int64_t psx = pstride(x);
    if (transpose_) {
      // x is contiguous on the logical side, `in` on the packed side; rx starts at 0.
      if (!row_off_.empty()) {  // every loop of the rows is exact
        const int64_t rows = static_cast<int64_t>(row_off_.size());
        if (to_packed_) transpose_from_rows(lin_ + loff, row_off_.data(), pout_ + poff, psx, rows, x.extent, eb_);
        else transpose_to_cols(pin_ + poff, psx, lout_ + loff, row_off_.data(), x.extent, rows, eb_);
        return;
      }
      if (x_tile_.hi > 0) {
        loff += x_tile_.lo * x.lstep;
        poff += x_tile_.lo * psx;
        rx = {0, x_tile_.n()};
      }
      const Range rin = range(in);
      loff += rin.lo * in.lstep;
      poff += rin.lo * eb_;
      const int64_t nin = rin.n(), nx = rx.n();
      const int64_t room = in.extent - rin.lo;
      if (to_packed_ && x_tile_.hi > 0 && x_tile_.hi < x.extent) {
        // The next tile of the same rows, into L2 by the time tiled_nest comes back to them.
        prefetch_row_lines(lin_ + loff + nx * x.lstep, in.lstep, nin, std::min(nx, x.extent - x_tile_.hi) * x.lstep);
      }
      if (to_packed_ && nin < room && !L_.ragged()) {
        // A short last block of a padded layout (3-channel images, C % atom != 0): its rows
        // after the last valid one are holes (in a ragged layout they would be the next block),
        // so write the whole block, those rows from pad values; the holes then need no
        // separate fill (fills_holes).
        pad_rows(room, nx);
        pack_columns(lin_ + loff, in.lstep, nin, room, pout_ + poff, psx, nx);
        return;
      }
      // fp16 into the packed side (watch_fp16): the transpose tests what it moves.
      if (watch_ && record_watch(transpose_finite16(lin_ + loff, in.lstep, pout_ + poff, psx, nin, nx, stream_),
                                 nin * nx * eb_)) {
        return;
      }
      if (to_packed_ && stream_) transpose_stream(lin_ + loff, in.lstep, pout_ + poff, psx, nin, nx, eb_);
      else if (to_packed_) transpose(lin_ + loff, in.lstep, pout_ + poff, psx, nin, nx, eb_);
      else transpose(pin_ + poff, psx, lout_ + loff, in.lstep, nx, nin, eb_);
      return;
    }
    if (x.dim != in.dim) {
      // The inner loop's range depends only on its own dim, and its stride only on outer
      // counts of ragged dims other than x's: compute them once for all of x.
      const Range rin = range(in);
      const int64_t psin = pstride(in), nin = rin.n();
      loff += rin.lo * in.lstep + rx.lo * x.lstep;
      poff += rin.lo * psin + rx.lo * psx;
      const int64_t nx = rx.n();
      if (psin == eb_ && in.lstep == eb_) {
        // Rows contiguous on both sides (1x1 kernels, channel blocks): plain memcpy per row.
        const size_t row = static_cast<size_t>(nin * eb_);
        if (to_packed_ && row_gaps_) {
          // The gaps between rows are the layout's only holes (Horizon's aligned C): zero each
          // gap right after its row instead of a separate fill pass over the whole buffer.
          const size_t gap = static_cast<size_t>(psx) - row;
          for (int64_t i = 0; i < nx; ++i) {
            char* d = pout_ + poff + i * psx;
            std::memcpy(d, lin_ + loff + i * x.lstep, row);
            if (i + 1 < nx) std::memset(d + row, 0, gap);
          }
        } else if (watch_ && row % 16 == 0) {
          const Ahead ahead = pf_hi_ > pf_lo_ ? take_ahead(nx) : Ahead();
          const auto copy = row == 64 ? copy_rows_finite16<64> : row == 128 ? copy_rows_finite16<128>
                                                                            : copy_rows_finite16<0>;
          const bool finite = copy(lin_ + loff, x.lstep, pout_ + poff, psx, nx, static_cast<int64_t>(row), ahead);
          record_watch(finite ? 1 : 0, nx * static_cast<int64_t>(row));
        } else if (to_packed_ && pf_hi_ > pf_lo_ && row == 64) {
          copy_rows_ahead<64>(lin_ + loff, x.lstep, pout_ + poff, psx, nx, take_ahead(nx));
        } else if (to_packed_ && pf_hi_ > pf_lo_ && row == 128) {
          copy_rows_ahead<128>(lin_ + loff, x.lstep, pout_ + poff, psx, nx, take_ahead(nx));
        } else if (to_packed_) {
          copy_rows(lin_ + loff, x.lstep, pout_ + poff, psx, nx, row);
        } else {
          copy_rows(pin_ + poff, psx, lout_ + loff, x.lstep, nx, row);
        }
        return;
      }
      for (int64_t i = 0; i < nx; ++i) copy(loff + i * x.lstep, in.lstep, poff + i * psx, psin, nin);
      return;
    }
    const int64_t saved = base_[x.dim];
    for (int64_t i = rx.lo; i < rx.hi; ++i) {
      enter(x, i, saved);
      const Range rin = range(in);
      const int64_t psin = pstride(in);
      copy(loff + i * x.lstep + rin.lo * in.lstep, in.lstep, poff + i * psx + rin.lo * psin, psin, rin.n());
    }
    if (!x.exact) base_[x.dim] = saved;
  }

  // The loop just outside a transposed pair (DC weights: the kernels of a group, each a channel
  // block x taps matrix) as one batched transpose: the kernel is chosen once per batch, not once
  // per small matrix. Not for the pad-row case (a short block of a padded layout takes inner_pair
  // per step). In a ragged layout the strides and ranges inside the batch depend only on the
  // outer counts of ragged dims, so they hold for every step of b unless b is one of those.
  bool batch_pairs(const Loop& b, int64_t loff, int64_t poff) {
    if (!plain_pair()) return false;
    const Loop& x = loops_[loops_.size() - 2];
    const Loop& in = loops_.back();
    // b the outer count of x's dim, padded at the end only (os_is_yx_isv16_osv16 with I % 16 != 0):
    // every step of b but the last holds whole x blocks; those are batched, the last is run alone.
    const auto& xd = L_.dims()[x.dim];
    const bool x_tail = !x.exact && b.dim == x.dim && b.dim != in.dim && !L_.ragged() && xd.pad_lo == 0 &&
                        b.lstep == x.extent * x.lstep;
    // Otherwise b's own digit must not move the ranges of x and in (two levels of one padded dim).
    if (!x_tail && !b.exact && (b.dim == x.dim || b.dim == in.dim)) return false;
    if (L_.ragged() && !b.exact && L_.axes()[b.axis].level == 0) return false;
    const Range rin = range(in), rb = range(b);
    const Range rx = x_tail ? Range{0, x.extent} : range(x);
    // b's steps that hold whole blocks of x: all of them unless x_tail.
    const int64_t nb = x_tail ? std::max<int64_t>(0, std::min(rb.hi, (xd.extent - base_[x.dim]) / b.weight) - rb.lo)
                              : rb.n();
    if (nb < 2 || (to_packed_ && !L_.ragged() && rin.n() < in.extent - rin.lo)) return false;
    const int64_t psb = pstride(b), psx = pstride(x);
    if (nb < rb.n()) {  // the short last blocks of x, as rec would run them, after the batch
      const int64_t saved = base_[b.dim];
      for (int64_t i = rb.lo + nb; i < rb.hi; ++i) {
        enter(b, i, saved);
        inner_pair(loff + i * b.lstep, poff + i * psb);
      }
      base_[b.dim] = saved;
      idx_[b.axis] = 0;
    }
    loff += rin.lo * in.lstep + rb.lo * b.lstep;
    poff += rin.lo * eb_ + rb.lo * psb;
    if (to_packed_ && stream_) {
      for (int64_t i = 0; i < nb; ++i) {
        transpose_stream(lin_ + loff + i * b.lstep, in.lstep, pout_ + poff + i * psb, psx, rin.n(), rx.n(), eb_);
      }
    } else if (to_packed_) {
      const char* ahead = pf_hi_ > pf_lo_ ? lin_ + pf_lo_ : nullptr;
      // fp16 into the packed side (watch_fp16): the 3x3 kernel tests what it moves.
      if (watch_ && record_watch(transpose_batch_finite16(lin_ + loff, in.lstep, b.lstep, pout_ + poff, psx, psb,
                                                          rin.n(), rx.n(), nb, ahead, pf_hi_ - pf_lo_),
                                 nb * rin.n() * rx.n() * eb_)) {
        pf_lo_ = pf_hi_ = 0;
      } else if (transpose_batch(lin_ + loff, in.lstep, b.lstep, pout_ + poff, psx, psb, rin.n(), rx.n(), nb, eb_,
                                 ahead, pf_hi_ - pf_lo_)) {
        pf_lo_ = pf_hi_ = 0;
      }
    } else {
      transpose_batch(pin_ + poff, psx, psb, lout_ + loff, in.lstep, b.lstep, rx.n(), rin.n(), nb, eb_);
    }
    return true;
  }

  // Whole-block tiles. The loop just outside a transposed pair can, with the pair's packed-inner
  // loop, make up the whole packed block of each x column (os_is_yx_isv16_osv16 on activations:
  // [isv][osv] is 256 contiguous bytes per y*x). Packing one strided pass per b step touches
  // every cache line of the output b times. Instead, per tile of x, the blocks are built in a
  // buffer whose holes are filled once (every tile writes the same slots) and copied out; from
  // kStreamBytes on with non-temporal stores, which need not read the lines in first. A tile is
  // built by scatter when at most 1/8 of `in` is valid (batch 1 or 2 of osv16: transpose each
  // valid `in` row's b x tile matrix, scatter it to its slots; with one valid row and zero
  // padding, spread_blocks shuffles whole blocks straight to the output instead), else by one
  // pack_columns per valid b step, the rows of the tiles ahead prefetched. Taken where
  //  - at most 1/8 of `in` is valid;
  //  - the output is kStreamBytes or more and at most a quarter of each block valid
  //    ((8,3,224,224) in os_is_yx_isv16_osv16: 3 x 8 of 16 x 16);
  //  - the output is kDenseTileBytes or more and x spans a whole tile, whatever the holes. Past
  //    the caches, tiled_nest reads b x `in` rows (256 for isv16_osv16) in passes too short for
  //    the hardware prefetchers and writes each line in b passes. Smaller outputs stay in L3,
  //    where tiled_nest's plain stores beat streaming, and tiles of a short x (3x3 kernels: 9
  //    columns) are too small to pay.
  // Decided once per plan (tiles_), as fills_holes relies on it.
  bool plan_tile_blocks() const {
    const size_t n = loops_.size();
    if (!to_packed_ || !plain_pair() || L_.ragged() || n < 3) return false;
    const Loop& b = loops_[n - 3];
    const Loop& x = loops_[n - 2];
    const Loop& in = loops_[n - 1];
    if (b.dim == in.dim || b.pstep != in.extent * eb_ || b.extent * b.pstep != x.pstep) return false;
    if (x.pstep > kMaxBlockBytes) return false;
    // The valid part of a block as far as the dims' extents tell (a dim shorter than its tile).
    const auto valid = [&](const Loop& lp) { return std::min(L_.dims()[lp.dim].extent, lp.extent); };
    if (L_.nbytes() >= kStreamBytes && 4 * valid(b) * valid(in) <= b.extent * in.extent) return true;
    if (L_.nbytes() >= kDenseTileBytes && x.extent * x.pstep >= kRowTileBytes) return true;
    return b.exact && single_level(in) && 8 * valid(in) <= in.extent;
  }

  // The loop is the one tile of a dim without padding before blocking: its outer count is then
  // ceil(extent / tile), every outer block is visited, and only the last is partial.
  bool single_level(const Loop& lp) const {
    const auto& d = L_.dims()[lp.dim];
    const int64_t storage = d.storage ? d.storage : d.pad_lo + d.extent;
    return d.tiles.size() == 1 && d.pad_lo == 0 && storage == d.extent && L_.axes()[lp.axis].level == 1;
  }

  // tiles_ and every packed byte lies in a block that tile_blocks writes whole: b's and in's dims
  // have no padding before blocking, every other loop is exact or the outer count of those two
  // dims, and no stride leaves gaps.
  bool tiles_cover_all() const {
    const size_t n = loops_.size();
    const Loop& b = loops_[n - 3];
    const Loop& in = loops_[n - 1];
    if (!single_level(b) || !single_level(in)) return false;
    for (size_t i = 0; i + 3 < n; ++i) {
      const Loop& lp = loops_[i];
      if (!lp.exact && lp.dim != b.dim && lp.dim != in.dim) return false;
    }
    int64_t blocked = L_.elem_bytes();
    for (const auto& ax : L_.axes()) blocked *= ax.extent;
    return blocked == L_.nbytes();
  }

  void tile_blocks(const Loop& b, int64_t loff, int64_t poff) {
    const Loop& x = loops_[loops_.size() - 2];
    const Loop& in = loops_.back();
    const Range rin = range(in), rb = range(b);
    const int64_t nin = rin.n(), room = in.extent - rin.lo;
    const bool scattered = b.exact && 8 * nin <= in.extent;
    if (scattered && nin == 1 && zero_pad() && spread_blocks(b, x, in, rin.lo, loff, poff)) return;
    const int64_t tile_bytes = scattered ? kScatterTileBytes : kRowTileBytes;
    const int64_t tile = std::min(x.extent, std::max<int64_t>(8, tile_bytes / x.pstep));
    const bool zero = zero_pad();
    pad_rows(room, tile * x.pstep / eb_);  // pad_row_ also serves the fill
    if (scattered) scratch_.resize(static_cast<size_t>(tile * b.extent * eb_));
    auto fill = [&](char* p, int64_t bytes) {
      if (zero) std::memset(p, 0, static_cast<size_t>(bytes));
      else std::memcpy(p, pad_row_.data(), static_cast<size_t>(bytes));
    };
    const bool stream = L_.nbytes() >= kStreamBytes;
    tile_buf_.resize(static_cast<size_t>(tile * x.pstep));
    fill(tile_buf_.data(), tile * x.pstep);
    char* const buf = tile_buf_.data();
    for (int64_t t = 0; t < x.extent; t += tile) {
      const int64_t nx = std::min(tile, x.extent - t);
      const char* const src = lin_ + loff + t * x.lstep;
      if (scattered) {
        for (int64_t j = rin.lo; j < rin.hi; ++j) {
          transpose(src + j * in.lstep, b.lstep, scratch_.data(), b.extent * eb_, b.extent, nx, eb_);
          // The slots of all columns form one sequence at a step of b.pstep (x.pstep = b.extent * b.pstep).
          scatter(scratch_.data(), buf + j * eb_, b.pstep, b.extent * nx);
        }
      } else {
        // The same rows kTilesAhead tiles on (clipped to the rows' ends), asked into L2: up to
        // 256 rows far apart are more read streams than the hardware prefetchers follow.
        const int64_t ahead = kTilesAhead * tile * x.lstep;
        const int64_t span = std::min(ahead + tile * x.lstep, (x.extent - t) * x.lstep) - ahead;
        for (int64_t i = rb.lo; i < rb.hi; ++i) {
          const char* rows = src + i * b.lstep + rin.lo * in.lstep;
          if (span > 0) prefetch_row_lines(rows + ahead, in.lstep, nin, span);
          pack_columns(rows, in.lstep, nin, room, buf + i * b.pstep + rin.lo * eb_, x.pstep, nx);
        }
      }
      char* const dst = pout_ + poff + t * x.pstep;
      if (stream) stream_copy(dst, buf, nx * x.pstep);
      else std::memcpy(dst, buf, static_cast<size_t>(nx * x.pstep));
    }
    if (stream) stream_fence();
  }

  // tile_blocks with one valid column `col` of `in` and zero padding (batch 1 of osv16): per tile
  // of x, the column's b x tile matrix is transposed into scratch_ and each block is written
  // whole from its b values by byte shuffles (SpreadPlan), straight to the output: no buffer to
  // fill, scatter into and copy out. False, with nothing written, where the kernel does not apply.
  bool spread_blocks(const Loop& b, const Loop& x, const Loop& in, int64_t col, int64_t loff, int64_t poff) {
    if (!spread_ || spread_col_ != col) {
      spread_ = std::make_shared<const SpreadPlan>(eb_, b.extent, b.pstep, col);
      spread_col_ = col;
    }
    if (!spread_->ok()) return false;
    char* const out = pout_ + poff;
    const bool stream = L_.nbytes() >= kStreamBytes;
    const int64_t tile = std::min(x.extent, std::max<int64_t>(8, kRowTileBytes / (b.extent * eb_)));
    scratch_.resize(static_cast<size_t>(tile * b.extent * eb_));
    for (int64_t t = 0; t < x.extent; t += tile) {
      const int64_t nx = std::min(tile, x.extent - t);
      transpose(lin_ + loff + t * x.lstep + col * in.lstep, b.lstep, scratch_.data(), b.extent * eb_, b.extent, nx, eb_);
      spread_->run(scratch_.data(), out + t * x.pstep, nx, stream);
    }
    if (stream) stream_fence();
    return true;
  }

  // n elements from src (contiguous) to dst at a step of `step` bytes.
  void scatter(const char* src, char* dst, int64_t step, int64_t n) const {
    switch (eb_) {
      case 1: return scatter_n<1>(src, dst, step, n);
      case 2: return scatter_n<2>(src, dst, step, n);
      case 4: return scatter_n<4>(src, dst, step, n);
      case 8: return scatter_n<8>(src, dst, step, n);
      default:
        for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * step, src + i * eb_, static_cast<size_t>(eb_));
    }
  }
  template <size_t EB>
  static void scatter_n(const char* src, char* dst, int64_t step, int64_t n) {
    int64_t i = 0;
    if constexpr (EB == 1) {  // bytes: one load per 8 (a load and a store per byte was the cost)
      for (; i + 8 <= n; i += 8) {
        uint64_t v;
        std::memcpy(&v, src + i, 8);
        char* d = dst + i * step;
        for (int k = 0; k < 8; ++k) d[k * step] = static_cast<char>(v >> (8 * k));
      }
    }
    for (; i < n; ++i) std::memcpy(dst + i * step, src + i * EB, EB);
  }

  // Loops outside a transposed pair can interleave with it in the packed buffer: each step of
  // such a loop writes a few bytes of every block of x (os_is_yx_isv16_osv16 on activations:
  // each of the 16 isv steps writes 16 of every 256 bytes of y*x; os_is_yx_isa8_osv16_isv4 with
  // a partial osv16 block: osv16 and isa8 steps each write 4 of every 512). Run whole, each step
  // would stream over the pair's entire packed range, and every cache line of it would be loaded
  // and written back (or, unpacking, read) once per step. Cutting x into tiles whose packed range
  // stays in L2 and running the whole nest of such loops per tile touches each line once. The
  // first loop from which on every loop interleaves so, or loops_.size() for none. (With a
  // whole osv16 block, group_transpose_rows folds isv4's outer loops into the rows instead.)
  size_t plan_tiled_nest() const {
    const size_t n = loops_.size();
    if (!plain_pair() || L_.ragged() || tiles_ || n < 3) return n;
    const Loop& x = loops_[n - 2];
    size_t first = n - 2;
    while (first > 0 && loops_[first - 1].pstep * loops_[first - 1].extent <= x.pstep) --first;
    return first == n - 2 ? n : first;
  }

  // The nest from loop li on, run once per tile of x (kTileBytes of packed range). False when x
  // is short.
  bool tiled_nest(size_t li, int64_t loff, int64_t poff) {
    const Loop& x = loops_[loops_.size() - 2];
    const int64_t tile = std::max<int64_t>(16, kTileBytes / x.pstep);
    if (x.extent <= tile) return false;
    for (int64_t t = 0; t < x.extent; t += tile) {
      x_tile_ = {t, std::min(x.extent, t + tile)};
      rec(li, loff, poff);
    }
    x_tile_ = {0, 0};
    return true;
  }

  void rec(size_t li, int64_t loff, int64_t poff) {
    const size_t n = loops_.size();
    if (n == 1) {
      const Range r = range(loops_[0]);
      const int64_t ps = pstride(loops_[0]);
      copy(loff + r.lo * loops_[0].lstep, loops_[0].lstep, poff + r.lo * ps, ps, r.n());
      return;
    }
    if (group_ > 1 && li + 1 + group_ == n) {
      inner_group(loff, poff);
      return;
    }
    if (li + 2 == n) {
      inner_pair(loff, poff);
      return;
    }
    const Loop& lp = loops_[li];
    if (li >= nest_ && x_tile_.hi == 0 && tiled_nest(li, loff, poff)) return;
    if (li + 3 == n && tiles_) {
      tile_blocks(lp, loff, poff);
      return;
    }
    if (li + 3 == n && x_tile_.hi == 0 && batch_pairs(lp, loff, poff)) return;
    const Range r = range(lp);
    const int64_t ps = pstride(lp);
    const int64_t saved = base_[lp.dim];
    for (int64_t i = r.lo; i < r.hi; ++i) {
      enter(lp, i, saved);
      if (li == 0) outer_i_ = i;
      if (prefetch_slabs_ && li == 1) next_slab_part(i - r.lo, r.n());
      rec(li + 1, loff + i * lp.lstep, poff + i * ps);
      pf_lo_ = pf_hi_ = 0;  // a plan whose kernels do not take the range prefetches nothing
    }
    if (!lp.exact) {
      base_[lp.dim] = saved;
      idx_[lp.axis] = 0;
    }
  }

  bool c_contiguous(const std::vector<int64_t>& strides) const {
    int64_t bytes = L_.elem_bytes();
    for (size_t i = strides.size(); i-- > 0;) {
      if (strides[i] != bytes) return false;
      bytes *= L_.dims()[i].extent;
    }
    return true;
  }

  // Part `part` of `parts` of the logical range that the next outer iteration reads (DC weights:
  // the next kernel group), asked for while this one runs. A group's kernels are rows far apart
  // in the source, read a block at a time: more streams than the hardware prefetchers follow,
  // so past the caches the reads waited on memory. Spread over the iterations of the loop inside
  // the outer one, the requests overlap with this group's packing.
  // The slab and the share are worked out at part 0 only: divisions are slow, and two per inner
  // iteration would be a noticeable share of a pack.
  void next_slab_part(int64_t part, int64_t parts) {
    if (part == 0) {
      next_slab_ = outer_slab(outer_i_ + 1);
      pf_chunk_ = ((next_slab_.second - next_slab_.first + parts - 1) / parts + 63) / 64 * 64;
    }
    pf_lo_ = std::min(next_slab_.second, next_slab_.first + part * pf_chunk_);
    pf_hi_ = std::min(next_slab_.second, pf_lo_ + pf_chunk_);
  }

  const BlockedLayout& L_;
  bool to_packed_;
  int64_t eb_;
  RunFn run_;
  bool has_pad_;                       // a pad value was given (else zero)
  char pad_[8] = {};                   // the pad value, repeated to eb_ bytes
  bool row_gaps_ = false;              // pack zeroes the gaps between rows itself
  std::vector<char> pad_row_;          // a row of pad values for short_rows
  std::vector<const char*> row_ptrs_;
  bool prefetch_slabs_ = false;        // the next outer slab is prefetched (next_slab_part)
  bool watch_ = false;                 // watch_fp16: row copies and transposes test fp16 halves
  bool nonfinite_ = false;             // watch_fp16: a tested half was INF or NaN
  int64_t watched_ = 0;                // watch_fp16: bytes tested since clear_watch
  int64_t outer_i_ = 0;                // the outer iteration running
  int64_t pf_lo_ = 0, pf_hi_ = 0;      // logical bytes the inner kernels are to prefetch
  std::pair<int64_t, int64_t> next_slab_{0, 0};  // next_slab_part: the next outer slab
  int64_t pf_chunk_ = 0;                // next_slab_part: its share per part
  bool tiles_ = false;                 // tile_blocks runs the loop outside the pair
  bool stream_ = false;                // inner_pair's and batch_pairs' transposes use transpose_stream
  std::vector<char> scratch_;          // tile_blocks: one transposed b x tile matrix
  std::vector<char> tile_buf_;         // tile_blocks: one tile of packed blocks
  std::vector<Loop> loops_;
  bool transpose_ = false;
  static constexpr int64_t kGroupBytes = 64 * 1024;
  static constexpr int64_t kRowsAhead = 256;                   // copy_rows_n: prefetch distance in a strided row
  static constexpr int64_t kTileBytes = 256 * 1024;            // tiled_nest: packed bytes of one x tile
  static constexpr int64_t kScatterTileBytes = 16 * 1024;      // tile_blocks, scattered: the same
  // tile_blocks, one transpose per b step: the same. A tile that stays in L1 while it is built and
  // streamed out; L2-sized tiles are slower (docs/performance.md).
  static constexpr int64_t kRowTileBytes = 16 * 1024;
  static constexpr int64_t kTilesAhead = 2;
  static constexpr int64_t kMaxBlockBytes = 4096;              // tile_blocks: largest block of one x column
  static constexpr int64_t kStreamBytes = 4 << 20;             // tile_blocks: outputs streamed past the caches
  static constexpr int64_t kDenseTileBytes = 8 << 20;          // tile_blocks: outputs that take it whatever the holes
  static constexpr int64_t kStreamTransposeBytes = 16 << 20;   // inner_pair, batch_pairs: the same
  Range x_tile_{0, 0};              // tiled_nest: the x columns inner_pair runs (hi 0: all)
  size_t nest_ = 0;                 // tiled_nest: the first loop of the nest it tiles (loops_.size(): none)
  std::shared_ptr<const SpreadPlan> spread_;  // spread_blocks: the kernel of its column (spread_col_); copies share it
  int64_t spread_col_ = -1;
  size_t group_ = 0;                // loops transposed together before the innermost (0: none)
  std::vector<int64_t> col_poff_;   // packed offset of each column of the group
  std::vector<int64_t> row_off_;    // logical offset of each row of a row group (empty: none)
  static constexpr int64_t kShortRowBytes = 16;  // group_transpose_rows: rows shorter than a SIMD block
  static constexpr int64_t kRowGroupBytes = 64;  // group_transpose_rows: the rows it aims for
  std::vector<int64_t> idx_, base_;
  int64_t origin_ = 0;
  const char* lin_ = nullptr;
  char* lout_ = nullptr;
  const char* pin_ = nullptr;
  char* pout_ = nullptr;
};

}  // namespace detail
}  // namespace npupack
