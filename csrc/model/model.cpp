// The int8 step (see model.h). Every line mirrors quant.IntModel.step; the arithmetic itself is
// in the kernels (kernels/generic.h and the path files), called through the Kernels table.
#include "model/model.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <set>
#include <type_traits>

namespace shazip::model {

using namespace kernels;

namespace {

constexpr i64 VOCAB = 256;
constexpr i64 INT64_SAFE = i64(1) << 62;
constexpr i64 SOLO_LANES = 4;  // measured: see Model::step

const std::vector<std::string> BLOCK_TENSORS = {
    "ln_start.gain", "ln_start.bias", "lstm.w0", "lstm.w1", "lstm.m0", "lstm.m1", "lstm.bias", "ln_ff.gain",
    "ln_ff.bias", "ln_xff.gain", "ln_xff.bias", "boom.w0", "boom.m0", "boom.bias"};
const std::vector<std::string> ATTN_TENSORS = {
    "ln_mem.gain", "ln_mem.bias", "ln_mid.gain", "ln_mid.bias", "q.w0", "q.m0", "q.bias", "q_ln.gain", "q_ln.bias", "vs"};
const std::vector<std::string> OUT_TENSORS = {"out.w0", "out.m0", "out.bias"};
const std::vector<std::string> TABLE_NAMES = {"sigmoid", "tanh", "gelu", "exp_att", "exp_out"};

std::string shape_str(const std::vector<i64>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

std::string names_str(const std::set<std::string>& names) {
  std::string r;
  for (const auto& n : names) r += (r.empty() ? "" : ", ") + n;
  return r;
}

// t must hold exactly `names`
void check_names(const Arrays& t, const std::vector<std::string>& names, const std::string& where) {
  std::set<std::string> want(names.begin(), names.end()), missing, extra;
  for (const auto& n : want)
    if (!t.count(n)) missing.insert(n);
  for (const auto& [n, _] : t)
    if (!want.count(n)) extra.insert(n);
  require(missing.empty(), where + ": missing arrays: " + names_str(missing));
  require(extra.empty(), where + ": unexpected arrays: " + names_str(extra));
}

const Array& get(const Arrays& t, const std::string& name, bool int8, const std::vector<i64>& shape,
                 const std::string& where) {
  auto it = t.find(name);
  require(it != t.end(), where + ": array '" + name + "' missing");
  const Array& a = it->second;
  require(a.int8 == int8, where + ": array '" + name + "' must be " + (int8 ? "int8" : "int64"));
  require(a.shape == shape, where + ": array '" + name + "' has shape " + shape_str(a.shape) + ", expected " +
                                shape_str(shape));
  return a;
}

i64 max_abs(const std::vector<i64>& v) {
  i64 m = 0;
  for (i64 x : v) m = std::max(m, x == INT64_MIN ? INT64_MAX : std::abs(x));
  return m;
}

i64 round_up(i64 x, i64 m) { return (x + m - 1) / m * m; }

}  // namespace

i64 Array::size() const {
  i64 n = 1;
  for (i64 s : shape) n *= s;
  return n;
}

const std::vector<std::string>& block_tensor_names() { return BLOCK_TENSORS; }
const std::vector<std::string>& attn_tensor_names() { return ATTN_TENSORS; }
const std::vector<std::string>& out_tensor_names() { return OUT_TENSORS; }
const std::vector<std::string>& table_names() { return TABLE_NAMES; }

// One pool member's working memory for up to `rows` lanes, carved from one aligned block.
struct Scratch {
  Aligned mem;
  i64 rows = 0;
  i64 *h, *ff, *mid, *tmp, *ql, *qn, *e, *em, *big, *es;
  i8 *q8, *qm, *qq;
  i32 *acc0, *acc1, *cell, *dots, *u, *mixv;
  u8 *gemm, *mixs;

