// The stage's mixers, each named by what selects its weight set: every one mixes the same inputs,
// and (LAYERED) a final mixer mixes their outputs; without LAYERED the first two are averaged.
// The list is made once from the parameters; per bit each mixer's set is chosen, then every
// mixer predicts and learns (the contract below says how).
//
// CONTRACT: the later mixers and how they learn, each named as in models.def (where its bit and
// the stage version that added it are); the rules every model keeps are atop stage.h.
// MATCH_CTX's and FIELD_EQ's rules (contexts.h) also choose sets of mixers 1 and 4.
//   LAYERED        mixers 3 (a weight set per c1) and 4 (per min(seen, 15) * 8 + k, seen = the
//                  context models whose current bit-history state is not 0); x_mix = a final
//                  mixer of (x_1, x_2, x_3, x_4), a set per bit position k, initial weights 16384,
//                  in place of floor((x_1 + x_2) / 2).
//   WARM           a mixer's rate for a set updated n times before: LR + floor(LR * 3 * 1024 /
//                  (1024 + n)) (n need not count past the boost's end).
//   DIGITS         (needs LAYERED) r = the digits ending at c1 (0 after any other byte), counted
//                  to at most 16; fields as for FIELDS. While r > 0, mixer 3 takes its
//                  weight set by the number's shape instead of c1: 256 + (r - 1) * 8 + k + 128 *
//                  min(field, 7), of 256 + 1024 sets (the leading digits of a count or a time
//                  follow other rules than its last ones, and each field's numbers their own).
//   CLASS_MIX      (needs LAYERED) a fifth mixer over the same inputs, a weight set per (class of c1,
//                  class of c2, bit position): (class(c1) * 32 + class(c2)) * 8 + k, classes as
//                  SHAPE's; its output is the final mixer's next input.
//   STATE_MIX      (needs LAYERED) a sixth, a set per (min(field, 15) * 16 + min(depth, 3) * 4 +
//                  inside a string * 2 + in a number) * 8 + k; the final mixer's next input.
//   final mixer    inputs x_1 .. x_4, then CLASS_MIX's and STATE_MIX's (those present); initial
//                  weights floor(65536 / its inputs) each (16384 for 4).
//   GROUP_MIX      (needs LAYERED) a seventh mixer over the same inputs, a weight set per (g3 >> 20) * 8 +
//                  k; its output is the final mixer's next input, after STATE_MIX's.
//   SLOW_FINAL     (needs LAYERED) the final mixer's LR is max(floor(mixer_lr / 4), 1), the other mixers'
//                  mixer_lr (WARM's boost follows each mixer's own LR): it weighs a few mixers' outputs,
//                  which the full rate makes it chase from bit to bit.
//   SEED_SETS      (needs WARM, whose update counts tell a set never updated) at each bit, before the dot
//                  products: if mixer 1's set set1 has never been updated and is not set k, its weights
//                  become those of its set k (no match state); then, in the order mixer 2, 3, 4, CLASS_MIX's,
//                  STATE_MIX's, GROUP_MIX's, ORDER_MIX's two, PLACE_MIX's, MATCH_MIX's, each present mixer's
//                  set for this bit that has never been updated takes mixer 1's set1 weights. A weight set
//                  met for the first time (a partial byte, a pair of classes, an order-2 context) starts
//                  from weights that have learnt the file so far, not from the NN's alone.
//   ORDER_MIX      (needs LAYERED) two more mixers over the same inputs: sets c1 << 8 | c0 (65536) and
//                  hash32(c2 c1 * 0x9E3779B1 + c0 * 0x3C6EF372) >> 16 (65536; the products wrap as u32);
//                  their outputs are the final mixer's next two inputs, after GROUP_MIX's.
//   PLACE_MIX      (needs LAYERED) a mixer over the same inputs, sets min(field, 15) << 12 | min(column, 15) << 8
//                  | c0 (65536; fields as for FIELDS, tracked for it too; column: the lane's bytes since its line
//                  began): an indentation, a record's field, by where the byte is; its output the final
//                  mixer's next input, after ORDER_MIX's.
//   MATCH_MIX      (needs LAYERED and the match model) a mixer over the same inputs, sets (e + 1) << 8 | c0, e the
//                  first match model's predicted byte, or c0 without one (257 * 256): how far to trust a
//                  match, by what it predicts; its output the final mixer's next input.
//   NN_FINAL       (needs LAYERED and the NN) the NN's first input (its stretch) as the final mixer's last
//                  input. The final mixer's initial weights stay floor(65536 / its inputs) each.
#pragma once

