// The AVX2 transpose network, the pairs of 16-row matrices and the 3x3 rotation blocks shared
// by several AVX2 kernels of cpp/kernels (see narrow.hpp).
#pragma once
#include "narrow.hpp"

#if defined(__x86_64__) || defined(__i386__)
namespace npupack {
namespace narrow {

#pragma GCC push_options
#pragma GCC target("avx2")
namespace avx2 {
// The same network on both 128-bit lanes of a 256-bit register (every unpack instruction works
// within lanes): 32 rows per block, row k in lane 0 and row k + 16 in lane 1.
struct V {
  using reg = __m256i;
  static constexpr int kRowsU8 = 32;
  NPUPACK_AI reg lo8(reg a, reg b) { return _mm256_unpacklo_epi8(a, b); }
  NPUPACK_AI reg hi8(reg a, reg b) { return _mm256_unpackhi_epi8(a, b); }
  NPUPACK_AI reg lo16(reg a, reg b) { return _mm256_unpacklo_epi16(a, b); }
  NPUPACK_AI reg hi16(reg a, reg b) { return _mm256_unpackhi_epi16(a, b); }
  NPUPACK_AI reg lo32(reg a, reg b) { return _mm256_unpacklo_epi32(a, b); }
  NPUPACK_AI reg hi32(reg a, reg b) { return _mm256_unpackhi_epi32(a, b); }
  NPUPACK_AI reg lo64(reg a, reg b) { return _mm256_unpacklo_epi64(a, b); }
  NPUPACK_AI reg hi64(reg a, reg b) { return _mm256_unpackhi_epi64(a, b); }
  // Lane 0 from a 32-byte read of row k (its upper half is discarded; row k + 16 lies further on,
  // so the read stays inside the matrix), lane 1 from a broadcast read of row k + 16, joined by a
  // blend: loads and a blend keep the shuffle ports free for the network.
  template <int Bytes, bool Ends, int64_t Fixed, int Last>
  NPUPACK_AI reg load(const Rows<Ends, Fixed, Last>& row, int k) {
    const reg lo = _mm256_loadu_si256(reinterpret_cast<const reg*>(row(k)));
    if (row.is_last(k + 16)) return _mm256_inserti128_si256(lo, load_row<Bytes>(row, k + 16), 1);
    const reg hi = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row(k + 16))));
    return _mm256_blend_epi32(lo, hi, 0xF0);
  }
  NPUPACK_AI void store(char* d, reg v) { _mm256_storeu_si256(reinterpret_cast<reg*>(d), v); }
  // Column k of cursor d: non-temporal stores for a streamed destination (transpose_stream), as
  // two 16-byte halves, since NumPy's buffers are often only 16-byte aligned.
  template <class Cur>
  NPUPACK_AI void put(const Cur& d, int64_t k, reg v) {
    if constexpr (Cur::kStream) {
      _mm_stream_si128(reinterpret_cast<__m128i*>(d[k]), _mm256_castsi256_si128(v));
      _mm_stream_si128(reinterpret_cast<__m128i*>(d[k] + 16), _mm256_extracti128_si256(v, 1));
    } else {
      store(d[k], v);
    }
  }
};
#include "network.inc"

// Two 16-byte rows in one register, `lo` in lane 0 and `hi` in lane 1 (loads and a blend: the
// shuffle ports stay free for the network).
NPUPACK_AI V::reg lanes(__m128i lo, __m128i hi) {
  return _mm256_blend_epi32(_mm256_castsi128_si256(lo), _mm256_broadcastsi128_si256(hi), 0xF0);
}

// Matrices of exactly 16 rows in a batch (clDNN fsv16 weights, 16-channel DC blocks): the 32-row
// network above would need 32 rows of one matrix, so two matrices run side by side instead,
// matrix i in lane 0 and matrix i + 1 in lane 1, and each result is stored as two 16-byte columns.
// Every matrix's row 15 is read so that the read ends at its last byte (the next matrix need not
// follow it in memory).
namespace pairs {
template <class R1>
struct Rows2 {
  R1 a, b;
};
struct Cols2 {
  char* a;
  char* b;
};
template <class Cur>
struct Cur2 {
  Cur a, b;
  Cols2 operator[](int64_t k) const { return {a[k], b[k]}; }
};
struct V : avx2::V {
  template <int Bytes, class R1>
  NPUPACK_AI reg load(const Rows2<R1>& r, int k) {
    return lanes(load_row<Bytes>(r.a, k), load_row<Bytes>(r.b, k));
  }
  NPUPACK_AI void store(Cols2 d, reg v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d.a), _mm256_castsi256_si128(v));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d.b), _mm256_extracti128_si256(v, 1));
  }
};
#include "network.inc"

