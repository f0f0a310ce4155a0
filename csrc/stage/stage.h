// The adaptive context-mixing stage and its binary arithmetic coder (shazip/stage/adaptive.py builds and wraps it).
//
// Each byte is coded as 8 binary decisions, most significant bit first. For every decision a
// pair of logistic mixers combines, in the stretch (logit) domain, the neural model's
// probability of the bit (exact subtree sums of its integer frequencies), hashed context
// models (orders 1-8 of the lane's own bytes and a word) and a match model over the history of
// all lanes and earlier blocks; two APM (SSE) stages refine the mix, and a carry-propagating
// range coder codes the bit. Lanes share every table and are coded in a fixed order: lane 0's
// 8 bits, then lane 1's, ... within a step. The design follows lpaq1 / zpaq (bit-history states
// with adaptive probabilities, nibble-bucket hash tables, 33-bucket APMs); the code is ours.
// Version 2's models for structured text (below the contract) follow ideas described for
// paq8-class compressors (record fields, nesting, character classes, mixer selection by how
// many contexts are known, a second mixer layer); lanes add the lane's own contexts and match,
// since interleaving lanes dilutes the recency shared tables rely on.
//
// NUMERICS CONTRACT: an archive must decode bit-exactly on any machine, so every value that
// feeds prediction, update or coding is an integer, computed with fixed-width two's-complement
// types and no undefined behaviour (hashes wrap as uint32_t/uint64_t; signed values are
// bounded far below overflow and kept in int64_t where products are formed). Right shifts of
// negative int64_t values floor (arithmetic shift: guaranteed by C++20 and by every compiler
// that builds this file; C++17 calls it implementation-defined). The constants:
//   probabilities  P16: 16 bits, P(bit = 1) = p / 65536, the coder's p in [1, 65535].
//                  P22: 22 bits (counters, APM cells), P16 = P22 >> 6 (floor).
//   stretch domain ST: integers in [-4095, 4095], unit 1/256 nat (logit * 256).
//   squash[x + 4095] = clamp(round_half_even(65536 / (1 + exp(-x / 256))), 1, 65535), given
//                  by Python (adaptive.squash_table, decimal arithmetic, prec 24), never
//                  computed here; checked non-decreasing.
//   stretch[p]    = for p >= 32768 the smallest x in [-4095, 4095] with squash[x] >= p (4095
//                  if none), for p < 32768 the largest x with squash[x] <= p (-4095 if none):
//                  the exact integer inverse, symmetric about p = 1/2, by linear search.
//   NN input       p16 = clamp(floor((s1 * 65536 + (s0 + s1) / 2) / (s0 + s1)), 1, 65535) from
//                  the subtree sums s0, s1 (int64; every frequency in [1, 2**30], so
//                  s * 65536 < 2**55); input 1 = x = stretch[p16]; input 2 = clamp(floor(x * |x| /
//                  2048), -4095, 4095) (a confidence-weighted copy); input 3 = stretch of an APM
//                  (as below) of x in context c0 | c1 << 8 (the NN recalibrated per order-1 context).
//   counter        u32 = P22 << 10 | n (n = updates seen, at most `limit`); on bit y:
//                  P22 += floor((y * 2**22 - P22) * RECIP[n] / 65536), RECIP[n] = floor(131072 /
//                  (2n + 3)), i.e. rate 1 / (n + 1.5); then n = min(n + 1, limit).
//                  State-map cells start at P22 = floor((2 n1 + 1) * 2**22 / (2 (n0 + n1) + 2))
//                  of their bit-history state's counts, n = 0; the match map at P22 = 2**21.
//                  Every state map's limit is 1023.
//   match inputs   stretch of the match map's P16 (context: length band * 2 + expected bit,
//                  0 without a prediction), and +-min(32 * length, 2047) by the expected bit.
//   mixers         two, over the same inputs (the last is a bias of 256): one with a weight set
//                  per (bit position, match-length band), one per partial byte c0. Each: dot =
//                  sum w_i x_i (int64), w in 16.16 fixed point; x_k = clamp(floor(dot / 65536),
//                  -4095, 4095); on bit y, err = y * 65536 - squash[x_k] and w_i += floor((x_i *
//                  err * LR + 2**19) / 2**20) (round half up), clamped to [-2**24, 2**24]; LR =
//                  params.mixer_lr. x_mix = floor((x_1 + x_2) / 2), p_mix = squash[x_mix].
//                  Initial weights: the NN's first input 65536 (1.0), the others 0; without
//                  the NN input every weight is 16384.
//   APM            33 cells of P22 per context over x in [-4096, 4096], cell j at x = 256 (j - 16),
//                  initialised to squash[clamp(256 (j - 16))] << 6. For input x: u = x + 4096,
//                  j = u >> 8, w = u & 255, P22 = floor((c[j] (256 - w) + c[j+1] w) / 256); on bit
//                  y the nearer cell (j + (w >> 7)) moves: c += floor((y * 2**22 - c) / 2**APM_RATE).
//   final p        p_mix, a1 = APM1[c0](x_mix), a2 = APM2[c0 | c1 << 8](stretch[pa]) with
//                  pa = floor((p_mix + 3 a1) / 4); p = floor((pa + 3 a2) / 4); clamp [1, 65535].
//   coder          32-bit range, 64-bit low with carry (LZMA's scheme): bound = floor(range *
//                  p / 65536); bit 1 takes [low, low + bound), bit 0 the rest; range is kept
//                  >= 2**24 by shifting bytes out. The leading byte (always 0) is not written,
//                  the final value is the one in [low, low + range) with most trailing zero
//                  bits, and trailing zero bytes are dropped: the decoder reads zeros past the end.
// LATER MODELS: every model beyond version 1's is one bit of Params::extras, listed in models.def
// with the stage version that added it; without its bit the stage computes exactly what it did
// before. Each model's rules open the component it lives in: lane.h (what a lane tracks for
// them), contexts.h (the context models, whose inputs come in extra_contexts()'s order, after
// version 1's), runs.h, matches.h, cells.h, floats.h, steps.h, echoes.h (with digit_mass.h), mixers.h,
// apms.h. The inputs, in order: the NN's (nn_inputs.h); the context models' (contexts.h), then
// RUNS's one per hashed model; the match models' two each, RECOVER's two, LINE_MATCH's two,
// CELL_ORDER's one and CELL_LEFT's two (matches.h, cells.h); FLOAT_TAIL's two, LINE_STEP's two and
// NUMBER_ECHO's two (floats.h, steps.h, echoes.h); the bias.
// The mixers' dot products and training run on the kernel path chosen at run time (kernels.h):
// every path computes the integers above.
// The only floating point is the optional measurement of the ideal code length (sum of
// -log2 p of the coded bits), which is reported and never read back.
#pragma once
// The stage is made of components, one file each, composed by the Stage below: nn_inputs.h (the
// NN's inputs), context_maps.h (the context models: contexts.h's contexts, lane.h's lane state,
// runs.h), matches.h (the match models, RECOVER, LINE_MATCH), cells.h (the tables' inputs),
// floats.h, steps.h and echoes.h (a number's next digit: FLOAT_TAIL, LINE_STEP, NUMBER_ECHO),
// mixers.h (the mixers, by what selects their weight sets), apms.h (the APM stages); history.h is
// the block's byte ring, params.h the parameters and the models' registry (models.def).

