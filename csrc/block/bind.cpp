// Python binding of the block loop: _core.Job.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "block/coders.h"
#include "block/job.h"
#include "stage/block_coder.h"

namespace py = pybind11;
using namespace shazip;

void bind_block(py::module_& m) {
  py::class_<block::Job>(m, "Job", "One block coded by the int8 model and a symbol coder, a chunk of steps at a time.")
      .def(py::init([](std::shared_ptr<model::Model> model, std::shared_ptr<ThreadPool> pool, i64 n, i64 lanes,
                       std::shared_ptr<stage::Stage> stage, std::optional<py::bytes> data,
                       std::optional<py::bytes> payload, bool measure, i64 overrun) {
             require(data.has_value() != payload.has_value(), "give the block's data (encoding) or payload (decoding)");
             require(model || stage, "a job codes with the model, a stage or both");
             const i64 span = n ? (n + lanes - 1) / lanes : 1;
             std::unique_ptr<coder::SymbolCoder> symbols;
             std::string bytes;
             if (data) {
               bytes = std::string(*data);
               require(i64(bytes.size()) == n, "data must be n bytes");
               if (stage)
                 symbols = std::make_unique<stage::Encoder>(stage, lanes, span, measure);
               else
                 symbols = std::make_unique<block::CategoricalEncode>(measure);
             } else if (stage) {
               symbols = std::make_unique<stage::Decoder>(stage, lanes, span, std::string(*payload), overrun);
             } else {
               symbols = std::make_unique<block::CategoricalDecode>(std::string(*payload), overrun);
             }
             return std::make_unique<block::Job>(model, pool, std::move(symbols), n, lanes,
                                                 data ? reinterpret_cast<const u8*>(bytes.data()) : nullptr, measure);
           }),
           py::arg("model"), py::arg("pool"), py::arg("n"), py::arg("lanes"), py::arg("stage") = nullptr,
           py::arg("data") = py::none(), py::arg("payload") = py::none(), py::arg("measure") = false,
           py::arg("overrun") = -1)
      .def("run", &block::Job::run, py::arg("steps"), py::call_guard<py::gil_scoped_release>(),
           "Runs at most `steps` steps (GIL released); returns the bytes they coded.")
      .def_property_readonly("done", &block::Job::done)
      .def("result", [](block::Job& j) { return py::bytes(j.result()); })
      .def("head", [](const block::Job& j, i64 steps) { return py::bytes(j.head(steps)); }, py::arg("steps"),
           "Each lane's first `steps` bytes, lane after lane (format 5's head check), once they have run.")
      .def_property_readonly("steps_done", &block::Job::steps_done)
      .def_property_readonly("model_bits", &block::Job::model_bits)
      .def_property_readonly("coded_bits", &block::Job::coded_bits);
}
