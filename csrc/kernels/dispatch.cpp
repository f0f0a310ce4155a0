// Picks a kernel path at run time: the best this CPU runs, or the one SHAZIP_KERNELS names.
// Compiled for the baseline: the ISA paths' code is only reached through their tables, after
// the CPU has been checked for every feature its file's target pragma enables.
#include <cstdlib>

#include "kernels/kernels.h"

#if defined(SHAZIP_KERNELS_AMX)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif
#if defined(SHAZIP_KERNELS_NEON) && defined(__linux__)
#include <sys/auxv.h>
#elif defined(SHAZIP_KERNELS_NEON)
#include <sys/sysctl.h>
#endif

namespace shazip::kernels {

namespace portable {
extern const Kernels table;
}
#if defined(__x86_64__) || defined(SHAZIP_EMULATE_AVX512)
namespace avx512vnni {
extern const Kernels table;
}
#endif
#if defined(SHAZIP_KERNELS_AMX)
namespace amx {
extern const Kernels table;
}
#endif
#if defined(__x86_64__)
namespace avx2 {
extern const Kernels table;
}
#endif
#if defined(SHAZIP_KERNELS_NEON)
namespace dotprod {
extern const Kernels table;
}
#endif
#if defined(SHAZIP_KERNELS_I8MM)
namespace i8mm {
extern const Kernels table;
}
#endif

namespace {

struct Path {
  const Kernels* table;
  bool (*runs_here)();
};

#if defined(__x86_64__)
bool has_avx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi") &&
         __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("popcnt");
}
#endif

#if defined(SHAZIP_EMULATE_AVX512)
bool has_avx512vnni() { return true; }  // emulated (avx512vnni.cpp): tests of this path's logic
#elif defined(__x86_64__)
bool has_avx512vnni() {
  // (__builtin_cpu_supports also checks that the OS saves the AVX-512 registers)
  return has_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vnni");
}
#endif

#if defined(SHAZIP_KERNELS_AMX)
// AMX-TILE and AMX-INT8 (CPUID leaf 7, EDX bits 24 and 25), and Linux's leave to use the tiles'
// 8 KB of state (arch_prctl ARCH_REQ_XCOMP_PERM for XTILEDATA, Linux 5.16 and later; a kernel or
// hypervisor without it refuses, and the path is not offered). Asked once; the leave holds for
// every thread of the process.
bool has_amx() {
  static const bool ok = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!has_avx512vnni() || !__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    if (((d >> 24) & 1) == 0 || ((d >> 25) & 1) == 0) return false;
    constexpr long ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18;
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
  }();
  return ok;
}
#endif

#if defined(SHAZIP_KERNELS_NEON) && defined(__linux__)
// the kernel's hardware capabilities (asm/hwcap.h's bits, named here for C libraries without them)
constexpr unsigned long HWCAP_DOTPROD = 1UL << 20, HWCAP2_SMMLA = 1UL << 13;  // ASIMDDP, I8MM
bool has_dotprod() { return (getauxval(AT_HWCAP) & HWCAP_DOTPROD) != 0; }
#if defined(SHAZIP_KERNELS_I8MM)
bool has_i8mm() { return has_dotprod() && (getauxval(AT_HWCAP2) & HWCAP2_SMMLA) != 0; }
#endif
#elif defined(SHAZIP_KERNELS_NEON)
bool sysctl_says(const char* name) {
  int v = 0;
  size_t size = sizeof v;
  return sysctlbyname(name, &v, &size, nullptr, 0) == 0 && v != 0;
}
bool has_dotprod() { return sysctl_says("hw.optional.arm.FEAT_DotProd"); }
#if defined(SHAZIP_KERNELS_I8MM)
bool has_i8mm() { return has_dotprod() && sysctl_says("hw.optional.arm.FEAT_I8MM"); }
#endif
#endif

bool always() { return true; }

// slowest first
const std::vector<Path>& paths() {
  static const std::vector<Path> all = {
      {&portable::table, always},
#if defined(__x86_64__)
      {&avx2::table, has_avx2},
#endif
#if defined(__x86_64__) || defined(SHAZIP_EMULATE_AVX512)
      {&avx512vnni::table, has_avx512vnni},
#endif
#if defined(SHAZIP_KERNELS_AMX)
      {&amx::table, has_amx},
#endif
#if defined(SHAZIP_KERNELS_NEON)
      {&dotprod::table, has_dotprod},
#endif
#if defined(SHAZIP_KERNELS_I8MM)
      {&i8mm::table, has_i8mm},
#endif
  };
  return all;
}

std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

}  // namespace

std::vector<std::string> known_kernels() {
  std::vector<std::string> names;
  for (const Path& p : paths()) names.push_back(p.table->name);
  return names;
}

std::vector<std::string> available_kernels() {
  std::vector<std::string> names;
  for (const Path& p : paths())
    if (p.runs_here()) names.push_back(p.table->name);
  return names;
}

const Kernels& select_kernels(const std::string& name) {
  std::string want = name, source = "kernels";
  if (want == "auto") {
    const char* env = std::getenv("SHAZIP_KERNELS");
    if (env != nullptr && *env != '\0') {
      want = env;
      source = "SHAZIP_KERNELS";
    }
  }
  if (want == "auto") {
    const Kernels* best = nullptr;
    for (const Path& p : paths())
      if (p.runs_here()) best = p.table;
    return *best;  // portable always runs
  }
  for (const Path& p : paths()) {
    if (want != p.table->name) continue;
    if (!p.runs_here())
      throw ArgumentError(source + "=" + want + ": this CPU cannot run the " + want + " kernels (available here: " +
                          joined(available_kernels()) + ")");
    return *p.table;
  }
  throw ArgumentError(source + "=" + want + ": no such kernel path (known: auto, " + joined(known_kernels()) +
                      "; available here: " + joined(available_kernels()) + ")");
}

}  // namespace shazip::kernels
