// The x86 instruction-set extensions the kernels choose between at run time (the extension is
// built for baseline x86-64). Detected once; all false on other architectures.
#pragma once

namespace npupack {

struct CpuFeatures {
  bool ssse3 = false, popcnt = false, avx = false, avx2 = false, f16c = false, bmi2 = false;
  bool fast_pext = false;  // bmi2 with a single-instruction pext (microcoded on AMD Zen 1/2)
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
    f.bmi2 = __builtin_cpu_supports("bmi2");
    f.fast_pext = f.bmi2 && !__builtin_cpu_is("znver1") && !__builtin_cpu_is("znver2");
#endif
    return f;
  }();
  return features;
}

}  // namespace npupack
