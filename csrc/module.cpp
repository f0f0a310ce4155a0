// shazip._core: the whole decode path in one module (csrc/README.md: where each part lives).
#include <pybind11/pybind11.h>

#include "common.h"
#include "errors_py.h"

namespace py = pybind11;

void bind_model(py::module_& m);        // csrc/model/bind.cpp: the int8 engine, kernels, threads
void bind_categorical(py::module_& m);  // csrc/coder/bind.cpp: the categorical range coder
void bind_stage(py::module_& m);        // csrc/stage/bind.cpp: the adaptive stage
void bind_block(py::module_& m);        // csrc/block/bind.cpp: the block loop
void bind_zstd(py::module_& m);         // csrc/zstd/bind.cpp: the zstd block method

PYBIND11_MODULE(_core, m) {
  m.doc() = "shazip's native core: int8 engine, adaptive stage, coders and block loop";
  m.attr("ABI") = 4;  // what shazip/core.py expects of this build
  shazip::register_errors(m);  // DataError (damaged data: ValueError), ArgumentError -> ValueError
  bind_model(m);
  bind_categorical(m);
  bind_stage(m);
  bind_block(m);
  bind_zstd(m);
}
