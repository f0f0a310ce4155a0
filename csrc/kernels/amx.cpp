// The AMX kernel path: avx512vnni's kernels, with the int8 matmul on Advanced Matrix Extensions
// tiles (Intel since Sapphire Rapids). It is chosen at run time where the CPU has AMX-TILE and
// AMX-INT8 and the operating system lets the process use the tile registers (dispatch.cpp asks
// Linux once, by arch_prctl).
//
// Why: one step of the default model is about 1.7M multiply-adds a lane in eight matmuls;
// vpdpbusd does 64 of them an instruction, a tile product (tdpbssd) 16,384 in about 16 cycles. At
// the lane counts the codec steps (tens of rows) the tiles then wait on the weights, which each
// matmul reads once whatever its rows (benchmarks/JOURNAL.md, "AMX tiles").
//
// Exactness: tdpbssd multiplies signed by signed bytes and adds them into int32 without saturation,
// so neither the activations' offset of the VNNI path nor its column sums are needed; integer sums
// in any order, so the same integers as every other path.
//
// Compiled for those instructions by the target pragma below (see avx2.cpp and kernels.h for why
// the kernels are internal and template-free); the table at the end is built outside it.
#include "kernels/kernels.h"

#if defined(SHAZIP_KERNELS_AMX)

#include <immintrin.h>

#include <cstring>

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,amx-tile,amx-int8"))), \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,amx-tile,amx-int8")
#endif

namespace shazip::kernels::amx {
namespace {

#include "kernels/panels.h"

// Every tile register is configured 16 rows x 64 bytes: A tiles hold 16 rows of 64 activations,
// B tiles 16 groups of four weight rows x 16 columns (a panel's rows), C tiles 16 x 16 int32 sums.
constexpr i64 TILE_ROWS = 16;  // rows of A and C in a tile
constexpr i64 TILE_K = 64;     // K in a tile

static inline i64 round_up(i64 x, i64 m) { return (x + m - 1) / m * m; }

// Weights in panels (panels.h) with K padded to 64, so that a B tile is 16 consecutive rows of
// its panel.
static i64 packed_bytes(i64 K, i64 N) { return round_up(K, TILE_K) * round_up(N, PANEL); }

static void pack(const i8* w, i64 K, i64 N, u8* out) { pack_panels(w, K, N, round_up(K, TILE_K), out); }

// A's rows padded to 16 and K to 64 with zeros (when they are not already), then one C tile.
static i64 gemm_scratch_bytes(i64 rows, i64 K) {
  return round_up(rows, TILE_ROWS) * round_up(K, TILE_K) + TILE_ROWS * PANEL * 4;
}

struct alignas(64) TileConfig {
  u8 palette = 1, start_row = 0, reserved[14] = {};
  u16 colsb[16] = {};
  u8 rows[16] = {};
};

// The part of a C tile (stored in `tmp`) of rows [r, r + 16) and columns [n, n + 16) that is in c.
static void copy_part(const i32* tmp, i32* c, i64 rows, i64 N, i64 r, i64 n) {
  const i64 nr = rows - r < TILE_ROWS ? rows - r : TILE_ROWS, nc = N - n < PANEL ? N - n : PANEL;
  for (i64 i = 0; i < nr; ++i) std::memcpy(c + (r + i) * N + n, tmp + i * PANEL, nc * 4);
}

// C tile T of rows [R, R + 16) and columns [NC, NC + 16): straight into c where all of it is in
// c, else through `tmp` for the part that is (a tile number must be a literal: a macro).
#define SHAZIP_STORE(T, R, NC)                                           \
  if ((R) + TILE_ROWS <= rows && (NC) + PANEL <= N) {                    \
    _tile_stored(T, c + (R) * N + (NC), N * 4);                          \
  } else if ((R) < rows && (NC) < N) {                                   \
    _tile_stored(T, tmp, PANEL * 4);                                     \
    copy_part(tmp, c, rows, N, R, NC);                                   \
  }

// Blocks of 32 rows x 32 columns, panel pair by panel pair (each pair's weights read once, A's
// rows staying in L1): C in tiles 0-3, A's two row tiles in 4-5, B's two panels in 6-7; a block
// past the last row or column multiplies zeros and is not stored.
static void gemm(const i8* a, i64 rows, i64 K, i64 N, const u8* packed, i32* c, u8* scratch) {
  const i64 Kp = round_up(K, TILE_K), Rp = round_up(rows, TILE_ROWS), panels = round_up(N, PANEL) / PANEL;
  const i64 panel_bytes = Kp * PANEL;
  const i8* A = a;
  if (K != Kp || rows != Rp) {
    i8* ap = reinterpret_cast<i8*>(scratch);
    std::memset(ap, 0, Rp * Kp);
    for (i64 r = 0; r < rows; ++r) std::memcpy(ap + r * Kp, a + r * K, K);
    A = ap;
  }
  i32* tmp = reinterpret_cast<i32*>(scratch + Rp * Kp);
  const i8* w = reinterpret_cast<const i8*>(packed);
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.rows[t] = TILE_ROWS;
    cfg.colsb[t] = TILE_K;
  }
  _tile_loadconfig(&cfg);
  for (i64 p = 0; p < panels; p += 2) {
    const bool two_panels = p + 1 < panels;
    const i8* b0 = w + p * panel_bytes;
    const i8* b1 = b0 + panel_bytes;
    const i64 n = p * PANEL;
    for (i64 r = 0; r < Rp; r += 2 * TILE_ROWS) {
      const bool two_rows = r + TILE_ROWS < Rp;
      const i8* a0 = A + r * Kp;
      const i8* a1 = a0 + TILE_ROWS * Kp;
      _tile_zero(0);
      _tile_zero(1);
      _tile_zero(2);
      _tile_zero(3);
      for (i64 k = 0; k < Kp; k += TILE_K) {
        _tile_loadd(4, a0 + k, Kp);
        _tile_loadd(6, b0 + k * PANEL, 64);
        _tile_dpbssd(0, 4, 6);
        if (two_panels) {
          _tile_loadd(7, b1 + k * PANEL, 64);
          _tile_dpbssd(1, 4, 7);
        }
        if (two_rows) {
          _tile_loadd(5, a1 + k, Kp);
          _tile_dpbssd(2, 5, 6);
          if (two_panels) _tile_dpbssd(3, 5, 7);
        }
      }
      SHAZIP_STORE(0, r, n)
      SHAZIP_STORE(1, r, n + PANEL)
      SHAZIP_STORE(2, r + TILE_ROWS, n)
      SHAZIP_STORE(3, r + TILE_ROWS, n + PANEL)
    }
  }
  _tile_release();
}
#undef SHAZIP_STORE

}  // namespace
}  // namespace shazip::kernels::amx

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

namespace shazip::kernels {
namespace avx512vnni {
extern const Kernels table;
}
namespace amx {

extern const Kernels table = with_matmul(avx512vnni::table, "amx", packed_bytes, pack, gemm_scratch_bytes, gemm);

}  // namespace amx
}  // namespace shazip::kernels

#endif  // SHAZIP_KERNELS_AMX
