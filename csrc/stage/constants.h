// The adaptive stage's fixed-point constants (the contract is at the top of stage/stage.h).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "common.h"

namespace shazip::stage {

constexpr int ST_MAX = 4095;
constexpr int SQUASH_SIZE = 2 * ST_MAX + 1;
constexpr i32 P16_MAX = 65535;
constexpr int P22_BITS = 22;
constexpr int COUNT_BITS = 10;
constexpr u32 COUNT_MASK = (1u << COUNT_BITS) - 1;
constexpr int COUNT_LIMIT_MAX = 1023;
constexpr int APM_CELLS = 33;
constexpr int APM_RATE = 7;
constexpr i64 FREQ_MAX = i64(1) << 30;
constexpr i64 MAX_LANES = 65536, MAX_SPAN = i64(1) << 31;  // lane offsets are uint32
constexpr int MAX_INPUTS = 92;  // every model with all 8 orders
constexpr int MATCH_BANDS = 20;  // match-length buckets of the match model's state map

inline int clampi(i64 x, i64 lo, i64 hi) { return int(std::min(std::max(x, lo), hi)); }

}  // namespace shazip::stage
