// The adaptive context-mixing stage and its binary arithmetic coder (shazip/adaptive.py builds and wraps it).
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
// VERSION 2 adds models, each one bit of Params::extras (all 0: version 1's stage, unchanged):
//   inputs order   the NN's 3; the context models: orders, word, word pair, column, sparse, then
//                  FIELDS, BRACKETS, SHAPE, LOCAL_CTX's two; each match model's 2; the bias.
//   fields         a line's field k + 1 starts after its k-th separator byte (space, tab and
//                  , ; | : = " ' ( ) [ ] { } < >; a space right after a separator starts none),
//                  at most 16 fields (the last takes the rest); tracked for FIELDS or SHAPE.
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
//   LOCAL_MATCH    a second match model, as the first (its own match map) but with the lane
//                  number in its hash key (seed 19 + 2 * lane, the first's 17), so that it finds
//                  the lane's own latest occurrence; both share the hash table of heads.
//   LAYERED        mixers 3 (a weight set per c1) and 4 (per min(seen, 15) * 8 + k, seen = the
//                  context models whose current bit-history state is not 0); x_mix = a final
//                  mixer of (x_1, x_2, x_3, x_4), a set per bit position k, initial weights 16384,
//                  in place of floor((x_1 + x_2) / 2).
//   WARM           a mixer's rate for a set updated n times before: LR + floor(LR * 3 * 1024 /
//                  (1024 + n)) (n need not count past the boost's end).
// VERSION 3 adds one model, bit 7 of extras (0 gives version 2's stage, unchanged):
//   MATCH_CTX      a context model after LOCAL_CTX's: the match's predicted byte e (of the second
//                  match model when it has one, else of the first), min(its length band, 15) and
//                  the last two bytes: hash of (256 + e) << 24 | band << 16 | c2 c1, or of c2 c1
//                  alone without a prediction (the prediction is the byte's, fixed at its start).
//                  And mixer 1 gets 96 weight sets: set1 + 32 * (1 + the first match model's
//                  expected bit) while its prediction agrees with the bits so far.
// VERSION 4 adds three, bits 8-10 of extras (0 gives version 3's stage, unchanged):
//   fields         tracked also for FIELD_VALUE and FIELD_EQ; `above` = FIELDS's context byte
//                  (256 + the byte above in the field, or 0), formed before each byte.
//   FIELD_VALUE    a context model after MATCH_CTX's: v = the hash of the current field's bytes
//                  (v = 0 after a newline or a separator, else v = hash32(v + byte) | 1), with
//                  the field number: hash of (v, or c1 while v = 0) << 8 | field.
//   FIELD_EQ       eq = every byte of the current field so far equalled its `above` (true at
//                  a line's or field's start; any other byte keeps it only if 256 + byte is its
//                  above). FIELDS's context gets eq << 28; mixer 4 has 256 sets, set4 + 128
//                  while eq; APM 1 has 256 * 16 contexts: c0 | eq << 8 | min(field, 7) << 9.
//   MATCH_APM      an APM of x_mix in context c0 | mcx << 8 (mcx: the first match map's context,
//                  0 without a prediction), after APM 2: p = floor((3 p + p_match) / 4).
// VERSION 5 adds one, bit 11 of extras (0 gives version 4's stage, unchanged):
//   DIGITS         (needs LAYERED) r = the digits ending at c1 (0 after any other byte), counted
//                  to at most 16; fields as for FIELDS. While r > 0, mixer 3 takes its
//                  weight set by the number's shape instead of c1: 256 + (r - 1) * 8 + k + 128 *
//                  min(field, 7), of 256 + 1024 sets (the leading digits of a count or a time
//                  follow other rules than its last ones, and each field's numbers their own).
// VERSION 6 adds one, bit 12 of extras (0 gives version 5's stage, unchanged):
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
// VERSION 7 adds one, bit 13 of extras (0 gives version 6's stage, unchanged):
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
// VERSION 8 adds two, bits 14 and 15 of extras (0 gives version 7's stage, unchanged):
//   inputs order   two more context models, after FIELD_VALUE's: NUMBER's, then RECORD's.
//   NUMBER         a number: after a digit outside a number, num_int = 1 (num_frac = 0, no point);
//                  a digit adds 1 to num_frac once the number has its point, else to num_int
//                  (each at most 15); a '.' gives a number without one its point; any other byte
//                  ends it (num_int = num_frac = 0, no point). Context: in a number (num_int >
//                  0), the hash of num_int << 32 | num_frac << 24 | point << 20 | c2 c1; else 0
//                  (order 0).
//   RECORD         words as for the word model (letters, case folded); word2 = the word before
//                  the previous word. Context: hash of hash32(prev_word + hash32(word2)) << 32 |
//                  (FIELD_VALUE's v, or c1 while v = 0; v is tracked for RECORD too).
// VERSION 9 adds three, bits 16-18 of extras (0 gives version 8's stage, unchanged):
//   number         tracked also for PREDICTED and STATE_MIX; fields also for STATE_MIX, brackets
//                  and quoting (as for BRACKETS) also for STATE_MIX.
//   PREDICTED      a context model after RECORD's: P = the recovering match's pointer while it has a
//                  predicted byte the decoder knows (src 1), else the first match model's (src 2),
//                  else LINE_MATCH's first matcher's (src 3); e = the byte at P (the predicted byte),
//                  e1 = the byte at P - 1 (0 if the decoder cannot know it). Context: hash of src << 48
//                  | e << 40 | e1 << 32 | c1 << 24 | min(the recovering match's len, 3) << 20 | num_int
//                  << 12 | num_frac << 4 | point; without a predicted byte 0 (order 0). How a value goes
//                  on where it left the earlier record's (a counter's digits after the one that grew).
//   CLASS_MIX      (needs LAYERED) a fifth mixer over the same inputs, a weight set per (class of c1,
//                  class of c2, bit position): (class(c1) * 32 + class(c2)) * 8 + k, classes as
//                  SHAPE's; its output is the final mixer's next input.
//   STATE_MIX      (needs LAYERED) a sixth, a set per (min(field, 15) * 16 + min(depth, 3) * 4 +
//                  inside a string * 2 + in a number) * 8 + k; the final mixer's next input.
//   final mixer    inputs x_1 .. x_4, then CLASS_MIX's and STATE_MIX's (those present); initial
//                  weights floor(65536 / its inputs) each (16384 for 4, version 8's).
// VERSION 10 adds two for tables, bits 19 and 20 of extras (0 gives version 9's stage, unchanged):
//   cells          a line's cell k + 1 starts after its k-th ',', '\t', ';' or '|' (the columns of a
//                  table, whatever spaces their values hold), at most 16 cells (the last takes the
//                  rest). Before each byte, at offset o of its cell: left = 256 + the byte at offset o
//                  of the previous cell in this line while o is within that cell (its separator
//                  included), else 0 (also in cell 0, and when the decoder cannot know the byte); up
//                  = 256 + the byte at offset o of this cell in the lane's previous line while o is
//                  within it (its separator or newline included), else 0. left_eq (up_eq): every
//                  byte of the cell so far equalled its left (up); both true at a cell's start.
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
// VERSION 11 adds one, bit 21 of extras (0 gives version 10's stage, unchanged):
//   number         tracked also for LAST_NUMBER; and lead = the first two digits of a number's
//                  integer part (its first digit d: lead = d; its second: lead = lead * 10 + d);
//                  when a byte ends a number (num_int > 0), last = num_int << 8 | lead.
//   LAST_NUMBER    a context model after CELL_LEFT's: hash of hash32(prev_word + last *
//                  0x9E3779B1) << 32 | (FIELD_VALUE's v, or c1 while v = 0; v is tracked for
//                  LAST_NUMBER too): a value by its key and the number before it (a car's
//                  horsepower by its displacement, a longitude by the latitude, a list's next item).
// VERSION 12 adds one, bit 22 of extras (0 gives version 11's stage, unchanged):
//   RUNS           every hashed context model (all but order 1's direct table) keeps a run table of
//                  2**(table_bits - 5) u32 entries chk << 24 | b1 << 16 | b2 << 8 | n at index ctx >> (37 -
//                  table_bits), chk = (ctx >> 2) & 255, ctx the model's context hash for the byte: the last
//                  byte seen in that context (b1), the different one before it (b2; b1 if none) and how
//                  many times in a row b1 came (n in 1..255; 0: empty). After byte c an entry with another
//                  chk or n = 0 becomes chk, c, c, 1; else b1 = c makes n = min(n + 1, 255); else it becomes
//                  chk, c, b1, 1. One input per such model, after the context models' (in their order):
//                  while the entry's chk is the context's, n > 0 and b1 agrees with the bits so far c0, the
//                  stretch of the run map's P16 in context 256 * m + ((min(n, 15) * 4 + g) * 2 + u) * 2 + e
//                  (m: the model's place among them; g: 0 at bit 0, 1 at bit 1, 2 at bits 2-4, 3 at bits
//                  5-7; u: b2 != b1; e: b1's bit k), floor-divided by 4 when u; else 0 and no update of the
//                  map. Its cells start at 2**21. A context's last byte and how surely it repeats, which its
//                  bit histories (one per bit of the byte) see only in parts.
// VERSION 13 adds one, bit 23 of extras (0 gives version 12's stage, unchanged):
//   GROUPS         a context model after LAST_NUMBER's: a byte's group is '0' for a digit, 'a' for a
//                  lower-case letter, 'A' for an upper-case one, 128 for a byte >= 128, else the byte
//                  itself. The lane keeps its last 8 groups (u64, the latest in the low byte): after a
//                  byte whose group is '0', 'a' or 'A' and equals the latest, nothing is added and
//                  repeat = 1; after any other byte its group is shifted in and repeat = 0. Context:
//                  hash of groups ^ repeat: the shape of a line or a statement whatever the lengths
//                  of its words and numbers (`"key": 12,` and `"other_key": 3405,` alike). With RUNS
//                  it has a run table and input as every hashed model.
// VERSION 14 adds three for the heaviest level, bits 24-26 of extras (0 gives version 13's stage,
// unchanged):
//   groups         tracked (as for GROUPS) also for GROUP_WORD, GROUP_MIX and GROUP_APM; with r = repeat:
//                  g4 = hash32(u32(groups) + r * 0x9E3779B1) (the last 4 groups), g3 = hash32(u32(groups &
//                  0xFFFFFF) + r) (the last 3), and at bit k g2 = hash32(u32(groups & 0xFFFF) * 0x9E3779B1
//                  + c0 + r * 77) (the last 2 and the bits so far).
//   GROUP_WORD     a context model after GROUPS's: hash of g4 << 32 | the current word's hash (0 outside a
//                  word): a word by the shape of what led to it (`this.x =`, `"key": [`).
//   GROUP_MIX      (needs LAYERED) a seventh mixer over the same inputs, a weight set per (g3 >> 20) * 8 +
//                  k; its output is the final mixer's next input, after STATE_MIX's.
//   GROUP_APM      (needs the APMs) an APM of x_mix in context g2 >> 16 after MATCH_APM's: p = floor((3 p +
//                  its P16) / 4).
// VERSION 15 adds two more for the heaviest levels, bits 27 and 28 of extras (0 gives version 14's stage,
// unchanged):
//   inputs order   six more context models after GROUP_WORD's (or where it would be): TOKENS's three,
//                  then INDIRECT's three.
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
// VERSION 16 adds five, bits 29-33 of extras (32 and 33 in a fifth byte; 0 gives version 15's stage, unchanged):
//   SLOW_FINAL     (needs LAYERED) the final mixer's LR is max(floor(mixer_lr / 4), 1), the other mixers'
//                  mixer_lr (WARM's boost follows each mixer's own LR): it weighs a few mixers' outputs,
//                  which the full rate makes it chase from bit to bit.
//   inputs order   four more context models after INDIRECT's (or where they would be): PLACES's, CELL_UP's,
//                  THIS_TOKEN's, then NEST's.
//   number         tracked (as for NUMBER) also for PLACES; cells (as for version 10) also for CELL_UP;
//                  tokens (as for TOKENS) also for THIS_TOKEN and NEST; brackets (as for BRACKETS) also
//                  for NEST.
//   PLACES         context: in a number (num_int > 0), the hash of num_int << 32 | num_frac << 24 | point
//                  << 20 | c1; else 0 (order 0): a digit by its place and the digit before it alone.
//   CELL_UP        context: hash of up << 24 | up_eq << 20 | cell << 12 | min(o, 15), o the byte's offset
//                  in its cell (up and up_eq as version 10 forms them before the byte): a sorted
//                  column's next code, a repeated value, by its place in the cell.
//   THIS_TOKEN     context: the hash of t (the current token's hash) while in a token, else of 2**40 |
//                  tok1 (the last token ended): what ends an identifier, what follows an operator, by
//                  the token alone, whatever came before it.
//   NEST           context: the hash of (stack & 255) << 40 | min(depth, 15) << 32 | (t while in a token,
//                  else tok1): the token by the bracket it is in (an argument list, an array, a block).
// VERSION 17 adds five, bits 34-38 of extras (0 gives version 16's stage, unchanged):
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
// The mixers' dot products and training run on the kernel path chosen at run time (kernels.h):
// every path computes the integers above.
// The only floating point is the optional measurement of the ideal code length (sum of
// -log2 p of the coded bits), which is reported and never read back.
#pragma once
// The stage is made of components, one file each, composed by the Stage below: nn_inputs.h (the
// NN's inputs), context_maps.h (the context models: contexts.h's contexts, lane.h's lane state,
// runs.h), matches.h (the match models, RECOVER, LINE_MATCH), cells.h (the tables' inputs),
// mixers.h (the mixers, by what selects their weight sets), apms.h (the APM stages); history.h
// is the block's byte ring, params.h the parameters and the models' registry (models.def).

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
#include "stage/history.h"
#include "stage/lane.h"
#include "stage/matches.h"
#include "stage/mixers.h"
#include "stage/nn_inputs.h"
#include "stage/params.h"
#include "stage/tables.h"

