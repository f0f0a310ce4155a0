// One lane's state within a block (its last bytes, words, lines, fields, cells, numbers, brackets,
// groups, tokens and matches) and how a byte moves it on: what the context models read.
//
// CONTRACT: what a lane tracks for the later models (each tracked only where a model reads it),
// named as in models.def (where each model's bit and stage version are); the rules every model
// keeps are atop stage.h.
//   fields         a line's field k + 1 starts after its k-th separator byte (space, tab and
//                  , ; | : = " ' ( ) [ ] { } < >; a space right after a separator starts none),
//                  at most 16 fields (the last takes the rest); tracked for FIELDS or SHAPE.
//   fields         tracked also for FIELD_VALUE and FIELD_EQ; `above` = FIELDS's context byte
//                  (256 + the byte above in the field, or 0), formed before each byte.
//   number         tracked also for PREDICTED and STATE_MIX; fields also for STATE_MIX, brackets
//                  and quoting (as for BRACKETS) also for STATE_MIX.
//   cells          a line's cell k + 1 starts after its k-th ',', '\t', ';' or '|' (the columns of a
//                  table, whatever spaces their values hold), at most 16 cells (the last takes the
//                  rest). Before each byte, at offset o of its cell: left = 256 + the byte at offset o
//                  of the previous cell in this line while o is within that cell (its separator
//                  included), else 0 (also in cell 0, and when the decoder cannot know the byte); up
//                  = 256 + the byte at offset o of this cell in the lane's previous line while o is
//                  within it (its separator or newline included), else 0. left_eq (up_eq): every
//                  byte of the cell so far equalled its left (up); both true at a cell's start.
//   number         tracked also for LAST_NUMBER; and lead = the first two digits of a number's
//                  integer part (its first digit d: lead = d; its second: lead = lead * 10 + d);
//                  when a byte ends a number (num_int > 0), last = num_int << 8 | lead.
//   groups         tracked (as for GROUPS) also for GROUP_WORD, GROUP_MIX and GROUP_APM; with r = repeat:
//                  g4 = hash32(u32(groups) + r * 0x9E3779B1) (the last 4 groups), g3 = hash32(u32(groups &
//                  0xFFFFFF) + r) (the last 3), and at bit k g2 = hash32(u32(groups & 0xFFFF) * 0x9E3779B1
//                  + c0 + r * 77) (the last 2 and the bits so far).
//   number         tracked (as for NUMBER) also for PLACES; cells (as for CELL_LEFT) also for CELL_UP;
//                  tokens (as for TOKENS) also for THIS_TOKEN and NEST; brackets (as for BRACKETS) also
//                  for NEST.
#pragma once

#include <algorithm>
#include <array>
#include <vector>

#include "common.h"
#include "stage/hash.h"
#include "stage/params.h"

