// The adaptive context-mixing stage and its binary arithmetic coder (see shazip/adaptive.py).
//
// Each byte is coded as 8 binary decisions, most significant bit first. For every decision a
// pair of logistic mixers combines, in the stretch (logit) domain, the neural model's
// probability of the bit (exact subtree sums of its integer frequencies), hashed context
// models (orders 1-8 of the lane's own bytes and a word) and a match model over the history of
// all lanes and earlier blocks; two APM (SSE) stages refine the mix, and a carry-propagating
// range coder codes the bit. Lanes share every table and are coded in a fixed order: lane 0's
// 8 bits, then lane 1's, ... within a step. The design follows lpaq1 / zpaq (bit-history states
// with adaptive probabilities, nibble-bucket hash tables, 33-bucket APMs); the code is ours.
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
// The only floating point is the optional measurement of the ideal code length (sum of
// -log2 p of the coded bits), which is reported and never read back.
#include <torch/extension.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using u8 = uint8_t;
using u32 = uint32_t;
using u64 = uint64_t;
using i32 = int32_t;
using i64 = int64_t;

constexpr int ST_MAX = 4095;
constexpr int SQUASH_SIZE = 2 * ST_MAX + 1;
constexpr i32 P16_MAX = 65535;
constexpr int P22_BITS = 22;
constexpr int COUNT_BITS = 10;
constexpr u32 COUNT_MASK = (1u << COUNT_BITS) - 1;
constexpr int COUNT_LIMIT_MAX = 1023;
constexpr int APM_CELLS = 33;
constexpr int APM_RATE = 7;
constexpr i64 W_LIMIT = i64(1) << 24;
constexpr i64 FREQ_MAX = i64(1) << 30;
constexpr i64 MAX_LANES = 65536, MAX_SPAN = i64(1) << 31;  // lane offsets are uint32
constexpr int MAX_INPUTS = 24;
constexpr int MATCH_BANDS = 20;  // match-length buckets of the match model's state map

inline int clampi(i64 x, i64 lo, i64 hi) { return int(std::min(std::max(x, lo), hi)); }

// ----------------------------------------------------------------------------------------
// Shared integer tables: squash (from Python), its inverse, counter reciprocals, and the
// bit-history state machine.

// Bit histories: a state stands for a pair of bit counts (n0, n1), bounded so that 256
// states suffice, plus the last bit where there is room; an observed bit increments its
// count and discounts the other, so the state tracks recent, not lifetime, statistics.
// States are numbered by increasing n0 + n1, which makes the number a usable priority.
// The bounds and discount are zpaq's; the construction is a plain enumeration.
class BitHistory {
 public:
  BitHistory() {
    constexpr int N = 50;
    std::vector<int> id(N * N * 2, -1);  // (n0, n1, last bit) -> state
    int s = 0;
    for (int total = 0; total < N; ++total)
      for (int n1 = 0; n1 <= total; ++n1) {
        const int n0 = total - n1, k = slots(n0, n1);
        if (!k) continue;
        id[(n0 * N + n1) * 2] = s;
        id[(n0 * N + n1) * 2 + 1] = s + k - 1;
        s += k;
      }
    if (s > 256) throw std::logic_error("bit-history states do not fit a byte");
    states_ = s;
    for (int n0 = 0; n0 < N; ++n0)
      for (int n1 = 0; n1 < N; ++n1)
        for (int last = 0; last < slots(n0, n1); ++last) {
          const int st = id[(n0 * N + n1) * 2 + last];
          n0_[st] = u8(n0);
          n1_[st] = u8(n1);
          for (int y = 0; y < 2; ++y) {
            int a = n0, b = n1;
            advance(a, b, y);
            next_[st][y] = u8(id[(a * N + b) * 2 + y]);
          }
        }
  }
  u8 next(int state, int y) const { return next_[state][y]; }
  int n0(int state) const { return n0_[state]; }
  int n1(int state) const { return n1_[state]; }
  int states() const { return states_; }

 private:
  // how many states the counts (a, b) get: 0 (not representable), 1, or 2 (with the last bit)
  static int slots(int a, int b) {
    if (a < b) std::swap(a, b);
    static constexpr int bound[6] = {20, 48, 15, 8, 6, 5};  // larger count allowed, by smaller
    if (b >= 6 || a > bound[b]) return 0;
    return 1 + (b > 0 && a + b <= 17);
  }
  static int discount(int n) {
    return (n >= 1) + (n >= 2) + (n >= 3) + (n >= 4) + (n >= 5) + (n >= 7) + (n >= 8);
  }
  // counts after bit y: its count up, the other's discounted, then scaled back into range
  static void advance(int& zeros, int& ones, int y) {
    if (zeros < ones) {  // symmetric: handled with the roles swapped
      advance(ones, zeros, 1 - y);
      return;
    }
    if (y) {
      ++ones;
      zeros = discount(zeros);
    } else {
      ++zeros;
      ones = discount(ones);
    }
    while (!slots(zeros, ones)) {
      if (ones < 2) {
        --zeros;
      } else {
        zeros = (zeros * (ones - 1) + ones / 2) / ones;
        --ones;
      }
    }
  }
  u8 next_[256][2] = {};
  u8 n0_[256] = {}, n1_[256] = {};
  int states_ = 0;
};

