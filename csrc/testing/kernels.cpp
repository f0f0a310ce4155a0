// shazip._testing's kernels: one kernel alone on the kernel path of a stage the core made (its
// table of function pointers comes with it, so nothing here is compiled per instruction set), for
// the cases a model rarely reaches: rows past a fast path's range, the weight -128, every residue
// of a width.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdlib>

#include "model/model.h"
#include "stage/stage.h"

namespace py = pybind11;
using namespace shazip;
using shazip::model::Aligned;
using shazip::stage::Stage;

namespace {

// The layer_norm of int64 rows [rows, d].
py::array_t<i64> kernel_layer_norm(const std::shared_ptr<Stage>& on, const py::array_t<i64, py::array::c_style | py::array::forcecast>& x,
                                   const py::array_t<i64, py::array::c_style | py::array::forcecast>& gain,
                                   const py::array_t<i64, py::array::c_style | py::array::forcecast>& bias) {
  const kernels::Kernels& k = on->kernels();
  require(x.ndim() == 2 && gain.ndim() == 1 && bias.ndim() == 1, "x must be [rows, d], gain and bias [d]");
  const i64 rows = x.shape(0), d = x.shape(1);
  require(gain.shape(0) == d && bias.shape(0) == d && d > 0, "gain and bias must have x's width");
  for (i64 i = 0; i < rows * d; ++i) require(std::abs(x.data()[i]) <= kernels::R_MAX, "x exceeds the residual range");
  for (i64 i = 0; i < d; ++i)
    require(std::abs(gain.data()[i]) < (i64(1) << 40) && std::abs(bias.data()[i]) <= kernels::R_MAX,
            "gain or bias out of range");
  py::array_t<i64> y({rows, d});
  for (i64 r = 0; r < rows; ++r) k.layer_norm(x.data() + r * d, gain.data(), bias.data(), d, y.mutable_data() + r * d);
  return y;
}

// The gemm: int32 [rows, N] = a int8 [rows, K] (|a| <= 127) @ w int8 [K, N].
py::array_t<i32> kernel_gemm(const std::shared_ptr<Stage>& on, const py::array_t<i8, py::array::c_style | py::array::forcecast>& a,
                             const py::array_t<i8, py::array::c_style | py::array::forcecast>& w) {
  const kernels::Kernels& k = on->kernels();
  require(a.ndim() == 2 && w.ndim() == 2 && a.shape(1) == w.shape(0), "a must be [rows, K] and w [K, N]");
  const i64 rows = a.shape(0), K = a.shape(1), N = w.shape(1);
  require(K > 0 && N > 0, "K and N must be positive");
  for (i64 i = 0; i < rows * K; ++i) require(a.data()[i] != -128, "a row's entries must be within +-127");
  Aligned packed, scratch;
  packed.resize(k.packed_bytes(K, N));
  k.pack(w.data(), K, N, packed.data());
  scratch.resize(k.gemm_scratch_bytes(rows, K));
  py::array_t<i32> c({rows, N});
  k.gemm(a.data(), rows, K, N, packed.data(), c.mutable_data(), scratch.data());
  return c;
}

// The quantization of int64 rows (|y| <= R_MAX): int8 rows and their scales e.
py::tuple kernel_quantize(const std::shared_ptr<Stage>& on, const py::array_t<i64, py::array::c_style | py::array::forcecast>& y) {
  const kernels::Kernels& k = on->kernels();
  require(y.ndim() == 2 && y.shape(1) > 0, "y must be [rows, d]");
  const i64 rows = y.shape(0), d = y.shape(1);
  for (i64 i = 0; i < rows * d; ++i) require(std::abs(y.data()[i]) <= kernels::R_MAX, "y's entries must be within the residual range");
  py::array_t<i8> q({rows, d});
  py::array_t<i64> e(rows);
  for (i64 r = 0; r < rows; ++r) e.mutable_data()[r] = k.quantize_row(y.data() + r * d, d, q.mutable_data() + r * d);
  return py::make_tuple(q, e);
}

// The attention mix: int32 [d] = u int32 [n] @ keys int8 [n, d] + u_extra * extra int8 [d],
// for weights u >= 0 summing to at most MIX_MASS and entries within +-127 (quantized rows).
py::array_t<i32> kernel_mix(const std::shared_ptr<Stage>& on, const py::array_t<i8, py::array::c_style | py::array::forcecast>& keys,
                            const py::array_t<i32, py::array::c_style | py::array::forcecast>& u,
                            const py::array_t<i8, py::array::c_style | py::array::forcecast>& extra, i32 u_extra) {
  const kernels::Kernels& k = on->kernels();
  require(keys.ndim() == 2 && u.ndim() == 1 && extra.ndim() == 1, "keys must be [n, d], u [n] and extra [d]");
  const i64 n = keys.shape(0), d = keys.shape(1);
  require(u.shape(0) == n && extra.shape(0) == d && d > 0, "keys, u and extra disagree in n or d");
  i64 mass = u_extra;
  for (i64 j = 0; j < n; ++j) {
    require(u.data()[j] >= 0, "weights must be non-negative");
    mass += u.data()[j];
  }
  require(u_extra >= 0 && mass <= kernels::MIX_MASS, "the weights must sum to at most MIX_MASS");
  for (i64 i = 0; i < n * d; ++i) require(keys.data()[i] != -128, "keys' entries must be within +-127");
  for (i64 i = 0; i < d; ++i) require(extra.data()[i] != -128, "extra's entries must be within +-127");
  Aligned scratch;
  scratch.resize(32 * (n + 2));
  py::array_t<i32> out(d);
  k.mix(keys.data(), n, u.data(), extra.data(), u_extra, d, out.mutable_data(), scratch.data());
  return out;
}

}  // namespace

void bind_kernel_hooks(py::module_& m) {
  m.def("kernel_layer_norm", &kernel_layer_norm, py::arg("on"), py::arg("x"), py::arg("gain"), py::arg("bias"),
        "The LayerNorm of int64 rows on stage `on`'s kernel path.");
  m.def("kernel_gemm", &kernel_gemm, py::arg("on"), py::arg("a"), py::arg("w"),
        "The int8 GEMM a [rows, K] @ w [K, N] -> int32 on stage `on`'s kernel path.");
  m.def("kernel_quantize", &kernel_quantize, py::arg("on"), py::arg("y"),
        "The quantization of int64 rows -> (int8 rows, their scales) on stage `on`'s kernel path.");
  m.def("kernel_mix", &kernel_mix, py::arg("on"), py::arg("keys"), py::arg("u"), py::arg("extra"), py::arg("u_extra"),
        "The attention mix u [n] @ keys [n, d] + u_extra * extra -> int32 [d] on stage `on`'s kernel path.");
}
