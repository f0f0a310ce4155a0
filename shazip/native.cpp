// The integer step of quant.IntModel in C++ (CPU): the same integers, computed without
// Python's per-operation overhead and with an int8 attention memory.
//
// Every line below mirrors a line of shazip/quant.py, whose module docstring states the
// numerics contract. Only integer arithmetic appears (plus one IEEE sqrt whose result is
// corrected to the exact integer square root), so compiler flags, vector width and thread
// count cannot change a result; tests/test_native.py checks equality with quant.py.
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

namespace {

using I64 = int64_t;
using Tensors = std::map<std::string, at::Tensor>;

// The constants of quant.py's contract. `contract()` exports them with the tensor layout below,
// and native.py refuses to run this step unless they equal quant.py's (quant.CONTRACT).
constexpr int FRAC = 10;
constexpr I64 ONE = I64(1) << FRAC;
constexpr I64 R_MAX = (I64(1) << 20) - 1;
constexpr I64 LUT_RANGE = 8;
constexpr I64 LUT_HALF = LUT_RANGE * ONE;  // tables cover [-8, 8]
constexpr int GATE_FRAC = 15;
constexpr I64 C_MAX = (I64(1) << 22) - 1;
constexpr I64 EXP_ATT_RANGE = 16;
constexpr I64 EXP_ATT_MAX = EXP_ATT_RANGE * ONE;
constexpr I64 EXP_OUT_RANGE = 24;
constexpr I64 EXP_OUT_MAX = EXP_OUT_RANGE * ONE;
constexpr I64 MIX_MASS = I64(1) << 17;
constexpr int NORM_GAIN_BITS = 16;
// Named tensors the constructor takes (native.py's `block_tensors` makes them from quant.py's
// objects): per block, then the attention block's extra ones; the output layer; the tables.
const std::vector<std::string> BLOCK_TENSORS = {
    "ln_start.gain", "ln_start.bias", "lstm.w0", "lstm.w1", "lstm.m0", "lstm.m1", "lstm.bias", "ln_ff.gain",
    "ln_ff.bias", "ln_xff.gain", "ln_xff.bias", "boom.w0", "boom.m0", "boom.bias"};
const std::vector<std::string> ATTN_TENSORS = {
    "ln_mem.gain", "ln_mem.bias", "ln_mid.gain", "ln_mid.bias", "q.w0", "q.m0", "q.bias", "q_ln.gain", "q_ln.bias", "vs"};
const std::vector<std::string> OUT_TENSORS = {"out.w0", "out.m0", "out.bias"};
const std::vector<std::string> TABLES = {"sigmoid", "tanh", "gelu", "exp_att", "exp_out"};

pybind11::dict contract() {
  pybind11::dict c;
  for (const auto& [name, value] : std::initializer_list<std::pair<const char*, I64>>{
           {"FRAC", FRAC}, {"R_MAX", R_MAX}, {"LUT_RANGE", LUT_RANGE}, {"GATE_FRAC", GATE_FRAC}, {"C_MAX", C_MAX},
           {"EXP_ATT_RANGE", EXP_ATT_RANGE}, {"EXP_OUT_RANGE", EXP_OUT_RANGE}, {"MIX_MASS", MIX_MASS},
           {"NORM_GAIN_BITS", NORM_GAIN_BITS}})
    c[name] = value;
  c["BLOCK_TENSORS"] = BLOCK_TENSORS;
  c["ATTN_TENSORS"] = ATTN_TENSORS;
  c["OUT_TENSORS"] = OUT_TENSORS;
  c["TABLES"] = TABLES;
  return c;
}

// t[name], which must be there with the dtype the step reads it as
at::Tensor get(const Tensors& t, const std::string& name, at::ScalarType dtype) {
  auto it = t.find(name);
  TORCH_CHECK(it != t.end(), "tensor '", name, "' missing");
  TORCH_CHECK(it->second.scalar_type() == dtype && it->second.is_contiguous(), "tensor '", name,
              "' has the wrong dtype or layout");
  return it->second;
}

inline I64 rshift(I64 x, I64 s) { return s > 0 ? (x + (I64(1) << (s - 1))) >> s : x; }
inline I64 floordiv(I64 a, I64 b) {
  I64 q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
inline I64 rdiv(I64 a, I64 b) { return floordiv(2 * a + b, 2 * b); }

// Division by one positive divisor many times: a float64 estimate of the quotient, corrected by
// integer arithmetic to the exact floor (the estimate is within one of it for |a / b| < 2**50,
// which every use below satisfies). 64-bit idiv costs tens of cycles; this is a multiply.
struct Divisor {
  I64 b;
  double inv;
  explicit Divisor(I64 b_) : b(b_), inv(1.0 / static_cast<double>(b_)) {}
  I64 floor(I64 a) const {
    const double x = static_cast<double>(a) * inv;
    I64 q = static_cast<I64>(x);  // truncation; then floor (|q| < 2**53, so double(q) is exact).
    q -= I64(static_cast<double>(q) > x);  // Written without std::floor, which blocks vectorizing.
    const I64 r = a - q * b;
    return q - I64(r < 0) + I64(r >= b);  // branch-free, so loops of it vectorize
  }
};
// round(a / b), halves up, as rdiv: floor((2a + b) / 2b); `twice` is Divisor(2b)
inline I64 rdiv2(I64 a, const Divisor& twice) { return twice.floor(2 * a + twice.b / 2); }
inline I64 clampv(I64 x, I64 lo, I64 hi) { return std::min(std::max(x, lo), hi); }
inline I64 isqrt(I64 v) {
  I64 s = static_cast<I64>(std::floor(std::sqrt(static_cast<double>(v))));
  if (s * s > v) s -= 1;
  if ((s + 1) * (s + 1) <= v) s += 1;
  return s;
}

// t[clamp(x, -8, 8)] for a table over [-8, 8]: written as one simple loop over arrays so the
// compiler can use vector gathers (tables are int32 copies: every entry is below 2**31)
inline void lookup_all(const int32_t* t, const I64* x, I64* out, I64 n) {
  for (I64 j = 0; j < n; ++j) out[j] = t[clampv(x[j], -LUT_HALF, LUT_HALF) + LUT_HALF];
}

// dots[j] = key(j) . q over int8 vectors of length d for keys j < n; exact in int32 for
// d * 127 * 128 < 2**31. With AVX512-VNNI (d a multiple of 64), 16 keys at a time (independent
// accumulator chains, so the loads overlap) through vpdpbusd, which multiplies unsigned by
// signed bytes: each key is offset by 128 (k ^ 0x80 = k + 128) and 128 * sum(q) taken off
// again; the 16 accumulators are then summed across in one transpose tree. Integer sums, so
// the same integers as the plain loop below.
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
inline __m512i sum16(const __m512i* v) {  // r[k] = sum of the 16 entries of v[k]
  __m512i w[8], x[4];
  for (int i = 0; i < 8; ++i)
    w[i] = _mm512_add_epi32(_mm512_shuffle_i64x2(v[2 * i], v[2 * i + 1], 0x44),
                            _mm512_shuffle_i64x2(v[2 * i], v[2 * i + 1], 0xEE));
  for (int i = 0; i < 4; ++i)  // 128-bit lane L of x[i]: four partial sums of v[4i + L]
    x[i] = _mm512_add_epi32(_mm512_shuffle_i64x2(w[2 * i], w[2 * i + 1], 0x88),
                            _mm512_shuffle_i64x2(w[2 * i], w[2 * i + 1], 0xDD));
  const __m512i y0 = _mm512_add_epi32(_mm512_unpacklo_epi32(x[0], x[1]), _mm512_unpackhi_epi32(x[0], x[1]));
  const __m512i y1 = _mm512_add_epi32(_mm512_unpacklo_epi32(x[2], x[3]), _mm512_unpackhi_epi32(x[2], x[3]));
  const __m512i z = _mm512_add_epi32(_mm512_unpacklo_epi64(y0, y1), _mm512_unpackhi_epi64(y0, y1));
  // z[4L + m] = sum of v[4m + L]
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_permutexvar_epi32(order, z);
}
#endif
template <class KeyFn>
inline void dots_i8(KeyFn key, I64 n, const int8_t* q, I64 d, int32_t* dots) {
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
  if (d % 64 == 0) {
    int32_t q_sum = 0;
    for (I64 i = 0; i < d; ++i) q_sum += q[i];
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    const __m512i offset = _mm512_set1_epi32(128 * q_sum);
    for (I64 j0 = 0; j0 < n; j0 += 16) {
      const int m = static_cast<int>(std::min<I64>(16, n - j0));
      const int8_t* k[16];
      for (int t = 0; t < 16; ++t) k[t] = key(j0 + std::min(t, m - 1));
      __m512i acc[16];
      for (int t = 0; t < 16; ++t) acc[t] = _mm512_setzero_si512();
      for (I64 c = 0; c < d; c += 64) {
        const __m512i qv = _mm512_loadu_si512(q + c);
        for (int t = 0; t < 16; ++t)
          acc[t] = _mm512_dpbusd_epi32(acc[t], _mm512_xor_si512(_mm512_loadu_si512(k[t] + c), flip), qv);
      }
      const __m512i r = _mm512_sub_epi32(sum16(acc), offset);
      _mm512_mask_storeu_epi32(dots + j0, static_cast<__mmask16>((1u << m) - 1), r);
    }
    return;
  }
#endif
  for (I64 j = 0; j < n; ++j) {
    const int8_t* k = key(j);
    int32_t s = 0;
    for (I64 i = 0; i < d; ++i) s += int32_t(k[i]) * int32_t(q[i]);
    dots[j] = s;
  }
}

// mix[i] = sum_j u[j] * key(j)[i] over keys j < n; u[j] <= 2**17 with sum(u) <= 2**17, so
// every sum fits int32. AVX512-VNNI path (d a multiple of 32): keys with weight go in pairs
// through vpdpwssd, whose 16-bit operands take u in two parts, u = 256 * (u >> 8) + (u & 255)
// (each part fits int16), summed apart and combined at the end. Chunk by chunk of 32 entries,
// the accumulators stay in registers; they hold the chunk in vpunpck order (lo half: i = 8L + p,
// hi half: i = 8L + 4 + p for 128-bit lane L, p < 4), put back in order when stored.
template <class KeyFn>
inline void mix_keys(KeyFn key, I64 n, const int32_t* u, I64 d, int32_t* mix) {
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
  if (d % 32 == 0) {
    struct Pair { const int8_t* r0; const int8_t* r1; int32_t hi, lo; };
    std::vector<Pair> pairs;
    for (I64 j = 0; j < n; j += 2) {
      const int32_t u0 = u[j], u1 = j + 1 < n ? u[j + 1] : 0;
      if ((u0 | u1) == 0) continue;  // most keys get no weight: skip reading them
      pairs.push_back({key(j), j + 1 < n ? key(j + 1) : key(j), ((u1 >> 8) << 16) | (u0 >> 8),
                       ((u1 & 255) << 16) | (u0 & 255)});
    }
    alignas(64) int32_t h[32], l[32];
    for (I64 c = 0; c < d; c += 32) {
      __m512i h0 = _mm512_setzero_si512(), h1 = h0, l0 = h0, l1 = h0;
      for (const Pair& p : pairs) {
        const __m512i a0 = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p.r0 + c)));
        const __m512i a1 = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p.r1 + c)));
        const __m512i pl = _mm512_unpacklo_epi16(a0, a1), ph = _mm512_unpackhi_epi16(a0, a1);
        const __m512i hw = _mm512_set1_epi32(p.hi), lw = _mm512_set1_epi32(p.lo);
        h0 = _mm512_dpwssd_epi32(h0, pl, hw);
        h1 = _mm512_dpwssd_epi32(h1, ph, hw);
        l0 = _mm512_dpwssd_epi32(l0, pl, lw);
        l1 = _mm512_dpwssd_epi32(l1, ph, lw);
      }
      _mm512_store_si512(h, h0);
      _mm512_store_si512(h + 16, h1);
      _mm512_store_si512(l, l0);
      _mm512_store_si512(l + 16, l1);
      for (int e = 0; e < 16; ++e) {
        const I64 i = c + (e / 4) * 8 + e % 4;
        mix[i] = h[e] * 256 + l[e];
        mix[i + 4] = h[16 + e] * 256 + l[16 + e];
      }
    }
    return;
  }