struct Tables {
  std::vector<i32> squash;   // [x + ST_MAX] -> P16
  std::vector<int16_t> stretch;  // [P16] -> x
  std::array<i32, COUNT_LIMIT_MAX + 1> recip{};
  BitHistory history;

  explicit Tables(const std::vector<i64>& sq) {
    if (int(sq.size()) != SQUASH_SIZE) throw std::invalid_argument("squash table needs 8191 entries");
    squash.resize(SQUASH_SIZE);
    for (int i = 0; i < SQUASH_SIZE; ++i) {
      if (sq[i] < 1 || sq[i] > P16_MAX || (i && sq[i] < sq[i - 1]))
        throw std::invalid_argument("squash table must be non-decreasing within [1, 65535]");
      squash[i] = i32(sq[i]);
    }
    stretch.assign(P16_MAX + 1, int16_t(ST_MAX));
    for (int p = 32768, x = -ST_MAX; p <= P16_MAX; ++p) {  // upper half: smallest x reaching p
      while (x <= ST_MAX && squash[x + ST_MAX] < p) ++x;
      if (x > ST_MAX) break;  // the rest keep ST_MAX
      stretch[p] = int16_t(x);
    }
    for (int p = 32767, x = ST_MAX; p >= 0; --p) {  // lower half: largest x not above p
      while (x >= -ST_MAX && squash[x + ST_MAX] > p) --x;
      stretch[p] = int16_t(std::max(x, -ST_MAX));
    }
    for (int n = 0; n <= COUNT_LIMIT_MAX; ++n) recip[n] = 131072 / (2 * n + 3);
  }
  int sq(int x) const { return squash[clampi(x, -ST_MAX, ST_MAX) + ST_MAX]; }
  int st(int p16) const { return stretch[clampi(p16, 0, P16_MAX)]; }
  // the adaptive counter (see the contract): P22 << 10 | n
  void update(u32& cell, int y, int limit) const {
    const u32 n = cell & COUNT_MASK;
    const i64 p = cell >> COUNT_BITS;
    const i64 np = p + ((((i64(y) << P22_BITS) - p) * recip[n]) >> 16);
    cell = u32(np << COUNT_BITS) | std::min<u32>(n + 1, u32(limit));
  }
};

// ----------------------------------------------------------------------------------------
// Model components.

// A hash table of 16-byte buckets, one per (context, nibble): byte 0 is a check byte, bytes
// 1..15 the bit-history states of the nibble's 15 binary-tree nodes (byte 1, the nibble's
// first node, doubles as the bucket's priority). A lookup probes 3 buckets of one 64-byte
// line and, on a miss, clears the one of lowest priority.
class BucketTable {
 public:
  explicit BucketTable(int bits) : lines_(size_t(1) << (bits - 6)), mask_((u32(1) << (bits - 4)) - 1) {}
  u8* find(u32 h) {
    const u8 check = u8(h >> 24);
    const u32 i = h & mask_;
    u8* b[3] = {bucket(i), bucket(i ^ 1), bucket(i ^ 2)};
    for (u8* p : b)
      if (p[0] == check) return p;
    u8* victim = b[0];
    if (b[1][1] < victim[1]) victim = b[1];
    if (b[2][1] < victim[1]) victim = b[2];
    std::memset(victim, 0, 16);
    victim[0] = check;
    return victim;
  }
  size_t bytes() const { return lines_.size() * sizeof(Line); }
  void prefetch(u32 h) const { __builtin_prefetch(&lines_[(h & mask_) >> 2]); }

 private:
  struct alignas(64) Line {
    u8 b[64];
  };
  u8* bucket(u32 i) { return lines_[i >> 2].b + (i & 3) * 16; }
  std::vector<Line> lines_;
  u32 mask_;
};

// P22 counters indexed by a small context (a bit-history state, or a match state)
class StateMap {
 public:
  StateMap() = default;
  StateMap(size_t n, u32 init) : t_(n, init) {}
  int p16(size_t cx) const { return int(t_[cx] >> (COUNT_BITS + 6)); }
  void update(const Tables& tb, size_t cx, int y, int limit) { tb.update(t_[cx], y, limit); }
  std::vector<u32>& cells() { return t_; }

 private:
  std::vector<u32> t_;
};

