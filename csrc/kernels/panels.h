// The layout the int8 matmuls of the AVX-512 VNNI and AMX paths read their weights in: int8
// [K, N] in panels of 16 columns; in a panel, for each group of four rows k = 4 kq .. 4 kq + 3,
// the 16 columns' four bytes side by side (64 bytes: one vpdpbusd operand, one row of an AMX B
// tile). Included by avx512vnni.cpp and amx.cpp inside their anonymous namespace, under their
// target pragma.

constexpr i64 PANEL = 16;

// w packed into panels with K padded by zeros to Kp (a multiple of 4) and N to a multiple of 16:
// round_up(N, 16) * Kp bytes at out.
static void pack_panels(const i8* w, i64 K, i64 N, i64 Kp, u8* out) {
  const i64 KQ = Kp / 4, panels = (N + PANEL - 1) / PANEL;
  i8* o = reinterpret_cast<i8*>(out);
  for (i64 p = 0; p < panels; ++p)
    for (i64 kq = 0; kq < KQ; ++kq)
      for (i64 c = 0; c < PANEL; ++c)
        for (i64 t = 0; t < 4; ++t) {
          const i64 k = 4 * kq + t, n = p * PANEL + c;
          o[((p * KQ + kq) * PANEL + c) * 4 + t] = (k < K && n < N) ? w[k * N + n] : 0;
        }
}
