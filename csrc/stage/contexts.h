// The context models' contexts: which models a stage has, in the order of their inputs, and the
// bytes each hashes for the next byte of a lane (the contract below says how). Every model
// is a hashed table of bit histories over its context (context_maps.h), order 1 a direct one.
//
// CONTRACT: the later context models' contexts, each named as in models.def (where its bit and
// the stage version that added it are); the rules every model keeps are atop stage.h.
//   FIELDS         context: the byte at the same offset of the same field in the lane's previous
//                  line (256 + byte; 0 if that field is absent or shorter there, or the decoder
//                  cannot know it yet), the field number, c1.
//   BRACKETS       outside a string, ( [ { < push and ) ] } > pop (at depth > 0); a '"' opens
//                  a string and one not after a '\' closes it. Context: the two innermost open
//                  brackets, min(depth, 15), inside a string, c1.
//   SHAPE          a byte's class: 0 digit, 1 lower case, 2 upper case, 3 >= 128, 4 + i for the
//                  i-th of " \n\t\"&'()*+,-./:;<=>?@[]_{|}", 31 the rest. Context: the last 6
//                  classes (5 bits each, the latest lowest) and the field number.
//   LOCAL_CTX      orders 3 and 6 with the lane number in the hash: the lane's own statistics.
//   MATCH_CTX      a context model after LOCAL_CTX's: the match's predicted byte e (of the second
//                  match model when it has one, else of the first), min(its length band, 15) and
//                  the last two bytes: hash of (256 + e) << 24 | band << 16 | c2 c1, or of c2 c1
//                  alone without a prediction (the prediction is the byte's, fixed at its start).
//                  And mixer 1 gets 96 weight sets: set1 + 32 * (1 + the first match model's
//                  expected bit) while its prediction agrees with the bits so far.
//   FIELD_VALUE    a context model after MATCH_CTX's: v = the hash of the current field's bytes
//                  (v = 0 after a newline or a separator, else v = hash32(v + byte) | 1), with
//                  the field number: hash of (v, or c1 while v = 0) << 8 | field.
//   FIELD_EQ       eq = every byte of the current field so far equalled its `above` (true at
//                  a line's or field's start; any other byte keeps it only if 256 + byte is its
//                  above). FIELDS's context gets eq << 28; mixer 4 has 256 sets, set4 + 128
//                  while eq; APM 1 has 256 * 16 contexts: c0 | eq << 8 | min(field, 7) << 9.
//   NUMBER         a number: after a digit outside a number, num_int = 1 (num_frac = 0, no point);
//                  a digit adds 1 to num_frac once the number has its point, else to num_int
//                  (each at most 15); a '.' gives a number without one its point; any other byte
//                  ends it (num_int = num_frac = 0, no point). Context: in a number (num_int >
//                  0), the hash of num_int << 32 | num_frac << 24 | point << 20 | c2 c1; else 0
//                  (order 0).
//   RECORD         words as for the word model (letters, case folded); word2 = the word before
//                  the previous word. Context: hash of hash32(prev_word + hash32(word2)) << 32 |
//                  (FIELD_VALUE's v, or c1 while v = 0; v is tracked for RECORD too).
//   PREDICTED      a context model after RECORD's: P = the recovering match's pointer while it has a
//                  predicted byte the decoder knows (src 1), else the first match model's (src 2),
//                  else LINE_MATCH's first matcher's (src 3); e = the byte at P (the predicted byte),
//                  e1 = the byte at P - 1 (0 if the decoder cannot know it). Context: hash of src << 48
//                  | e << 40 | e1 << 32 | c1 << 24 | min(the recovering match's len, 3) << 20 | num_int
//                  << 12 | num_frac << 4 | point; without a predicted byte 0 (order 0). How a value goes
//                  on where it left the earlier record's (a counter's digits after the one that grew).
//   LAST_NUMBER    a context model after CELL_LEFT's: hash of hash32(prev_word + last *
//                  0x9E3779B1) << 32 | (FIELD_VALUE's v, or c1 while v = 0; v is tracked for
//                  LAST_NUMBER too): a value by its key and the number before it (a car's
//                  horsepower by its displacement, a longitude by the latitude, a list's next item).
//   GROUPS         a context model after LAST_NUMBER's: a byte's group is '0' for a digit, 'a' for a
//                  lower-case letter, 'A' for an upper-case one, 128 for a byte >= 128, else the byte
//                  itself. The lane keeps its last 8 groups (u64, the latest in the low byte): after a
//                  byte whose group is '0', 'a' or 'A' and equals the latest, nothing is added and
//                  repeat = 1; after any other byte its group is shifted in and repeat = 0. Context:
//                  hash of groups ^ repeat: the shape of a line or a statement whatever the lengths
//                  of its words and numbers (`"key": 12,` and `"other_key": 3405,` alike). With RUNS
//                  it has a run table and input as every hashed model.
//   GROUP_WORD     a context model after GROUPS's: hash of g4 << 32 | the current word's hash (0 outside a
//                  word): a word by the shape of what led to it (`this.x =`, `"key": [`).
//   TOKENS         a token is a run of letters, digits, '_', '$' and bytes >= 128; a space, tab, CR or LF
//                  ends one, any other byte ends one and is a token of its own. The lane keeps the hash of
//                  the current token (t = 0 outside one; on a token byte c, t = hash32(t + c + 1) | 1) and
//                  the last 3 tokens ended (a token's t, or 256 + the byte for a one-byte token; the latest
//                  first, 0 while none). Contexts: hash of tok1 << 32 | t; of hash32(tok2 + tok1 *
//                  0x9E3779B1) << 32 | t; of hash32(tok3 + hash32(tok2 + tok1 * 0x9E3779B1)) << 32 | t: the
//                  next token by the tokens before it, whatever their lengths (`this.options.` `var x =`).
//   INDIRECT       three tables shared by the lanes of the last 2 bytes (u16, the latest in the low byte)
//                  that followed each order-1 context (256 entries), order-2 context (65536) and hashed
//                  order-3 context (2**(table_bits - 1) entries, index hash32(c3 c2 c1) >> (33 -
//                  table_bits)); after byte c of a lane they become e << 8 | c for the lane's contexts
//                  before c. Contexts: hash of i1 << 8 | c1, of i2 << 16 | c2 c1, of i3 << 24 | c3 c2 c1
//                  (i: the entry of that order's context): what followed this context the last times.
//   PLACES         context: in a number (num_int > 0), the hash of num_int << 32 | num_frac << 24 | point
//                  << 20 | c1; else 0 (order 0): a digit by its place and the digit before it alone.
//   CELL_UP        context: hash of up << 24 | up_eq << 20 | cell << 12 | min(o, 15), o the byte's offset
//                  in its cell (up and up_eq as the lane's cells form them before the byte): a sorted
//                  column's next code, a repeated value, by its place in the cell.
//   THIS_TOKEN     context: the hash of t (the current token's hash) while in a token, else of 2**40 |
//                  tok1 (the last token ended): what ends an identifier, what follows an operator, by
//                  the token alone, whatever came before it.
//   NEST           context: the hash of (stack & 255) << 40 | min(depth, 15) << 32 | (t while in a token,
//                  else tok1): the token by the bracket it is in (an argument list, an array, a block).
#pragma once

