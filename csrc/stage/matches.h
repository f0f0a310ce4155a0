// The models that predict a whole byte from the history: the match models (the longest recent
// context, and with LOCAL_MATCH the lane's own), RECOVER's match followed on past a miss, and
// LINE_MATCH's matches within the lane's last lines. Each gives two inputs per bit while its
// predicted byte agrees with the bits so far (the contract below says how).
//
// CONTRACT: the later match models, each named as in models.def (where its bit and
// the stage version that added it are); the rules every model keeps are atop stage.h.
//   LOCAL_MATCH    a second match model, as the first (its own match map) but with the lane
//                  number in its hash key (seed 19 + 2 * lane, the first's 17), so that it finds
//                  the lane's own latest occurrence; both share the hash table of heads.
//   RECOVER        (needs the match model) a recovering match: when a match model's match of at
//                  least 16 bytes mispredicts byte c (the first model's, else the second's), a
//                  pointer to the byte after its predicted one is followed on, as if c had
//                  replaced that byte (a record whose one field differs: a time, an id). Before
//                  the match models move past c, a live recovering match (misses > 0) moves on
//                  one byte; if it predicted c, len += 1 (at most 65535), else len = 0 and
//                  misses += 1, and at 16 misses it ends (misses = 0); then a long match's
//                  mispredicting c starts a new one: ptr = the match's ptr + 1, len 0, misses 1.
//                  Its predicted byte is the ring's at ptr when the decoder knows it. Two inputs
//                  before the bias, as a match model's: stretch of its own map's P16 (context 0
//                  without a prediction or once it disagrees with the bits so far, else 2 * (1 +
//                  min(len, 15) * 4 + min(misses, 4) - 1) + expected bit; cells start at 2**21),
//                  and +-min(32 * len, 2047) by the expected bit.
//   LINE_MATCH     two matches keyed by only the last 2 bytes, but within the lane's last lines: a
//                  value copied from earlier in the record (a city from the airport's name, a key
//                  repeated in a log line, `x = x`). After byte c at position pos (the ring holds c):
//                  each matcher with a match goes on if c is not '\n' and was its predicted byte,
//                  which the decoder knew (len += 1, at most 65535; ptr += 1), else it ends (len =
//                  0). Then, once the lane has 2 bytes, its head (2**16 entries of position + 1, 0:
//                  empty; index hash64(lane << 32 | c2 << 8 | c1, 23) >> 16) gives cand = head - 1,
//                  which a matcher without a match takes (len 2, ptr cand) if cand - 2 is at or after
//                  the start of this line (matcher 0) or of the line before it (matcher 1), cand <=
//                  pos, the ring at cand - 2 is valid and holds c2 c1 at cand - 2, cand - 1; then head
//                  = pos + 2. Two inputs after RECOVER's, as a match model's, from matcher 0 if the
//                  decoder knows its predicted byte, else from matcher 1: stretch of their map's P16
//                  (context 0 without a prediction or once it disagrees with the bits so far, else
//                  2 * (1 + min(len, 15) + 16 * w) + expected bit, w = 0 for matcher 0, 1 for matcher
//                  1 pointing into this line, 2 into the line before; cells start at 2**21) and
//                  +-min(32 * len, 2047) by the expected bit. Without a match model's prediction,
//                  MATCHED's context takes matcher 0's predicted byte e: hash of (512 + e) << 24 |
//                  c2 c1. It keeps a history ring (history_bits) of its own where nothing else does.
#pragma once

#include <algorithm>
#include <array>
#include <vector>

#include "common.h"
#include "stage/big_vector.h"
#include "stage/hash.h"
#include "stage/history.h"
#include "stage/lane.h"
#include "stage/params.h"
#include "stage/state_map.h"