#endif
  std::fill(mix, mix + d, 0);
  for (I64 j = 0; j < n; ++j) {
    if (u[j] == 0) continue;
    const int8_t* k = key(j);
    for (I64 i = 0; i < d; ++i) mix[i] += u[j] * int32_t(k[i]);
  }
}

struct Norm {
  at::Tensor gain, bias;
  // y = LayerNorm(x) in residual units (quant.QNorm). Kept out of line: inlined into the step,
  // GCC 12 no longer vectorizes the last loop ("control flow in loop"), and it ran scalar.
  __attribute__((noinline)) void apply(const I64* __restrict x, I64* __restrict y, int d) const {
    const I64* __restrict g = gain.data_ptr<I64>();
    const I64* __restrict b = bias.data_ptr<I64>();
    I64 s = 0;
    for (int i = 0; i < d; ++i) s += x[i];
    const I64 mean = rdiv(s, d);
    I64 ss = 0;
    for (int i = 0; i < d; ++i) ss += (x[i] - mean) * (x[i] - mean);
    I64 sd = std::max<I64>(isqrt(floordiv(ss, d) << 8), 1);
    const Divisor twice(2 * (sd << NORM_GAIN_BITS));
    for (int i = 0; i < d; ++i) y[i] = clampv(rdiv2((x[i] - mean) * g[i], twice) + b[i], -R_MAX, R_MAX);
  }
};