// Matrices i and i + 1 of the batch for even i: block(a, b, d) with their first rows a and b and
// their column cursors joined (d[k] = column k of both).
template <class DC, class Block>
void over_pairs(const RowReader& in, DC col, const Batch& batch, Block block) {
  Ahead ahead = ahead_of(batch, std::max<int64_t>(1, batch.count / 2));
  for (int64_t i = 0; i + 2 <= batch.count; i += 2) {
    ahead.step();
    const char* a = in.base + i * batch.sstep;
    DC ca = col, cb = col;
    ca.base += i * batch.dstep;
    cb.base += (i + 1) * batch.dstep;
    block(a, a + batch.sstep, Cur2<decltype(ca.at(0, 0))>{ca.at(0, 0), cb.at(0, 0)});
  }
}

template <int NC, int64_t Fixed, class DC>
NPUPACK_FLAT void run(const RowReader& in, DC col, const Batch& batch) {
  over_pairs(in, col, batch, [&in](const char* a, const char* b, const auto& d) {
    block_u8<NC>(Rows2<Rows<true, Fixed, 15>>{{a, in.stride, 15}, {b, in.stride, 15}}, d);
  });
}
}  // namespace pairs

// Matrices of 9 columns whose rows are back to back (3x3 kernels: DC weights' channel blocks,
// b_fs_yx_fsv16 / fsv32 over a 3x3 plane). A 128-bit lane takes 16 rows of bytes or 8 rows of
// halves: 9 * 16 bytes, exactly nine 16-byte chunks of E elements (E = 16 or 8). As 9 is coprime
// with E, no transpose network is needed: element b = E * q + p (position p of chunk q) is row
// b / 9 of column b % 9 = (E * q + p) % 9. Chunk q is loaded into register v = E * q - c (mod 9),
// a free renaming, so that the element belongs to register (v + c + p) % 9: a rotation of the
// nine registers by an amount that depends only on the position, done as one blend stage per bit
// of the amount (register v takes the selected positions of register v - 2^s). Each register
// then holds one column, one element per position, and one pshufb per column puts the rows in
// order. Nine loads at 16-byte steps from the block start, three or four blend stages and nine
// (16-bit) or eighteen (8-bit) shuffles per block, where the row-pair network it replaced made
// 16 or 32 unaligned loads and 23 or 35 shuffles.
//
// The rotation stages are narrow::rotate<9, Shift>, with the blends below.
template <int Imm>
struct Words {  // 16-bit positions by an immediate mask (the same in both lanes)
  void operator()(V::reg& out, const V::reg& a, const V::reg& b) const { out = _mm256_blend_epi16(a, b, Imm); }
};
struct Bytes {  // byte positions by a mask register
  V::reg mask;
  void operator()(V::reg& out, const V::reg& a, const V::reg& b) const { out = _mm256_blendv_epi8(a, b, mask); }
};

// Chunk controls for bytes (E = 16, c = 1): amounts k = (p + 1) % 9 take every value 1..7 at two
// positions and 0 and 8 at one each. The first pshufb (`pre`) puts the two positions of each
// amount 1..7 in one 16-bit word and those of 0 and 8 in the last, so that the stages of bits 0..2
// are word blends (vpblendw, which here runs beside the shuffles, not on their ports) and only
// bit 3 (amount 8: byte 14) is a byte blend. `post[j]`: row r of column j from the position of
// element 9r + j.
struct Taps9Bytes {
  alignas(32) int8_t pre[32] = {};
  alignas(32) int8_t post[9][32] = {};
  alignas(32) int8_t bit3[32] = {};
  constexpr Taps9Bytes() {
    int at[16] = {};  // the position after `pre` of the byte at position p
    for (int w = 0; w < 7; ++w) {
      at[w] = 2 * w;           // amount w + 1
      at[w + 9] = 2 * w + 1;   // amount (w + 10) % 9 = w + 1
    }
    at[7] = 14;  // amount 8
    at[8] = 15;  // amount 0
    for (int p = 0; p < 16; ++p) pre[at[p]] = pre[16 + at[p]] = static_cast<int8_t>(p);
    for (int j = 0; j < 9; ++j) {
      for (int r = 0; r < 16; ++r) post[j][r] = post[j][16 + r] = static_cast<int8_t>(at[(9 * r + j) % 16]);
    }
    bit3[14] = bit3[30] = -1;
  }
};
inline constexpr Taps9Bytes kTaps9Bytes{};