// Logistic mixing of stretched inputs with one weight vector per selecting context
class Mixer {
 public:
  Mixer() = default;
  Mixer(int inputs, int sets, int lr, const std::vector<i32>& init)
      : n_(inputs), lr_(lr), w_(size_t(inputs) * sets) {
    for (int s = 0; s < sets; ++s) std::copy(init.begin(), init.end(), w_.begin() + size_t(s) * inputs);
  }
  // returns x_mix (the clamped stretch-domain output)
  int dot(const i32* x, int set) const {
    const i32* w = &w_[size_t(set) * n_];
    i64 s = 0;
    for (int i = 0; i < n_; ++i) s += i64(w[i]) * x[i];
    return clampi(s >> 16, -ST_MAX, ST_MAX);
  }
  void update(const i32* x, int set, int y, int p16) {
    i32* w = &w_[size_t(set) * n_];
    const i64 err = (i64(y) << 16) - p16;
    for (int i = 0; i < n_; ++i) {
      const i64 nw = w[i] + ((i64(x[i]) * err * lr_ + (i64(1) << 19)) >> 20);
      w[i] = i32(std::min(std::max(nw, -W_LIMIT), W_LIMIT));
    }
  }
  std::vector<i32>& weights() { return w_; }

 private:
  int n_ = 0, lr_ = 0;
  std::vector<i32> w_;
};

// Adaptive probability map: refines a probability given a context by interpolating
// between 33 cells spaced one nat apart over the stretch domain
class APM {
 public:
  APM() = default;
  APM(const Tables& tb, size_t contexts) : t_(contexts * APM_CELLS) {
    for (size_t c = 0; c < contexts; ++c)
      for (int j = 0; j < APM_CELLS; ++j) t_[c * APM_CELLS + j] = tb.sq(256 * (j - 16)) << 6;
  }
  // P16 of context cx for stretch-domain input x; remembers the cell to train
  int p16(int x, size_t cx) {
    const int u = clampi(x, -ST_MAX, ST_MAX) + 4096;
    const int j = u >> 8, w = u & 255;
    const i32* c = &t_[cx * APM_CELLS + j];
    last_ = cx * APM_CELLS + j + (w >> 7);
    return int(((i64(c[0]) * (256 - w) + i64(c[1]) * w) >> 8) >> 6);
  }
  void prefetch(size_t cx) const {  // the row's 132 bytes span at most 3 cache lines
    const char* row = reinterpret_cast<const char*>(&t_[cx * APM_CELLS]);
    for (int b : {0, 64, APM_CELLS * 4 - 1}) __builtin_prefetch(row + b);
  }
  void update(int y) {
    i32& c = t_[last_];
    c += i32((((i64(y) << P22_BITS) - c)) >> APM_RATE);
  }
  std::vector<i32>& cells() { return t_; }

 private:
  std::vector<i32> t_;
  size_t last_ = 0;
};

// ----------------------------------------------------------------------------------------
// Hashing (uint32/uint64 arithmetic wraps: defined)
inline u32 hash64(u64 x, u64 seed) {
  x ^= seed * 0x9E3779B97F4A7C15ull;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 32;
  return u32(x);
}
inline u32 hash32(u32 x) {
  x ^= x >> 16;
  x *= 0x7FEB352Du;
  x ^= x >> 15;
  x *= 0x846CA68Bu;
  x ^= x >> 16;
  return x;
}

// ----------------------------------------------------------------------------------------
// Range coder (see the contract)

class RangeEncoder {
 public:
  void encode(int y, int p16) {
    const u32 bound = u32((u64(range_) * u32(p16)) >> 16);
    if (y) {
      range_ = bound;
    } else {
      low_ += bound;
      range_ -= bound;
    }
    while (range_ < (1u << 24)) {
      range_ <<= 8;
      shift();
    }
  }
  std::vector<u8> finish() {
    const u64 last = low_ + range_ - 1;  // the interval is [low, last]
    for (int k = 32; k >= 0; --k) {      // the value in it with the most trailing zero bits
      const u64 m = (u64(1) << k) - 1;
      const u64 v = (low_ + m) & ~m;
      if (v <= last) {
        low_ = v;
        break;
      }
    }
    for (int i = 0; i < 5; ++i) shift();
    while (!out_.empty() && out_.back() == 0) out_.pop_back();
    return std::move(out_);
  }

 private:
  void shift() {  // moves low's top byte out, resolving a pending carry
    if (u32(low_) < 0xFF000000u || (low_ >> 32) != 0) {
      const u8 carry = u8(low_ >> 32);
      emit(u8(cache_ + carry));
      for (; pending_; --pending_) emit(u8(0xFF + carry));
      cache_ = u8(low_ >> 24);
    } else {
      ++pending_;
    }
    low_ = (low_ & 0x00FFFFFFull) << 8;
  }
  void emit(u8 b) {
    if (started_) out_.push_back(b);
    started_ = true;  // the first byte is always 0 and is not written
  }
  u64 low_ = 0;
  u32 range_ = 0xFFFFFFFFu;
  u8 cache_ = 0;
  u64 pending_ = 0;
  bool started_ = false;
  std::vector<u8> out_;
};