namespace shazip::stage {

constexpr u32 RECOVER_MIN = 16;  // RECOVER: a match this long is followed on past a miss
constexpr u32 RECOVER_MISSES = 16;  // ... until it has missed this many bytes
constexpr u32 RECOVER_LENS = 16, RECOVER_MISS_BANDS = 4;  // its map's contexts: min(len, 15), min(miss, 4)
constexpr int LINE_BITS = 16;  // LINE_MATCH: log2 of its heads (the last position of each lane's 2-byte context)
constexpr u32 LINE_LENS = 16;  // its maps' contexts: min(len, 15)

// A predicted byte's two inputs at bit k, appended to x: while `byte` (-1: none) agrees with the
// bits so far c0, the stretch of its map's P16 in context band * 2 + the expected bit and +-min(32
// len, 2047) by that bit; else the map's context 0 and 0. Returns the context, for the map's update.
inline size_t byte_inputs(const Tables& tb, const StateMap& map, int byte, size_t band, u32 len, int k, int c0,
                          i32* x, int& n) {
  const bool on = byte >= 0 && ((byte | 256) >> (8 - k)) == c0;
  const int ebit = on ? (byte >> (7 - k)) & 1 : 0;
  const size_t cx = on ? band * 2 + size_t(ebit) : 0;
  x[n++] = tb.st(map.p16(cx));
  x[n++] = on ? (ebit ? 1 : -1) * std::min<int>(int(len) * 32, 2047) : 0;
  return cx;
}

// The recovering match R after byte c: r, its predicted byte (-1: none the decoder knows); M, the
// match models' matches and their predicted bytes (-1: none)
inline Lane::Recovering recover_step(Lane::Recovering R, int r, const Lane::Match* M, const int* predicted,
                                     int matchers, int c) {
  if (R.miss > 0) {
    if (r == c) {
      R.len += R.len < 65535;
    } else {
      R.len = 0;
      R.miss = R.miss < RECOVER_MISSES ? R.miss + 1 : 0;
    }
    ++R.ptr;
  }
  for (int m = 0; m < matchers; ++m)
    if (M[m].len >= RECOVER_MIN && predicted[m] >= 0 && predicted[m] != c) return {M[m].ptr + 1, 0, 1};
  return R;
}

// What the matches predict for a byte (fixed for the byte; -1: no predicted byte the decoder knows)
struct Predictions {
  int expect[2] = {-1, -1};  // the match models'
  int band[2] = {};          // ... and their length bands (0 without a prediction)
  int rexpect = -1;          // RECOVER's
  size_t rband = 0;          // its map's context but the expected bit
  int lexpect[LINE_MATCHERS] = {-1, -1};  // LINE_MATCH's matchers'
  int lbyte = -1;            // the one its inputs take: this line's matcher while it predicts, else the other
  u32 llen = 0;              // ... its length
  size_t lband = 0;          // ... its map's context but the expected bit
};

// The contexts of one bit's match inputs (for their maps' updates)
struct MatchContexts {
  size_t match[2] = {}, recover = 0, line = 0;
};

class Matches {
 public:
  Matches() = default;
  explicit Matches(const Params& p) : prm_(p), recover_(p.has(RECOVER)), line_(p.has(LINE_MATCH)) {
    const u32 half = u32(1) << (P22_BITS - 1 + COUNT_BITS);
    if (p.match) {
      heads_.assign(size_t(1) << p.match_bits, 0);
      matchers_ = p.has(LOCAL_MATCH) ? 2 : 1;
      for (int m = 0; m < matchers_; ++m) match_map_[m] = StateMap(MATCH_BANDS * 2, half);
    }
    if (p.has(LINE_MATCH)) {
      line_heads_.assign(size_t(1) << LINE_BITS, 0);
      line_map_ = StateMap(2 * (1 + 3 * LINE_LENS), half);
    }
    if (p.has(RECOVER)) recover_map_ = StateMap(2 * (1 + RECOVER_LENS * RECOVER_MISS_BANDS), half);
  }
  int matchers() const { return matchers_; }
  // the inputs it gives each bit
  int inputs() const { return 2 * matchers_ + 2 * recover_ + 2 * line_; }
  size_t bytes() const { return (heads_.size() + line_heads_.size()) * sizeof(u64); }

  Predictions predict(const Lane& L, size_t b, const Where& at, const History& h) const {
    Predictions e;
    for (int m = 0; m < matchers_; ++m) {
      const Lane::Match& M = L.match[m];
      if (M.len > 0 && h.valid(M.ptr, at)) e.expect[m] = h[M.ptr];
      e.band[m] = e.expect[m] < 0 ? 0 : std::min<int>(M.len < 16 ? M.len : 12 + ilog2(M.len), MATCH_BANDS - 1);
    }
    const Lane::Recovering& R = L.recover;
    if (recover_ && R.miss > 0 && h.valid(R.ptr, at)) e.rexpect = h[R.ptr];
    e.rband = 1 + std::min(R.len, RECOVER_LENS - 1) * RECOVER_MISS_BANDS + std::min(R.miss, RECOVER_MISS_BANDS) - 1;
    if (line_)
      for (int m = 0; m < LINE_MATCHERS; ++m) {
        const Lane::Match& LM = L.line_match[m];
        if (LM.len > 0 && h.valid(LM.ptr, at)) e.lexpect[m] = h[LM.ptr];
      }
    const int lm = e.lexpect[0] >= 0 ? 0 : 1;
    const Lane::Match& LM = L.line_match[lm];
    const u32 which = lm == 0 ? 0 : LM.ptr >= at.base + b * at.span + L.line ? 1 : 2;
    e.lbyte = e.lexpect[lm];
    e.llen = LM.len;
    e.lband = 1 + std::min(LM.len, LINE_LENS - 1) + LINE_LENS * which;
    return e;
  }