namespace shazip::stage {

class Stage {
 public:
  // k: the kernel path of the mixers' arithmetic (any gives the same results)
  Stage(const std::vector<i64>& squash, const Params& p, const kernels::Kernels& k)
      : prm_(checked(p)), tb_(std::make_shared<const Tables>(squash)), k_(&k), nn_(p, *tb_), contexts_(p, *tb_),
        matches_(p), cells_(p), apms_(p, *tb_),
        history_(p.history_bits, p.match || p.column || p.has(FIELDS) || p.has(FIELD_EQ) || p.has(LINE_MATCH) ||
                                     p.has(CELLS)) {
    if (p.has(INDIRECT)) indirect_ = Indirect(p.table_bits);
    n_inputs_ = nn_.inputs() + contexts_.inputs() + matches_.inputs() + cells_.inputs() + 1;  // + bias
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
    const auto lane_byte = [&](u32 q) { return history_.byte(at.base + b * at.span + q, at); };
    if (prm_.has(FIELDS) || prm_.has(FIELD_EQ)) L.above = field_above(L, lane_byte);
    if (prm_.has(CELLS)) cells_before(L, lane_byte);
    const Looking to{b, at, history_, e, matches_.matchers(),
                     prm_.has(INDIRECT) ? indirect_.entries(L.hist) : std::array<u32, 3>{}};
    contexts_.begin_byte(L, to);
    nn_.begin_byte(freq);
    mixers_.begin_byte(L);
    apms_.prefetch(1, c1);
    nn_.prefetch(1, c1);
    int c0 = 1;  // 1 followed by the bits of this byte so far
    for (int k = 0; k < 8; ++k) {
      if (k < 7)  // the order-1 APM rows of both possible next bits (a hint only)
        for (int y = 0; y < 2; ++y) apms_.prefetch(c0 * 2 + y, c1), nn_.prefetch(c0 * 2 + y, c1);
      // inputs -> mixers -> APMs -> the coder
      i32 x[MAX_INPUTS];
      int n = 0;
      nn_.bit_inputs(tb, c0, c1, x, n);
      const int seen = contexts_.bit_inputs(tb, k, c0, x, n);
      const MatchContexts mcx = matches_.bit_inputs(tb, L, e, k, c0, x, n);
      cells_.bit_inputs(tb, L, k, c0, x, n);
      x[n++] = 256;  // bias
      const int xm = mixers_.mix(L, {k, c0, seen, e.expect[0], e.band[0], mcx.match[0]}, x, x[0]);
      const int p = apms_.refine(tb, L, xm, tb.sq(xm), c0, mcx.match[0]);
      const int y = io(clampi(p, 1, P16_MAX), sym < 0 ? -1 : (sym >> (7 - k)) & 1);
      if (k < 7) mixers_.prefetch_next(L, c0 * 2 + y, e.expect[0]);
      // every component learns the bit from its own prediction
      mixers_.update(tb, x, y);
      nn_.update(y);
      apms_.update(y);
      contexts_.update(tb, y);
      matches_.update(tb, mcx, y);
      cells_.update(tb, y);
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
  APMs apms_;
  History history_;
  Indirect indirect_;  // INDIRECT's tables
  Mixers mixers_;
  int n_inputs_ = 0;
  u64 pos_ = 0;
};


}  // namespace shazip::stage