class RangeDecoder {
 public:
  explicit RangeDecoder(std::string data) : data_(std::move(data)) {
    for (int i = 0; i < 4; ++i) code_ = (code_ << 8) | next();
  }
  // any input decodes to some bits: a damaged payload gives wrong bytes, never a fault
  int decode(int p16) {
    const u32 bound = u32((u64(range_) * u32(p16)) >> 16);
    int y;
    if (code_ < bound) {
      range_ = bound;
      y = 1;
    } else {
      code_ -= bound;
      range_ -= bound;
      y = 0;
    }
    while (range_ < (1u << 24)) {
      range_ <<= 8;
      code_ = (code_ << 8) | next();
    }
    return y;
  }

 private:
  u32 next() { return pos_ < data_.size() ? u8(data_[pos_++]) : 0u; }
  std::string data_;
  size_t pos_ = 0;
  u32 code_ = 0, range_ = 0xFFFFFFFFu;
};

// ----------------------------------------------------------------------------------------
// The stage: every table that outlives a block.

struct Params {
  int table_bits, history_bits, match_bits, match_min, mixer_lr;
  std::vector<int> orders;
  bool word, column, sparse, nn, match, apm;
  bool operator==(const Params& o) const {
    return table_bits == o.table_bits && history_bits == o.history_bits && match_bits == o.match_bits &&
           match_min == o.match_min && mixer_lr == o.mixer_lr && orders == o.orders && word == o.word &&
           column == o.column && sparse == o.sparse && nn == o.nn && match == o.match && apm == o.apm;
  }
};

// One lane's context within a block: its own previous bytes, words, lines and match
struct Lane {
  u64 hist = 0;       // last 8 bytes, most recent in the low byte
  u32 word = 0;       // hash of the current alphabetic word (0 outside words)
  u32 prev_word = 0;  // hash of the word before it
  u32 line = 0;       // lane offset where the current line starts (after a '\n')
  u32 prev_line = 0;  // ... and where the previous one started
  u64 ptr = 0;        // match: global position of the predicted byte (valid while len > 0)
  u32 len = 0;        // match length in bytes (0: none)
  u32 coded = 0;      // bytes of this lane coded so far
};

// Where a byte is being coded: which history bytes are already known to the decoder
struct Where {
  u64 base, span, lanes;
  const std::vector<Lane>* lane;
};

class Stage {
 public:
  Stage(const std::vector<i64>& squash, const Params& p)
      : prm_(p), tb_(std::make_shared<const Tables>(squash)) {
    if (p.table_bits < 10 || p.table_bits > 30) throw std::invalid_argument("table_bits must be in [10, 30]");
    if (p.history_bits < 10 || p.history_bits > 32) throw std::invalid_argument("history_bits must be in [10, 32]");
    if (p.match_bits < 8 || p.match_bits > 28) throw std::invalid_argument("match_bits must be in [8, 28]");
    if (p.match_min < 2 || p.match_min > 8) throw std::invalid_argument("match_min must be in [2, 8]");
    if (p.mixer_lr < 1 || p.mixer_lr > 64) throw std::invalid_argument("mixer_lr must be in [1, 64]");
    for (int o : p.orders)
      if (o < 1 || o > 8) throw std::invalid_argument("context orders must be in [1, 8]");
    std::vector<u32> init(256);
    for (int s = 0; s < 256; ++s) {
      const int n0 = tb_->history.n0(s), n1 = tb_->history.n1(s);
      init[s] = u32((i64(2 * n1 + 1) << P22_BITS) / (2 * (n0 + n1) + 2)) << COUNT_BITS;
    }
    std::vector<int> orders = p.orders;
    if (p.word) orders.insert(orders.end(), {WORD, WORD_PAIR});
    if (p.column) orders.push_back(COLUMN);
    if (p.sparse) orders.push_back(SPARSE);
    for (int o : orders) {
      if (o == 1 && direct_.empty()) {
        direct_.assign(65536, 0);
        models_.push_back({o, -1});
      } else {
        models_.push_back({o, int(tables_.size())});
        tables_.emplace_back(p.table_bits);
      }
      maps_.emplace_back(256, 0);
      std::copy(init.begin(), init.end(), maps_.back().cells().begin());
    }
    if (p.match || p.column) ring_.assign(size_t(1) << p.history_bits, 0);
    if (p.match) {
      heads_.assign(size_t(1) << p.match_bits, 0);
      match_map_ = StateMap(MATCH_BANDS * 2, u32(1) << (P22_BITS - 1 + COUNT_BITS));
    }
    n_inputs_ = (p.nn ? 3 : 0) + int(maps_.size()) + (p.match ? 2 : 0) + 1;  // + bias
    if (n_inputs_ > MAX_INPUTS) throw std::invalid_argument("too many context models");
    std::vector<i32> w(n_inputs_, p.nn ? 0 : 16384);
    if (p.nn) w[0] = 65536;
    mixer1_ = Mixer(n_inputs_, 32, p.mixer_lr, w);
    mixer2_ = Mixer(n_inputs_, 256, p.mixer_lr, w);
    if (p.nn) nn_apm_ = APM(*tb_, 65536);
    if (p.apm) {
      apm1_ = APM(*tb_, 256);
      apm2_ = APM(*tb_, 65536);
    }
  }

