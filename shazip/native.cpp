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
#include <initializer_list>
#include <cstdint>
#include <vector>

namespace {

using I64 = int64_t;

constexpr int FRAC = 10;
constexpr I64 ONE = I64(1) << FRAC;
constexpr I64 R_MAX = (I64(1) << 20) - 1;
constexpr I64 LUT_HALF = 8 * ONE;  // tables cover [-8, 8]
constexpr int GATE_FRAC = 15;
constexpr I64 C_MAX = (I64(1) << 22) - 1;
constexpr I64 EXP_ATT_MAX = 16 * ONE;
constexpr I64 EXP_OUT_MAX = 24 * ONE;
constexpr I64 MIX_MASS = I64(1) << 17;
constexpr int NORM_GAIN_BITS = 16;

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

// sum_i a[i] * b[i] over int8 vectors of length n, exact in int32 for n * 127 * 128 < 2**31.
// With AVX512-VNNI (n a multiple of 64), vpdpbusd multiplies unsigned by signed bytes, so a is
// offset by 128 (a ^ 0x80 = a + 128) and 128 * sum(b) taken off again (`b_sum` is sum(b), the
// same for every key, so the caller computes it once): the same integer as the plain loop.
inline int32_t dot_i8(const int8_t* a, const int8_t* b, int32_t b_sum, I64 n) {
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
  if (n % 64 == 0) {
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    __m512i acc = _mm512_setzero_si512();
    for (I64 i = 0; i < n; i += 64)
      acc = _mm512_dpbusd_epi32(acc, _mm512_xor_si512(_mm512_loadu_si512(a + i), flip), _mm512_loadu_si512(b + i));
    return _mm512_reduce_add_epi32(acc) - 128 * b_sum;
  }
#endif
  (void)b_sum;
  int32_t s = 0;
  for (I64 i = 0; i < n; ++i) s += int32_t(a[i]) * int32_t(b[i]);
  return s;
}

// mix[i] = sum_j u[j] * key_j[i] over the ring's first `filled` keys (rows of `kb`) and the
// current entry `km` (key number `filled`); u[j] <= 2**17, so every sum fits int32.
// AVX512BW path (d a multiple of 32): keys go in pairs through vpmaddwd, whose 16-bit operands
// take u in two parts, u = 256 * (u >> 8) + (u & 255) (each part fits int16), summed apart and
// combined at the end; the accumulators hold each 32-wide chunk in vpunpck order (lo half: i =
// 8L + p, hi half: i = 8L + 4 + p for 128-bit lane L, p < 4), put back in order at the end.
inline void mix_keys(const int8_t* kb, const int8_t* km, I64 filled, const int32_t* u, I64 d, int32_t* mix,
                     int32_t* acc_h, int32_t* acc_l) {
  auto key = [&](I64 j) { return j < filled ? kb + j * d : km; };
#if defined(__AVX512BW__)
  if (d % 32 == 0) {
    std::fill(acc_h, acc_h + d, 0);
    std::fill(acc_l, acc_l + d, 0);
    for (I64 j = 0; j <= filled; j += 2) {
      const int32_t u0 = u[j], u1 = j + 1 <= filled ? u[j + 1] : 0;
      if ((u0 | u1) == 0) continue;  // most keys get no weight: skip reading them
      const int8_t* r0 = key(j);
      const int8_t* r1 = j + 1 <= filled ? key(j + 1) : r0;
      const __m512i hi_w = _mm512_set1_epi32(((u1 >> 8) << 16) | (u0 >> 8));
      const __m512i lo_w = _mm512_set1_epi32(((u1 & 255) << 16) | (u0 & 255));
      for (I64 c = 0; c < d; c += 32) {
        const __m512i a0 = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(r0 + c)));
        const __m512i a1 = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(r1 + c)));
        const __m512i pl = _mm512_unpacklo_epi16(a0, a1), ph = _mm512_unpackhi_epi16(a0, a1);
        int32_t* h = acc_h + c;
        int32_t* l = acc_l + c;
        _mm512_storeu_si512(h, _mm512_add_epi32(_mm512_loadu_si512(h), _mm512_madd_epi16(pl, hi_w)));
        _mm512_storeu_si512(h + 16, _mm512_add_epi32(_mm512_loadu_si512(h + 16), _mm512_madd_epi16(ph, hi_w)));
        _mm512_storeu_si512(l, _mm512_add_epi32(_mm512_loadu_si512(l), _mm512_madd_epi16(pl, lo_w)));
        _mm512_storeu_si512(l + 16, _mm512_add_epi32(_mm512_loadu_si512(l + 16), _mm512_madd_epi16(ph, lo_w)));
      }
    }
    for (I64 c = 0; c < d; c += 32)
      for (int e = 0; e < 16; ++e) {
        const I64 i = c + (e / 4) * 8 + e % 4;
        mix[i] = acc_h[c + e] * 256 + acc_l[c + e];
        mix[i + 4] = acc_h[c + 16 + e] * 256 + acc_l[c + 16 + e];
      }
    return;
  }
