// Types and checks shared by every room of the core.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace shazip {

using i8 = int8_t;
using u8 = uint8_t;
using u16 = uint16_t;
using i32 = int32_t;
using u32 = uint32_t;
using i64 = int64_t;
using u64 = uint64_t;

// Bad arguments from Python (shapes, ranges): becomes ValueError.
struct ArgumentError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};
// Damaged archive data found while decoding: becomes shazip.CorruptArchive.
struct DataError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline void require(bool ok, const std::string& what) {
  if (!ok) throw ArgumentError(what);
}
// a literal message: no string is built where the check passes (checks in loops over arrays)
inline void require(bool ok, const char* what) {
  if (!ok) throw ArgumentError(what);
}

}  // namespace shazip
