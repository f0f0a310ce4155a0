// The stage's large tables' storage: a std::vector whose blocks of 2 MiB or more start on a 2 MiB
// boundary and are offered to the kernel's transparent huge pages (madvise). The stage reads
// hundreds of MB at random, a few bytes a table per bit: on 4 KiB pages nearly every read also
// misses the TLB. Only where the data lives changes, never a value; where the kernel declines
// (THP off, another OS), the pages stay small.
#pragma once

#include <cstdlib>
#include <new>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace shazip::stage {

constexpr size_t HUGE_PAGE = size_t(1) << 21;

template <class T>
struct BigAllocator {
  using value_type = T;
  BigAllocator() = default;
  template <class U>
  BigAllocator(const BigAllocator<U>&) {}
  T* allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
    const size_t align = bytes >= HUGE_PAGE ? HUGE_PAGE : 64;  // 64: a cache line, as alignas(64) rows need
    void* p = std::aligned_alloc(align, (bytes + align - 1) / align * align);
    if (!p) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (align == HUGE_PAGE) madvise(p, bytes, MADV_HUGEPAGE);  // a hint: its failure changes nothing
#endif
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t) { std::free(p); }
  template <class U>
  bool operator==(const BigAllocator<U>&) const { return true; }
  template <class U>
  bool operator!=(const BigAllocator<U>&) const { return false; }
};

template <class T>
using BigVector = std::vector<T, BigAllocator<T>>;

}  // namespace shazip::stage