  const Tables& tables() const { return *tb_; }
  u64 position() const { return pos_; }
  size_t bytes() const {
    size_t n = ring_.size() + heads_.size() * sizeof(u64) + direct_.size();
    for (const auto& t : tables_) n += t.bytes();
    n += size_t(n_inputs_) * (32 + 256) * 4 + (prm_.nn ? 65536 * APM_CELLS * 4 : 0);
    return n + (prm_.apm ? (256 + 65536) * APM_CELLS * 4 : 0);
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
    const int nm = int(models_.size());
    const u32 c1 = u32(L.hist & 0xFF);
    // each context's hash for this byte, from the lane's own bytes; the first nibble's buckets
    // are fetched while the NN's sums are formed (a hint only: it changes no value)
    u32 ctx[MAX_INPUTS];
    for (int i = 0; i < nm; ++i) {
      const int o = models_[i].order;
      u64 bytes;
      switch (o) {
        case WORD: bytes = u64(L.word) << 8 | c1; break;
        case WORD_PAIR: bytes = u64(L.word) << 32 | L.prev_word; break;
        case COLUMN: bytes = column_context(L, b, at); break;
        case SPARSE: bytes = L.hist & 0xFFFF00; break;  // the 2 bytes before the last
        default: bytes = o >= 8 ? L.hist : L.hist & ((u64(1) << (8 * o)) - 1);
      }
      ctx[i] = hash64(bytes, u64(o));
      if (models_[i].table >= 0) tables_[models_[i].table].prefetch(bucket_hash(ctx[i], 1));
    }
    // the NN's subtree sums: tree[(1 << d) + v] = total of the byte values whose top d bits are v
    i64 tree[512];
    if (prm_.nn) {
      std::copy(freq, freq + 256, tree + 256);
      for (int d = 7; d >= 0; --d)
        for (int v = 0; v < (1 << d); ++v) tree[(1 << d) + v] = tree[(2 << d) + 2 * v] + tree[(2 << d) + 2 * v + 1];
    }
    // the match model's predicted byte, if its position is already known to the decoder
    int expect = -1;
    if (prm_.match && L.len > 0 && valid(L.ptr, at)) expect = ring_[L.ptr & ring_mask()];
    const int band = expect < 0 ? 0 : std::min<int>(L.len < 16 ? L.len : 12 + ilog2(L.len), MATCH_BANDS - 1);
    const int strength = std::min<int>(int(L.len) * 32, 2047);

    if (prm_.apm) apm2_.prefetch(1 | c1 << 8);
    if (prm_.nn) nn_apm_.prefetch(1 | c1 << 8);
    u8* node[MAX_INPUTS] = {};
    int c0 = 1;  // 1 followed by the bits of this byte so far
    int j = 1;   // the same within the current nibble: a bucket's node (1..15)
    for (int k = 0; k < 8; ++k) {
      if (k == 3)  // the second nibble's buckets are one of two: fetch both ahead (a hint only)
        for (int i = 0; i < nm; ++i)
          if (models_[i].table >= 0)
            for (int y = 0; y < 2; ++y) tables_[models_[i].table].prefetch(bucket_hash(ctx[i], c0 * 2 + y));
      if (k == 0 || k == 4) {  // a new nibble: each context's bucket (order 1: its direct row)
        j = 1;
        for (int i = 0; i < nm; ++i)
          node[i] = models_[i].table < 0 ? &direct_[c1 << 8] : tables_[models_[i].table].find(bucket_hash(ctx[i], c0));
      }
      if (k < 7)  // the order-1 APM rows of both possible next bits (a hint only)
        for (int y = 0; y < 2; ++y) {
          if (prm_.apm) apm2_.prefetch(size_t(c0 * 2 + y) | c1 << 8);
          if (prm_.nn) nn_apm_.prefetch(size_t(c0 * 2 + y) | c1 << 8);
        }
      i32 x[MAX_INPUTS];
      int n = 0;
      if (prm_.nn) {
        const i64 s0 = tree[2 * c0], s1 = tree[2 * c0 + 1];
        const int s = tb.st(clampi((s1 * 65536 + (s0 + s1) / 2) / (s0 + s1), 1, P16_MAX));
        x[n++] = s;
        x[n++] = clampi((i64(s) * std::abs(s)) >> 11, -ST_MAX, ST_MAX);
      }
      if (prm_.nn) x[n++] = tb.st(nn_apm_.p16(x[0], size_t(c0) | c1 << 8));
      u8* state[MAX_INPUTS];
      for (int i = 0; i < nm; ++i) {
        state[i] = node[i] + (models_[i].table < 0 ? c0 : j);  // order 1's row: by c0 (1..255)
        x[n++] = tb.st(maps_[i].p16(*state[i]));
      }
      size_t mcx = 0;  // the match map's context: 0 without a prediction
      if (prm_.match) {
        if (expect >= 0 && ((expect | 256) >> (8 - k)) == c0) {
          const int ebit = (expect >> (7 - k)) & 1;
          mcx = size_t(band * 2 + ebit);
          x[n++] = tb.st(match_map_.p16(mcx));
          x[n++] = ebit ? strength : -strength;
        } else {
          x[n++] = tb.st(match_map_.p16(0));
          x[n++] = 0;
        }
      }
      x[n++] = 256;  // bias
      // two weight sets, by bit position and match length, and by the partial byte
      const int set1 = k + 8 * (expect < 0 ? 0 : 1 + (band >= 16) + (band >= 28));
      const int x1 = mixer1_.dot(x, set1), x2 = mixer2_.dot(x, c0);
      const int xm = (x1 + x2) >> 1;
      const int pm = tb.sq(xm);
      int p = pm;
      if (prm_.apm) {
        const int a1 = apm1_.p16(xm, size_t(c0));
        const int pa = (pm + 3 * a1) >> 2;
        const int a2 = apm2_.p16(tb.st(pa), size_t(c0) | c1 << 8);
        p = (pa + 3 * a2) >> 2;
      }
      const int y = io(clampi(p, 1, P16_MAX), sym < 0 ? -1 : (sym >> (7 - k)) & 1);
      // learn, every component from its own prediction
      mixer1_.update(x, set1, y, tb.sq(x1));
      mixer2_.update(x, c0, y, tb.sq(x2));
      if (prm_.nn) nn_apm_.update(y);
      if (prm_.apm) {
        apm1_.update(y);
        apm2_.update(y);
      }
      for (int i = 0; i < nm; ++i) {
        maps_[i].update(tb, *state[i], y, COUNT_LIMIT_MAX);
        *state[i] = tb.history.next(*state[i], y);
      }
      if (prm_.match) match_map_.update(tb, mcx, y, COUNT_LIMIT_MAX);
      c0 = c0 * 2 + y;
      j = j * 2 + y;
    }
    const int c = c0 & 255;
    end_byte(lanes, b, at, c);
    return c;
  }