// Chunk controls for halves (E = 8, c = 0): amount k = p (0..7, three word-blend stages);
// `post[j]`: row r of column j from the half at position (9r + j) % 8.
struct Taps9Halves {
  alignas(32) int8_t post[9][32] = {};
  constexpr Taps9Halves() {
    for (int j = 0; j < 9; ++j) {
      for (int r = 0; r < 8; ++r) {
        const int p = (9 * r + j) % 8;
        for (int lane = 0; lane < 32; lane += 16) {
          post[j][lane + 2 * r] = static_cast<int8_t>(2 * p);
          post[j][lane + 2 * r + 1] = static_cast<int8_t>(2 * p + 1);
        }
      }
    }
  }
};
inline constexpr Taps9Halves kTaps9Halves{};

NPUPACK_AI V::reg load_control(const int8_t* c) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(c)); }
NPUPACK_AI void store_column(char* d, V::reg v) { V::store(d, v); }
NPUPACK_AI void store_column(pairs::Cols2 d, V::reg v) { pairs::V::store(d, v); }

// Chunk q of both lanes: 16 bytes at s0 + 16q (lane 0) and s1 + 16q (lane 1).
NPUPACK_AI V::reg chunk(const char* s0, const char* s1, int q) {
  return lanes(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s0 + 16 * q)),
               _mm_loadu_si128(reinterpret_cast<const __m128i*>(s1 + 16 * q)));
}

// After the rotation: column j, its rows put in order by post[j], to column cursor d[j].
template <class DCur>
NPUPACK_AI void store_columns(const V::reg w[9], const int8_t (*post)[32], DCur d) {
  for (int j = 0; j < 9; ++j) store_column(d[j], _mm256_shuffle_epi8(w[j], load_control(post[j])));
}

// 32 rows of 8-bit elements: 16 from s0 (lane 0) and 16 from s1 (lane 1; s0 + 144 for 32 rows
// of one matrix, the next matrix for two 16-row matrices side by side), 144 bytes each.
template <class DCur>
NPUPACK_AI void block_u8_taps9(const char* s0, const char* s1, DCur d) {
  using R = V::reg;
  const R pre = load_control(kTaps9Bytes.pre);
  R w[9];
  for (int v = 0; v < 9; ++v) {
    const int q = 4 * (v + 1) % 9;  // v = 16q - 1 = 7q - 1 (mod 9); 4 = 7^-1 (mod 9)
    w[v] = _mm256_shuffle_epi8(chunk(s0, s1, q), pre);
  }
  rotate<9, 1>(w, Words<0x55>());  // amounts 1, 3, 5, 7: words 0, 2, 4, 6
  rotate<9, 2>(w, Words<0x66>());  // 2, 3, 6, 7: words 1, 2, 5, 6
  rotate<9, 4>(w, Words<0x78>());  // 4..7: words 3..6
  rotate<9, 8>(w, Bytes{load_control(kTaps9Bytes.bit3)});  // 8: byte 14
  store_columns(w, kTaps9Bytes.post, d);
}

// pack_checked's fp16 watch inside the 16-bit kernels: the largest magnitude (v & 0x7FFF) of
// the halves read, INF and NaN being the magnitudes >= 0x7C00 (a signed compare: magnitudes are
// at most 0x7FFF). Two vector ALU instructions per 32 bytes, on ports the networks' shuffles
// leave idle, instead of a separate pass that read each slab from L3 before it was packed.
NPUPACK_AI __m256i watch_halves(__m256i largest, __m256i v) {
  return _mm256_max_epu16(largest, _mm256_and_si256(v, _mm256_set1_epi16(0x7FFF)));
}
NPUPACK_AI bool any_nonfinite(__m256i largest) {
  return !_mm256_testz_si256(_mm256_cmpgt_epi16(largest, _mm256_set1_epi16(0x7BFF)), _mm256_set1_epi16(-1));
}

// 16 rows of 16-bit elements from s (8 per lane, s and s + 144), 144 bytes per lane.
// With a non-null `largest` (pack_checked's fp16 watch) the magnitudes of every half read are
// max-reduced into it, as in tall_u16: the nine chunks are the 16 rows exactly.
template <class DCur>
NPUPACK_AI void block_u16_taps9(const char* s, DCur d, V::reg* largest = nullptr) {
  using R = V::reg;
  R w[9];
  for (int v = 0; v < 9; ++v) {
    const int q = (9 - v) % 9;  // v = 8q = -q (mod 9)
    w[v] = chunk(s, s + 144, q);
    if (largest) *largest = watch_halves(*largest, w[v]);
  }
  rotate<9, 1>(w, Words<0xAA>());  // amounts 1, 3, 5, 7
  rotate<9, 2>(w, Words<0xCC>());  // 2, 3, 6, 7
  rotate<9, 4>(w, Words<0xF0>());  // 4..7
  store_columns(w, kTaps9Halves.post, d);
}