#include <algorithm>
#include <array>
#include <memory>
#include <stdexcept>
#include <vector>

#include "common.h"
#include "coder/binary.h"
#include "stage/apms.h"
#include "stage/cells.h"
#include "stage/context_maps.h"
#include "stage/contexts.h"
#include "stage/echoes.h"
#include "stage/floats.h"
#include "stage/history.h"
#include "stage/lane.h"
#include "stage/matches.h"
#include "stage/mixers.h"
#include "stage/nn_inputs.h"
#include "stage/params.h"
#include "stage/steps.h"
#include "stage/tables.h"

namespace shazip::stage {

class Stage {
 public:
  // k: the kernel path of the mixers' arithmetic (any gives the same results)
  Stage(const std::vector<i64>& squash, const Params& p, const kernels::Kernels& k)
      : prm_(checked(p)), tb_(std::make_shared<const Tables>(squash)), k_(&k), nn_(p, *tb_), contexts_(p, *tb_),
        matches_(p), cells_(p), floats_(p), steps_(p), echoes_(p), apms_(p, *tb_),
        history_(p.history_bits, p.match || p.column || (p.extras & HISTORY_USERS)) {
    if (p.has(INDIRECT)) indirect_ = Indirect(p.table_bits);
    n_inputs_ = nn_.inputs() + contexts_.inputs() + matches_.inputs() + cells_.inputs() + floats_.inputs() + steps_.inputs() +
                echoes_.inputs() + 1;  // + bias
    if (n_inputs_ > MAX_INPUTS) throw std::invalid_argument("too many context models");
    mixers_ = Mixers(p, k, n_inputs_);
  }

  const Tables& tables() const { return *tb_; }
  const kernels::Kernels& kernels() const { return *k_; }
  const Params& params() const { return prm_; }
  u64 position() const { return pos_; }
  size_t bytes() const {
    return history_.bytes() + matches_.bytes() + contexts_.bytes() + indirect_.bytes() + mixers_.bytes() +
           nn_.bytes() + apms_.bytes();
  }
  void restore(const Stage& s) {
    if (!(s.prm_ == prm_)) throw std::invalid_argument("snapshot of a stage with other parameters");
    *this = s;
  }
  void advance(u64 n) { pos_ += n; }

