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

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "common.h"
#include "coder/binary.h"
#include "stage/components.h"

namespace shazip::stage {


// The models adapt_version 2 added, each one bit of Params::extras (0 gives version 1's stage)
// The models beyond version 1's (models.def, the one list of them): Extra's masks by bit, and each
// model's name, version and needs (what `check_needs` and Python's shazip.adaptive read).
enum ExtraBit : int {
#define STAGE_MODEL(MASK, name, version, needs, about) MASK##_BIT,
#include "models.def"
#undef STAGE_MODEL
  EXTRA_COUNT
};

enum Extra : u64 {
#define STAGE_MODEL(MASK, name, version, needs, about) MASK = u64(1) << MASK##_BIT,
#include "models.def"
#undef STAGE_MODEL
  EXTRAS_ALL = (u64(1) << EXTRA_COUNT) - 1,
  GROUPS_ANY = GROUPS | GROUP_WORD | GROUP_MIX | GROUP_APM,
  CELLS = CELL_LEFT | CELL_ORDER | CELL_UP,  // the cells are tracked for any of these
};

struct StageModel {
  const char* name;
  int version;
  const char* needs;  // space-separated: models' names, or "nn", "match", "apm"
  const char* about;
};

inline constexpr StageModel STAGE_MODELS[EXTRA_COUNT] = {
#define STAGE_MODEL(MASK, name, version, needs, about) {#name, version, needs, about},
#include "models.def"
#undef STAGE_MODEL
};

struct Params {
  int table_bits, history_bits, match_bits, match_min, mixer_lr;
  std::vector<int> orders;
  bool word, column, sparse, nn, match, apm;
  u64 extras;
  bool has(Extra e) const { return extras & e; }
  bool operator==(const Params& o) const {
    return table_bits == o.table_bits && history_bits == o.history_bits && match_bits == o.match_bits &&
           match_min == o.match_min && mixer_lr == o.mixer_lr && orders == o.orders && word == o.word &&
           column == o.column && sparse == o.sparse && nn == o.nn && match == o.match && apm == o.apm &&
           extras == o.extras;
  }
};

// Refuses parameters with a model but not what it needs (models.def's `needs`).
inline void check_needs(const Params& p) {
  for (int i = 0; i < EXTRA_COUNT; ++i) {
    if (!(p.extras >> i & 1)) continue;
    const std::string needs = STAGE_MODELS[i].needs;
    for (size_t at = 0; at < needs.size();) {
      size_t end = needs.find(' ', at);
      if (end == std::string::npos) end = needs.size();
      const std::string need = needs.substr(at, end - at);
      at = end + 1;
      bool there = need == "nn" ? p.nn : need == "match" ? p.match : need == "apm" ? p.apm : false;
      for (int j = 0; j < EXTRA_COUNT && !there; ++j) there = need == STAGE_MODELS[j].name && (p.extras >> j & 1);
      if (!there) throw std::invalid_argument(std::string("the ") + STAGE_MODELS[i].name + " model needs " + need);
    }
  }
}

constexpr int FIELDS_MAX = 16;  // fields of a line tracked by the FIELDS model
constexpr int WARM_UPDATES = 1024;  // WARM: a set's rate is 4x at first, 2.5x after this many updates
constexpr u32 APM1_FIELDS = 8;  // FIELD_EQ: APM 1's contexts tell fields 0..6 and 7 or later apart
constexpr u32 DIGITS_MAX = 16;  // DIGITS: a run of digits is counted up to this
constexpr u32 DIGIT_FIELDS = 8;  // DIGITS: mixer 3's sets tell fields 0..6 and 7 or later apart
constexpr u32 RECOVER_MIN = 16;  // RECOVER: a match this long is followed on past a miss
constexpr u32 RECOVER_MISSES = 16;  // ... until it has missed this many bytes
constexpr u32 RECOVER_LENS = 16, RECOVER_MISS_BANDS = 4;  // its map's contexts: min(len, 15), min(miss, 4)
constexpr int LINE_BITS = 16;  // LINE_MATCH: log2 of its heads (the last position of each lane's 2-byte context)
constexpr u32 LINE_LENS = 16;  // its maps' contexts: min(len, 15)
constexpr int LINE_MATCHERS = 2;  // one takes candidates in this line, one also in the line before
constexpr u32 CLASS_SETS = 32;  // CLASS_MIX: byte_class's classes
constexpr u32 STATE_SETS = FIELDS_MAX * 16;  // STATE_MIX: by the field (16), depth (4), quoting and number
constexpr u32 NUM_PLACES = 15;  // NUMBER: a number's digits before and after its point are counted to at most this
constexpr u32 CELLS_MAX = 16;  // CELL_*: cells of a line tracked (the last takes the rest)
constexpr u32 ORDER_CELLS = 8;  // CELL_ORDER's and CELL_LEFT's maps tell cells 0..6 and 7 or later apart
constexpr u32 LEFT_LEN = 8;  // CELL_LEFT's predicted byte counts as a match of this length
constexpr u32 UP_OFFSETS = 16;  // CELL_UP: a byte's offset in its cell is counted to at most 15
constexpr int RUN_BITS_BELOW = 5;  // RUNS: a model's run table has 2**(table_bits - this) entries
constexpr u32 RUN_COUNTS = 16;  // RUNS: its map's contexts tell runs of 1..14 and 15 or more apart
constexpr int GROUP_SET_BITS = 12;  // GROUP_MIX: its weight sets (per bit position) by a hash of the last 3 groups
constexpr u32 GROUP_SETS = u32(1) << GROUP_SET_BITS;
constexpr int ORDER_SET_BITS = 16;  // ORDER_MIX: each mixer's sets (c1 and c0; a hash of c2 c1 and c0)
constexpr u32 ORDER_SETS = u32(1) << ORDER_SET_BITS;
constexpr u32 PLACE_MAX = 16;  // PLACE_MIX: fields 0..14 and 15 or later, columns 0..14 and 15 or later
constexpr u32 PLACE_SETS = PLACE_MAX * PLACE_MAX * 256, MATCH_SETS = 257 * 256;  // PLACE_MIX's, MATCH_MIX's

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
};

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
  std::vector<u16> o1_, o2_, o3_;
  int shift_ = 32;
};

// Where a byte is being coded: which history bytes are already known to the decoder
struct Where {
  u64 base, span, lanes;
  const std::vector<Lane>* lane;
};