// quant.quantize_rows on one row: q = round(127 y / e), e = max|y| (>= 1)
inline I64 quantize_row(const I64* __restrict y, int8_t* __restrict q, int d) {
  I64 e = 1;
  for (int i = 0; i < d; ++i) e = std::max<I64>(e, y[i] < 0 ? -y[i] : y[i]);
  const Divisor twice(2 * e);
  for (int i = 0; i < d; ++i) q[i] = static_cast<int8_t>(rdiv2(127 * y[i], twice));
  return e;
}

struct Linear {
  std::vector<at::Tensor> w, m;  // int8 [K, N], int64 [N] per input
  at::Tensor bias;
  I64 shift;
  I64 n() const { return bias.size(0); }
  // accs[p]: int32 [B, N] (input p times w[p]); es[p]: row scales or nullptr (fixed scale).
  // round(x / 2**s) is (x + 2**(s-1)) >> s, so the half is added with the bias and the shift
  // is one vector shift; scale * m is formed first (the same integer: products are associative).
  void finish(std::initializer_list<const int32_t*> accs, std::initializer_list<const I64*> es, I64 b,
              I64* __restrict out) const {
    const I64 N = n(), s = shift;
    const I64* __restrict bs = bias.data_ptr<I64>();
    const I64 half = s > 0 ? I64(1) << (s - 1) : 0;
    for (I64 j = 0; j < N; ++j) out[j] = bs[j] + half;
    auto e = es.begin();
    size_t p = 0;
    for (const int32_t* acc : accs) {
      const int32_t* __restrict a = acc + b * N;
      const I64* __restrict mm = m[p++].data_ptr<I64>();
      const I64 scale = *e ? (*e)[b] : 1;
      ++e;
      for (I64 j = 0; j < N; ++j) out[j] += I64(a[j]) * (scale * mm[j]);
    }
    for (I64 j = 0; j < N; ++j) out[j] >>= s;
  }
};

