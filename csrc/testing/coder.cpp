// shazip._testing's coder hook: the categorical coder's quantized rows (coder::quantize_row, the
// model whose entries the coders compute as they need them), for tests against the formula
// written out in Python. setup.py compiles coder/categorical.cpp into this module for it.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "coder/categorical.h"

namespace py = pybind11;
using namespace shazip;

void bind_coder_hooks(py::module_& m) {
  m.def(
      "categorical_cdf",
      [](const py::array_t<double, py::array::c_style | py::array::forcecast>& probs) {
        constexpr py::ssize_t n = coder::kCategoricalSymbols;
        require(probs.ndim() == 2 && probs.shape(1) == n, "categorical probabilities must have shape [k, 256]");
        const py::ssize_t k = probs.shape(0);
        py::array_t<u32> out({k, n + 1});
        for (py::ssize_t i = 0; i < k; ++i) coder::quantize_row(probs.data() + i * n, out.mutable_data() + i * (n + 1));
        return out;
      },
      py::arg("probs"), "The fixed-point model of each row: cdf[s] is symbol s's left end, cdf[256] = 2**24.");
}
