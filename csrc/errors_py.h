// How the core's C++ errors reach Python: shazip::DataError (damaged archive data) becomes
// _core.DataError, a ValueError subclass that shazip turns into CorruptArchive;
// shazip::ArgumentError (bad arguments) becomes ValueError.
#pragma once

#include <exception>

#include <pybind11/pybind11.h>

#include "common.h"

namespace shazip {

// Registers _core.DataError and both translators on the module. Idempotent: if the module
// already has a DataError (registered once, e.g. by module.cpp), it does nothing, so any number
// of bind_* functions may call it. (ArgumentError is a std::invalid_argument, which pybind11
// maps to ValueError by itself; the translator only makes that explicit.)
inline void register_errors(pybind11::module_& m) {
  namespace py = pybind11;
  if (py::hasattr(m, "DataError")) return;
  py::register_exception<DataError>(m, "DataError", PyExc_ValueError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const ArgumentError& e) {
      py::set_error(PyExc_ValueError, e.what());
    }
  });
}

}  // namespace shazip