 private:
  static int ilog2(u32 x) { return 31 - __builtin_clz(x); }
  u64 ring_mask() const { return (u64(1) << prm_.history_bits) - 1; }

  // written in this block? (lane c has coded its first `coded` bytes)
  static bool known(u64 p, const Where& at) {
    const u64 o = p - at.base, lane = o / at.span;
    return lane < at.lanes && o % at.span < (*at.lane)[lane].coded;
  }
  // may the match model read ring position p: written (in an earlier block or this one's
  // known part) and not yet overwritten by a later position sharing its ring slot
  bool valid(u64 p, const Where& at) const {
    const u64 size = u64(1) << prm_.history_bits, end = at.base + at.span * at.lanes;
    if (p >= at.base && (p >= end || !known(p, at))) return false;
    const u64 later = p + size;
    if (later < at.base) return false;
    return !(later < end && known(later, at));
  }

  // the byte above (at this column in the lane's previous line), the column, and c1: for text
  // laid out in lines or records (logs, tables, code)
  u64 column_context(const Lane& L, size_t b, const Where& at) const {
    const u32 col = L.coded - L.line;
    const u64 pa = at.base + b * at.span + L.prev_line + col;
    const u64 above = L.prev_line + col < L.line && valid(pa, at) ? ring_[pa & ring_mask()] : 0;
    return above << 16 | u64(std::min<u32>(col, 255)) << 8 | (L.hist & 0xFF);
  }