#include <algorithm>
#include <vector>

#include "common.h"
#include "kernels/kernels.h"
#include "stage/hash.h"
#include "stage/lane.h"
#include "stage/mixer.h"
#include "stage/params.h"
#include "stage/tables.h"

namespace shazip::stage {

constexpr int WARM_UPDATES = 1024;  // WARM: a set's rate is 4x at first, 2.5x after this many updates
constexpr u32 DIGIT_FIELDS = 8;  // DIGITS: the last byte's sets tell fields 0..6 and 7 or later apart
constexpr u32 CLASS_SETS = 32;  // CLASS_MIX: byte_class's classes
constexpr u32 STATE_SETS = FIELDS_MAX * 16;  // STATE_MIX: by the field (16), depth (4), quoting and number
constexpr int GROUP_SET_BITS = 12;  // GROUP_MIX: its weight sets (per bit position) by a hash of the last 3 groups
constexpr u32 GROUP_SETS = u32(1) << GROUP_SET_BITS;
constexpr int ORDER_SET_BITS = 16;  // ORDER_MIX: each mixer's sets (c1 and c0; a hash of c2 c1 and c0)
constexpr u32 ORDER_SETS = u32(1) << ORDER_SET_BITS;
constexpr u32 PLACE_MAX = 16;  // PLACE_MIX: fields 0..14 and 15 or later, columns 0..14 and 15 or later
constexpr u32 PLACE_SETS = PLACE_MAX * PLACE_MAX * 256, PREDICTED_SETS = 257 * 256;  // PLACE_MIX's, MATCH_MIX's

// What selects a mixer's weight set, in the order of the final mixer's inputs
enum class By : u8 {
  MATCH,      // the bit position and the match's length band (MATCH_CTX: and its expected bit)
  PARTIAL,    // the bits so far, c0
  LAST_BYTE,  // c1 (DIGITS: within a number, its digits so far and the field)
  SEEN,       // how many context models know their context, the bit position (FIELD_EQ: and field_eq)
  CLASSES,    // CLASS_MIX: the classes of the last two bytes, the bit position
  STATE,      // STATE_MIX: the field, the brackets' depth, quoting, being in a number, the bit position
  GROUPS,     // GROUP_MIX: the last 3 groups, the bit position
  ORDER1,     // ORDER_MIX: c1 and c0
  ORDER2,     // ORDER_MIX: a hash of c2 c1 and c0
  PLACE,      // PLACE_MIX: the field, the column and c0
  PREDICTED,  // MATCH_MIX: the first match model's predicted byte and c0
};
constexpr int MAX_MIXERS = int(By::PREDICTED) + 1;  // one mixer per By at most
constexpr int FINAL_INPUTS = MAX_MIXERS + 1;  // theirs and NN_FINAL's input

// LAST_BYTE's weight set at bit k: by c1, or (DIGITS) within a number by its digits so far and field
inline int last_byte_set(const Lane& L, int k, bool digits) {
  if (!digits || L.digits == 0) return int(L.hist & 0xFF);
  return int(256 + (L.digits - 1) * 8 + u32(k) + 128 * std::min(L.field, DIGIT_FIELDS - 1));
}
// CLASSES's weight set at bit k
inline int class_set(const Lane& L, int k) {
  return int(byte_class(int(L.hist & 255)) * CLASS_SETS + byte_class(int(L.hist >> 8 & 255))) * 8 + k;
}
// STATE's weight set at bit k
inline int state_set(const Lane& L, int k) {
  return int(std::min<u32>(L.field, FIELDS_MAX - 1) * 16 + std::min<u32>(L.depth, 3) * 4 + u32(L.quoted) * 2 +
             u32(L.num_int > 0)) * 8 + k;
}
// GROUPS's weight set at bit k
inline int group_set(const Lane& L, int k) {
  return int(hash32(u32(L.groups & 0xFFFFFF) + u32(L.group_repeat)) >> (32 - GROUP_SET_BITS)) * 8 + k;
}
// ORDER1's and ORDER2's weight sets, c0 the bits so far
inline int order1_set(const Lane& L, int c0) { return int(L.hist & 0xFF) << 8 | c0; }
inline int order2_set(const Lane& L, int c0) {
  return int(hash32(u32(L.hist & 0xFFFF) * 0x9E3779B1u + u32(c0) * 0x3C6EF372u) >> (32 - ORDER_SET_BITS));
}
// PLACE's weight set: the column is the lane's bytes since its line began
inline int place_set(const Lane& L, int c0) {
  const u32 column = std::min<u32>(L.coded - L.line, PLACE_MAX - 1);
  return int(std::min<u32>(L.field, PLACE_MAX - 1) << 12 | column << 8 | u32(c0));
}
// PREDICTED's weight set: e the first match model's predicted byte (-1: none)
inline int predicted_set(int e, int c0) { return (e < 0 ? 0 : (e + 1) << 8) | c0; }

// What the bit's weight sets are chosen by, beyond the lane
struct BitFacts {
  int k, c0;
  int seen;      // context models that know their context's node
  int expect;    // the first match model's predicted byte (-1: none)
  int band;      // ... its length band
  size_t match;  // ... its map's context at this bit (0: no prediction that agrees)
};

class Mixers {
 public:
  Mixers() = default;
  Mixers(const Params& p, const kernels::Kernels& k, int inputs)
      : kernels_(&k), inputs_(inputs), layered_(p.has(LAYERED)), match_ctx_(p.has(MATCH_CTX)), digits_(p.has(DIGITS)),
        field_eq_(p.has(FIELD_EQ)), seed_(p.has(SEED_SETS)), nn_final_(p.has(NN_FINAL)) {
    std::vector<i32> w(size_t(inputs), p.nn ? 0 : 16384);
    if (p.nn) w[0] = 65536;
    const int warm = p.has(WARM) ? WARM_UPDATES : 0;
    const auto add = [&](By by, size_t sets) { list_.push_back({by, Mixer(k, inputs, int(sets), p.mixer_lr, w, warm)}); };
    add(By::MATCH, match_ctx_ ? 96 : 32);
    add(By::PARTIAL, 256);
    if (!layered_) return;
    add(By::LAST_BYTE, digits_ ? 256 + DIGITS_MAX * 8 * DIGIT_FIELDS : 256);
    add(By::SEEN, 16 * 8 * (field_eq_ ? 2 : 1));
    if (p.has(CLASS_MIX)) add(By::CLASSES, CLASS_SETS * CLASS_SETS * 8);
    if (p.has(STATE_MIX)) add(By::STATE, STATE_SETS * 8);
    if (p.has(GROUP_MIX)) add(By::GROUPS, GROUP_SETS * 8);
    if (p.has(ORDER_MIX)) add(By::ORDER1, ORDER_SETS), add(By::ORDER2, ORDER_SETS);
    if (p.has(PLACE_MIX)) add(By::PLACE, PLACE_SETS);
    if (p.has(MATCH_MIX)) add(By::PREDICTED, PREDICTED_SETS);
    const int n = int(list_.size()) + nn_final_;
    final_ = Mixer(k, n, 8, final_rate(p), std::vector<i32>(size_t(n), 65536 / n), warm);
  }
  // the final mixer's rate: SLOW_FINAL's quarter of the mixers' (at least 1), else theirs
  static int final_rate(const Params& p) { return p.has(SLOW_FINAL) ? std::max(p.mixer_lr / 4, 1) : p.mixer_lr; }
  size_t bytes() const {
    size_t n = final_.bytes();
    for (const Layer& m : list_) n += m.mixer.bytes();
    return n;
  }