  // Codes one byte of lane b: `io(p16, bit)` codes a bit (the encoder's bit, or -1 for the
  // decoder) and returns it. freq: the NN's 256 frequencies (validated by the caller).
  template <class IO>
  int code_byte(std::vector<Lane>& lanes, size_t b, const Where& at, const i64* freq, int sym, IO&& io) {
    const Tables& tb = *tb_;
    Lane& L = lanes[b];
    const u32 c1 = u32(L.hist & 0xFF);
    // the byte's contexts: what the matches predict, the lane's fields and cells, the hashes
    const Predictions e = matches_.predict(L, b, at, history_);
    const DigitMass tail = floats_.predict(L);
    const auto lane_byte = [&](u32 q) { return history_.byte(at.base + b * at.span + q, at); };
    if (prm_.extras & ABOVE_USERS) L.above = field_above(L, lane_byte);
    if (prm_.extras & CELLS_USERS) cells_before(L, lane_byte);
    const Looking to{b, at, history_, e, matches_.matchers(),
                     prm_.has(INDIRECT) ? indirect_.entries(L.hist) : std::array<u32, 3>{}};
    contexts_.begin_byte(L, to);
    nn_.begin_byte(freq);
    mixers_.begin_byte(L);
    mixers_.prefetch(L, 0, 1, e.expect[0]);
    apms_.prefetch(L, 1);
    nn_.prefetch(1, c1);
    int c0 = 1;  // 1 followed by the bits of this byte so far
    for (int k = 0; k < 8; ++k) {
      if (k < 7)  // the mixers', hashed APMs' and NN APM's rows of both possible next bits (a hint only)
        for (int y = 0; y < 2; ++y) {
          mixers_.prefetch(L, k + 1, c0 * 2 + y, e.expect[0]);
          apms_.prefetch(L, c0 * 2 + y);
          nn_.prefetch(c0 * 2 + y, c1);
        }
      // inputs -> mixers -> APMs -> the coder
      i32 x[MAX_INPUTS];
      int n = 0;
      nn_.bit_inputs(tb, c0, c1, x, n);
      const int seen = contexts_.bit_inputs(tb, k, c0, x, n);
      const MatchContexts mcx = matches_.bit_inputs(tb, L, e, k, c0, x, n);
      cells_.bit_inputs(tb, L, k, c0, x, n);
      floats_.bit_inputs(tb, tail, k, c0, x, n);
      steps_.bit_inputs(tb, L, k, c0, x, n);
      echoes_.bit_inputs(tb, L, k, c0, x, n);
      x[n++] = 256;  // bias
      const int xm = mixers_.mix(L, {k, c0, seen, e.expect[0], e.band[0], mcx.match[0]}, x, x[0]);
      const int p = apms_.refine(tb, L, xm, tb.sq(xm), c0, mcx.match[0]);
      const int y = io(clampi(p, 1, P16_MAX), sym < 0 ? -1 : (sym >> (7 - k)) & 1);
      // every component learns the bit from its own prediction
      mixers_.update(tb, x, y);
      nn_.update(y);
      apms_.update(y);
      contexts_.update(tb, y);
      matches_.update(tb, mcx, y);
      cells_.update(tb, y);
      floats_.update(tb, y);
      steps_.update(tb, y);
      echoes_.update(tb, y);
      c0 = c0 * 2 + y;
    }
    const int c = c0 & 255;
    contexts_.end_byte(c);
    end_byte(lanes, b, at, c);
    return c;
  }

  // lane b's state and the shared tables after its byte c (code_byte's last step; bound for tests)
  void end_byte(std::vector<Lane>& lanes, size_t b, const Where& at, int c) {
    Lane& L = lanes[b];
    const u64 pos = at.base + b * at.span + L.coded;
    const int before = int(L.hist & 0xFF);
    if (prm_.has(INDIRECT)) indirect_.update(L.hist, c);  // what followed the lane's contexts before c
    L.hist = (L.hist << 8) | u64(c);
    track_words(L, c);
    ++L.coded;
    track(L, c, before, prm_.extras);
    history_.put(pos, c);
    matches_.after_byte(L, b, at, history_, pos, c);
    floats_.after_byte(L, c, before);
    steps_.after_byte(L, c);
    echoes_.after_byte(L, c);
  }

 private:
  // p, refused unless every value is in its range and every model has what it needs
  static const Params& checked(const Params& p) {
    if (p.table_bits < 10 || p.table_bits > 30) throw std::invalid_argument("table_bits must be in [10, 30]");
    if (p.history_bits < 10 || p.history_bits > 32) throw std::invalid_argument("history_bits must be in [10, 32]");
    if (p.match_bits < 8 || p.match_bits > 28) throw std::invalid_argument("match_bits must be in [8, 28]");
    if (p.match_min < 2 || p.match_min > 8) throw std::invalid_argument("match_min must be in [2, 8]");
    for (int o : p.orders)
      if (o < 1 || o > 8) throw std::invalid_argument("context orders must be in [1, 8]");
    if (p.extras & ~u64(EXTRAS_ALL)) throw std::invalid_argument("unknown extra models");
    check_needs(p);
    return p;
  }

  Params prm_;
  std::shared_ptr<const Tables> tb_;
  const kernels::Kernels* k_;
  NNInputs nn_;
  ContextMaps contexts_;
  Matches matches_;
  CellInputs cells_;
  FloatTail floats_;
  LineStep steps_;
  NumberEcho echoes_;
  APMs apms_;
  History history_;
  Indirect indirect_;  // INDIRECT's tables
  Mixers mixers_;
  int n_inputs_ = 0;
  u64 pos_ = 0;
};


}  // namespace shazip::stage