struct Block {
  Norm ln_start, ln_ff, ln_xff, ln_mem, ln_mid, q_ln;
  Linear lstm, boom, q;
  at::Tensor vs;
  bool attn = false;
};

Norm norm_of(const Tensors& t, const std::string& name) {
  return Norm{get(t, name + ".gain", at::kLong), get(t, name + ".bias", at::kLong)};
}

Linear linear_of(const Tensors& t, const std::string& name, int parts, I64 shift) {
  Linear l;
  for (int p = 0; p < parts; ++p) {
    l.w.push_back(get(t, name + ".w" + std::to_string(p), at::kChar));
    l.m.push_back(get(t, name + ".m" + std::to_string(p), at::kLong));
  }
  l.bias = get(t, name + ".bias", at::kLong);
  l.shift = shift;
  return l;
}

class Model {
 public:
  // blocks[k]: the tensors named in BLOCK_TENSORS (plus ATTN_TENSORS for the attention block),
  // shifts[k]: "lstm", "boom" (and "q"); out: OUT_TENSORS; tables: TABLES, by name.
  Model(int64_t d, int64_t d_boom, int64_t mem_len, at::Tensor embed, std::vector<Tensors> blocks,
        std::vector<std::map<std::string, int64_t>> shifts, Tensors out, int64_t out_shift, Tensors tables)
      : d_(d), d_boom_(d_boom), M_(mem_len), embed_(embed) {
    TORCH_CHECK(blocks.size() == shifts.size(), "one shift set per block");
    for (const auto& name : TABLES) {
      at::Tensor t = get(tables, name, at::kLong);
      TORCH_CHECK(t.abs().max().item<I64>() < (I64(1) << 31), "lookup table entry does not fit int32");
      tables_.push_back(t);
      tables32_.push_back(t.to(at::kInt).contiguous());
    }
    for (size_t k = 0; k < blocks.size(); ++k) {
      const Tensors& t = blocks[k];
      const bool attn = t.count("vs") > 0;
      TORCH_CHECK(t.size() == BLOCK_TENSORS.size() + (attn ? ATTN_TENSORS.size() : 0), "block ", k,
                  ": unexpected tensors");
      Block b;
      b.ln_start = norm_of(t, "ln_start");
      b.lstm = linear_of(t, "lstm", 2, shifts[k].at("lstm"));
      b.ln_ff = norm_of(t, "ln_ff");
      b.ln_xff = norm_of(t, "ln_xff");
      b.boom = linear_of(t, "boom", 1, shifts[k].at("boom"));
      if (attn) {
        b.attn = true;
        b.ln_mem = norm_of(t, "ln_mem");
        b.ln_mid = norm_of(t, "ln_mid");
        b.q = linear_of(t, "q", 1, shifts[k].at("q"));
        b.q_ln = norm_of(t, "q_ln");
        b.vs = get(t, "vs", at::kLong);
      }
      blocks_.push_back(b);
    }
    out_ = linear_of(out, "out", 1, out_shift);
  }