  // the bit's inputs (the match models', RECOVER's, LINE_MATCH's), appended to x
  MatchContexts bit_inputs(const Tables& tb, const Lane& L, const Predictions& e, int k, int c0, i32* x,
                           int& count) const {
    MatchContexts cx;
    int n = count;  // a local: x's stores cannot then alias it
    for (int m = 0; m < matchers_; ++m)
      cx.match[m] = byte_inputs(tb, match_map_[m], e.expect[m], size_t(e.band[m]), L.match[m].len, k, c0, x, n);
    if (recover_) cx.recover = byte_inputs(tb, recover_map_, e.rexpect, e.rband, L.recover.len, k, c0, x, n);
    if (line_) cx.line = byte_inputs(tb, line_map_, e.lbyte, e.lband, e.llen, k, c0, x, n);
    count = n;
    return cx;
  }
  void update(const Tables& tb, const MatchContexts& cx, int y) {
    for (int m = 0; m < matchers_; ++m) match_map_[m].update(tb, cx.match[m], y, COUNT_LIMIT_MAX);
    if (recover_) recover_map_.update(tb, cx.recover, y, COUNT_LIMIT_MAX);
    if (line_) line_map_.update(tb, cx.line, y, COUNT_LIMIT_MAX);
  }

  // the matches of lane b after its byte c at position pos (the lane and the history hold c)
  void after_byte(Lane& L, size_t b, const Where& at, const History& h, u64 pos, int c) {
    if (line_) line_match(L, b, at, h, pos, c);
    if (!prm_.match) return;
    if (recover_) recover(L, at, h, c);
    for (Lane::Match& M : L.match) {  // a match goes on if it predicted this byte from known history
      if (M.len > 0 && h.valid(M.ptr, at) && h[M.ptr] == c) {
        M.len += M.len < 65535;
        ++M.ptr;
      } else {
        M.len = 0;
      }
    }
    if (L.coded < u32(prm_.match_min)) return;
    const u64 key = prm_.match_min >= 8 ? L.hist : L.hist & ((u64(1) << (8 * prm_.match_min)) - 1);
    for (int m = 0; m < matchers_; ++m) {  // the second's key has the lane: its latest occurrence in the lane
      Lane::Match& M = L.match[m];
      u64& head = heads_[hash64(key, m == 0 ? 17 : 19 + 2 * u64(b)) >> (32 - prm_.match_bits)];
      if (M.len == 0 && head) {  // a candidate: verify its last match_min bytes against ours
        const u64 cand = head - 1;
        u32 n = 0;
        while (n < u32(prm_.match_min) && cand > n && h.valid(cand - 1 - n, at) &&
               h[cand - 1 - n] == int(u8(L.hist >> (8 * n))))
          ++n;
        if (n == u32(prm_.match_min)) {
          M.len = n;
          M.ptr = cand;
        }
      }
      head = pos + 2;  // stores position + 1 of the next byte (0: empty)
    }
  }

 private:
  static int ilog2(u32 x) { return 31 - __builtin_clz(x); }
  // LINE_MATCH after byte c at global position pos (the contract says how)
  void line_match(Lane& L, size_t b, const Where& at, const History& h, u64 pos, int c) {
    for (Lane::Match& M : L.line_match)
      if (M.len > 0 && c != '\n' && h.valid(M.ptr, at) && h[M.ptr] == c) {
        M.len += M.len < 65535;
        ++M.ptr;
      } else {
        M.len = 0;
      }
    if (L.coded < 2) return;
    u64& head = line_heads_[hash64(u64(b) << 32 | (L.hist & 0xFFFF), 23) >> (32 - LINE_BITS)];
    const u64 cand = head - 1;  // the byte after the 2 bytes' latest occurrence in the lane (head 0: none)
    for (int m = 0; m < LINE_MATCHERS; ++m) {  // the first takes it in this line, the second also in the last
      Lane::Match& M = L.line_match[m];
      const u64 start = at.base + b * at.span + (m == 0 ? L.line : L.prev_line);
      if (M.len == 0 && head && cand >= start + 2 && cand <= pos && h.valid(cand - 2, at) &&
          h[cand - 1] == int(u8(L.hist)) && h[cand - 2] == int(u8(L.hist >> 8))) {
        M.len = 2;
        M.ptr = cand;
      }
    }
    head = pos + 2;
  }
  // RECOVER, before the match models move on past byte c (the contract says how)
  void recover(Lane& L, const Where& at, const History& h, int c) const {
    int predicted[2] = {-1, -1};
    for (int m = 0; m < matchers_; ++m)
      if (L.match[m].len > 0) predicted[m] = h.byte(L.match[m].ptr, at);
    L.recover = recover_step(L.recover, L.recover.miss > 0 ? h.byte(L.recover.ptr, at) : -1, L.match.data(),
                             predicted, matchers_, c);
  }

  Params prm_{};
  bool recover_ = false, line_ = false;  // RECOVER, LINE_MATCH
  int matchers_ = 0;  // match models: 0, 1, or 2 with LOCAL_MATCH
  BigVector<u64> heads_;  // position + 1 of the byte after each hashed context (both match models')
  StateMap match_map_[2];  // by the length band and the expected bit
  BigVector<u64> line_heads_;  // LINE_MATCH: position + 1 of the byte after each lane's 2-byte context
  StateMap line_map_;  // LINE_MATCH: by the matcher, its length, the line of its ptr and the expected bit
  StateMap recover_map_;  // RECOVER: by the recovering match's length, misses and expected bit
};


}  // namespace shazip::stage