namespace shazip::stage {

constexpr int FIELDS_MAX = 16;  // fields of a line tracked by the FIELDS model
constexpr u32 DIGITS_MAX = 16;  // DIGITS: a run of digits is counted up to this
constexpr int LINE_MATCHERS = 2;  // LINE_MATCH: one takes candidates in this line, one also in the line before
constexpr u32 NUM_PLACES = 15;  // NUMBER: a number's digits before and after its point are counted to at most this
constexpr u32 CELLS_MAX = 16;  // CELL_*: cells of a line tracked (the last takes the rest)
constexpr int OFFSETS = 20;  // FLOAT_TAIL: the doubles this many ulps either side of the nearest...
constexpr int CANDIDATES = 2 * OFFSETS + 1;  // ... are its candidates
constexpr u32 STEP_NUMBERS = 16;  // LINE_STEP: the numbers of a line kept
constexpr u32 ECHO_NUMBERS = 64;  // NUMBER_ECHO: the lane's last numbers kept...
constexpr u32 ECHO_DIGITS = 24;  // ... the first this many digits of each

// One lane's context within a block: its own previous bytes, words, lines and match
struct Lane {
  u64 hist = 0;       // last 8 bytes, most recent in the low byte
  u32 word = 0;       // hash of the current alphabetic word (0 outside words)
  u32 prev_word = 0;  // hash of the word before it
  u32 word2 = 0;      // RECORD: hash of the word before prev_word
  u32 line = 0;       // lane offset where the current line starts (after a '\n')
  u32 prev_line = 0;  // ... and where the previous one started
  struct Match {
    u64 ptr = 0;  // global position of the predicted byte (valid while len > 0)
    u32 len = 0;  // match length in bytes (0: none)
  };
  std::array<Match, 2> match{};  // the match models' (the second: LOCAL_MATCH)
  // RECOVER: a match that mispredicted, followed on as if the byte had been replaced (none: 0 misses)
  struct Recovering {
    u64 ptr = 0;
    u32 len = 0;   // bytes it predicted since its last miss
    u32 miss = 0;  // its misses (0: none followed)
  } recover;
  std::array<Match, LINE_MATCHERS> line_match{};  // LINE_MATCH: the last 2 bytes' latest occurrence in this line (in these 2 lines)
  u32 coded = 0;      // bytes of this lane coded so far
  // FIELDS: the current line's field starts (lane offsets), and the previous line's
  u32 field = 0, prev_fields = 0;
  std::array<u32, FIELDS_MAX> field_start{}, prev_field_start{};
  // BRACKETS: open brackets (innermost in the low byte), how many, and inside a "string"
  u64 stack = 0;
  u32 depth = 0;
  bool quoted = false;
  u32 shape = 0;  // SHAPE: the last bytes' classes, 5 bits each, the latest in the low bits
  u32 value = 0;  // FIELD_VALUE: hash of the current field's bytes (0: none yet)
  // FIELD_EQ: this byte's FIELDS context byte (256 + the byte above in the field, 0: none), and
  // whether every byte of the current field so far equalled its byte above
  u32 above = 0;
  bool field_eq = true;
  u32 digits = 0;  // DIGITS: the digits ending at the last byte (at most DIGITS_MAX)
  // NUMBER: the current number's digits before its point and after it (0: not in a number)
  u32 num_int = 0, num_frac = 0;
  bool num_point = false;
  // CELL_*: the current cell, this line's cell starts and the previous line's; the bytes at this
  // offset of the previous cell (left) and of this cell in the line above (up: 256 + byte, 0:
  // none), formed before each byte, and whether every byte of the cell so far equalled its own
  u32 cell = 0, prev_cells = 0;
  std::array<u32, CELLS_MAX> cell_start{}, prev_cell_start{};
  u32 left = 0, up = 0;
  bool left_eq = true, up_eq = true;
  // LAST_NUMBER: the current number's first two digits, and the last number's digits before its
  // point << 8 | their lead (0: none yet)
  u32 lead = 0, last_num = 0;
  // GROUPS: the last 8 byte groups (the latest in the low byte), and whether the last byte's
  // group repeated the latest (a letter or digit within a word or number: not added again)
  u64 groups = 0;
  bool group_repeat = false;
  // TOKENS: the hash of the current token (0 outside one) and the last 3 tokens ended, the latest first
  u32 token = 0;
  std::array<u32, 3> tokens{};
  // FLOAT_TAIL: the current number's digits, and the printings of the doubles about its last run of
  // 0s or 9s (floats.h)
  struct Decimal {
    u64 digits = 0;  // its digits as an integer
    u32 count = 0, frac = 0;  // its significant digits, and those after its point
    u32 run = 0, run_digit = 0;  // how many of its last digits equal the last one, and that digit
    bool on = false, point = false, lost = false;  // in a number; after its point; in one too long to track
    u64 key_d = 0;  // the candidates' short decimal key_d * 10**key_q (key_d 0: none yet)
    int key_q = 0;
    std::array<u64, CANDIDATES> S{};  // the 17 digits of the double `offset - OFFSETS` ulps from the nearest (read through set)
    int E = 0;  // ... their decimal exponent
    u32 cls = 0;  // ... their class (the binary exponent's low bits)
    u64 set = 0;  // the offsets whose printing agrees with the number so far
  } decimal;
  // LINE_STEP: the numbers of this line and of the line above, and the current one (steps.h)
  struct Steps {
    std::array<u64, STEP_NUMBERS> line_value{}, above_value{};
    std::array<u8, STEP_NUMBERS> line_width{}, above_width{};  // their digits (0: too many to keep)
    u32 count = 0, above_count = 0;  // this line's numbers so far (every one), the line above's kept
    bool in = false;  // within a number
    bool same = false;  // the line's last number was its above's
    u64 value = 0;    // its value so far
    u32 width = 0;    // its digits so far
    u64 set = 0;      // the steps whose printing agrees with it
  } steps;
  // NUMBER_ECHO: the last numbers' digits, and the current one's (echoes.h)
  struct Echoes {
    std::array<std::array<u8, ECHO_DIGITS>, ECHO_NUMBERS> numbers{};  // a ring, the latest at head
    std::array<u8, ECHO_NUMBERS> width{};  // their digits kept
    u32 head = 0;
    u64 kept = 0;  // the ranks that hold a number (bit r: rank r)
    std::array<u8, ECHO_DIGITS> digits{};  // the current number's first digits
    u32 count = 0;  // its digits so far (every one; 0 outside a number)
    bool in = false, point = false;  // within a number; after a '.' in it
    u64 set = 0;  // the ranks whose digits begin with its own so far
    u32 label = 0;  // a hash of the bytes since the last number ended
  } echoes;
};

// digits, lower and upper case letters, bytes above 127 (4 classes); space, newline, tab and
// 24 punctuation marks each their own; the rest one class
inline u32 byte_class(int c) {
  if (c >= '0' && c <= '9') return 0;
  if (c >= 'a' && c <= 'z') return 1;
  if (c >= 'A' && c <= 'Z') return 2;
  if (c >= 128) return 3;
  static constexpr char marks[] = " \n\t\"&'()*+,-./:;<=>?@[]_{|}";
  for (u32 i = 0; i < sizeof(marks) - 1; ++i)
    if (c == marks[i]) return 4 + i;
  return 31;
}
inline bool cell_separator(int c) { return c == ',' || c == '\t' || c == ';' || c == '|'; }
inline bool separator(int c) {
  switch (c) {
    case ' ': case '\t': case ',': case ';': case '|': case ':': case '=': case '"': case '\'':
    case '(': case ')': case '[': case ']': case '{': case '}': case '<': case '>': return true;
    default: return false;
  }
}
// The byte at the same offset of the same field in the lane's previous line, 256 + byte; 0 if
// that field is shorter or absent there, or the decoder cannot know it (byte_at(lane offset)
// is -1): for records whose fields vary in width (CSV, logs).
template <class ByteAt>
u32 field_above(const Lane& L, ByteAt&& byte_at) {
  if (L.field >= L.prev_fields) return 0;
  const u32 q = L.prev_field_start[L.field] + (L.coded - L.field_start[L.field]);
  const u32 end = L.field + 1 < L.prev_fields ? L.prev_field_start[L.field + 1] : L.line;
  const int c = q < end ? byte_at(q) : -1;
  return c < 0 ? 0 : 256 | u32(c);
}
// CELL_*'s left and up before the next byte (256 + byte, 0: none; byte_at(lane offset) is -1 where
// the decoder cannot know the byte)
template <class ByteAt>
void cells_before(Lane& L, ByteAt&& byte_at) {
  const u32 o = L.coded - L.cell_start[L.cell];
  const auto at = [&](u32 q, u32 end) {
    const int c = q < end ? byte_at(q) : -1;
    return c < 0 ? 0 : 256 | u32(c);
  };
  L.left = L.cell > 0 ? at(L.cell_start[L.cell - 1] + o, L.cell_start[L.cell]) : 0;
  L.up = 0;
  if (L.cell < L.prev_cells) {
    const u32 end = L.cell + 1 < L.prev_cells ? L.prev_cell_start[L.cell + 1] : L.line;
    L.up = at(L.prev_cell_start[L.cell] + o, end);
  }
}
// The word model's words after byte c: letters, case folded (RECORD keeps the word before the last)
inline void track_words(Lane& L, int c) {
  const int lc = (c >= 'A' && c <= 'Z') ? c + 32 : c;
  if (lc >= 'a' && lc <= 'z') {
    L.word = hash32(L.word + u32(lc)) | 1u;
  } else if (L.word) {
    L.word2 = L.prev_word;
    L.prev_word = L.word;
    L.word = 0;
  }
}
// The models each state is tracked for: those whose line in models.def `uses` it
inline constexpr u64 FIELDS_USERS = users_of("fields"), ABOVE_USERS = users_of("above"), CELLS_USERS = users_of("cells"),
                     DIGITS_USERS = users_of("digits"), NUMBER_USERS = users_of("number"),
                     VALUE_USERS = users_of("value"), SHAPE_USERS = users_of("shape"), GROUPS_USERS = users_of("groups"),
                     TOKENS_USERS = users_of("tokens"), BRACKETS_USERS = users_of("brackets"),
                     HISTORY_USERS = users_of("history");

// The lane's lines, fields, cells, numbers, brackets, groups and tokens after byte c, which followed
// `before` (L.coded counts c; FIELD_EQ compares c with L.above, c's field_above): each tracked only
// for the models (`extras`) that use it
inline void track(Lane& L, int c, int before, u64 extras) {
  if (extras & FIELDS_USERS) {
    const bool eq = L.field_eq && L.above == (256 | u32(c));
    L.field_eq = true;
    if (c == '\n') {
      L.prev_field_start = L.field_start;
      L.prev_fields = L.field + 1;
      L.field = 0;
      L.field_start[0] = L.coded;
    } else if (separator(c) && !(c == ' ' && separator(before)) && L.field + 1 < FIELDS_MAX) {
      L.field_start[++L.field] = L.coded;
    } else {
      L.field_eq = eq;
    }
  }
  if (extras & CELLS_USERS) {
    const bool left_eq = L.left_eq && L.left == (256 | u32(c)), up_eq = L.up_eq && L.up == (256 | u32(c));
    L.left_eq = L.up_eq = true;
    if (c == '\n') {
      L.prev_cell_start = L.cell_start;
      L.prev_cells = L.cell + 1;
      L.cell = 0;
      L.cell_start[0] = L.coded;
    } else if (cell_separator(c) && L.cell + 1 < CELLS_MAX) {
      L.cell_start[++L.cell] = L.coded;
    } else {
      L.left_eq = left_eq, L.up_eq = up_eq;
    }
  }
  if (extras & DIGITS_USERS) L.digits = c >= '0' && c <= '9' ? std::min(L.digits + 1, DIGITS_MAX) : 0;
  if (extras & NUMBER_USERS) {
    const bool digit = c >= '0' && c <= '9';
    if (digit && !L.num_point && L.num_int < 2) L.lead = (L.num_int ? L.lead * 10 : 0) + u32(c - '0');
    const bool ends = !digit && !(c == '.' && L.num_int && !L.num_point);
    if (ends && L.num_int) L.last_num = L.num_int << 8 | L.lead;
    if (digit) {
      if (L.num_point) L.num_frac += L.num_frac < NUM_PLACES;
      else L.num_int += L.num_int < NUM_PLACES;
    } else if (c == '.' && L.num_int && !L.num_point) {
      L.num_point = true;
    } else {
      L.num_int = L.num_frac = 0, L.num_point = false;
    }
  }
  if (extras & VALUE_USERS)
    L.value = c == '\n' || separator(c) ? 0 : hash32(L.value + u32(c)) | 1u;
  if (c == '\n') {
    L.prev_line = L.line;
    L.line = L.coded;
  }
  if (extras & SHAPE_USERS) L.shape = L.shape << 5 | byte_class(c);
  if (extras & GROUPS_USERS) {
    const u64 g = c >= '0' && c <= '9'   ? '0'
                  : c >= 'a' && c <= 'z' ? 'a'
                  : c >= 'A' && c <= 'Z' ? 'A'
                  : c >= 128             ? 128
                                         : u64(c);
    L.group_repeat = (g == '0' || g == 'a' || g == 'A') && (L.groups & 255) == g;
    if (!L.group_repeat) L.groups = L.groups << 8 | g;
  }
  if (extras & TOKENS_USERS) {
    const bool in_token = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                          c == '$' || c >= 128;
    const auto push = [&L](u32 t) { L.tokens = {t, L.tokens[0], L.tokens[1]}; };
    if (in_token) {
      L.token = hash32(L.token + u32(c) + 1) | 1u;
    } else {
      if (L.token) push(L.token);
      L.token = 0;
      if (c != ' ' && c != '\t' && c != '\r' && c != '\n') push(256 + u32(c));
    }
  }
  if (extras & BRACKETS_USERS) {
    if (L.quoted) {
      L.quoted = !(c == '"' && before != '\\');
    } else if (c == '"') {
      L.quoted = true;
    } else if (c == '(' || c == '[' || c == '{' || c == '<') {
      L.stack = L.stack << 8 | u64(c);
      ++L.depth;
    } else if ((c == ')' || c == ']' || c == '}' || c == '>') && L.depth) {
      L.stack >>= 8;
      --L.depth;
    }
  }
}


}  // namespace shazip::stage
