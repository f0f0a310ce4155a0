// Python binding of the adaptive stage: _core.Stage and the per-step coders external engines use
// (the torch twin, the GPU). Its components alone, for tests, are shazip._testing's (csrc/testing/).
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "stage/block_coder.h"

namespace py = pybind11;
using namespace shazip;
using namespace shazip::stage;

namespace {

using Rows = py::array_t<i64, py::array::c_style | py::array::forcecast>;

// freq [k, 256] int64, checked
const i64* rows_of(const Rows& freq, i64& k) {
  require(freq.ndim() == 2 && freq.shape(1) == 256, "freq must be [k, 256]");
  k = freq.shape(0);
  return freq.data();
}

}  // namespace

void bind_stage(py::module_& m) {
  m.def(
      "stage_models",
      [] {
        py::list out;
        for (const StageModel& sm : STAGE_MODELS) {
          py::dict d;
          d["name"] = sm.name;
          d["version"] = sm.version;
          d["needs"] = py::str(sm.needs).attr("split")();
          d["about"] = sm.about;
          out.append(d);
        }
        return out;
      },
      "The stage's models beyond version 1's, in the order of their bits (csrc/stage/models.def).");
  py::class_<Stage, std::shared_ptr<Stage>>(m, "Stage", "The adaptive stage's tables, shared by lanes and blocks.")
      .def(py::init([](const std::vector<i64>& squash, int table_bits, int history_bits, int match_bits,
                       int match_min, int mixer_lr, const std::vector<int>& orders, bool word, bool column,
                       bool sparse, bool nn, bool match, bool apm, u64 extras, const std::string& kernels) {
             return std::make_shared<Stage>(squash,
                                            Params{table_bits, history_bits, match_bits, match_min, mixer_lr, orders,
                                                   word, column, sparse, nn, match, apm, extras},
                                            kernels::select_kernels(kernels));
           }),
           py::arg("squash"), py::arg("table_bits"), py::arg("history_bits"), py::arg("match_bits"),
           py::arg("match_min"), py::arg("mixer_lr"), py::arg("orders"), py::arg("word"), py::arg("column"),
           py::arg("sparse"), py::arg("nn"), py::arg("match"), py::arg("apm"), py::arg("extras"),
           py::arg("kernels") = "auto")
      .def_property_readonly("kernels", [](const Stage& s) { return std::string(s.kernels().name); })
      .def("snapshot", [](const Stage& s) { return std::make_shared<Stage>(s); })
      .def("restore", &Stage::restore)
      .def_property_readonly("position", &Stage::position)
      .def_property_readonly("bytes", &Stage::bytes);
  py::class_<Encoder>(m, "StageEncoder", "Codes one block through the stage, a step at a time.")
      .def(py::init<std::shared_ptr<Stage>, i64, i64, bool>())
      .def("code", [](Encoder& e, const Rows& freq, py::array_t<i64, py::array::c_style | py::array::forcecast> sym) {
        i64 k;
        const i64* f = rows_of(freq, k);
        require(sym.ndim() == 1 && sym.shape(0) == k, "symbols must be [k]");
        std::vector<u8> bytes(static_cast<size_t>(k));
        for (i64 b = 0; b < k; ++b) {
          require(sym.data()[b] >= 0 && sym.data()[b] < 256, "symbols must be bytes");
          bytes[size_t(b)] = u8(sym.data()[b]);
        }
        py::gil_scoped_release unlocked;
        e.code(f, bytes.data(), k);
      })
      .def("finish", [](Encoder& e) { return py::bytes(e.finish()); })
      .def_property_readonly("bits", &Encoder::bits);
  py::class_<Decoder>(m, "StageDecoder", "Decodes one block through the stage, a step at a time.")
      .def(py::init([](std::shared_ptr<Stage> st, i64 lanes, i64 span, const py::bytes& payload, i64 overrun) {
             return std::make_unique<Decoder>(std::move(st), lanes, span, std::string(payload), overrun);
           }),
           py::arg("stage"), py::arg("lanes"), py::arg("span"), py::arg("payload"), py::arg("overrun") = -1)
      .def("code", [](Decoder& d, const Rows& freq) {
        i64 k;
        const i64* f = rows_of(freq, k);
        py::array_t<i64> out(k);
        std::vector<u8> sym(static_cast<size_t>(k));
        {
          py::gil_scoped_release unlocked;
          d.code(f, sym.data(), k);
        }
        std::copy(sym.begin(), sym.end(), out.mutable_data());
        return out;
      });
}