  // the byte's sets by the lane's last bytes and state (fixed for the byte, but the bit position)
  void begin_byte(const Lane& L) {
    for (Layer& m : list_)
      m.base = m.by == By::CLASSES ? class_set(L, 0) : m.by == By::STATE ? state_set(L, 0)
               : m.by == By::GROUPS ? group_set(L, 0) : 0;
  }
  // x_mix of inputs x at bit f.k; nn: the NN's stretch (NN_FINAL's input)
  int mix(const Lane& L, const BitFacts& f, const i32* x, int nn) {
    for (Layer& m : list_) m.set = set_of(m, L, f);
    if (seed_) {  // SEED_SETS: mixer MATCH's set, if new, from its set for no match; then each other's from it
      Mixer& first = list_[0].mixer;
      first.seed(list_[0].set, first.set_weights(f.k));
      const i32* from = first.set_weights(list_[0].set);
      for (size_t i = 1; i < list_.size(); ++i) list_[i].mixer.seed(list_[i].set, from);
    }
    const i32* rows[MAX_MIXERS];
    i64 sums[MAX_MIXERS];
    const size_t nl = list_.size();
    for (size_t i = 0; i < nl; ++i) rows[i] = list_[i].mixer.set_weights(list_[i].set);
    kernels_->mixer_dot(rows, i64(nl), x, inputs_, sums);
    for (size_t i = 0; i < nl; ++i) list_[i].out = Mixer::output(sums[i]);
    if (!layered_) return (list_[0].out + list_[1].out) >> 1;
    int nf = 0;
    for (const Layer& m : list_) xf_[nf++] = m.out;
    if (nn_final_) xf_[nf++] = nn;
    k_ = f.k;
    return xm_ = final_.dot(xf_, f.k);
  }
  // every mixer learns bit y from its own prediction
  void update(const Tables& tb, const i32* x, int y) {
    i32* rows[MAX_MIXERS];
    i64 errors[MAX_MIXERS];
    const size_t nl = list_.size();
    for (size_t i = 0; i < nl; ++i) {
      Layer& m = list_[i];
      rows[i] = m.mixer.set_row(m.set);
      errors[i] = m.mixer.error(m.set, y, tb.sq(m.out));
    }
    kernels_->mixer_train(rows, errors, i64(nl), x, inputs_);
    if (layered_) final_.update(xf_, k_, y, tb.sq(xm_));
  }
  // the rows at bit k, partial byte c0, of every mixer whose set the lane and c0 tell (all but MATCH's
  // and SEEN's, which wait for the bit's inputs): a hint only, fetched while the bit before updates
  // its models (after begin_byte, which sets the byte's sets)
  void prefetch(const Lane& L, int k, int c0, int expect) const {
    const BitFacts f{k, c0, 0, expect, 0, 0};
    for (const Layer& m : list_)
      if (m.by != By::MATCH && m.by != By::SEEN) m.mixer.prefetch(set_of(m, L, f));
  }

