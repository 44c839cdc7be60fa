// Grouped convolution weights straight into the DC surface, without building the densified
// (K, C, R, S) tensor: the surface is zeroed, then each of the K*(C/G)*R*S real weights is
// written at its DC offset (docs/nvdla.md §6.1, 7.1). Depthwise layers touch 1/C of the surface.
// The DC descriptor of the densified tensor is the rule; this loop is a faster path for it (most
// of a grouped surface is zero) and the tests check it against the descriptor.
#pragma once
#include <cstdint>

namespace npupack {

struct GroupedSpec {
  int64_t k, cg, r, s;   // logical grouped weights (K, C/G, R, S), elements
  int64_t stride[4];     // their byte strides
  int64_t groups;        // G (K % G == 0)
  int64_t kpg, cb;       // kernels per group, channels per block
  int64_t elem_bytes;    // 1 or 2
};

// Bytes of the meaningful DC stream of the densified weights: K * (G*Cg) * R * S * es.
int64_t grouped_bytes(const GroupedSpec& spec);

// Zero-fills dst[0, dst_size) (unless the caller passes memory known to be zero, such as fresh
// calloc pages, which then stay untouched where no weight lands) and writes every weight;
// dst_size must hold grouped_bytes(spec) (checked first).
void grouped_pack(const char* src, const GroupedSpec& spec, char* dst, int64_t dst_size, bool zeroed = false);

}  // namespace npupack