  // One step for B lanes. h: int8 [B, d] per block, c: int64 [B, d] per block (updated in
  // place), keys: int8 ring [B, M, d], mem_e: int64 [B, M], pos: bytes consumed.
  // Returns int64 frequencies [B, 256].
  //
  // One parallel region a step: each thread runs the whole step for its own slice of lanes,
  // its matmuls single-threaded (ATen runs nested work inline). Threads then meet once a step
  // instead of at every layer: a fork-join costs a wake-up per thread, which dominated with
  // a dozen a step, and under load a thread that lost its core held up every join. Lanes are
  // independent and every sum is exact, so how the lanes are split cannot change a result.
  at::Tensor step(at::Tensor x, std::vector<at::Tensor> hs, std::vector<at::Tensor> cs, at::Tensor keys,
                  at::Tensor mem_e, int64_t pos) {
    const I64 B = x.size(0);
    at::Tensor freq = at::empty({B, 256}, at::TensorOptions().dtype(at::kLong));
    at::parallel_for(0, B, 1, [&](I64 lo, I64 hi) { lanes(lo, hi, x, hs, cs, keys, mem_e, pos, freq); });
    return freq;
  }

 private:
  // The step for lanes [lo, hi): local row b is lane lo + b.
  void lanes(I64 lo, I64 hi, const at::Tensor& x, std::vector<at::Tensor>& hs, std::vector<at::Tensor>& cs,
             at::Tensor& keys, at::Tensor& mem_e, I64 pos, at::Tensor& freq) const {
    // Loop bounds below are copied into the loop (`n = d`): a bound read through a reference
    // would be reloaded after every int64 store, which stops vectorizing.
    const I64 B = hi - lo, d = d_, DB = d_boom_;
    auto opt8 = at::TensorOptions().dtype(at::kChar);
    at::Tensor q8 = at::empty({B, d}, opt8);
    std::vector<I64> h(B * d), e(B), ff(B * d), tmp(d);
    I64* hp = h.data();
    int8_t* q8p = q8.data_ptr<int8_t>();
    const I64* xs = x.data_ptr<I64>() + lo;
    const I64* emb = embed_.data_ptr<I64>();
    for (I64 b = 0; b < B; ++b) std::copy(emb + xs[b] * d, emb + (xs[b] + 1) * d, hp + b * d);
    const int32_t* sig = tables32_[0].data_ptr<int32_t>();
    const int32_t* tnh = tables32_[1].data_ptr<int32_t>();
    const int32_t* gelu = tables32_[2].data_ptr<int32_t>();
    const I64* expo = tables_[4].data_ptr<I64>();
    std::vector<I64> gates(4 * d), act(4 * d), cs_(d), tc(d), pre(DB), g(DB), sum(d);

    for (size_t k = 0; k < blocks_.size(); ++k) {
      const Block& blk = blocks_[k];
      // h = ln_start(h); quantized copy for the LSTM
      for (I64 b = 0; b < B; ++b) {
        blk.ln_start.apply(hp + b * d, tmp.data(), d);
        std::copy(tmp.begin(), tmp.end(), hp + b * d);
        e[b] = quantize_row(hp + b * d, q8p + b * d, d);
      }
      at::Tensor hk = hs[k].narrow(0, lo, B);
      at::Tensor ax = at::_int_mm(q8, blk.lstm.w[0]);
      at::Tensor ah = at::_int_mm(hk, blk.lstm.w[1]);
      int8_t* hq = hk.data_ptr<int8_t>();
      I64* cp = cs[k].data_ptr<I64>() + lo * d;
      for (I64 b = 0; b < B; ++b) {
        blk.lstm.finish({ax.data_ptr<int32_t>(), ah.data_ptr<int32_t>()}, {e.data(), nullptr}, b, gates.data());
        const I64* __restrict gt = gates.data();
        I64* __restrict a = act.data();
        lookup_all(sig, gt, a, 2 * d);  // i, f
        lookup_all(tnh, gt + 2 * d, a + 2 * d, d);  // g
        lookup_all(sig, gt + 3 * d, a + 3 * d, d);  // o
        I64* __restrict c = cp + b * d;
        I64* __restrict cc = cs_.data();
        for (I64 j = 0, n = d; j < n; ++j) {
          c[j] = clampv(rshift(a[d + j] * c[j] + a[j] * a[2 * d + j], GATE_FRAC), -C_MAX, C_MAX);
          cc[j] = rshift(c[j], GATE_FRAC - FRAC);
        }
        lookup_all(tnh, cc, tc.data(), d);
        const I64* __restrict t = tc.data();
        int8_t* __restrict hqb = hq + b * d;
        I64* __restrict hb = hp + b * d;
        for (I64 j = 0, n = d; j < n; ++j) {
          const I64 hh = a[3 * d + j] * t[j];  // Q30
          hqb[j] = static_cast<int8_t>(rshift(hh * 127, 2 * GATE_FRAC));
          hb[j] = clampv(hb[j] + rshift(hh, 2 * GATE_FRAC - FRAC), -R_MAX, R_MAX);
        }
      }
      if (blk.attn) attend(blk, hp, lo, B, keys, mem_e, pos);
      // Boom on ln_xff(h), added to ln_ff(h)
      for (I64 b = 0; b < B; ++b) {
        blk.ln_ff.apply(hp + b * d, ff.data() + b * d, d);
        blk.ln_xff.apply(hp + b * d, tmp.data(), d);
        e[b] = quantize_row(tmp.data(), q8p + b * d, d);
      }
      at::Tensor ab = at::_int_mm(q8, blk.boom.w[0]);
      for (I64 b = 0; b < B; ++b) {
        blk.boom.finish({ab.data_ptr<int32_t>()}, {e.data()}, b, pre.data());
        const I64* __restrict pr = pre.data();
        I64* __restrict gg = g.data();
        lookup_all(gelu, pr, gg, DB);
        for (I64 ch = 0, n = DB; ch < n; ++ch) gg[ch] += std::max<I64>(pr[ch] - LUT_HALF, 0);  // GELU(x) = x beyond 8
        I64* __restrict acc = sum.data();
        const I64* __restrict f = ff.data() + b * d;
        for (I64 i = 0, n = d; i < n; ++i) acc[i] = f[i];
        for (I64 ch = 0, end = DB, step = d; ch < end; ch += step)  // the Boom's chunks summed
          for (I64 i = 0, n = d; i < n; ++i) acc[i] += gg[ch + i];
        I64* __restrict hb = hp + b * d;
        for (I64 i = 0, n = d; i < n; ++i) hb[i] = clampv(acc[i], -R_MAX, R_MAX);
      }
    }
    // output: logits -> frequencies through the exp table
    for (I64 b = 0; b < B; ++b) e[b] = quantize_row(hp + b * d, q8p + b * d, d);
    at::Tensor ao = at::_int_mm(q8, out_.w[0]);
    std::vector<I64> logits(256);
    for (I64 b = 0; b < B; ++b) {
      out_.finish({ao.data_ptr<int32_t>()}, {e.data()}, b, logits.data());
      const I64 mx = *std::max_element(logits.begin(), logits.end());
      I64* f = freq.data_ptr<I64>() + (lo + b) * 256;
      for (int j = 0; j < 256; ++j) f[j] = std::max<I64>(expo[std::min(mx - logits[j], EXP_OUT_MAX)], 1);
    }
  }

