// copy_rows: innermost rows contiguous on both sides (1x1 kernels, channel blocks), one copy of
// constant size per row; zeroing the gap after each row where the gaps are the layout's only
// holes, testing fp16 halves when watched, taking the pending slab prefetch over the rows.
// Spec: docs/design.md §3.12 (the plan and the strategy list), §3.4 (strategies).
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "row_copy.hpp"
#include "strategies.hpp"
#include "walker.hpp"

namespace npupack {
namespace detail {

// Plan time: the runner below copies rows (rather than falling back to runs) for every step
// where the inner loop's packed stride is one element, as it is for every non-ragged layout.
bool copy_rows_applies(const Plan& p) {
  const size_t n = p.loops.size();
  if (p.transpose || n < 2) return false;
  const Loop& x = p.loops[n - 2];
  const Loop& in = p.loops[n - 1];
  return x.dim != in.dim && in.lstep == p.eb && in.pstep == p.eb;
}

void run_copy_rows(Walker& w, int64_t loff, int64_t poff) {
  const Plan& P = w.P;
  const int64_t eb = P.eb;
  const Loop& x = P.loops[P.loops.size() - 2];
  const Loop& in = P.loops.back();
  const int64_t psin = w.pstride(in);
  if (x.dim == in.dim || psin != eb || in.lstep != eb) return run_copy_runs(w, loff, poff);
  const Walker::Range rx = w.range(x), rin = w.range(in);
  const int64_t psx = w.pstride(x), nin = rin.n();
  loff += rin.lo * in.lstep + rx.lo * x.lstep;
  poff += rin.lo * psin + rx.lo * psx;
  const int64_t nx = rx.n();
  const size_t row = static_cast<size_t>(nin * eb);
  const char* const lin = w.lin;
  char* const pout = w.pout;
  // Rows of one or two whole lines of a line-aligned output, which the plan streams: each row's
  // lines with non-temporal stores, back to back (docs/design.md §3.8).
  const bool lines = P.to_packed && P.stream_lines && !P.row_gaps && (row == 64 || row == 128) && psx % 64 == 0 &&
                     reinterpret_cast<uintptr_t>(pout + poff) % 64 == 0;
  if (P.to_packed && P.row_gaps) {
    // The gaps between rows are the layout's only holes (Horizon's aligned C): zero them
    // chunk by chunk right before the rows land, instead of a separate fill pass over the whole
    // buffer: a memset of an L1-sized chunk, then constant-size row moves, costs far less than a
    // memcpy and a memset call per row of a few bytes. The gap after this call's last row is
    // zeroed where it lies inside the layout: another chunk's rows follow it when the threads
    // share x (split_pair_for_threads); the layout's last row has none.
    const int64_t chunk = std::max<int64_t>(1, kRowTileBytes / psx);
    const bool gap_after = poff + nx * psx <= P.layout->nbytes();
    for (int64_t i = 0; i < nx; i += chunk) {
      const int64_t m = std::min(chunk, nx - i);
      char* d = pout + poff + i * psx;
      const size_t last = i + m < nx || gap_after ? static_cast<size_t>(psx) : row;
      std::memset(d, 0, static_cast<size_t>((m - 1) * psx) + last);
      copy_rows(lin + loff + i * x.lstep, x.lstep, d, psx, m, row);
    }
  } else if (w.watch) {
    const Ahead ahead = w.pf_hi > w.pf_lo ? w.take_ahead(nx) : Ahead();
    const auto copy = lines ? (row == 64 ? copy_rows_finite16<64, true> : copy_rows_finite16<128, true>)
                      : row == 64  ? copy_rows_finite16<64>
                      : row == 128 ? copy_rows_finite16<128>
                                   : copy_rows_finite16<0>;
    const bool finite = copy(lin + loff, x.lstep, pout + poff, psx, nx, static_cast<int64_t>(row), ahead);
    w.record_watch(finite ? 1 : 0, nx * static_cast<int64_t>(row));
  } else if (lines) {
    const Ahead ahead = w.pf_hi > w.pf_lo ? w.take_ahead(nx) : Ahead();
    (row == 64 ? copy_rows_ahead<64, true> : copy_rows_ahead<128, true>)(lin + loff, x.lstep, pout + poff, psx, nx,
                                                                          ahead);
  } else if (P.to_packed && w.pf_hi > w.pf_lo && row == 64) {
    copy_rows_ahead<64>(lin + loff, x.lstep, pout + poff, psx, nx, w.take_ahead(nx));
  } else if (P.to_packed && w.pf_hi > w.pf_lo && row == 128) {
    copy_rows_ahead<128>(lin + loff, x.lstep, pout + poff, psx, nx, w.take_ahead(nx));
  } else if (P.to_packed) {
    copy_rows(lin + loff, x.lstep, pout + poff, psx, nx, row);
  } else {
    copy_rows(w.pin + poff, psx, w.lout + loff, x.lstep, nx, row);
  }
}

}  // namespace detail
}  // namespace npupack