class Stage {
 public:
  // k: the kernel path of the mixers' arithmetic (any gives the same results)
  Stage(const std::vector<i64>& squash, const Params& p, const kernels::Kernels& k)
      : prm_(p), tb_(std::make_shared<const Tables>(squash)), k_(&k) {
    if (p.table_bits < 10 || p.table_bits > 30) throw std::invalid_argument("table_bits must be in [10, 30]");
    if (p.history_bits < 10 || p.history_bits > 32) throw std::invalid_argument("history_bits must be in [10, 32]");
    if (p.match_bits < 8 || p.match_bits > 28) throw std::invalid_argument("match_bits must be in [8, 28]");
    if (p.match_min < 2 || p.match_min > 8) throw std::invalid_argument("match_min must be in [2, 8]");
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
    if (p.has(FIELDS)) orders.push_back(FIELD);
    if (p.has(BRACKETS)) orders.push_back(BRACKET);
    if (p.has(SHAPE)) orders.push_back(SHAPES);
    if (p.has(LOCAL_CTX)) orders.insert(orders.end(), {LOCAL3, LOCAL6});
    if (p.has(MATCH_CTX)) orders.push_back(MATCHED);
    if (p.has(FIELD_VALUE)) orders.push_back(VALUE);
    if (p.has(NUMBER)) orders.push_back(NUMBER_CTX);
    if (p.has(RECORD)) orders.push_back(RECORD_CTX);
    if (p.has(PREDICTED)) orders.push_back(PREDICTED_CTX);
    if (p.has(CELL_LEFT)) orders.push_back(LEFT_CTX);
    if (p.has(LAST_NUMBER)) orders.push_back(LAST_NUMBER_CTX);
    if (p.has(GROUPS)) orders.push_back(GROUPS_CTX);
    if (p.has(GROUP_WORD)) orders.push_back(GROUP_WORD_CTX);
    if (p.has(TOKENS)) orders.insert(orders.end(), {TOKEN1, TOKEN2, TOKEN3});
    if (p.has(INDIRECT)) {
      orders.insert(orders.end(), {INDIRECT1, INDIRECT2, INDIRECT3});
      indirect_ = Indirect(p.table_bits);
    }
    if (p.has(PLACES)) orders.push_back(PLACES_CTX);
    if (p.has(CELL_UP)) orders.push_back(UP_CTX);
    if (p.has(THIS_TOKEN)) orders.push_back(THIS_TOKEN_CTX);
    if (p.has(NEST)) orders.push_back(NEST_CTX);
    if (p.extras & ~u64(EXTRAS_ALL)) throw std::invalid_argument("unknown extra models");
    check_needs(p);
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
    if (p.has(RUNS)) {
      runs_.assign(tables_.size(), std::vector<u32>(size_t(1) << (p.table_bits - RUN_BITS_BELOW), 0));
      run_map_ = StateMap(tables_.size() * 256, u32(1) << (P22_BITS - 1 + COUNT_BITS));
    }
    if (p.match || p.column || p.has(FIELDS) || p.has(FIELD_EQ) || p.has(LINE_MATCH) || p.has(CELLS))
      ring_.assign(size_t(1) << p.history_bits, 0);
    if (p.match) {
      heads_.assign(size_t(1) << p.match_bits, 0);
      matchers_ = p.has(LOCAL_MATCH) ? 2 : 1;
      for (int m = 0; m < matchers_; ++m) match_map_[m] = StateMap(MATCH_BANDS * 2, u32(1) << (P22_BITS - 1 + COUNT_BITS));
    }
    if (p.has(LINE_MATCH)) {
      line_heads_.assign(size_t(1) << LINE_BITS, 0);
      line_map_ = StateMap(2 * (1 + 3 * LINE_LENS), u32(1) << (P22_BITS - 1 + COUNT_BITS));
    }
    if (p.has(RECOVER))
      recover_map_ = StateMap(2 * (1 + RECOVER_LENS * RECOVER_MISS_BANDS), u32(1) << (P22_BITS - 1 + COUNT_BITS));
    if (p.has(CELL_LEFT)) left_map_ = StateMap(2 * ORDER_CELLS * 2, u32(1) << (P22_BITS - 1 + COUNT_BITS));
    if (p.has(CELL_ORDER)) order_map_ = StateMap(ORDER_CELLS * 2 * 4 * 2 * 8, u32(1) << (P22_BITS - 1 + COUNT_BITS));
    n_inputs_ = (p.nn ? 3 : 0) + int(maps_.size()) + int(runs_.size()) + 2 * matchers_ + 2 * p.has(RECOVER) +
                2 * p.has(LINE_MATCH) + p.has(CELL_ORDER) + 2 * p.has(CELL_LEFT) + 1;  // + bias
    if (n_inputs_ > MAX_INPUTS) throw std::invalid_argument("too many context models");
    std::vector<i32> w(n_inputs_, p.nn ? 0 : 16384);
    if (p.nn) w[0] = 65536;
    const int warm = p.has(WARM) ? WARM_UPDATES : 0;
    mixer1_ = Mixer(k, n_inputs_, p.has(MATCH_CTX) ? 96 : 32, p.mixer_lr, w, warm);
    const int eq_sets = p.has(FIELD_EQ) ? 2 : 1;  // FIELD_EQ doubles mixer 4's sets and APM 1's by field_eq
    mixer2_ = Mixer(k, n_inputs_, 256, p.mixer_lr, w, warm);
    if (p.has(LAYERED)) {
      mixer3_ = Mixer(k, n_inputs_, p.has(DIGITS) ? 256 + DIGITS_MAX * 8 * DIGIT_FIELDS : 256, p.mixer_lr, w, warm);
      mixer4_ = Mixer(k, n_inputs_, 16 * 8 * eq_sets, p.mixer_lr, w, warm);
      if (p.has(CLASS_MIX)) mixer5_ = Mixer(k, n_inputs_, CLASS_SETS * CLASS_SETS * 8, p.mixer_lr, w, warm);
      if (p.has(STATE_MIX)) mixer6_ = Mixer(k, n_inputs_, STATE_SETS * 8, p.mixer_lr, w, warm);
      if (p.has(GROUP_MIX)) mixer7_ = Mixer(k, n_inputs_, GROUP_SETS * 8, p.mixer_lr, w, warm);
      if (p.has(ORDER_MIX)) {
        mixer8_ = Mixer(k, n_inputs_, ORDER_SETS, p.mixer_lr, w, warm);
        mixer9_ = Mixer(k, n_inputs_, ORDER_SETS, p.mixer_lr, w, warm);
      }
      if (p.has(PLACE_MIX)) mixer10_ = Mixer(k, n_inputs_, PLACE_SETS, p.mixer_lr, w, warm);
      if (p.has(MATCH_MIX)) mixer11_ = Mixer(k, n_inputs_, MATCH_SETS, p.mixer_lr, w, warm);
      n_final_ = 4 + p.has(CLASS_MIX) + p.has(STATE_MIX) + p.has(GROUP_MIX) + 2 * p.has(ORDER_MIX) + p.has(PLACE_MIX) +
                 p.has(MATCH_MIX) + p.has(NN_FINAL);
      final_ = Mixer(k, n_final_, 8, final_rate(p), std::vector<i32>(size_t(n_final_), 65536 / n_final_), warm);
    }
    if (p.nn) nn_apm_ = APM(*tb_, 65536);
    if (p.apm) {
      apm1_ = APM(*tb_, p.has(FIELD_EQ) ? 256 * 2 * APM1_FIELDS : 256);
      if (p.has(MATCH_APM)) match_apm_ = APM(*tb_, 256 * 2 * MATCH_BANDS);
      if (p.has(GROUP_APM)) group_apm_ = APM(*tb_, 65536);
      apm2_ = APM(*tb_, 65536);
    }
  }