#include <algorithm>
#include <array>
#include <vector>

#include "common.h"
#include "stage/big_vector.h"
#include "stage/hash.h"
#include "stage/history.h"
#include "stage/lane.h"
#include "stage/matches.h"
#include "stage/params.h"

namespace shazip::stage {

constexpr u32 UP_OFFSETS = 16;  // CELL_UP: a byte's offset in its cell is counted to at most 15

// A context model's kind: 1..8 the orders, then version 1's others, then the later models' in
// models.def's order (a model's `contexts`, numbered on from 13). The number seeds the context's
// hash: it is part of the format and never changes (models.def only grows at its end).
#define SHAZIP_CONTEXTS(...) __VA_ARGS__
enum Context : int {
  WORD = 9, WORD_PAIR = 10, COLUMN = 11, SPARSE = 12,
#define STAGE_MODEL(MASK, name, version, needs, uses, contexts, about) SHAZIP_CONTEXTS contexts
#include "stage/models.def"
#undef STAGE_MODEL
};
static_assert(FIELD == 13 && NEST_CTX == 36, "a context's number seeds its hash: models.def is never reordered");

// The models after version 1's, in the order of their inputs: each model's contexts (models.def's)
struct ContextsOf {
  Extra model;
  std::vector<Context> contexts;
};
inline const std::vector<ContextsOf>& extra_contexts() {
  static const std::vector<ContextsOf> list = {
#define STAGE_MODEL(MASK, name, version, needs, uses, contexts, about) {MASK, {SHAZIP_CONTEXTS contexts}},
#include "stage/models.def"
#undef STAGE_MODEL
  };
  return list;
}
#undef SHAZIP_CONTEXTS

// A stage's context models in the order of their inputs: the orders, the word model's two, the
// column's, the sparse one, then the later models' (extra_contexts)
inline std::vector<int> context_models(const Params& p) {
  std::vector<int> kinds = p.orders;
  if (p.word) kinds.insert(kinds.end(), {WORD, WORD_PAIR});
  if (p.column) kinds.push_back(COLUMN);
  if (p.sparse) kinds.push_back(SPARSE);
  for (const ContextsOf& m : extra_contexts())
    if (p.has(m.model)) kinds.insert(kinds.end(), m.contexts.begin(), m.contexts.end());
  return kinds;
}

// INDIRECT's tables, shared by the lanes: the last 2 bytes (the latest low) that followed each
// order-1, order-2 and hashed order-3 context
class Indirect {
 public:
  Indirect() = default;
  explicit Indirect(int table_bits) : o1_(256), o2_(65536), o3_(size_t(1) << (table_bits - 1)), shift_(33 - table_bits) {}
  // the entries of a lane's contexts (its last bytes `hist`, the latest low)
  std::array<u32, 3> entries(u64 hist) const { return {o1_[hist & 0xFF], o2_[hist & 0xFFFF], o3_[index3(hist)]}; }
  // byte c followed the contexts of `hist`
  void update(u64 hist, int c) {
    for (u16* e : {&o1_[hist & 0xFF], &o2_[hist & 0xFFFF], &o3_[index3(hist)]}) *e = u16(*e << 8 | c);
  }
  size_t bytes() const { return (o1_.size() + o2_.size() + o3_.size()) * sizeof(u16); }