 private:
  struct Layer {
    By by;
    Mixer mixer;
    int base = 0, set = 0, out = 0;  // the byte's set but the bit position; the bit's set; its x_mix
  };
  int set_of(const Layer& m, const Lane& L, const BitFacts& f) const {
    switch (m.by) {
      case By::MATCH: {
        int set = f.k + 8 * (f.expect < 0 ? 0 : 1 + (f.band >= 16) + (f.band >= 28));
        if (match_ctx_ && f.match != 0) set += 32 * (1 + int(f.match & 1));  // by the expected bit
        return set;
      }
      case By::PARTIAL: return f.c0;
      case By::LAST_BYTE: return last_byte_set(L, f.k, digits_);
      case By::SEEN: return std::min(f.seen, 15) * 8 + f.k + (field_eq_ && L.field_eq ? 128 : 0);
      case By::CLASSES: case By::STATE: case By::GROUPS: return m.base + f.k;
      case By::ORDER1: return order1_set(L, f.c0);
      case By::ORDER2: return order2_set(L, f.c0);
      case By::PLACE: return place_set(L, f.c0);
      case By::PREDICTED: return predicted_set(f.expect, f.c0);
    }
    return 0;
  }
  const kernels::Kernels* kernels_ = nullptr;
  int inputs_ = 0;  // every mixer's but the final one's
  bool layered_ = false, match_ctx_ = false, digits_ = false, field_eq_ = false, seed_ = false, nn_final_ = false;
  std::vector<Layer> list_;
  Mixer final_;
  i32 xf_[FINAL_INPUTS] = {};
  int k_ = 0, xm_ = 0;
};


}  // namespace shazip::stage
