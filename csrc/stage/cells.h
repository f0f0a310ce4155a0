// The models of tables: CELL_ORDER's input, by the bits so far against the byte above
// in the cell, and CELL_LEFT's two, of the byte at this offset of the previous cell (the lane
// tracks the cells: lane.h; CELL_LEFT's and CELL_UP's contexts: contexts.h).
//
// CONTRACT: the tables' models, each named as in models.def (where its bit and
// the stage version that added it are); the rules every model keeps are atop stage.h.
//   CELL_LEFT      a context model after PREDICTED's: hash of left << 24 | left_eq << 20 | cell << 8
//                  | c1 (a city repeating the airport's name). And two inputs after CELL_ORDER's, as
//                  a match model's for the predicted byte left & 255 (none while left = 0): the stretch
//                  of its own map's P16 (context 0 without a prediction or once it disagrees with the
//                  bits so far, else 2 * (min(cell, 7) * 2 + left_eq) + expected bit; cells start at
//                  2**21) and +-min(32 * 8, 2047) = +-256 by the expected bit.
//   CELL_ORDER     one input after LINE_MATCH's: the stretch of a map's P16 (cells start at 2**21) in
//                  context (((min(cell, 7) * 2 + up_eq) * 4 + r) * 2 + u) * 8 + k, where r = 0 without
//                  up, else 1 while the bits so far equal up's first k bits, 2 once greater, 3 once
//                  less; u = up's bit k (0 without up): a sorted column or a counter goes on above the
//                  byte above.
#pragma once

#include <algorithm>

#include "common.h"
#include "stage/lane.h"
#include "stage/matches.h"
#include "stage/params.h"
#include "stage/state_map.h"
#include "stage/tables.h"

namespace shazip::stage {

constexpr u32 ORDER_CELLS = 8;  // CELL_ORDER's and CELL_LEFT's maps tell cells 0..6 and 7 or later apart
constexpr u32 LEFT_LEN = 8;  // CELL_LEFT's predicted byte counts as a match of this length

// CELL_LEFT's map context but the expected bit (a predicted byte is only in cells 1 and later)
inline size_t left_band(const Lane& L) { return size_t(std::min(L.cell, ORDER_CELLS - 1) * 2 + u32(L.left_eq)); }
// CELL_ORDER's map context at bit k, c0 the bits so far
inline size_t order_context(const Lane& L, int k, int c0) {
  int r = 0, u = 0;
  if (L.up) {
    const int above = int(L.up >> (8 - k));  // 1 followed by up's first k bits, as c0
    r = above == c0 ? 1 : c0 > above ? 2 : 3;
    u = int(L.up >> (7 - k)) & 1;
  }
  return size_t((((std::min(L.cell, ORDER_CELLS - 1) * 2 + u32(L.up_eq)) * 4 + u32(r)) * 2 + u32(u)) * 8 + u32(k));
}

class CellInputs {
 public:
  CellInputs() = default;
  explicit CellInputs(const Params& p) : order_(p.has(CELL_ORDER)), left_(p.has(CELL_LEFT)) {
    const u32 half = u32(1) << (P22_BITS - 1 + COUNT_BITS);
    if (left_) left_map_ = StateMap(2 * ORDER_CELLS * 2, half);
    if (order_) order_map_ = StateMap(ORDER_CELLS * 2 * 4 * 2 * 8, half);
  }
  int inputs() const { return order_ + 2 * left_; }
  // the bit's inputs, appended to x (CELL_ORDER's, then CELL_LEFT's); their maps' contexts kept for update
  void bit_inputs(const Tables& tb, const Lane& L, int k, int c0, i32* x, int& count) {
    int n = count;  // a local: x's stores cannot then alias it
    if (order_) x[n++] = tb.st(order_map_.p16(ocx_ = order_context(L, k, c0)));
    if (left_) lcx_ = byte_inputs(tb, left_map_, L.left ? int(L.left & 255) : -1, left_band(L), LEFT_LEN, k, c0, x, n);
    count = n;
  }
  void update(const Tables& tb, int y) {
    if (order_) order_map_.update(tb, ocx_, y, COUNT_LIMIT_MAX);
    if (left_) left_map_.update(tb, lcx_, y, COUNT_LIMIT_MAX);
  }

 private:
  bool order_ = false, left_ = false;
  StateMap order_map_;  // CELL_ORDER: by the cell, up_eq, the bits so far against up's, up's bit and k
  StateMap left_map_;   // CELL_LEFT: by the cell, left_eq and the expected bit
  size_t ocx_ = 0, lcx_ = 0;
};


}  // namespace shazip::stage