  void end_byte(std::vector<Lane>& lanes, size_t b, const Where& at, int c) {
    Lane& L = lanes[b];
    const u64 pos = at.base + b * at.span + L.coded;
    L.hist = (L.hist << 8) | u64(c);
    const int lc = (c >= 'A' && c <= 'Z') ? c + 32 : c;
    if (lc >= 'a' && lc <= 'z') {
      L.word = hash32(L.word + u32(lc)) | 1u;
    } else if (L.word) {
      L.prev_word = L.word;
      L.word = 0;
    }
    ++L.coded;
    if (c == '\n') {
      L.prev_line = L.line;
      L.line = L.coded;
    }
    if (!ring_.empty()) ring_[pos & ring_mask()] = u8(c);
    if (!prm_.match) return;
    if (L.len > 0) {  // the match goes on if it predicted this byte from known history
      if (valid(L.ptr, at) && ring_[L.ptr & ring_mask()] == c) {
        L.len += L.len < 65535;
        ++L.ptr;
      } else {
        L.len = 0;
      }
    }
    if (L.coded < u32(prm_.match_min)) return;
    const u64 key = prm_.match_min >= 8 ? L.hist : L.hist & ((u64(1) << (8 * prm_.match_min)) - 1);
    u64& head = heads_[hash64(key, 17) >> (32 - prm_.match_bits)];
    if (L.len == 0 && head) {  // a candidate: verify its last match_min bytes against ours
      const u64 cand = head - 1;
      u32 n = 0;
      while (n < u32(prm_.match_min) && cand > n && valid(cand - 1 - n, at) &&
             ring_[(cand - 1 - n) & ring_mask()] == u8(L.hist >> (8 * n)))
        ++n;
      if (n == u32(prm_.match_min)) {
        L.len = n;
        L.ptr = cand;
      }
    }
    head = pos + 2;  // stores position + 1 of the next byte (0: empty)
  }

  Params prm_;
  std::shared_ptr<const Tables> tb_;
  // a context model: its order (1..8, or one of the kinds below) and hashed table (-1: direct)
  struct Model {
    int order, table;
  };
  static constexpr int WORD = 9, WORD_PAIR = 10, COLUMN = 11, SPARSE = 12;
  static u32 bucket_hash(u32 ctx, int c0) { return hash32(ctx + u32(c0) * 0x9E3779B1u); }
  std::vector<Model> models_;
  std::vector<BucketTable> tables_;
  std::vector<u8> direct_;  // order 1: c1 << 8 | c0 -> bit-history state
  std::vector<StateMap> maps_;
  StateMap match_map_;
  std::vector<u8> ring_;
  std::vector<u64> heads_;
  Mixer mixer1_, mixer2_;
  APM nn_apm_, apm1_, apm2_;
  int n_inputs_ = 0;
  u64 pos_ = 0;
};

// ----------------------------------------------------------------------------------------
// Per-block coders: lanes, validation of the NN rows, and the Python-facing calls.

class BlockCoder {
 protected:
  BlockCoder(std::shared_ptr<Stage> st, i64 lanes, i64 span) : st_(std::move(st)) {
    if (lanes < 1 || lanes > MAX_LANES || span < 1 || span > MAX_SPAN)
      throw std::invalid_argument("lanes must be in [1, 65536] and span in [1, 2**31]");
    lanes_.resize(size_t(lanes));
    at_ = Where{st_->position(), u64(span), u64(lanes), &lanes_};
  }
  // the k active lanes' rows, checked: a prefix of the lanes, each entry in [1, 2**30]
  const i64* rows(const torch::Tensor& freq, torch::Tensor& keep) {
    TORCH_CHECK(freq.dim() == 2 && freq.size(1) == 256, "freq must be [k, 256]");
    const i64 k = freq.size(0);
    TORCH_CHECK(k <= i64(lanes_.size()), "more rows than lanes");
    keep = freq.scalar_type() == torch::kInt64 && freq.is_contiguous() ? freq : freq.to(torch::kInt64).contiguous();
    const i64* f = keep.data_ptr<i64>();
    bool bad = false;
    for (i64 i = 0; i < k * 256; ++i) bad |= (f[i] < 1) | (f[i] > FREQ_MAX);
    TORCH_CHECK(!bad, "frequencies must be in [1, 2**30]");
    for (i64 b = 0; b < k; ++b)
      TORCH_CHECK(lanes_[size_t(b)].coded < at_.span, "lane ", b, " is already full");
    return f;
  }
  std::shared_ptr<Stage> st_;
  std::vector<Lane> lanes_;
  Where at_{};
};

class Encoder : public BlockCoder {
 public:
  Encoder(std::shared_ptr<Stage> st, i64 lanes, i64 span, bool measure)
      : BlockCoder(std::move(st), lanes, span), measure_(measure) {}
  void code(const torch::Tensor& freq, const torch::Tensor& symbols) {
    torch::Tensor keep;
    const i64* f = rows(freq, keep);
    const i64 k = freq.size(0);
    TORCH_CHECK(symbols.dim() == 1 && symbols.size(0) == k, "symbols must be [k]");
    const torch::Tensor s =
        symbols.scalar_type() == torch::kInt64 && symbols.is_contiguous() ? symbols : symbols.to(torch::kInt64).contiguous();
    const i64* sym = s.data_ptr<i64>();
    for (i64 b = 0; b < k; ++b) TORCH_CHECK(sym[b] >= 0 && sym[b] < 256, "symbols must be bytes");
    auto io = [this](int p, int y) {
      enc_.encode(y, p);
      if (measure_) bits_ -= std::log2(y ? p / 65536.0 : 1.0 - p / 65536.0);
      return y;
    };
    for (i64 b = 0; b < k; ++b) st_->code_byte(lanes_, size_t(b), at_, f + b * 256, int(sym[b]), io);
    st_->advance(u64(k));
  }
  py::bytes finish() {
    const std::vector<u8> out = enc_.finish();
    return py::bytes(reinterpret_cast<const char*>(out.data()), out.size());
  }
  double bits() const { return bits_; }

