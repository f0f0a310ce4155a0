// Python binding of the categorical range coder (coder/categorical.h):
//   _core.CategoricalEncoder().encode(probs float64 [k, 256], symbols int [k]); .finish() -> bytes
//   _core.CategoricalDecoder(payload: bytes-like).decode(probs float64 [k, 256]) -> int64 [k]
// Arguments are copied, then the GIL is released while coding. Bad arguments raise ValueError
// (a non-float64 row array TypeError); damaged payloads raise _core.DataError (a ValueError).
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "coder/categorical.h"
#include "common.h"
#include "errors_py.h"

namespace py = pybind11;
using namespace shazip;

namespace {

constexpr py::ssize_t kRow = coder::kCategoricalSymbols;

// probs as a contiguous copy: float64 only (float32 rows would have been quantized in float32
// arithmetic by constriction, so converting them would silently differ), shape [k, 256].
std::vector<double> rows_of(const py::array& probs) {
  const py::dtype dt = probs.dtype();
  if (dt.kind() != 'f' || dt.itemsize() != 8) throw py::type_error("categorical probabilities must be a float64 array");
  require(probs.ndim() == 2 && probs.shape(1) == kRow, "categorical probabilities must have shape [k, 256]");
  // (forcecast only to native byte order: the dtype is float64 already)
  auto a = py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(probs);
  if (!a) throw py::error_already_set();
  std::vector<double> out(size_t(a.size()));
  if (!out.empty()) std::memcpy(out.data(), a.data(), out.size() * sizeof(double));
  return out;
}

std::vector<i64> symbols_of(const py::array& symbols, py::ssize_t k) {
  const char kind = symbols.dtype().kind();
  if (kind != 'i' && kind != 'u') throw py::type_error("categorical symbols must be an integer array");
  require(symbols.ndim() == 1 && symbols.shape(0) == k, "need one symbol per probability row");
  auto a = py::array_t<i64, py::array::c_style | py::array::forcecast>::ensure(symbols);
  if (!a) throw py::error_already_set();
  std::vector<i64> out(size_t(a.size()));
  if (!out.empty()) std::memcpy(out.data(), a.data(), out.size() * sizeof(i64));
  // uint64 values past int64 wrap negative in the cast: still out of range, still refused.
  if (kind == 'u' && symbols.itemsize() == 8)
    for (i64 s : out) require(s >= 0, "categorical symbol must be in [0, 256)");
  return out;
}

// One object may be used from several Python threads; the GIL is released while it codes.
struct PyEncoder {
  coder::CategoricalEncoder enc;
  std::mutex mu;
};

struct PyDecoder {
  PyDecoder(const u8* p, size_t n, i64 overrun) : dec(p, n, overrun) {}
  coder::CategoricalDecoder dec;
  std::mutex mu;
};

// The bytes of a bytes-like object (bytes, bytearray, memoryview...), copied.
std::string bytes_of(const py::object& obj) {
  Py_buffer view;
  if (PyObject_GetBuffer(obj.ptr(), &view, PyBUF_SIMPLE) != 0) throw py::error_already_set();
  std::string out(static_cast<const char*>(view.buf), size_t(view.len));
  PyBuffer_Release(&view);
  return out;
}

}  // namespace

void bind_categorical(py::module_& m) {
  register_errors(m);

  py::class_<PyEncoder>(m, "CategoricalEncoder",
                        "The categorical range coder (bit-identical to constriction's queue RangeEncoder with "
                        "Categorical(perfect=False) on float64 rows).")
      .def(py::init<>())
      .def(
          "encode",
          [](PyEncoder& self, const py::array& probs, const py::array& symbols) {
            const std::vector<double> p = rows_of(probs);
            const py::ssize_t k = probs.shape(0);
            const std::vector<i64> s = symbols_of(symbols, k);
            py::gil_scoped_release release;
            std::lock_guard<std::mutex> lock(self.mu);
            self.enc.encode_batch(p.data(), s.data(), size_t(k));
          },
          py::arg("probs"), py::arg("symbols"),
          "Codes symbols[i] under probs[i] (float64 [k, 256]) in order; all or nothing on a bad argument.")
      .def(
          "finish",
          [](PyEncoder& self) {
            std::string out;
            {
              py::gil_scoped_release release;
              std::lock_guard<std::mutex> lock(self.mu);
              out = self.enc.finish();
            }
            return py::bytes(out);
          },
          "The compressed bytes (little-endian u32 words). The encoder is done after this.");

  py::class_<PyDecoder>(m, "CategoricalDecoder", "Decodes what CategoricalEncoder (or constriction) wrote.")
      .def(py::init([](const py::object& payload, i64 overrun) {
             const std::string b = bytes_of(payload);
             return new PyDecoder(reinterpret_cast<const u8*>(b.data()), b.size(), overrun);
           }),
           py::arg("payload"), py::arg("overrun") = -1,
           "payload: the compressed bytes (a length not a multiple of 4 raises DataError); overrun: the most "
           "bytes it may read past them (-1: any).")
      .def(
          "decode",
          [](PyDecoder& self, const py::array& probs) {
            const std::vector<double> p = rows_of(probs);
            const py::ssize_t k = probs.shape(0);
            std::vector<i64> out(static_cast<size_t>(k));
            {
              py::gil_scoped_release release;
              std::lock_guard<std::mutex> lock(self.mu);
              self.dec.decode_batch(p.data(), size_t(k), out.data());
            }
            py::array_t<i64> result(k);
            if (k) std::memcpy(result.mutable_data(), out.data(), out.size() * sizeof(i64));
            return result;
          },
          py::arg("probs"),
          "Decodes one symbol per row of probs (float64 [k, 256]) -> int64 [k]; all or nothing; raises "
          "DataError on damaged data.")
      .def(
          "maybe_exhausted",
          [](PyDecoder& self) {
            std::lock_guard<std::mutex> lock(self.mu);
            return self.dec.maybe_exhausted();
          },
          "True if every word has been read and the state is one an encoder's seal leaves.");
}
