// Python bindings of the int8 engine: _core.Model, _core.ThreadPool, contract() and the kernel
// paths. Models are built from numpy arrays (core.py passes numerics.IntWeights' arrays).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

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

}  // namespace
}  // namespace shazip::model

void bind_model(py::module_& m) {
  using namespace shazip;
  using namespace shazip::model;

  m.def("contract", &contract, "The numerics constants and array names this core was compiled with.");
  m.def("available_kernels", &kernels::available_kernels, "The kernel paths this CPU runs, slowest first.");

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