#endif
  (void)acc_h;
  (void)acc_l;
  std::fill(mix, mix + d, 0);
  for (I64 j = 0; j <= filled; ++j) {
    if (u[j] == 0) continue;
    const int8_t* k = key(j);
    for (I64 i = 0; i < d; ++i) mix[i] += u[j] * int32_t(k[i]);
  }
}

struct Norm {
  at::Tensor gain, bias;
  // y = LayerNorm(x) in residual units (quant.QNorm)
  void apply(const I64* x, I64* y, int d) const {
    const I64* g = gain.data_ptr<I64>();
    const I64* b = bias.data_ptr<I64>();
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
inline I64 quantize_row(const I64* y, int8_t* q, int d) {
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
  // accs[p]: int32 [B, N] (input p times w[p]); es[p]: row scales or nullptr (fixed scale)
  void finish(std::initializer_list<const int32_t*> accs, std::initializer_list<const I64*> es, I64 b,
              I64* __restrict out) const {
    const I64 N = n(), s = shift;
    const I64* __restrict bs = bias.data_ptr<I64>();
    for (I64 j = 0; j < N; ++j) out[j] = bs[j];
    auto e = es.begin();
    size_t p = 0;
    for (const int32_t* acc : accs) {
      const int32_t* __restrict a = acc + b * N;
      const I64* __restrict mm = m[p++].data_ptr<I64>();
      const I64 scale = *e ? (*e)[b] : 1;
      ++e;
      for (I64 j = 0; j < N; ++j) out[j] += I64(a[j]) * scale * mm[j];
    }
    for (I64 j = 0; j < N; ++j) out[j] = rshift(out[j], s);
  }
};

struct Block {
  Norm ln_start, ln_ff, ln_xff, ln_mem, ln_mid, q_ln;
  Linear lstm, boom, q;
  at::Tensor vs;
  bool attn = false;
};

Norm norm_of(const std::vector<at::Tensor>& t, size_t& i) {
  Norm n{t[i], t[i + 1]};
  i += 2;
  return n;
}

Linear linear_of(const std::vector<at::Tensor>& t, size_t& i, int parts, I64 shift) {
  Linear l;
  for (int p = 0; p < parts; ++p) l.w.push_back(t[i++]);
  for (int p = 0; p < parts; ++p) l.m.push_back(t[i++]);
  l.bias = t[i++];
  l.shift = shift;
  return l;
}

class Model {
 public:
  // blocks[k]: tensors in the order of native.py's `_flatten_block`; shifts[k]: (lstm, boom[, q])
  Model(int64_t d, int64_t d_boom, int64_t mem_len, at::Tensor embed, std::vector<std::vector<at::Tensor>> blocks,
        std::vector<std::vector<int64_t>> shifts, std::vector<at::Tensor> out, int64_t out_shift,
        std::vector<at::Tensor> tables)
      : d_(d), d_boom_(d_boom), M_(mem_len), embed_(embed), tables_(tables) {
    for (auto& t : tables) {
      TORCH_CHECK(t.abs().max().item<I64>() < (I64(1) << 31), "lookup table entry does not fit int32");
      tables32_.push_back(t.to(at::kInt).contiguous());
    }
    for (size_t k = 0; k < blocks.size(); ++k) {
      const auto& t = blocks[k];
      size_t i = 0;
      Block b;
      b.ln_start = norm_of(t, i);
      b.lstm = linear_of(t, i, 2, shifts[k][0]);
      b.ln_ff = norm_of(t, i);
      b.ln_xff = norm_of(t, i);
      b.boom = linear_of(t, i, 1, shifts[k][1]);
      if (i < t.size()) {
        b.attn = true;
        b.ln_mem = norm_of(t, i);
        b.ln_mid = norm_of(t, i);
        b.q = linear_of(t, i, 1, shifts[k][2]);
        b.q_ln = norm_of(t, i);
        b.vs = t[i++];
      }
      blocks_.push_back(b);
    }
    size_t i = 0;
    out_ = linear_of(out, i, 1, out_shift);
  }

  // One step for B lanes. h: int8 [B, d] per block, c: int64 [B, d] per block (updated in
  // place), keys: int8 ring [B, M, d], mem_e: int64 [B, M], pos: bytes consumed.
  // Returns int64 frequencies [B, 256].
  at::Tensor step(at::Tensor x, std::vector<at::Tensor> hs, std::vector<at::Tensor> cs, at::Tensor keys,
                  at::Tensor mem_e, int64_t pos) {
    const I64 B = x.size(0), d = d_;
    auto opt64 = at::TensorOptions().dtype(at::kLong);
    auto opt8 = at::TensorOptions().dtype(at::kChar);
    at::Tensor h = at::empty({B, d}, opt64), q8 = at::empty({B, d}, opt8), e = at::empty({B}, opt64);
    const I64* xs = x.data_ptr<I64>();
    const I64* emb = embed_.data_ptr<I64>();
    I64* hp = h.data_ptr<I64>();
    for (I64 b = 0; b < B; ++b) std::copy(emb + xs[b] * d, emb + (xs[b] + 1) * d, hp + b * d);
    const int32_t* sig = tables32_[0].data_ptr<int32_t>();
    const int32_t* tnh = tables32_[1].data_ptr<int32_t>();
    const int32_t* gelu = tables32_[2].data_ptr<int32_t>();
    const I64* expo = tables_[4].data_ptr<I64>();
    const I64 grain = std::max<I64>(1, 8);

    for (size_t k = 0; k < blocks_.size(); ++k) {
      const Block& blk = blocks_[k];
      // h = ln_start(h); quantized copy for the LSTM
      at::parallel_for(0, B, grain, [&](I64 lo, I64 hi) {
        std::vector<I64> tmp(d);
        for (I64 b = lo; b < hi; ++b) {
          blk.ln_start.apply(hp + b * d, tmp.data(), d);
          std::copy(tmp.begin(), tmp.end(), hp + b * d);
          e.data_ptr<I64>()[b] = quantize_row(hp + b * d, q8.data_ptr<int8_t>() + b * d, d);
        }
      });
      at::Tensor ax = at::_int_mm(q8, blk.lstm.w[0]);
      at::Tensor ah = at::_int_mm(hs[k], blk.lstm.w[1]);
      int8_t* hq = hs[k].data_ptr<int8_t>();
      I64* cp = cs[k].data_ptr<I64>();
      at::parallel_for(0, B, grain, [&](I64 lo, I64 hi) {
        std::vector<I64> gates(4 * d), act(4 * d), cs_(d), tc(d);
        for (I64 b = lo; b < hi; ++b) {
          blk.lstm.finish({ax.data_ptr<int32_t>(), ah.data_ptr<int32_t>()}, {e.data_ptr<I64>(), nullptr}, b,
                          gates.data());
          lookup_all(sig, gates.data(), act.data(), 2 * d);  // i, f
          lookup_all(tnh, gates.data() + 2 * d, act.data() + 2 * d, d);  // g
          lookup_all(sig, gates.data() + 3 * d, act.data() + 3 * d, d);  // o
          I64* c = cp + b * d;
          for (I64 j = 0; j < d; ++j) {
            c[j] = clampv(rshift(act[d + j] * c[j] + act[j] * act[2 * d + j], GATE_FRAC), -C_MAX, C_MAX);
            cs_[j] = rshift(c[j], GATE_FRAC - FRAC);
          }
          lookup_all(tnh, cs_.data(), tc.data(), d);
          for (I64 j = 0; j < d; ++j) {
            const I64 hh = act[3 * d + j] * tc[j];  // Q30
            hq[b * d + j] = static_cast<int8_t>(rshift(hh * 127, 2 * GATE_FRAC));
            hp[b * d + j] = clampv(hp[b * d + j] + rshift(hh, 2 * GATE_FRAC - FRAC), -R_MAX, R_MAX);
          }
        }
      });
      if (blk.attn) attend(blk, hp, B, keys, mem_e, pos);
      // Boom on ln_xff(h), added to ln_ff(h)
      at::Tensor ff = at::empty({B, d}, opt64);
      at::parallel_for(0, B, grain, [&](I64 lo, I64 hi) {
        std::vector<I64> tmp(d);
        for (I64 b = lo; b < hi; ++b) {
          blk.ln_ff.apply(hp + b * d, ff.data_ptr<I64>() + b * d, d);
          blk.ln_xff.apply(hp + b * d, tmp.data(), d);
          e.data_ptr<I64>()[b] = quantize_row(tmp.data(), q8.data_ptr<int8_t>() + b * d, d);
        }
      });
      at::Tensor ab = at::_int_mm(q8, blk.boom.w[0]);
      at::parallel_for(0, B, grain, [&](I64 lo, I64 hi) {
        std::vector<I64> pre(d_boom_), g(d_boom_);
        for (I64 b = lo; b < hi; ++b) {
          blk.boom.finish({ab.data_ptr<int32_t>()}, {e.data_ptr<I64>()}, b, pre.data());
          lookup_all(gelu, pre.data(), g.data(), d_boom_);
          for (I64 ch = 0; ch < d_boom_; ++ch) g[ch] += std::max<I64>(pre[ch] - LUT_HALF, 0);  // GELU(x) = x beyond 8
          const I64* f = ff.data_ptr<I64>() + b * d;
          for (I64 i = 0; i < d; ++i) hp[b * d + i] = f[i];
          for (I64 ch = 0; ch < d_boom_; ch += d)
            for (I64 i = 0; i < d; ++i) hp[b * d + i] += g[ch + i];
          for (I64 i = 0; i < d; ++i) hp[b * d + i] = clampv(hp[b * d + i], -R_MAX, R_MAX);
        }
      });
    }
    // output: logits -> frequencies through the exp table
    at::parallel_for(0, B, grain, [&](I64 lo, I64 hi) {
      for (I64 b = lo; b < hi; ++b) e.data_ptr<I64>()[b] = quantize_row(hp + b * d, q8.data_ptr<int8_t>() + b * d, d);
    });
    at::Tensor ao = at::_int_mm(q8, out_.w[0]);
    at::Tensor freq = at::empty({B, 256}, opt64);
    at::parallel_for(0, B, grain, [&](I64 lo, I64 hi) {
      std::vector<I64> logits(256);
      for (I64 b = lo; b < hi; ++b) {
        out_.finish({ao.data_ptr<int32_t>()}, {e.data_ptr<I64>()}, b, logits.data());
        const I64 mx = *std::max_element(logits.begin(), logits.end());
        I64* f = freq.data_ptr<I64>() + b * 256;
        for (int j = 0; j < 256; ++j) f[j] = std::max<I64>(expo[std::min(mx - logits[j], EXP_OUT_MAX)], 1);
      }
    });
    return freq;
  }

 private:
  // quant.IntModel._attend for every lane, then h = ln_mid(h) + attention; writes the ring slot.
  void attend(const Block& blk, I64* hp, I64 B, at::Tensor keys, at::Tensor mem_e, I64 pos) {
    const I64 d = d_, M = M_;
    const I64 slot = pos % M, filled = std::min(pos, M);
    const I64* expa = tables_[3].data_ptr<I64>();
    auto opt64 = at::TensorOptions().dtype(at::kLong);
    at::Tensor mid = at::empty({B, d}, opt64), q8 = at::empty({B, d}, at::TensorOptions().dtype(at::kChar));
    at::Tensor e = at::empty({B}, opt64), qm = at::empty({B, d}, at::TensorOptions().dtype(at::kChar));
    at::Tensor em = at::empty({B}, opt64);
    at::parallel_for(0, B, 8, [&](I64 lo, I64 hi) {
      std::vector<I64> tmp(d);
      for (I64 b = lo; b < hi; ++b) {
        blk.ln_mid.apply(hp + b * d, mid.data_ptr<I64>() + b * d, d);
        blk.ln_mem.apply(hp + b * d, tmp.data(), d);
        em.data_ptr<I64>()[b] = quantize_row(tmp.data(), qm.data_ptr<int8_t>() + b * d, d);
        e.data_ptr<I64>()[b] = quantize_row(mid.data_ptr<I64>() + b * d, q8.data_ptr<int8_t>() + b * d, d);
      }
    });
    at::Tensor aq = at::_int_mm(q8, blk.q.w[0]);
    int8_t* ks = keys.data_ptr<int8_t>();
    I64* me = mem_e.data_ptr<I64>();
    const I64* vs = blk.vs.data_ptr<I64>();
    const I64* emp = em.data_ptr<I64>();
    const int8_t* qmp = qm.data_ptr<int8_t>();
    const I64* midp = mid.data_ptr<I64>();
    const int32_t* aqp = aq.data_ptr<int32_t>();
    const I64* ep = e.data_ptr<I64>();
    const Divisor score_div(2 * 127 * 127), out_div(I64(2 * 127) << 20);
    at::parallel_for(0, B, 8, [&](I64 lo, I64 hi) {
      std::vector<I64> ql(d), qn(d), s(filled + 1), w(filled + 1), es(filled + 1);
      std::vector<int8_t> qq(d);
      std::vector<int32_t> mix(d), acc_h(d), acc_l(d), dots(filled + 1), u(filled + 1);
      for (I64 b = lo; b < hi; ++b) {
        blk.q.finish({aqp}, {ep}, b, ql.data());
        for (I64 i = 0; i < d; ++i) ql[i] = clampv(ql[i], -R_MAX, R_MAX);
        blk.q_ln.apply(ql.data(), qn.data(), d);
        const I64 eq = quantize_row(qn.data(), qq.data(), d);
        const int8_t* km = qmp + b * d;
        const int8_t* kb = ks + b * M * d;
        int32_t q_sum = 0;
        for (I64 i = 0; i < d; ++i) q_sum += qq[i];
        for (I64 j = 0; j < filled; ++j) dots[j] = dot_i8(kb + j * d, qq.data(), q_sum, d);
        dots[filled] = dot_i8(km, qq.data(), q_sum, d);
        std::copy(me + b * M, me + b * M + filled, es.begin());
        es[filled] = emp[b];
        for (I64 j = 0; j <= filled; ++j) s[j] = rdiv2(rshift(I64(dots[j]) * es[j], FRAC) * eq, score_div);
        const I64 mx = *std::max_element(s.begin(), s.end());
        I64 we_sum = 0, w_sum = 0;
        for (I64 j = 0; j <= filled; ++j) {
          w[j] = expa[std::min(mx - s[j], EXP_ATT_MAX)];
          w_sum += w[j];
          we_sum += w[j] * es[j];
        }
        const Divisor by_we_sum(we_sum);
        for (I64 j = 0; j <= filled; ++j) u[j] = static_cast<int32_t>(by_we_sum.floor(w[j] * es[j] * MIX_MASS));
        mix_keys(kb, km, filled, u.data(), d, mix.data(), acc_h.data(), acc_l.data());
        const I64 ebar = floordiv(we_sum << 8, w_sum);
        const I64* md = midp + b * d;
        for (I64 i = 0; i < d; ++i) {
          const I64 t = rshift(I64(mix[i]) * ebar, 25);
          hp[b * d + i] = clampv(md[i] + rdiv2(t * vs[i], out_div), -R_MAX, R_MAX);
        }
        std::copy(km, km + d, ks + (b * M + slot) * d);
        me[b * M + slot] = emp[b];
      }
    });
  }

  I64 d_, d_boom_, M_;
  at::Tensor embed_;
  std::vector<Block> blocks_;
  Linear out_;
  std::vector<at::Tensor> tables_, tables32_;
};

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  pybind11::class_<Model>(m, "Model")
      .def(pybind11::init<int64_t, int64_t, int64_t, at::Tensor, std::vector<std::vector<at::Tensor>>,
                          std::vector<std::vector<int64_t>>, std::vector<at::Tensor>, int64_t,
                          std::vector<at::Tensor>>())
      .def("step", &Model::step);
}
