"""Integer-exact inference: the numerics contract of shazip archives, and the exact constants.

An archive decodes only if the decoder reproduces the encoder's probability tables bit for
bit. Floats cannot promise that (summation order, thread count, batch shape, FMA contraction
under a compiler, CPU vs GPU all move the last bits), so the shipped engine follows these rules:

1. THE STEP IS INTEGER ONLY. int8 weights and activations, int32/int64 accumulators; integer
   +, -, *, floor division, shifts, comparisons, max, and table lookups (the one float64 sqrt,
   in `isqrt`, is corrected to the exact integer root). Exact integers do not depend on
   summation order, threads, batch shape, compiler or device.
2. MATMULS: int8 x int8 -> int32 (`torch._int_mm` in the twin, the core's own kernels), or
   float32 `bmm` over integer-valued operands when every partial sum is provably below 2**24 in magnitude (float32 then adds
   exactly, in any order). The bounds are stated where it is used and checked at load.
3. CONSTANTS from the float model (int8 weights, per-channel multipliers, biases, LayerNorm
   gains, lookup tables) are derived once at load, on the CPU, in float64 with only + - * /
   and sqrt (correctly rounded by IEEE 754; numpy applies them one by one, never fused), or in
   Python's `decimal`, whose exp is correctly rounded; then rounded half-to-even to integers.
   No libm call (exp, tanh, log) that could differ between platforms touches a constant.
4. Every integer is range-bounded: activations are clamped, and load checks that no product
   can leave int64 (ModelError otherwise).
5. The coder gets integer frequencies divided by their sum in float64 (one correctly rounded
   division per entry).

Fixed point. The residual stream is int32 in units of 2**-FRAC (FRAC = 10), clamped to
+-R_MAX. The lookup tables take inputs in the same units over [-8, 8] (sigmoid, tanh, GELU)
or [0, EXP_RANGE) (exp). A matmul input is quantized per row (per lane) with a dynamic scale:
q = round(127 y / e), e = max|y| of the row, so no calibration data is needed; weights are
quantized per output channel, w = s_j q_j, s_j = max|w_j| / 127. Training's QAT phase
(`sharnn.fake_quant_rows`) applies the same two quantizers in float so the model learns to live
with them.

The step has two implementations that must give the same integers: `twin.IntModel.step` (plain
torch, any device: the reference, "the twin") and the native core's (csrc/model, CPU, every kernel
path); tests/test_core_model.py compares them. Both run the constants exact.py derives under these
rules, from a model's float weights as numpy arrays, so neither reading a model nor running it on
the CPU needs torch. Engine version ENGINE_VERSION names this exact arithmetic; any change to it
(here or in exact.py) must bump it, and tests/data/golden-int8.shz pins it.

This module holds the rules and their constants only, and imports nothing: the archive header
and the command line read them without loading numpy.
"""

from __future__ import annotations

ENGINE_VERSION = 1
FRAC = 10  # fixed-point fraction bits of the residual stream and of table inputs
ONE = 1 << FRAC
R_MAX = (1 << 20) - 1  # residual clamp: |x| < 1024
LUT_RANGE = 8  # sigmoid/tanh/GELU tables cover [-8, 8]
GATE_FRAC = 15  # sigmoid/tanh outputs and the LSTM cell are Q15
C_MAX = (1 << 22) - 1  # LSTM cell clamp: |c| < 128
EXP_ATT_RANGE = 16  # attention weights below e^-16 of the largest are zero
EXP_ATT_FRAC = 16
EXP_OUT_RANGE = 24  # output frequencies below e^-24 of the largest are floored at 1
EXP_OUT_FRAC = 30
MIX_MASS = 1 << 17  # attention weights are integers summing to at most this (see `_attend`)
MULT_BITS = 15  # per-channel multipliers are scaled to at most 2**15
INT64_SAFE = 1 << 62
NORM_GAIN_BITS = 16  # LayerNorm gains carry 16 extra bits (QNorm)
TABLES = ("sigmoid", "tanh", "gelu", "exp_att", "exp_out")
# What the native core must have been built with: core.py compares its `contract()` with this
# and refuses to run on any difference.
CONTRACT = {"FRAC": FRAC, "R_MAX": R_MAX, "LUT_RANGE": LUT_RANGE, "GATE_FRAC": GATE_FRAC, "C_MAX": C_MAX,
            "EXP_ATT_RANGE": EXP_ATT_RANGE, "EXP_OUT_RANGE": EXP_OUT_RANGE, "MIX_MASS": MIX_MASS,
            "NORM_GAIN_BITS": NORM_GAIN_BITS}
