// Picks a kernel path at run time: the best this CPU runs, or the one SHAZIP_KERNELS names.
// Compiled for the baseline: the ISA paths' code is only reached through their tables, after
// the CPU has been checked for every feature its file's target pragma enables.
#include <cstdlib>

#include "kernels/kernels.h"

namespace shazip::kernels {

namespace portable {
extern const Kernels table;
}
#if defined(__x86_64__) || defined(SHAZIP_EMULATE_AVX512)
namespace avx512vnni {
extern const Kernels table;
}
#endif
#if defined(__x86_64__)
namespace avx2 {
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