 private:
  size_t index3(u64 hist) const { return hash32(u32(hist & 0xFFFFFF)) >> shift_; }
  BigVector<u16> o1_, o2_, o3_;
  int shift_ = 32;
};

// PLACES's context bytes: in a number, its places so far and the last byte; elsewhere 0 (order 0)
inline u64 places_context(const Lane& L) {
  return L.num_int ? u64(L.num_int) << 32 | u64(L.num_frac) << 24 | u64(L.num_point) << 20 | (L.hist & 0xFF) : 0;
}
// THIS_TOKEN's context bytes: the current token, or between tokens 2**40 | the last one
inline u64 this_token_context(const Lane& L) { return L.token ? u64(L.token) : u64(1) << 40 | L.tokens[0]; }
// NEST's context bytes: the innermost open bracket, min(depth, 15) and the current token (or the last)
inline u64 nest_context(const Lane& L) {
  return (L.stack & 0xFF) << 40 | u64(std::min<u32>(L.depth, 15)) << 32 | (L.token ? L.token : L.tokens[0]);
}
// CELL_UP's context bytes (after cells_before): the byte above, whether the cell so far repeats
// the one above, the cell and the byte's offset in it
inline u64 up_context(const Lane& L) {
  return u64(L.up) << 24 | u64(L.up_eq) << 20 | u64(L.cell) << 12 |
         std::min<u32>(L.coded - L.cell_start[L.cell], UP_OFFSETS - 1);
}
// COLUMN's context bytes: the byte above (at this column in the lane's previous line), the column,
// and c1: for text laid out in lines or records (logs, tables, code)
inline u64 column_context(const Lane& L, size_t b, const Where& at, const History& h) {
  const u32 col = L.coded - L.line;
  const u64 pa = at.base + b * at.span + L.prev_line + col;
  const u64 above = L.prev_line + col < L.line && h.valid(pa, at) ? u64(h[pa]) : 0;
  return above << 16 | u64(std::min<u32>(col, 255)) << 8 | (L.hist & 0xFF);
}
// PREDICTED's context bytes (the contract says how): from the recovering match's, the first match
// model's or the first line matcher's predicted byte, the first there is
inline u64 predicted_context(const Lane& L, const Where& at, const History& h, const Predictions& e) {
  u64 src, ptr;
  int byte;
  if (e.rexpect >= 0) src = 1, ptr = L.recover.ptr, byte = e.rexpect;
  else if (e.expect[0] >= 0) src = 2, ptr = L.match[0].ptr, byte = e.expect[0];
  else if (e.lexpect[0] >= 0) src = 3, ptr = L.line_match[0].ptr, byte = e.lexpect[0];
  else return 0;
  const u64 e1 = h.valid(ptr - 1, at) ? u64(h[ptr - 1]) : 0;
  return src << 48 | u64(byte) << 40 | e1 << 32 | (L.hist & 0xFF) << 24 | u64(std::min<u32>(L.recover.len, 3)) << 20 |
         u64(L.num_int) << 12 | u64(L.num_frac) << 4 | u64(L.num_point);
}

// What the contexts of lane b's next byte read beyond the lane: its place in the block, the
// history, the matches' predictions, INDIRECT's entries
struct Looking {
  size_t b;
  const Where& at;
  const History& history;
  const Predictions& predicted;
  int matchers;
  std::array<u32, 3> indirect;
};

// The bytes a context model of kind `o` hashes for the lane's next byte (FIELD_EQ: FIELD's with
// field_eq)
inline u64 context_bytes(int o, const Lane& L, const Looking& to, bool field_eq) {
  const u32 c1 = u32(L.hist & 0xFF);
  const Predictions& e = to.predicted;
  switch (o) {
    case WORD: return u64(L.word) << 8 | c1;
    case WORD_PAIR: return u64(L.word) << 32 | L.prev_word;
    case COLUMN: return column_context(L, to.b, to.at, to.history);
    case SPARSE: return L.hist & 0xFFFF00;  // the 2 bytes before the last
    case FIELD: return u64(L.above) << 16 | u64(L.field) << 8 | c1 | (field_eq ? u64(L.field_eq) << 28 : 0);
    case VALUE: return u64(L.value ? L.value : c1) << 8 | L.field;
    case NUMBER_CTX:  // in a number: its places so far and the last 2 bytes; elsewhere order 0
      return L.num_int ? u64(L.num_int) << 32 | u64(L.num_frac) << 24 | u64(L.num_point) << 20 | (L.hist & 0xFFFF) : 0;
    case RECORD_CTX: return u64(hash32(L.prev_word + hash32(L.word2))) << 32 | (L.value ? L.value : c1);
    case PREDICTED_CTX: return predicted_context(L, to.at, to.history, e);
    case LAST_NUMBER_CTX: return u64(hash32(L.prev_word + L.last_num * 0x9E3779B1u)) << 32 | (L.value ? L.value : c1);
    case GROUPS_CTX: return L.groups ^ u64(L.group_repeat);
    case GROUP_WORD_CTX:  // the word by the last 4 groups
      return u64(hash32(u32(L.groups) + u32(L.group_repeat) * 0x9E3779B1u)) << 32 | L.word;
    case TOKEN1: return u64(L.tokens[0]) << 32 | L.token;
    case TOKEN2: return u64(hash32(L.tokens[1] + L.tokens[0] * 0x9E3779B1u)) << 32 | L.token;
    case TOKEN3: return u64(hash32(L.tokens[2] + hash32(L.tokens[1] + L.tokens[0] * 0x9E3779B1u))) << 32 | L.token;
    case INDIRECT1: return u64(to.indirect[0]) << 8 | c1;
    case INDIRECT2: return u64(to.indirect[1]) << 16 | (L.hist & 0xFFFF);
    case INDIRECT3: return u64(to.indirect[2]) << 24 | (L.hist & 0xFFFFFF);
    case PLACES_CTX: return places_context(L);
    case UP_CTX: return up_context(L);
    case THIS_TOKEN_CTX: return this_token_context(L);
    case NEST_CTX: return nest_context(L);
    case LEFT_CTX: return u64(L.left) << 24 | u64(L.left_eq) << 20 | u64(L.cell) << 8 | c1;
    case SHAPES: return u64(L.shape & 0x3FFFFFFF) << 8 | L.field;
    case LOCAL3: return u64(to.b) << 24 | (L.hist & 0xFFFFFF);
    case LOCAL6: return u64(to.b) << 48 | (L.hist & 0xFFFFFFFFFFFF);
    case MATCHED: {  // what followed the predicted byte
      const int m = to.matchers > 1 && e.expect[1] >= 0 ? 1 : 0;  // none without the match model: expect[0] < 0
      u64 bytes = L.hist & 0xFFFF;
      if (e.expect[m] >= 0) bytes |= u64(256 + e.expect[m]) << 24 | u64(std::min(e.band[m], 15)) << 16;
      else if (e.lexpect[0] >= 0) bytes |= u64(512 + e.lexpect[0]) << 24;  // LINE_MATCH's, this line's
      return bytes;
    }
    case BRACKET: return (L.stack & 0xFFFF) << 24 | u64(std::min<u32>(L.depth, 15)) << 16 | u64(L.quoted) << 8 | c1;
    default: return o >= 8 ? L.hist : L.hist & ((u64(1) << (8 * o)) - 1);
  }
}


}  // namespace shazip::stage