// Streamed (a streamed destination, columns of whole 64-byte lines: 64 rows of bytes or 32 of
// 16-bit elements): the two blocks of each such step go to a buffer on the stack, then each
// column's line is written whole by two non-temporal stores; storing each block straight away
// left nine lines half written at a time. `largest` as for block_u16_taps9.
struct Columns32 {  // column j of a block at p + 32 j
  char* p;
  char* operator[](int64_t j) const { return p + 32 * j; }
};
template <int EB, class DCur>
NPUPACK_AI void block_taps9_lines(const char* s, DCur d, V::reg* largest) {
  alignas(32) char t[2][9][32];
  for (int h = 0; h < 2; ++h) {  // each block: 288 bytes of source
    if constexpr (EB == 1) {
      block_u8_taps9(s + 288 * h, s + 288 * h + 144, Columns32{t[h][0]});
    } else {
      block_u16_taps9(s + 288 * h, Columns32{t[h][0]}, largest);
    }
  }
  for (int j = 0; j < 9; ++j) {
    for (int h = 0; h < 2; ++h) {
      _mm256_stream_si256(reinterpret_cast<__m256i*>(d[j] + 32 * h),
                          _mm256_load_si256(reinterpret_cast<const __m256i*>(t[h][j])));
    }
  }
}

// run_u8<9> for rows back to back (in.stride == 9) and run_u16<9> for 16 rows and more back to
// back (in.stride == 18): the rotation kernels above on each block of 32 (8-bit) or 16 (16-bit)
// rows; streamed, one 64-byte line of each column a step (block_taps9_lines).
// With a non-null `nonfinite` (16-bit only) every half moved is tested for fp16 INF/NaN, as in
// tall_u16.
template <int EB, class DC>
NPUPACK_FLAT void run_taps9(const RowReader& in, DC col, const Batch& batch, bool* nonfinite = nullptr) {
  constexpr int kRows = EB == 1 ? 32 : 16;
  if constexpr (decltype(col.at(0, 0))::kStream) {
    V::reg largest = _mm256_setzero_si256();
    V::reg* watch = EB == 2 && nonfinite ? &largest : nullptr;
    over_batch<64 / EB>(in, col, batch, [watch](const RowReader& m, const DC& c, int64_t r) {
      block_taps9_lines<EB>(m.base + r * 9 * EB, c.at(0, EB * r), watch);
    });
    if (watch) *nonfinite = any_nonfinite(largest);
  } else if constexpr (EB == 1) {
    over_batch<kRows>(in, col, batch, [](const RowReader& m, const DC& c, int64_t r) {
      block_u8_taps9(m.base + r * 9, m.base + r * 9 + 144, c.at(0, r));
    });
  } else if (nonfinite) {
    V::reg largest = _mm256_setzero_si256();
    over_batch<kRows>(in, col, batch, [&largest](const RowReader& m, const DC& c, int64_t r) {
      block_u16_taps9(m.base + r * 18, c.at(0, 2 * r), &largest);
    });
    *nonfinite = any_nonfinite(largest);
  } else {
    over_batch<kRows>(in, col, batch, [](const RowReader& m, const DC& c, int64_t r) {
      block_u16_taps9(m.base + r * 18, c.at(0, 2 * r));
    });
  }
}

// The loop of the tall and wide byte kernels: blocks of RB rows x CB columns (remainders are
// overlapping last blocks), block(s, d) with the block's row cursor s and column cursor d; for a
// streamed destination, rows prefetched once per Per columns (prefetch_rows).
template <int RB, int CB, int Per, class SR, class DC, class Block>
NPUPACK_AI void over_blocks(const SR& row, const DC& col, int64_t rows, int64_t cols, Block block) {
  over_rows(rows, RB, [&](int64_t r) {
    over_rows(cols, CB, [&](int64_t c) {
      const auto s = row.at(r, c);
      if constexpr (decltype(col.at(0, 0))::kStream) prefetch_rows<RB, Per>(s, c);
      block(s, col.at(c, r));
    });
  });
}

// Column j of cursor d as a store target for networks whose V::store needs the cursor (streamed
// or split columns).
template <class Cur>
struct ColumnOf {
  const Cur* d;
  int64_t j;
};
template <class Cur>
struct Columns {
  Cur d;
  ColumnOf<Cur> operator[](int64_t j) const { return {&d, j}; }
};
}  // namespace avx2
#pragma GCC pop_options

}  // namespace narrow
}  // namespace npupack
#endif  // x86