  Scratch(i64 rows_, i64 d, i64 db, i64 M, const Kernels& k) : rows(rows_) {
    const i64 R = std::max<i64>(rows_, 1), wide = std::max({4 * d, db, VOCAB});
    const i64 n = M + 1;
    i64 off = 0;
    u8* base = nullptr;
    auto take = [&](auto*& p, i64 bytes) {
      using T = std::remove_reference_t<decltype(*p)>;
      p = base != nullptr ? reinterpret_cast<T*>(base + off) : nullptr;
      off += round_up(std::max<i64>(bytes, 1), 64);
    };
    auto carve = [&] {
      off = 0;
      take(h, R * d * 8);
      take(ff, R * d * 8);
      take(mid, R * d * 8);
      take(tmp, d * 8);
      take(ql, d * 8);
      take(qn, d * 8);
      take(e, R * 8);
      take(em, R * 8);
      take(big, std::max({2 * db, VOCAB, 2 * n}) * 8);
      take(es, n * 8);
      take(q8, R * d);
      take(qm, R * d);
      take(qq, d);
      take(acc0, R * wide * 4);
      take(acc1, R * 4 * d * 4);
      take(cell, 8 * d * 4);
      take(dots, n * 4);
      take(u, n * 4);
      take(mixv, d * 4);
      take(gemm, k.gemm_scratch_bytes(R, d));
      take(mixs, 32 * (n + 2));
    };
    carve();
    mem.resize(off);
    base = mem.data();
    carve();
  }
};

State::State() = default;
State::~State() = default;

Model::Linear Model::linear(const Arrays& t, const std::string& name, int parts, i64 shift, i64 K, i64 N,
                            const std::string& where) {
  Linear l;
  l.K = K;
  l.N = N;
  require(shift >= 0 && shift <= 62, where + ": shift of " + name + " out of range");
  l.shift = static_cast<int>(shift);
  double bound = 0;  // |sum of products| before the shift, as numerics.Linear.build bounds it
  for (int p = 0; p < parts; ++p) {
    const std::string wn = name + ".w" + std::to_string(p), mn = name + ".m" + std::to_string(p);
    const Array& w = get(t, wn, true, {K, N}, where);
    const Array& m = get(t, mn, false, {N}, where);
    Aligned packed;
    packed.resize(k_.packed_bytes(K, N));
    k_.pack(w.i8s.data(), K, N, packed.data());
    l.w.push_back(std::move(packed));
    l.m.push_back(m.i64s);
    const double e_max = (name == "lstm" && p == 1) ? 1.0 : static_cast<double>(R_MAX);  // h: fixed scale
    bound += static_cast<double>(K) * 127 * 128 * e_max * static_cast<double>(max_abs(m.i64s));
  }
  l.bias = get(t, name + ".bias", false, {N}, where).i64s;
  bound += static_cast<double>(max_abs(l.bias)) + std::ldexp(1.0, l.shift);
  require(bound < static_cast<double>(INT64_SAFE), where + ": " + name + " could overflow int64 (multipliers too large)");
  return l;
}

Model::Model(const Spec& spec, const Kernels& k) : k_(k), d_(spec.d_model), db_(spec.d_boom), M_(spec.mem_len) {
  const i64 d = d_;
  require(d >= 1 && d * 127 * 127 < (i64(1) << 24), "d_model must be between 1 and 1040 (exact attention sums)");
  require(db_ >= d && db_ % d == 0, "d_boom must be a positive multiple of d_model");
  require(M_ >= 1, "mem_len must be positive");
  require(spec.blocks.size() >= 1, "the model needs at least one block");
  require(spec.blocks.size() == spec.shifts.size(), "one shift set per block");

  require(!spec.embed.int8 && spec.embed.shape == std::vector<i64>{VOCAB, d},
          "embed must be int64 [256, " + std::to_string(d) + "]");
  require(max_abs(spec.embed.i64s) <= R_MAX, "embed entries exceed the residual range");

  check_names(spec.tables, TABLE_NAMES, "tables");
  const std::map<std::string, std::pair<i64, std::vector<i32>*>> tables = {
      {"sigmoid", {2 * LUT_HALF + 1, &sig_}}, {"tanh", {2 * LUT_HALF + 1, &tanh_}},
      {"gelu", {2 * LUT_HALF + 1, &gelu_}},   {"exp_att", {EXP_ATT_MAX + 1, &exp_att_}},
      {"exp_out", {EXP_OUT_MAX + 1, &exp_out_}}};
  for (const auto& [name, what] : tables) {
    const Array& t = get(spec.tables, name, false, {what.first}, "tables");
    for (i64 v : t.i64s) require(v >= INT32_MIN && v <= INT32_MAX, "table " + name + ": entry does not fit int32");
    what.second->assign(t.i64s.begin(), t.i64s.end());
  }
  // The ranges numerics.py's tables have, which the kernels' int64 products rely on.
  for (i32 v : sig_) require(v >= -(1 << GATE_FRAC) && v <= (1 << GATE_FRAC), "table sigmoid: entry out of Q15 range");
  for (i32 v : tanh_) require(v >= -(1 << GATE_FRAC) && v <= (1 << GATE_FRAC), "table tanh: entry out of Q15 range");
  for (i32 v : exp_att_) require(v >= 0 && v <= (1 << 16), "table exp_att: entry out of [0, 2**16]");
  require(exp_att_[0] >= 1, "table exp_att: the first entry must be positive");

  int attn_blocks = 0;
  for (size_t i = 0; i < spec.blocks.size(); ++i) {
    const Arrays& t = spec.blocks[i];
    const std::string where = "block " + std::to_string(i);
    Block b;
    b.attn = t.count("vs") > 0;
    std::vector<std::string> names = BLOCK_TENSORS;
    if (b.attn) names.insert(names.end(), ATTN_TENSORS.begin(), ATTN_TENSORS.end());
    check_names(t, names, where);
    const auto& sh = spec.shifts[i];
    std::set<std::string> want_shifts = {"lstm", "boom"};
    if (b.attn) want_shifts.insert("q");
    std::set<std::string> have_shifts;
    for (const auto& [n, _] : sh) have_shifts.insert(n);
    require(have_shifts == want_shifts, where + ": shifts must be exactly " + names_str(want_shifts));
    auto norm = [&](const std::string& n) {
      Norm r;
      r.gain = get(t, n + ".gain", false, {d}, where).i64s;
      r.bias = get(t, n + ".bias", false, {d}, where).i64s;
      // numerics.Norm.build's bounds: gain * |x - mean| < 2**62, |bias| < R_MAX
      require(max_abs(r.gain) < (i64(1) << 40), where + ": " + n + " gain too large");
      require(max_abs(r.bias) <= R_MAX, where + ": " + n + " bias exceeds the residual range");
      return r;
    };
    b.ln_start = norm("ln_start");
    b.lstm = linear(t, "lstm", 2, sh.at("lstm"), d, 4 * d, where);
    b.ln_ff = norm("ln_ff");
    b.ln_xff = norm("ln_xff");
    b.boom = linear(t, "boom", 1, sh.at("boom"), d, db_, where);
    if (b.attn) {
      ++attn_blocks;
      b.ln_mem = norm("ln_mem");
      b.ln_mid = norm("ln_mid");
      b.q = linear(t, "q", 1, sh.at("q"), d, d, where);
      b.q_ln = norm("q_ln");
      b.vs = get(t, "vs", false, {d}, where).i64s;
      require(max_abs(b.vs) <= (i64(1) << 20), where + ": value gate outside [-1, 1]");
    }
    blocks_.push_back(std::move(b));
  }
  require(attn_blocks <= 1, "at most one attention block (they would share the ring)");
  check_names(spec.out, OUT_TENSORS, "out");
  out_ = linear(spec.out, "out", 1, spec.out_shift, d, VOCAB, "out");
  first_rows(spec.embed.i64s);
}

void Model::first_rows(const std::vector<i64>& embed) {
  const i64 d = d_;
  const Block& blk = blocks_[0];
  first_.h.resize(size_t(VOCAB * d));
  first_.e.resize(size_t(VOCAB));
  first_.acc.resize(size_t(VOCAB * 4 * d));
  std::vector<i8> q(size_t(VOCAB * d));
  for (i64 v = 0; v < VOCAB; ++v) {
    i64* h = first_.h.data() + v * d;
    k_.layer_norm(embed.data() + v * d, blk.ln_start.gain.data(), blk.ln_start.bias.data(), d, h);
    first_.e[size_t(v)] = k_.quantize_row(h, d, q.data() + v * d);
  }
  Aligned scratch;
  scratch.resize(k_.gemm_scratch_bytes(VOCAB, d));
  k_.gemm(q.data(), VOCAB, d, 4 * d, blk.lstm.w[0].data(), first_.acc.data(), scratch.data());
}

std::unique_ptr<State> Model::new_state(i64 lanes) const {
  require(lanes >= 0, "lanes must be non-negative");
  auto s = std::make_unique<State>();
  const i64 L = n_layers();
  s->lanes = lanes;
  s->h.assign(static_cast<size_t>(L * lanes * d_), 0);
  s->c.assign(static_cast<size_t>(L * lanes * d_), 0);
  s->ring.assign(static_cast<size_t>(lanes * M_ * d_), 0);
  s->ring_e.assign(static_cast<size_t>(lanes * M_), 0);
  s->owner = this;
  return s;
}

void Model::ensure_scratch(State& s, i64 rows, int members) const {
  if (static_cast<int>(s.scratch.size()) >= members && s.scratch_rows >= rows) return;
  rows = std::max(rows, s.scratch_rows);
  const int n = std::max(members, static_cast<int>(s.scratch.size()));
  s.scratch.clear();
  for (int i = 0; i < n; ++i) s.scratch.push_back(std::make_unique<Scratch>(rows, d_, db_, M_, k_));
  s.scratch_rows = rows;
}

void Model::step_lanes(State& s, i64 t, const u8* prev, i64 lo, i64 hi, i64* freq, ThreadPool& pool,
                       int first_member) const {
  require(s.owner == this, "this state belongs to another model");
  require(lo >= 0 && lo <= hi && hi <= s.lanes, "active lanes out of range");
  require(t >= 0 && first_member >= 0, "a step is a count, and members are counted from 0");
  const i64 n = hi - lo;
  const int T = pool.size();
  // Each member takes SOLO_LANES lanes or more: each streams every weight from memory once a
  // step, which at a few lanes is most of the step, and waking a member costs more than it
  // saves on fewer. So `use` members work (the rest of the team wakes and returns), or the
  // caller alone: 32 lanes on 16 threads run on 8, not on one.
  const int use = int(std::min<i64>(T, n / SOLO_LANES));
  // rows per member: ceil(lanes / T) when all work; below that, at most 2 * SOLO_LANES - 1
  ensure_scratch(s, std::max((s.lanes + T - 1) / T, std::min(s.lanes, 2 * SOLO_LANES - 1)), first_member + T);
  if (use <= 1) {
    if (n > 0) lanes(s, t, lo, hi, prev, freq, *s.scratch[size_t(first_member)]);
  } else {
    pool.run([&](int member) {
      const i64 a = lo + n * member / use, b = lo + n * (member + 1) / use;
      if (member < use && a < b) lanes(s, t, a, b, prev, freq, *s.scratch[size_t(first_member + member)]);
    });
  }
}

void Model::gemm(const i8* a, i64 rows, const Linear& l, int part, i32* c, Scratch& w) const {
  k_.gemm(a, rows, l.K, l.N, l.w[part].data(), c, w.gemm);
}

// The step for lanes [lo, hi): local row b is lane lo + b.
void Model::lanes(State& s, i64 t, i64 lo, i64 hi, const u8* prev, i64* freq, Scratch& w) const {
  const Kernels& k = k_;
  const i64 B = hi - lo, d = d_, DB = db_;
  i64* h = w.h;
  for (size_t layer = 0; layer < blocks_.size(); ++layer) {
    const Block& blk = blocks_[layer];
    // h = ln_start(h); the LSTM on it and on its int8 state. The first block's rows up to the
    // input's matmul are first_'s, by the previous byte.
    if (layer == 0) {
      for (i64 b = 0; b < B; ++b) {
        std::memcpy(h + b * d, first_.h.data() + prev[lo + b] * d, d * sizeof(i64));
        w.e[b] = first_.e[prev[lo + b]];
      }
    } else {
      for (i64 b = 0; b < B; ++b) {
        k.layer_norm(h + b * d, blk.ln_start.gain.data(), blk.ln_start.bias.data(), d, w.tmp);
        std::memcpy(h + b * d, w.tmp, d * sizeof(i64));
        w.e[b] = k.quantize_row(h + b * d, d, w.q8 + b * d);
      }
      gemm(w.q8, B, blk.lstm, 0, w.acc0, w);
    }
    auto x_row = [&](i64 b) { return layer == 0 ? first_.acc.data() + prev[lo + b] * 4 * d : w.acc0 + b * 4 * d; };
    i8* hq = s.h.data() + (layer * s.lanes + lo) * d;
    i64* c = s.c.data() + (layer * s.lanes + lo) * d;
    gemm(hq, B, blk.lstm, 1, w.acc1, w);
    for (i64 b = 0; b < B; ++b)
      k.lstm_cell(x_row(b), w.acc1 + b * 4 * d, w.e[b],
                  blk.lstm.m[0].data(), blk.lstm.m[1].data(),
                  blk.lstm.bias.data(), blk.lstm.shift, sig_.data(), tanh_.data(), d, c + b * d, hq + b * d,
                  h + b * d, w.cell);
    if (blk.attn) attend(blk, s, t, lo, B, w);
    // h = ln_ff(h) + Boom(ln_xff(h))
    for (i64 b = 0; b < B; ++b) {
      k.layer_norm(h + b * d, blk.ln_ff.gain.data(), blk.ln_ff.bias.data(), d, w.ff + b * d);
      k.layer_norm(h + b * d, blk.ln_xff.gain.data(), blk.ln_xff.bias.data(), d, w.tmp);
      w.e[b] = k.quantize_row(w.tmp, d, w.q8 + b * d);
    }
    gemm(w.q8, B, blk.boom, 0, w.acc0, w);
    for (i64 b = 0; b < B; ++b)
      k.boom(w.acc0 + b * DB, w.e[b], blk.boom.m[0].data(), blk.boom.bias.data(), blk.boom.shift, gelu_.data(),
             w.ff + b * d, d, DB, h + b * d, w.big);
  }
  // the output layer: logits -> frequencies
  for (i64 b = 0; b < B; ++b) w.e[b] = k.quantize_row(h + b * d, d, w.q8 + b * d);
  gemm(w.q8, B, out_, 0, w.acc0, w);
  for (i64 b = 0; b < B; ++b)
    k.out_freq(w.acc0 + b * VOCAB, w.e[b], out_.m[0].data(), out_.bias.data(), out_.shift, exp_out_.data(), VOCAB,
               freq + (lo + b) * VOCAB, w.big);
}

// quant.IntModel._attend for lanes [lo, lo + B) at step pos, then h = ln_mid(h) + attention;
// writes the lanes' ring slot after using the ring.
void Model::attend(const Block& blk, State& s, i64 pos, i64 lo, i64 B, Scratch& w) const {
  const Kernels& k = k_;
  const i64 d = d_, M = M_;
  const i64 slot = pos % M, filled = std::min(pos, M);
  i64* h = w.h;
  for (i64 b = 0; b < B; ++b) {
    k.layer_norm(h + b * d, blk.ln_mid.gain.data(), blk.ln_mid.bias.data(), d, w.mid + b * d);
    k.layer_norm(h + b * d, blk.ln_mem.gain.data(), blk.ln_mem.bias.data(), d, w.tmp);
    w.em[b] = k.quantize_row(w.tmp, d, w.qm + b * d);
    w.e[b] = k.quantize_row(w.mid + b * d, d, w.q8 + b * d);
  }
  gemm(w.q8, B, blk.q, 0, w.acc0, w);
  for (i64 b = 0; b < B; ++b) {
    k.linear_clamp(w.acc0 + b * d, w.e[b], blk.q.m[0].data(), blk.q.bias.data(), blk.q.shift, d, R_MAX, w.ql);
    k.layer_norm(w.ql, blk.q_ln.gain.data(), blk.q_ln.bias.data(), d, w.qn);
    const i64 eq = k.quantize_row(w.qn, d, w.qq);
    i8* ring = s.ring.data() + (lo + b) * M * d;
    i64* ring_e = s.ring_e.data() + (lo + b) * M;
    const i8* qm = w.qm + b * d;
    // keys: the ring's first `filled` slots, then the current entry
    k.dots(ring, filled, d, w.qq, w.dots);
    k.dots(qm, 1, d, w.qq, w.dots + filled);
    std::memcpy(w.es, ring_e, filled * sizeof(i64));
    w.es[filled] = w.em[b];
    const i64 ebar = k.attention_weights(w.dots, w.es, filled + 1, eq, exp_att_.data(), w.u, w.big);
    k.mix(ring, filled, w.u, qm, w.u[filled], d, w.mixv, w.mixs);
    k.attention_out(w.mixv, ebar, blk.vs.data(), w.mid + b * d, d, h + b * d);
    std::memcpy(ring + slot * d, qm, d);
    ring_e[slot] = w.em[b];
  }
}

}  // namespace shazip::model