  // the final mixer's rate: SLOW_FINAL's quarter of the mixers' (at least 1), else theirs
  static int final_rate(const Params& p) { return p.has(SLOW_FINAL) ? std::max(p.mixer_lr / 4, 1) : p.mixer_lr; }
  // digits, lower and upper case letters, bytes above 127 (4 classes); space, newline, tab and
  // 24 punctuation marks each their own; the rest one class
  static u32 byte_class(int c) {
    if (c >= '0' && c <= '9') return 0;
    if (c >= 'a' && c <= 'z') return 1;
    if (c >= 'A' && c <= 'Z') return 2;
    if (c >= 128) return 3;
    static constexpr char marks[] = " \n\t\"&'()*+,-./:;<=>?@[]_{|}";
    for (u32 i = 0; i < sizeof(marks) - 1; ++i)
      if (c == marks[i]) return 4 + i;
    return 31;
  }
  static bool cell_separator(int c) { return c == ',' || c == '\t' || c == ';' || c == '|'; }
  static bool separator(int c) {
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
  static u32 field_above(const Lane& L, ByteAt&& byte_at) {
    if (L.field >= L.prev_fields) return 0;
    const u32 q = L.prev_field_start[L.field] + (L.coded - L.field_start[L.field]);
    const u32 end = L.field + 1 < L.prev_fields ? L.prev_field_start[L.field + 1] : L.line;
    const int c = q < end ? byte_at(q) : -1;
    return c < 0 ? 0 : 256 | u32(c);
  }
  // CELL_*'s left and up before the next byte (256 + byte, 0: none; byte_at(lane offset) is -1 where
  // the decoder cannot know the byte)
  template <class ByteAt>
  static void cells_before(Lane& L, ByteAt&& byte_at) {
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
  // PLACES's context bytes: in a number, its places so far and the last byte; elsewhere 0 (order 0)
  static u64 places_context(const Lane& L) {
    return L.num_int ? u64(L.num_int) << 32 | u64(L.num_frac) << 24 | u64(L.num_point) << 20 | (L.hist & 0xFF) : 0;
  }
  // THIS_TOKEN's context bytes: the current token, or between tokens 2**40 | the last one
  static u64 this_token_context(const Lane& L) { return L.token ? u64(L.token) : u64(1) << 40 | L.tokens[0]; }
  // NEST's context bytes: the innermost open bracket, min(depth, 15) and the current token (or the last)
  static u64 nest_context(const Lane& L) {
    return (L.stack & 0xFF) << 40 | u64(std::min<u32>(L.depth, 15)) << 32 | (L.token ? L.token : L.tokens[0]);
  }
  // CELL_UP's context bytes (after cells_before): the byte above, whether the cell so far repeats
  // the one above, the cell and the byte's offset in it
  static u64 up_context(const Lane& L) {
    return u64(L.up) << 24 | u64(L.up_eq) << 20 | u64(L.cell) << 12 |
           std::min<u32>(L.coded - L.cell_start[L.cell], UP_OFFSETS - 1);
  }
  // CELL_LEFT's map context but the expected bit (a predicted byte is only in cells 1 and later)
  static size_t left_band(const Lane& L) { return size_t(std::min(L.cell, ORDER_CELLS - 1) * 2 + u32(L.left_eq)); }
  // CELL_ORDER's map context at bit k, c0 the bits so far
  static size_t order_context(const Lane& L, int k, int c0) {
    int r = 0, u = 0;
    if (L.up) {
      const int above = int(L.up >> (8 - k));  // 1 followed by up's first k bits, as c0
      r = above == c0 ? 1 : c0 > above ? 2 : 3;
      u = int(L.up >> (7 - k)) & 1;
    }
    return size_t((((std::min(L.cell, ORDER_CELLS - 1) * 2 + u32(L.up_eq)) * 4 + u32(r)) * 2 + u32(u)) * 8 + u32(k));
  }
  // the recovering match R after byte c: r, its predicted byte (-1: none the decoder knows); M, the
  // match models' matches and their predicted bytes (-1: none)
  static Lane::Recovering recover_step(Lane::Recovering R, int r, const Lane::Match* M, const int* predicted,
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
  // mixer 3's weight set at bit k: by c1, or (DIGITS) within a number by its digits so far and field
  static int mixer3_set(const Lane& L, int k, bool digits) {
    if (!digits || L.digits == 0) return int(L.hist & 0xFF);
    return int(256 + (L.digits - 1) * 8 + u32(k) + 128 * std::min(L.field, DIGIT_FIELDS - 1));
  }
  // CLASS_MIX's weight set at bit k: by the classes of the last two bytes
  static int class_set(const Lane& L, int k) {
    return int(byte_class(int(L.hist & 255)) * CLASS_SETS + byte_class(int(L.hist >> 8 & 255))) * 8 + k;
  }
  // ORDER_MIX: the first order mixer's weight set, by the last byte and the bits so far c0; the second's,
  // by the last two bytes and c0
  static int order1_set(const Lane& L, int c0) { return int(L.hist & 0xFF) << 8 | c0; }
  static int order2_set(const Lane& L, int c0) {
    return int(hash32(u32(L.hist & 0xFFFF) * 0x9E3779B1u + u32(c0) * 0x3C6EF372u) >> (32 - ORDER_SET_BITS));
  }
  // PLACE_MIX's weight set: by the field, the column (the lane's bytes since its line began) and c0
  static int place_set(const Lane& L, int c0) {
    const u32 column = std::min<u32>(L.coded - L.line, PLACE_MAX - 1);
    return int(std::min<u32>(L.field, PLACE_MAX - 1) << 12 | column << 8 | u32(c0));
  }
  // MATCH_MIX's weight set: by the first match model's predicted byte e (-1: none) and c0
  static int match_set(int e, int c0) { return (e < 0 ? 0 : (e + 1) << 8) | c0; }
  // GROUP_MIX's weight set at bit k: by the last 3 groups
  static int group_set(const Lane& L, int k) {
    return int(hash32(u32(L.groups & 0xFFFFFF) + u32(L.group_repeat)) >> (32 - GROUP_SET_BITS)) * 8 + k;
  }
  // GROUP_APM's context at bit k, c0 the bits so far: by the last 2 groups
  static size_t group_apm_context(const Lane& L, int c0) {
    return hash32(u32(L.groups & 0xFFFF) * 0x9E3779B1u + u32(c0) + u32(L.group_repeat) * 77u) >> 16;
  }
  // STATE_MIX's weight set at bit k: by the field, the brackets' depth, quoting and being in a number
  static int state_set(const Lane& L, int k) {
    return int(std::min<u32>(L.field, FIELDS_MAX - 1) * 16 + std::min<u32>(L.depth, 3) * 4 + u32(L.quoted) * 2 +
               u32(L.num_int > 0)) * 8 + k;
  }
  // the lines, FIELDS, SHAPE, BRACKETS, FIELD_VALUE/EQ, DIGITS, ... and GROUPS state after byte c, which followed
  // `before` (L.coded counts c; FIELD_EQ compares c with L.above, c's field_above)
  static void structure(Lane& L, int c, int before, u64 extras) {
    if (extras & (FIELDS | SHAPE | FIELD_VALUE | FIELD_EQ | DIGITS | RECORD | STATE_MIX | PLACE_MIX)) {
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
    if (extras & CELLS) {
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
    if (extras & DIGITS) L.digits = c >= '0' && c <= '9' ? std::min(L.digits + 1, DIGITS_MAX) : 0;
    if (extras & (NUMBER | PREDICTED | STATE_MIX | LAST_NUMBER | PLACES)) {
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
    if (extras & (FIELD_VALUE | RECORD | LAST_NUMBER))
      L.value = c == '\n' || separator(c) ? 0 : hash32(L.value + u32(c)) | 1u;
    if (c == '\n') {
      L.prev_line = L.line;
      L.line = L.coded;
    }
    if (extras & SHAPE) L.shape = L.shape << 5 | byte_class(c);
    if (extras & GROUPS_ANY) {
      const u64 g = c >= '0' && c <= '9'   ? '0'
                    : c >= 'a' && c <= 'z' ? 'a'
                    : c >= 'A' && c <= 'Z' ? 'A'
                    : c >= 128             ? 128
                                           : u64(c);
      L.group_repeat = (g == '0' || g == 'a' || g == 'A') && (L.groups & 255) == g;
      if (!L.group_repeat) L.groups = L.groups << 8 | g;
    }
    if (extras & (TOKENS | THIS_TOKEN | NEST)) {
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
    if (extras & (BRACKETS | STATE_MIX | NEST)) {
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

  const Tables& tables() const { return *tb_; }
  const kernels::Kernels& kernels() const { return *k_; }
  const Params& params() const { return prm_; }
  u64 position() const { return pos_; }
  size_t bytes() const {
    size_t n = ring_.size() + (heads_.size() + line_heads_.size()) * sizeof(u64) + direct_.size() +
               indirect_.bytes();
    for (const auto& t : tables_) n += t.bytes();
    for (const auto& r : runs_) n += r.size() * sizeof(u32);
    for (const Mixer* m : {&mixer1_, &mixer2_, &mixer3_, &mixer4_, &mixer5_, &mixer6_, &mixer7_, &mixer8_, &mixer9_,
                           &mixer10_, &mixer11_, &final_})
      n += m->bytes();
    for (const APM* a : {&nn_apm_, &apm1_, &apm2_, &match_apm_, &group_apm_}) n += a->bytes();
    return n;
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
    // the match model's predicted byte, if its position is already known to the decoder
    int expect[2] = {-1, -1}, band[2] = {};
    for (int m = 0; m < matchers_; ++m) {
      const Lane::Match& M = L.match[m];
      if (M.len > 0 && valid(M.ptr, at)) expect[m] = ring_[M.ptr & ring_mask()];
      band[m] = expect[m] < 0 ? 0 : std::min<int>(M.len < 16 ? M.len : 12 + ilog2(M.len), MATCH_BANDS - 1);
    }
    const Lane::Recovering& R = L.recover;
    const int rexpect = prm_.has(RECOVER) && R.miss > 0 && valid(R.ptr, at) ? ring_[R.ptr & ring_mask()] : -1;
    int lexpect[LINE_MATCHERS] = {-1, -1};
    if (prm_.has(LINE_MATCH))
      for (int m = 0; m < LINE_MATCHERS; ++m) {
        const Lane::Match& LM = L.line_match[m];
        if (LM.len > 0 && valid(LM.ptr, at)) lexpect[m] = ring_[LM.ptr & ring_mask()];
      }
    // LINE_MATCH's inputs come from this line's matcher while it predicts, else the other: which,
    // its predicted byte and its map's contexts but the expected bit (fixed for the byte)
    const int lm = lexpect[0] >= 0 ? 0 : 1;
    const Lane::Match& LM = L.line_match[lm];
    const int lbyte = lexpect[lm];
    const u32 lwhich = lm == 0 ? 0 : LM.ptr >= at.base + b * at.span + L.line ? 1 : 2;
    const size_t lband = 1 + std::min(LM.len, LINE_LENS - 1) + LINE_LENS * lwhich;
    const size_t rband = 1 + std::min(R.len, RECOVER_LENS - 1) * RECOVER_MISS_BANDS + std::min(R.miss, RECOVER_MISS_BANDS) - 1;
    // each context's hash for this byte, from the lane's own bytes; the first nibble's buckets
    // are fetched while the NN's sums are formed (a hint only: it changes no value)
    const auto lane_byte = [&](u32 q) {  // the byte at lane offset q, -1 where the decoder cannot know it
      const u64 pa = at.base + b * at.span + q;
      return valid(pa, at) ? int(ring_[pa & ring_mask()]) : -1;
    };
    if (prm_.has(FIELDS) || prm_.has(FIELD_EQ)) L.above = field_above(L, lane_byte);
    if (prm_.has(CELLS)) cells_before(L, lane_byte);
    const std::array<u32, 3> ind = prm_.has(INDIRECT) ? indirect_.entries(L.hist) : std::array<u32, 3>{};
    u32 ctx[MAX_INPUTS];
    for (int i = 0; i < nm; ++i) {
      const int o = models_[i].order;
      u64 bytes;
      switch (o) {
        case WORD: bytes = u64(L.word) << 8 | c1; break;
        case WORD_PAIR: bytes = u64(L.word) << 32 | L.prev_word; break;
        case COLUMN: bytes = column_context(L, b, at); break;
        case SPARSE: bytes = L.hist & 0xFFFF00; break;  // the 2 bytes before the last
        case FIELD:  // FIELD_EQ: with field_eq
          bytes = u64(L.above) << 16 | u64(L.field) << 8 | c1;
          if (prm_.has(FIELD_EQ)) bytes |= u64(L.field_eq) << 28;
          break;
        case VALUE: bytes = u64(L.value ? L.value : c1) << 8 | L.field; break;
        case NUMBER_CTX:  // in a number: its places so far and the last 2 bytes; elsewhere order 0
          bytes = L.num_int ? u64(L.num_int) << 32 | u64(L.num_frac) << 24 | u64(L.num_point) << 20 | (L.hist & 0xFFFF) : 0;
          break;
        case RECORD_CTX: bytes = u64(hash32(L.prev_word + hash32(L.word2))) << 32 | (L.value ? L.value : c1); break;
        case PREDICTED_CTX: bytes = predicted_context(L, at, expect[0], rexpect, lexpect[0]); break;
        case LAST_NUMBER_CTX:
          bytes = u64(hash32(L.prev_word + L.last_num * 0x9E3779B1u)) << 32 | (L.value ? L.value : c1);
          break;
        case GROUPS_CTX: bytes = L.groups ^ u64(L.group_repeat); break;
        case GROUP_WORD_CTX:  // the word by the last 4 groups
          bytes = u64(hash32(u32(L.groups) + u32(L.group_repeat) * 0x9E3779B1u)) << 32 | L.word;
          break;
        case TOKEN1: bytes = u64(L.tokens[0]) << 32 | L.token; break;
        case TOKEN2: bytes = u64(hash32(L.tokens[1] + L.tokens[0] * 0x9E3779B1u)) << 32 | L.token; break;
        case TOKEN3:
          bytes = u64(hash32(L.tokens[2] + hash32(L.tokens[1] + L.tokens[0] * 0x9E3779B1u))) << 32 | L.token;
          break;
        case INDIRECT1: bytes = u64(ind[0]) << 8 | c1; break;
        case INDIRECT2: bytes = u64(ind[1]) << 16 | (L.hist & 0xFFFF); break;
        case INDIRECT3: bytes = u64(ind[2]) << 24 | (L.hist & 0xFFFFFF); break;
        case PLACES_CTX: bytes = places_context(L); break;
        case UP_CTX: bytes = up_context(L); break;
        case THIS_TOKEN_CTX: bytes = this_token_context(L); break;
        case NEST_CTX: bytes = nest_context(L); break;
        case LEFT_CTX: bytes = u64(L.left) << 24 | u64(L.left_eq) << 20 | u64(L.cell) << 8 | c1; break;
        case SHAPES: bytes = u64(L.shape & 0x3FFFFFFF) << 8 | L.field; break;
        case LOCAL3: bytes = u64(b) << 24 | (L.hist & 0xFFFFFF); break;
        case LOCAL6: bytes = u64(b) << 48 | (L.hist & 0xFFFFFFFFFFFF); break;
        case MATCHED: {  // what followed the predicted byte
          const int m = matchers_ > 1 && expect[1] >= 0 ? 1 : 0;  // none without the match model: expect[0] < 0
          bytes = L.hist & 0xFFFF;
          if (expect[m] >= 0) bytes |= u64(256 + expect[m]) << 24 | u64(std::min(band[m], 15)) << 16;
          else if (lexpect[0] >= 0) bytes |= u64(512 + lexpect[0]) << 24;  // LINE_MATCH's, this line's
          break;
        }
        case BRACKET: bytes = (L.stack & 0xFFFF) << 24 | u64(std::min<u32>(L.depth, 15)) << 16 | u64(L.quoted) << 8 | c1; break;
        default: bytes = o >= 8 ? L.hist : L.hist & ((u64(1) << (8 * o)) - 1);
      }
      ctx[i] = hash64(bytes, u64(o));
      if (models_[i].table >= 0) tables_[models_[i].table].prefetch(bucket_hash(ctx[i], 1));
    }
    // RUNS: each hashed model's run entry (a hint fetches it), and its chk
    u32* run[MAX_INPUTS] = {};
    u32 run_chk[MAX_INPUTS] = {};
    for (int i = 0; i < nm && !runs_.empty(); ++i)
      if (models_[i].table >= 0) {
        run[i] = &runs_[size_t(models_[i].table)][ctx[i] >> (32 - prm_.table_bits + RUN_BITS_BELOW)];
        run_chk[i] = (ctx[i] >> 2) & 255;
        __builtin_prefetch(run[i]);
      }
    RunGuess guess[MAX_INPUTS];
    // the NN's subtree sums: tree[(1 << d) + v] = total of the byte values whose top d bits are v
    i64 tree[512];
    if (prm_.nn) {
      std::copy(freq, freq + 256, tree + 256);
      for (int d = 7; d >= 0; --d)
        for (int v = 0; v < (1 << d); ++v) tree[(1 << d) + v] = tree[(2 << d) + 2 * v] + tree[(2 << d) + 2 * v + 1];
    }

    if (prm_.apm) apm2_.prefetch(1 | c1 << 8);
    if (prm_.nn) nn_apm_.prefetch(1 | c1 << 8);
    // CLASS_MIX's, STATE_MIX's and GROUP_MIX's weight sets at bit 0: fixed for the byte
    const int class0 = prm_.has(CLASS_MIX) ? class_set(L, 0) : 0, state0 = prm_.has(STATE_MIX) ? state_set(L, 0) : 0;
    const int group0 = prm_.has(GROUP_MIX) ? group_set(L, 0) : 0;
    u8* node[MAX_INPUTS] = {};
    int c0 = 1;  // 1 followed by the bits of this byte so far
    int j = 1;   // the same within the current nibble: a bucket's node (1..15)
    for (int k = 0; k < 8; ++k) {
      if (k == 3)  // the second nibble's buckets are one of two: fetch both ahead (a hint only)
        for (int i = 0; i < nm; ++i)
          if (models_[i].table >= 0)
            for (int y = 0; y < 2; ++y) tables_[models_[i].table].prefetch(bucket_hash(ctx[i], c0 * 2 + y));
      if (k == 0)  // RUNS: each run entry, fetched by now, read once for the byte
        for (int i = 0; i < nm && !runs_.empty(); ++i)
          if (run[i]) guess[i] = run_guess(*run[i], run_chk[i], models_[i].table);
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
      int seen = 0;  // context models that have seen this node before
      for (int i = 0; i < nm; ++i) {
        state[i] = node[i] + (models_[i].table < 0 ? c0 : j);  // order 1's row: by c0 (1..255)
        x[n++] = tb.st(maps_[i].p16(*state[i]));
        seen += *state[i] != 0;
      }
      int runx[MAX_INPUTS];  // RUNS: each run map context (-1: no prediction)
      const int group = k == 0 ? 0 : k == 1 ? 1 : k < 5 ? 2 : 3;  // RUNS: the bit position's group
      for (int i = 0; i < nm && !runs_.empty(); ++i) {
        if (!run[i]) continue;
        const RunGuess& g = guess[i];
        runx[i] = -1;
        x[n] = 0;
        if (g.byte >= 0 && ((g.byte | 256) >> (8 - k)) == c0) {
          runx[i] = g.base + group * 4 + (g.byte >> (7 - k) & 1);
          x[n] = tb.st(run_map_.p16(size_t(runx[i]))) >> g.shift;
        }
        ++n;
      }
      // the predicted bytes' inputs; their maps' contexts (0 without a prediction)
      size_t mcx[2] = {}, rcx = 0, lcx = 0;
      for (int m = 0; m < matchers_; ++m)
        mcx[m] = byte_inputs(tb, match_map_[m], expect[m], size_t(band[m]), L.match[m].len, k, c0, x, n);
      if (prm_.has(RECOVER)) rcx = byte_inputs(tb, recover_map_, rexpect, rband, R.len, k, c0, x, n);
      if (prm_.has(LINE_MATCH)) lcx = byte_inputs(tb, line_map_, lbyte, lband, LM.len, k, c0, x, n);
      const size_t ocx = prm_.has(CELL_ORDER) ? order_context(L, k, c0) : 0;
      if (prm_.has(CELL_ORDER)) x[n++] = tb.st(order_map_.p16(ocx));
      size_t lfx = 0;  // CELL_LEFT's map context
      if (prm_.has(CELL_LEFT))
        lfx = byte_inputs(tb, left_map_, L.left ? int(L.left & 255) : -1, left_band(L), LEFT_LEN, k, c0, x, n);
      x[n++] = 256;  // bias
      // weight sets by bit position and match length, and by the partial byte (LAYERED: also by
      // c1 and by how many contexts are known, then a final mixer)
      int set1 = k + 8 * (expect[0] < 0 ? 0 : 1 + (band[0] >= 16) + (band[0] >= 28));
      if (prm_.has(MATCH_CTX) && mcx[0] != 0) set1 += 32 * (1 + int(mcx[0] & 1));  // by the expected bit
      const int set3 = mixer3_set(L, k, prm_.has(DIGITS));
      const int set4 = std::min(seen, 15) * 8 + k + (prm_.has(FIELD_EQ) && L.field_eq ? 128 : 0);
      const int set5 = class0 + k, set6 = state0 + k, set7 = group0 + k;
      const bool orders = prm_.has(ORDER_MIX);  // version 17's sets: formed only for the mixers present
      const int set8 = orders ? order1_set(L, c0) : 0, set9 = orders ? order2_set(L, c0) : 0;
      const int set10 = prm_.has(PLACE_MIX) ? place_set(L, c0) : 0;
      const int set11 = prm_.has(MATCH_MIX) ? match_set(expect[0], c0) : 0;
      if (prm_.has(SEED_SETS)) seed_sets(k, set1, c0, {set3, set4, set5, set6, set7, set8, set9, set10, set11});
      const int x1 = mixer1_.dot(x, set1), x2 = mixer2_.dot(x, c0);
      int x3 = 0, x4 = 0, x5 = 0, x6 = 0, x7 = 0, x8 = 0, x9 = 0, x10 = 0, x11 = 0, xf[FINAL_INPUTS];
      if (prm_.has(LAYERED)) {
        x3 = mixer3_.dot(x, set3);
        x4 = mixer4_.dot(x, set4);
        xf[0] = x1, xf[1] = x2, xf[2] = x3, xf[3] = x4;
        int nf = 4;
        if (prm_.has(CLASS_MIX)) xf[nf++] = x5 = mixer5_.dot(x, set5);
        if (prm_.has(STATE_MIX)) xf[nf++] = x6 = mixer6_.dot(x, set6);
        if (prm_.has(GROUP_MIX)) xf[nf++] = x7 = mixer7_.dot(x, set7);
        if (prm_.has(ORDER_MIX)) xf[nf++] = x8 = mixer8_.dot(x, set8), xf[nf++] = x9 = mixer9_.dot(x, set9);
        if (prm_.has(PLACE_MIX)) xf[nf++] = x10 = mixer10_.dot(x, set10);
        if (prm_.has(MATCH_MIX)) xf[nf++] = x11 = mixer11_.dot(x, set11);
        if (prm_.has(NN_FINAL)) xf[nf++] = x[0];
      }
      const int xm = prm_.has(LAYERED) ? final_.dot(xf, k) : (x1 + x2) >> 1;
      const int pm = tb.sq(xm);
      int p = pm;
      if (prm_.apm) {
        size_t cx1 = size_t(c0);
        if (prm_.has(FIELD_EQ)) cx1 |= size_t(L.field_eq) << 8 | size_t(std::min<u32>(L.field, APM1_FIELDS - 1)) << 9;
        const int a1 = apm1_.p16(xm, cx1);
        const int pa = (pm + 3 * a1) >> 2;
        const int a2 = apm2_.p16(tb.st(pa), size_t(c0) | c1 << 8);
        p = (pa + 3 * a2) >> 2;
        if (prm_.has(MATCH_APM)) p = (3 * p + match_apm_.p16(xm, size_t(c0) | mcx[0] << 8)) >> 2;
        if (prm_.has(GROUP_APM)) p = (3 * p + group_apm_.p16(xm, group_apm_context(L, c0))) >> 2;
      }
      const int y = io(clampi(p, 1, P16_MAX), sym < 0 ? -1 : (sym >> (7 - k)) & 1);
      if (k < 7) prefetch_big_sets(L, c0 * 2 + y, expect[0]);
      // learn, every component from its own prediction
      mixer1_.update(x, set1, y, tb.sq(x1));
      mixer2_.update(x, c0, y, tb.sq(x2));
      if (prm_.has(LAYERED)) {
        mixer3_.update(x, set3, y, tb.sq(x3));
        mixer4_.update(x, set4, y, tb.sq(x4));
        final_.update(xf, k, y, tb.sq(xm));
        if (prm_.has(CLASS_MIX)) mixer5_.update(x, set5, y, tb.sq(x5));
        if (prm_.has(STATE_MIX)) mixer6_.update(x, set6, y, tb.sq(x6));
        if (prm_.has(GROUP_MIX)) mixer7_.update(x, set7, y, tb.sq(x7));
        if (prm_.has(ORDER_MIX)) mixer8_.update(x, set8, y, tb.sq(x8)), mixer9_.update(x, set9, y, tb.sq(x9));
        if (prm_.has(PLACE_MIX)) mixer10_.update(x, set10, y, tb.sq(x10));
        if (prm_.has(MATCH_MIX)) mixer11_.update(x, set11, y, tb.sq(x11));
      }
      if (prm_.nn) nn_apm_.update(y);
      if (prm_.apm) {
        apm1_.update(y);
        apm2_.update(y);
        if (prm_.has(MATCH_APM)) match_apm_.update(y);
        if (prm_.has(GROUP_APM)) group_apm_.update(y);
      }
      for (int i = 0; i < nm && !runs_.empty(); ++i)
        if (run[i] && runx[i] >= 0) run_map_.update(tb, size_t(runx[i]), y, COUNT_LIMIT_MAX);
      for (int i = 0; i < nm; ++i) {
        maps_[i].update(tb, *state[i], y, COUNT_LIMIT_MAX);
        *state[i] = tb.history.next(*state[i], y);
      }
      for (int m = 0; m < matchers_; ++m) match_map_[m].update(tb, mcx[m], y, COUNT_LIMIT_MAX);
      if (prm_.has(RECOVER)) recover_map_.update(tb, rcx, y, COUNT_LIMIT_MAX);
      if (prm_.has(LINE_MATCH)) line_map_.update(tb, lcx, y, COUNT_LIMIT_MAX);
      if (prm_.has(CELL_ORDER)) order_map_.update(tb, ocx, y, COUNT_LIMIT_MAX);
      if (prm_.has(CELL_LEFT)) left_map_.update(tb, lfx, y, COUNT_LIMIT_MAX);
      c0 = c0 * 2 + y;
      j = j * 2 + y;
    }
    const int c = c0 & 255;
    for (int i = 0; i < nm && !runs_.empty(); ++i)
      if (run[i]) *run[i] = run_after(*run[i], run_chk[i], c);
    end_byte(lanes, b, at, c);
    return c;
  }

 public:
  // RUNS: a run entry after byte c in its context (chk: the context's check byte)
  static u32 run_after(u32 e, u32 chk, int c) {
    const u32 b1 = e >> 16 & 255, n = e & 255;
    if (e >> 24 != chk || n == 0) return chk << 24 | u32(c) << 16 | u32(c) << 8 | 1;
    if (b1 == u32(c)) return e - n + std::min<u32>(n + 1, 255);
    return chk << 24 | u32(c) << 16 | b1 << 8 | 1;
  }
  // RUNS: what model m's run entry e (its context's check byte chk) predicts for the byte
  struct RunGuess {
    int byte = -1;   // the last byte seen in the context (-1: none)
    int base = 0;    // its map context but the bit position's group and the expected bit
    int shift = 0;   // 2 when the byte before it differed, else 0
  };
  static RunGuess run_guess(u32 e, u32 chk, int m) {
    const u32 b1 = e >> 16 & 255, b2 = e >> 8 & 255, n = e & 255;
    if (e >> 24 != chk || n == 0) return {};
    const int u = b2 != b1;  // the map context is 256 m + ((min(n, 15) * 4 + group) * 2 + u) * 2 + bit
    return {int(b1), 256 * m + int(std::min(n, RUN_COUNTS - 1)) * 16 + u * 2, u ? 2 : 0};
  }

 private:
  static int ilog2(u32 x) { return 31 - __builtin_clz(x); }
  // A predicted byte's two inputs at bit k (a match model's, RECOVER's, LINE_MATCH's), appended to
  // x: while `byte` (-1: none) agrees with the bits so far c0, the stretch of its map's P16 in
  // context band * 2 + the expected bit and +-min(32 len, 2047) by that bit; else the map's
  // context 0 and 0. Returns the context, for the map's update.
  static size_t byte_inputs(const Tables& tb, const StateMap& map, int byte, size_t band, u32 len, int k, int c0,
                            i32* x, int& n) {
    const bool on = byte >= 0 && ((byte | 256) >> (8 - k)) == c0;
    const int ebit = on ? (byte >> (7 - k)) & 1 : 0;
    const size_t cx = on ? band * 2 + size_t(ebit) : 0;
    x[n++] = tb.st(map.p16(cx));
    x[n++] = on ? (ebit ? 1 : -1) * std::min<int>(int(len) * 32, 2047) : 0;
    return cx;
  }
  // SEED_SETS (the contract says how): mixer 1's set for this match state, if never updated, starts as
  // its set k (no match state); then each other mixer's set, if never updated, as mixer 1's. A set seen
  // for the first time (a new partial byte, class pair, order-2 context) starts from weights that
  // already know the file rather than from the NN alone. later: the sets of mixers 3 to 11, in order.
  void seed_sets(int k, int set1, int c0, const std::array<int, 9>& later) {
    mixer1_.seed(set1, mixer1_.set_weights(k));
    const i32* from = mixer1_.set_weights(set1);
    mixer2_.seed(c0, from);
    if (!prm_.has(LAYERED)) return;
    mixer3_.seed(later[0], from);
    mixer4_.seed(later[1], from);
    if (prm_.has(CLASS_MIX)) mixer5_.seed(later[2], from);
    if (prm_.has(STATE_MIX)) mixer6_.seed(later[3], from);
    if (prm_.has(GROUP_MIX)) mixer7_.seed(later[4], from);
    if (prm_.has(ORDER_MIX)) mixer8_.seed(later[5], from), mixer9_.seed(later[6], from);
    if (prm_.has(PLACE_MIX)) mixer10_.seed(later[7], from);
    if (prm_.has(MATCH_MIX)) mixer11_.seed(later[8], from);
  }
  // the rows of the mixers with 65,536 sets for the next bit, partial byte c0, rarely in cache (a hint
  // only, fetched while the bit before updates its models; fetching a byte's first rows too measured slower)
  void prefetch_big_sets(const Lane& L, int c0, int expect) const {
    if (prm_.has(ORDER_MIX)) mixer8_.prefetch(order1_set(L, c0)), mixer9_.prefetch(order2_set(L, c0));
    if (prm_.has(PLACE_MIX)) mixer10_.prefetch(place_set(L, c0));
    if (prm_.has(MATCH_MIX)) mixer11_.prefetch(match_set(expect, c0));
  }
  u64 ring_mask() const { return (u64(1) << prm_.history_bits) - 1; }

  // PREDICTED's context bytes (the contract says how): expect, rexpect, lexpect, the first match
  // model's, the recovering match's and the first line matcher's predicted bytes (-1: none)
  u64 predicted_context(const Lane& L, const Where& at, int expect, int rexpect, int lexpect) const {
    u64 src, ptr;
    int e;
    if (rexpect >= 0) src = 1, ptr = L.recover.ptr, e = rexpect;
    else if (expect >= 0) src = 2, ptr = L.match[0].ptr, e = expect;
    else if (lexpect >= 0) src = 3, ptr = L.line_match[0].ptr, e = lexpect;
    else return 0;
    const u64 e1 = valid(ptr - 1, at) ? ring_[(ptr - 1) & ring_mask()] : 0;
    return src << 48 | u64(e) << 40 | e1 << 32 | (L.hist & 0xFF) << 24 | u64(std::min<u32>(L.recover.len, 3)) << 20 |
           u64(L.num_int) << 12 | u64(L.num_frac) << 4 | u64(L.num_point);
  }

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

 public:
  // lane b's state and the shared tables after its byte c (code_byte's last step; bound for tests)
  void end_byte(std::vector<Lane>& lanes, size_t b, const Where& at, int c) {
    Lane& L = lanes[b];
    const u64 pos = at.base + b * at.span + L.coded;
    const int before = int(L.hist & 0xFF);
    if (prm_.has(INDIRECT)) indirect_.update(L.hist, c);  // what followed the lane's contexts before c
    L.hist = (L.hist << 8) | u64(c);
    const int lc = (c >= 'A' && c <= 'Z') ? c + 32 : c;
    if (lc >= 'a' && lc <= 'z') {
      L.word = hash32(L.word + u32(lc)) | 1u;
    } else if (L.word) {
      L.word2 = L.prev_word;
      L.prev_word = L.word;
      L.word = 0;
    }
    ++L.coded;
    structure(L, c, before, prm_.extras);
    if (!ring_.empty()) ring_[pos & ring_mask()] = u8(c);
    if (prm_.has(LINE_MATCH)) line_match(L, b, at, pos, c);
    if (!prm_.match) return;
    if (prm_.has(RECOVER)) recover(L, at, c);
    for (Lane::Match& M : L.match) {  // a match goes on if it predicted this byte from known history
      if (M.len > 0 && valid(M.ptr, at) && ring_[M.ptr & ring_mask()] == c) {
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
        while (n < u32(prm_.match_min) && cand > n && valid(cand - 1 - n, at) &&
               ring_[(cand - 1 - n) & ring_mask()] == u8(L.hist >> (8 * n)))
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
  // LINE_MATCH after byte c at global position pos (the contract says how)
  void line_match(Lane& L, size_t b, const Where& at, u64 pos, int c) {
    for (Lane::Match& M : L.line_match)
      if (M.len > 0 && c != '\n' && valid(M.ptr, at) && ring_[M.ptr & ring_mask()] == c) {
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
      if (M.len == 0 && head && cand >= start + 2 && cand <= pos && valid(cand - 2, at) &&
          ring_[(cand - 1) & ring_mask()] == u8(L.hist) && ring_[(cand - 2) & ring_mask()] == u8(L.hist >> 8)) {
        M.len = 2;
        M.ptr = cand;
      }
    }
    head = pos + 2;
  }

  // RECOVER, before the match models move on past byte c (the contract says how)
  void recover(Lane& L, const Where& at, int c) const {
    const auto byte = [&](u64 p) { return valid(p, at) ? int(ring_[p & ring_mask()]) : -1; };
    int predicted[2] = {-1, -1};
    for (int m = 0; m < matchers_; ++m)
      if (L.match[m].len > 0) predicted[m] = byte(L.match[m].ptr);
    L.recover = recover_step(L.recover, L.recover.miss > 0 ? byte(L.recover.ptr) : -1, L.match.data(), predicted,
                             matchers_, c);
  }

  Params prm_;
  std::shared_ptr<const Tables> tb_;
  const kernels::Kernels* k_;
  // a context model: its order (1..8, or one of the kinds below) and hashed table (-1: direct)
  struct Model {
    int order, table;
  };
  static constexpr int WORD = 9, WORD_PAIR = 10, COLUMN = 11, SPARSE = 12, FIELD = 13, BRACKET = 14, SHAPES = 15,
                       LOCAL3 = 16, LOCAL6 = 17, MATCHED = 18, VALUE = 19, NUMBER_CTX = 20, RECORD_CTX = 21,
                       PREDICTED_CTX = 22, LEFT_CTX = 23, LAST_NUMBER_CTX = 24,
                       GROUPS_CTX = 25, GROUP_WORD_CTX = 26, TOKEN1 = 27, TOKEN2 = 28, TOKEN3 = 29,
                       INDIRECT1 = 30, INDIRECT2 = 31, INDIRECT3 = 32,
                       PLACES_CTX = 33, UP_CTX = 34, THIS_TOKEN_CTX = 35, NEST_CTX = 36;
  // mixers 1-4, CLASS_MIX's, STATE_MIX's, GROUP_MIX's, ORDER_MIX's 2, PLACE_MIX's, MATCH_MIX's, NN_FINAL's
  static constexpr int FINAL_INPUTS = 12;

  static u32 bucket_hash(u32 ctx, int c0) { return hash32(ctx + u32(c0) * 0x9E3779B1u); }
  std::vector<Model> models_;
  std::vector<BucketTable> tables_;
  std::vector<u8> direct_;  // order 1: c1 << 8 | c0 -> bit-history state
  std::vector<StateMap> maps_;
  int matchers_ = 0;  // match models: 0, 1, or 2 with LOCAL_MATCH
  StateMap match_map_[2];
  StateMap line_map_;  // LINE_MATCH: by the matcher, its length, the line of its ptr and the expected bit
  std::vector<u64> line_heads_;  // LINE_MATCH: position + 1 of the byte after each lane's 2-byte context
  StateMap recover_map_;  // RECOVER: by the recovering match's length, misses and expected bit
  StateMap order_map_;  // CELL_ORDER: by the cell, up_eq, the bits so far against up's, up's bit and k
  StateMap left_map_;  // CELL_LEFT: by the cell, left_eq and the expected bit
  std::vector<std::vector<u32>> runs_;  // RUNS: each hashed model's run table (as tables_)
  StateMap run_map_;  // RUNS: by the model, the run's length, the bit position, b2 != b1 and b1's bit
  std::vector<u8> ring_;
  std::vector<u64> heads_;
  Indirect indirect_;  // INDIRECT's tables
  Mixer mixer1_, mixer2_, mixer3_, mixer4_, mixer5_, mixer6_, mixer7_, mixer8_, mixer9_, mixer10_, mixer11_, final_;
  int n_final_ = 4;  // the final mixer's inputs
  APM nn_apm_, apm1_, apm2_, match_apm_, group_apm_;
  int n_inputs_ = 0;
  u64 pos_ = 0;
};


}  // namespace shazip::stage