  // quant.IntModel._attend for lanes [lo, lo + B) (local rows of hp), then h = ln_mid(h) +
  // attention; writes the ring slot.
  void attend(const Block& blk, I64* hp, I64 lo, I64 B, at::Tensor& keys, at::Tensor& mem_e, I64 pos) const {
    const I64 d = d_, M = M_;
    const I64 slot = pos % M, filled = std::min(pos, M);
    const I64* expa = tables_[3].data_ptr<I64>();
    auto opt8 = at::TensorOptions().dtype(at::kChar);
    at::Tensor q8 = at::empty({B, d}, opt8), qm = at::empty({B, d}, opt8);
    std::vector<I64> mid(B * d), e(B), em(B), tmp(d);
    for (I64 b = 0; b < B; ++b) {
      blk.ln_mid.apply(hp + b * d, mid.data() + b * d, d);
      blk.ln_mem.apply(hp + b * d, tmp.data(), d);
      em[b] = quantize_row(tmp.data(), qm.data_ptr<int8_t>() + b * d, d);
      e[b] = quantize_row(mid.data() + b * d, q8.data_ptr<int8_t>() + b * d, d);
    }
    at::Tensor aq = at::_int_mm(q8, blk.q.w[0]);
    int8_t* ks = keys.data_ptr<int8_t>() + lo * M * d;
    I64* me = mem_e.data_ptr<I64>() + lo * M;
    const I64* vs = blk.vs.data_ptr<I64>();
    const int8_t* qmp = qm.data_ptr<int8_t>();
    const int32_t* aqp = aq.data_ptr<int32_t>();
    const Divisor score_div(2 * 127 * 127), out_div(I64(2 * 127) << 20);
    const I64 n = filled + 1;  // keys: the ring's first `filled` entries, then the current one
    std::vector<I64> ql(d), qn(d), s(n), w(n), es(n);
    std::vector<int8_t> qq(d);
    std::vector<int32_t> mix(d), dots(n), u(n);
    for (I64 b = 0; b < B; ++b) {
      blk.q.finish({aqp}, {e.data()}, b, ql.data());
      for (I64 i = 0; i < d; ++i) ql[i] = clampv(ql[i], -R_MAX, R_MAX);
      blk.q_ln.apply(ql.data(), qn.data(), d);
      const I64 eq = quantize_row(qn.data(), qq.data(), d);
      const int8_t* km = qmp + b * d;
      const int8_t* kb = ks + b * M * d;
      auto key = [&](I64 j) { return j < filled ? kb + j * d : km; };
      dots_i8(key, n, qq.data(), d, dots.data());
      std::copy(me + b * M, me + b * M + filled, es.begin());
      es[filled] = em[b];
      for (I64 j = 0; j < n; ++j) s[j] = rdiv2(rshift(I64(dots[j]) * es[j], FRAC) * eq, score_div);
      const I64 mx = *std::max_element(s.begin(), s.end());
      I64 we_sum = 0, w_sum = 0;
      for (I64 j = 0; j < n; ++j) {
        w[j] = expa[std::min(mx - s[j], EXP_ATT_MAX)];
        w_sum += w[j];
        we_sum += w[j] * es[j];
      }
      const Divisor by_we_sum(we_sum);
      for (I64 j = 0; j < n; ++j) u[j] = static_cast<int32_t>(by_we_sum.floor(w[j] * es[j] * MIX_MASS));
      mix_keys(key, n, u.data(), d, mix.data());
      const I64 ebar = floordiv(we_sum << 8, w_sum);
      const I64* md = mid.data() + b * d;
      for (I64 i = 0; i < d; ++i) {
        const I64 t = rshift(I64(mix[i]) * ebar, 25);
        hp[b * d + i] = clampv(md[i] + rdiv2(t * vs[i], out_div), -R_MAX, R_MAX);
      }
      std::copy(km, km + d, ks + (b * M + slot) * d);
      me[b * M + slot] = em[b];
    }
  }

  I64 d_, d_boom_, M_;
  at::Tensor embed_;
  std::vector<Block> blocks_;
  Linear out_;
  std::vector<at::Tensor> tables_, tables32_;
};

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("contract", &contract, "The constants and tensor layout this step was compiled with.");
  pybind11::class_<Model>(m, "Model")
      .def(pybind11::init<int64_t, int64_t, int64_t, at::Tensor, std::vector<Tensors>,
                          std::vector<std::map<std::string, int64_t>>, Tensors, int64_t, Tensors>())
      .def("step", &Model::step);
}