 private:
  RangeEncoder enc_;
  bool measure_;
  double bits_ = 0.0;  // measurement only: never read by the model
};

class Decoder : public BlockCoder {
 public:
  Decoder(std::shared_ptr<Stage> st, i64 lanes, i64 span, const py::bytes& payload)
      : BlockCoder(std::move(st), lanes, span), dec_(std::string(payload)) {}
  torch::Tensor code(const torch::Tensor& freq) {
    torch::Tensor keep;
    const i64* f = rows(freq, keep);
    const i64 k = freq.size(0);
    torch::Tensor out = torch::empty({k}, torch::kInt64);
    i64* o = out.data_ptr<i64>();
    auto io = [this](int p, int) { return dec_.decode(p); };
    for (i64 b = 0; b < k; ++b) o[b] = st_->code_byte(lanes_, size_t(b), at_, f + b * 256, -1, io);
    st_->advance(u64(k));
    return out;
  }

 private:
  RangeDecoder dec_;
};

// ----------------------------------------------------------------------------------------
// Single components for tests: each computes exactly what the stage computes.

u32 counter_update(const std::shared_ptr<Stage>& s, u32 cell, int y, int limit) {
  if (limit < 1 || limit > COUNT_LIMIT_MAX) throw std::invalid_argument("limit must be in [1, 1023]");
  s->tables().update(cell, y, limit);
  return cell;
}

// one mixer prediction and update: returns (p16, new weights)
py::tuple mixer_step(const std::shared_ptr<Stage>& s, std::vector<i32> w, const std::vector<i32>& x, int y, int lr) {
  if (w.size() != x.size() || x.empty() || x.size() > size_t(MAX_INPUTS)) throw std::invalid_argument("bad sizes");
  Mixer m(int(x.size()), 1, lr, w);
  const int p = s->tables().sq(m.dot(x.data(), 0));
  m.update(x.data(), 0, y, p);
  return py::make_tuple(p, m.weights());
}

// one APM prediction and update on a single context: returns (p16, new cells)
py::tuple apm_step(const std::shared_ptr<Stage>& s, const std::vector<i32>& cells, int x, int y) {
  if (cells.size() != size_t(APM_CELLS)) throw std::invalid_argument("an APM context has 33 cells");
  APM a(s->tables(), 1);
  a.cells() = cells;
  const int p = a.p16(x, 0);
  a.update(y);
  return py::make_tuple(p, a.cells());
}

std::vector<int> bit_history(const std::shared_ptr<Stage>& s, int state) {
  const BitHistory& h = s->tables().history;
  if (state < 0 || state >= h.states()) throw std::invalid_argument("no such state");
  return {h.n0(state), h.n1(state), h.next(state, 0), h.next(state, 1)};
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "shazip's adaptive context-mixing stage and binary arithmetic coder";
  py::class_<Stage, std::shared_ptr<Stage>>(m, "Stage")
      .def(py::init([](const std::vector<i64>& squash, int table_bits, int history_bits, int match_bits,
                       int match_min, int mixer_lr, const std::vector<int>& orders, bool word, bool column,
                       bool sparse, bool nn, bool match, bool apm) {
             return std::make_shared<Stage>(squash, Params{table_bits, history_bits, match_bits, match_min,
                                                           mixer_lr, orders, word, column, sparse, nn, match, apm});
           }))
      .def("snapshot", [](const Stage& s) { return std::make_shared<Stage>(s); })
      .def("restore", &Stage::restore)
      .def_property_readonly("position", &Stage::position)
      .def_property_readonly("bytes", &Stage::bytes)
      .def("squash", [](const Stage& s, int x) { return s.tables().sq(x); })
      .def("stretch", [](const Stage& s, int p) { return s.tables().st(p); });
  py::class_<Encoder>(m, "Encoder")
      .def(py::init<std::shared_ptr<Stage>, i64, i64, bool>())
      .def("code", &Encoder::code)
      .def("finish", &Encoder::finish)
      .def_property_readonly("bits", &Encoder::bits);
  py::class_<Decoder>(m, "Decoder")
      .def(py::init<std::shared_ptr<Stage>, i64, i64, const py::bytes&>())
      .def("code", &Decoder::code);
  m.def("counter_update", &counter_update);
  m.def("mixer_step", &mixer_step);
  m.def("apm_step", &apm_step);
  m.def("bit_history", &bit_history);
}
