// Python bindings of the int8 engine: _core.Model, _core.ThreadPool, contract() and the kernel
// paths. Models are built from numpy arrays (core.py passes numerics.IntWeights' arrays).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdlib>

#include "model/model.h"

namespace py = pybind11;

namespace shazip::model {
namespace {

// An int8 or int64 array (numpy, or anything numpy converts) copied into an Array.
Array to_array(py::handle obj, const std::string& what) {
  py::array a = py::array::ensure(obj);
  if (!a) {
    PyErr_Clear();
    throw ArgumentError(what + ": not an array");
  }
  const py::dtype dt = a.dtype();
  Array r;
  for (py::ssize_t i = 0; i < a.ndim(); ++i) r.shape.push_back(a.shape(i));
  if (dt.kind() == 'i' && dt.itemsize() == 1) {
    auto c = py::array_t<i8, py::array::c_style | py::array::forcecast>::ensure(a);
    r.int8 = true;
    r.i8s.assign(c.data(), c.data() + c.size());
  } else if (dt.kind() == 'i' && dt.itemsize() == 8) {
    auto c = py::array_t<i64, py::array::c_style | py::array::forcecast>::ensure(a);
    r.i64s.assign(c.data(), c.data() + c.size());
  } else {
    throw ArgumentError(what + ": dtype " + py::str(dt).cast<std::string>() + " (int8 or int64 expected)");
  }
  return r;
}

Arrays to_arrays(const py::dict& d, const std::string& where) {
  Arrays r;
  for (auto [k, v] : d) {
    const std::string name = py::str(k);
    r.emplace(name, to_array(v, where + ": array '" + name + "'"));
  }
  return r;
}

py::dict contract() {
  py::dict c;
  c["FRAC"] = kernels::FRAC;
  c["R_MAX"] = kernels::R_MAX;
  c["LUT_RANGE"] = kernels::LUT_RANGE;
  c["GATE_FRAC"] = kernels::GATE_FRAC;
  c["C_MAX"] = kernels::C_MAX;
  c["EXP_ATT_RANGE"] = kernels::EXP_ATT_RANGE;
  c["EXP_OUT_RANGE"] = kernels::EXP_OUT_RANGE;
  c["MIX_MASS"] = kernels::MIX_MASS;
  c["NORM_GAIN_BITS"] = kernels::NORM_GAIN_BITS;
  c["BLOCK_TENSORS"] = block_tensor_names();
  c["ATTN_TENSORS"] = attn_tensor_names();
  c["OUT_TENSORS"] = out_tensor_names();
  c["TABLES"] = table_names();
  return c;
}

std::unique_ptr<Model> make_model(i64 d_model, i64 d_boom, i64 mem_len, py::handle embed, const py::list& blocks,
                                  const py::list& shifts, const py::dict& out, i64 out_shift, const py::dict& tables,
                                  const std::string& path) {
  const kernels::Kernels& k = kernels::select_kernels(path);
  Spec s;
  s.d_model = d_model;
  s.d_boom = d_boom;
  s.mem_len = mem_len;
  s.embed = to_array(embed, "embed");
  for (size_t i = 0; i < blocks.size(); ++i)
    s.blocks.push_back(to_arrays(blocks[i].cast<py::dict>(), "block " + std::to_string(i)));
  for (size_t i = 0; i < shifts.size(); ++i) s.shifts.push_back(shifts[i].cast<std::map<std::string, i64>>());
  s.out = to_arrays(out, "out");
  s.out_shift = out_shift;
  s.tables = to_arrays(tables, "tables");
  return std::make_unique<Model>(s, k);
}

// prev: uint8 or int64 [k] bytes
std::vector<u8> prev_bytes(const py::array& prev) {
  require(prev.ndim() == 1, "prev must be one-dimensional");
  const py::dtype dt = prev.dtype();
  std::vector<u8> bytes(static_cast<size_t>(prev.shape(0)));
  if (dt.kind() == 'u' && dt.itemsize() == 1) {
    auto c = py::array_t<u8, py::array::c_style | py::array::forcecast>::ensure(prev);
    std::copy(c.data(), c.data() + c.size(), bytes.begin());
  } else if (dt.kind() == 'i' && dt.itemsize() == 8) {
    auto c = py::array_t<i64, py::array::c_style | py::array::forcecast>::ensure(prev);
    for (size_t i = 0; i < bytes.size(); ++i) {
      require(c.data()[i] >= 0 && c.data()[i] <= 255, "prev: a byte must be in [0, 255]");
      bytes[i] = static_cast<u8>(c.data()[i]);
    }
  } else {
    throw ArgumentError("prev: dtype " + py::str(dt).cast<std::string>() + " (uint8 or int64 expected)");
  }
  return bytes;
}

// One kernel alone, for tests of the cases a model rarely reaches (rows past a fast path's
// range, the weight -128): `path`'s layer_norm of int64 rows [rows, d].
py::array_t<i64> kernel_layer_norm(const std::string& path, const py::array_t<i64, py::array::c_style | py::array::forcecast>& x,
                                   const py::array_t<i64, py::array::c_style | py::array::forcecast>& gain,
                                   const py::array_t<i64, py::array::c_style | py::array::forcecast>& bias) {
  const kernels::Kernels& k = kernels::select_kernels(path);
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

// `path`'s gemm: int32 [rows, N] = a int8 [rows, K] (|a| <= 127) @ w int8 [K, N].
py::array_t<i32> kernel_gemm(const std::string& path, const py::array_t<i8, py::array::c_style | py::array::forcecast>& a,
                             const py::array_t<i8, py::array::c_style | py::array::forcecast>& w) {
  const kernels::Kernels& k = kernels::select_kernels(path);
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

// `path`'s quantization of int64 rows (|y| <= R_MAX): int8 rows and their scales e.
py::tuple kernel_quantize(const std::string& path, const py::array_t<i64, py::array::c_style | py::array::forcecast>& y) {
  const kernels::Kernels& k = kernels::select_kernels(path);
  require(y.ndim() == 2 && y.shape(1) > 0, "y must be [rows, d]");
  const i64 rows = y.shape(0), d = y.shape(1);
  for (i64 i = 0; i < rows * d; ++i) require(std::abs(y.data()[i]) <= kernels::R_MAX, "y's entries must be within the residual range");
  py::array_t<i8> q({rows, d});
  py::array_t<i64> e(rows);
  for (i64 r = 0; r < rows; ++r) e.mutable_data()[r] = k.quantize_row(y.data() + r * d, d, q.mutable_data() + r * d);
  return py::make_tuple(q, e);
}

// `path`'s attention mix: int32 [d] = u int32 [n] @ keys int8 [n, d] + u_extra * extra int8 [d],
// for weights u >= 0 summing to at most MIX_MASS and entries within +-127 (quantized rows).
py::array_t<i32> kernel_mix(const std::string& path, const py::array_t<i8, py::array::c_style | py::array::forcecast>& keys,
                            const py::array_t<i32, py::array::c_style | py::array::forcecast>& u,
                            const py::array_t<i8, py::array::c_style | py::array::forcecast>& extra, i32 u_extra) {
  const kernels::Kernels& k = kernels::select_kernels(path);
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
}  // namespace shazip::model

void bind_model(py::module_& m) {
  using namespace shazip;
  using namespace shazip::model;

  m.def("contract", &contract, "The numerics constants and array names this core was compiled with.");
  m.def("available_kernels", &kernels::available_kernels, "The kernel paths this CPU runs, slowest first.");
  m.def("kernel_layer_norm", &kernel_layer_norm, py::arg("path"), py::arg("x"), py::arg("gain"), py::arg("bias"),
        "One kernel path's LayerNorm of int64 rows (tests).");
  m.def("kernel_gemm", &kernel_gemm, py::arg("path"), py::arg("a"), py::arg("w"),
        "One kernel path's int8 GEMM, a [rows, K] @ w [K, N] -> int32 (tests).");
  m.def("kernel_quantize", &kernel_quantize, py::arg("path"), py::arg("y"),
        "One kernel path's quantization of int64 rows -> (int8 rows, their scales) (tests).");
  m.def("kernel_mix", &kernel_mix, py::arg("path"), py::arg("keys"), py::arg("u"), py::arg("extra"), py::arg("u_extra"),
        "One kernel path's attention mix, u [n] @ keys [n, d] + u_extra * extra -> int32 [d] (tests).");

  py::class_<ThreadPool, std::shared_ptr<ThreadPool>>(m, "ThreadPool", "A team of threads for Model.step (the caller is one of them).")
      .def(py::init<int>(), py::arg("threads"))
      .def_property_readonly("threads", &ThreadPool::size);

  py::class_<State>(m, "State", "Lanes' recurrent state for Model.step (Model.state makes one).")
      .def_property_readonly("lanes", [](const State& s) { return s.lanes; })
      .def_property_readonly("pos", [](const State& s) { return s.pos; });

  py::class_<Model, std::shared_ptr<Model>>(m, "Model", "The int8 SHA-RNN step on one kernel path.")
      .def(py::init(&make_model), py::arg("d_model"), py::arg("d_boom"), py::arg("mem_len"), py::arg("embed"),
           py::arg("blocks"), py::arg("shifts"), py::arg("out"), py::arg("out_shift"), py::arg("tables"),
           py::arg("kernels") = "auto")
      .def_property_readonly("kernels", [](const Model& self) { return std::string(self.kernels().name); })
      .def_property_readonly("d_model", &Model::d_model)
      .def_property_readonly("d_boom", &Model::d_boom)
      .def_property_readonly("mem_len", &Model::mem_len)
      .def_property_readonly("n_layers", &Model::n_layers)
      .def("state", &Model::new_state, py::arg("lanes"), py::keep_alive<0, 1>(),
           "Zero state for `lanes` lanes (pos 0).")
      .def(
          "step",
          [](const Model& self, State& s, const py::array& prev, ThreadPool& pool) {
            const std::vector<u8> bytes = prev_bytes(prev);
            const i64 k = static_cast<i64>(bytes.size());
            require(s.owner == &self, "this state belongs to another model");
            require(k <= s.lanes, "prev has more entries than the state has lanes");
            py::array_t<i64> freq({k, i64(256)});
            i64* f = freq.mutable_data();
            {
              py::gil_scoped_release nogil;
              self.step(s, bytes.data(), k, f, pool);
            }
            return freq;
          },
          py::arg("state"), py::arg("prev"), py::arg("threads"),
          "One step for the first len(prev) lanes (prev: their previous bytes, 0 at the start): int64 "
          "frequencies [len(prev), 256], every entry >= 1. The state advances by one byte.");
}
