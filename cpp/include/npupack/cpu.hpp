// The x86 instruction-set extensions the kernels choose between at run time (the extension is
// built for baseline x86-64). Detected once; all false on other architectures.
#pragma once
#include <string>

#include "npupack/errors.hpp"

namespace npupack {

struct CpuFeatures {
  bool ssse3 = false, popcnt = false, avx = false, avx2 = false, f16c = false;
  bool avx512vbmi2 = false;  // with AVX-512 F and BW, which the VBMI2 kernels also use
  bool avx512vbmi = false;   // the same for VBMI (vpermb)
  bool avx512bw = false;     // AVX-512 F and BW
};

inline const CpuFeatures& cpu() {
  static const CpuFeatures features = [] {
    CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    f.ssse3 = __builtin_cpu_supports("ssse3");
    f.popcnt = __builtin_cpu_supports("popcnt");
    f.avx = __builtin_cpu_supports("avx");
    f.avx2 = __builtin_cpu_supports("avx2");
    f.f16c = __builtin_cpu_supports("f16c");
    // libgcc reports AVX-512 features only where the OS saves the 512-bit state.
    f.avx512vbmi2 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                    __builtin_cpu_supports("avx512vbmi2");
    f.avx512vbmi = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                   __builtin_cpu_supports("avx512vbmi");
    f.avx512bw = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
#endif
    return f;
  }();
  return features;
}

// Which instruction-set variant a kernel with several runs: kAuto the fastest this CPU runs
// well; the others (for tests, each falling back to the next when the CPU lacks it or the
// kernel has no such variant) force AVX-512, AVX2, SSSE3 or plain C++.
enum class KernelPath { kAuto, kAvx512, kAvx2, kSsse3, kScalar };

// Whether a kernel asked for `path` may run its variant for `level`: kAuto allows every level,
// a forced path its own and every later (narrower) one.
inline bool allows(KernelPath path, KernelPath level) {
  return path == KernelPath::kAuto || static_cast<int>(path) <= static_cast<int>(level);
}

// "auto", "avx512", "avx2", "ssse3" or "scalar"; anything else is a LayoutError naming `fn`.
inline KernelPath kernel_path(const std::string& name, const char* fn) {
  if (name == "auto") return KernelPath::kAuto;
  if (name == "avx512") return KernelPath::kAvx512;
  if (name == "avx2") return KernelPath::kAvx2;
  if (name == "ssse3") return KernelPath::kSsse3;
  if (name == "scalar") return KernelPath::kScalar;
  throw LayoutError(std::string(fn) + ": unknown kernel path " + name + " (auto, avx512, avx2, ssse3, scalar)");
}

}  // namespace npupack
