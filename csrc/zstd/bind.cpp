// The ZSTD block method: blocks the model cannot shrink are stored as one zstd frame each.
//   _core.zstd_compress(data, level) -> bytes      one frame, content size recorded, no checksum
//   _core.zstd_decompress(payload, n) -> bytes     exactly one frame of exactly n bytes, or DataError
// libzstd 1.5.7 is vendored (csrc/third_party/zstd, BSD) and compiled into the core, so the base
// install needs no zstandard module (23 MB). Its frames are byte-identical to those of
// python-zstandard 0.25 (the same libzstd, the same parameters: ZstdCompressor(level).compress),
// which earlier shazip versions wrote; tests/test_zstd_block.py checks both directions.
#include <string>

#include <pybind11/pybind11.h>

#include "common.h"
#include "errors_py.h"
#include "third_party/zstd/zstd.h"

namespace py = pybind11;
using namespace shazip;

namespace {

std::string bytes_of(const py::buffer& obj) {
  const py::buffer_info info = obj.request();
  require(info.itemsize == 1 && info.ndim <= 1, "zstd data must be bytes");
  return std::string(static_cast<const char*>(info.ptr), size_t(info.size));
}

std::string compress(const std::string& src, int level) {
  require(level >= 1 && level <= ZSTD_maxCLevel(), "zstd level out of range");
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  if (!cctx) throw std::bad_alloc();
  std::string out(ZSTD_compressBound(src.size()), '\0');
  size_t n = ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level);
  if (!ZSTD_isError(n)) n = ZSTD_compress2(cctx, out.data(), out.size(), src.data(), src.size());
  ZSTD_freeCCtx(cctx);
  if (ZSTD_isError(n)) throw std::runtime_error(std::string("zstd: ") + ZSTD_getErrorName(n));
  out.resize(n);
  return out;
}

// A damaged frame could claim any size; the claim is checked against the block's own length
// before anything is allocated, and the frame must fill the payload exactly.
std::string decompress(const std::string& src, unsigned long long n) {
  const unsigned long long claimed = ZSTD_getFrameContentSize(src.data(), src.size());
  if (claimed == ZSTD_CONTENTSIZE_ERROR) throw DataError("not a zstd frame");
  if (claimed != n) throw DataError("wrong content size");
  const size_t frame = ZSTD_findFrameCompressedSize(src.data(), src.size());
  if (ZSTD_isError(frame)) throw DataError(ZSTD_getErrorName(frame));
  if (frame != src.size()) throw DataError("bytes after the frame");
  std::string out(size_t(n), '\0');
  const size_t got = ZSTD_decompress(out.data(), out.size(), src.data(), src.size());
  if (ZSTD_isError(got)) throw DataError(ZSTD_getErrorName(got));
  if (got != n) throw DataError("wrong content size");
  return out;
}

}  // namespace

void bind_zstd(py::module_& m) {
  register_errors(m);
  m.attr("ZSTD_VERSION") = ZSTD_versionString();
  m.def(
      "zstd_compress",
      [](const py::buffer& data, int level) {
        const std::string src = bytes_of(data);
        std::string out;
        {
          py::gil_scoped_release release;
          out = compress(src, level);
        }
        return py::bytes(out);
      },
      py::arg("data"), py::arg("level"), "One zstd frame of data at this level (1-22).");
  m.def(
      "zstd_decompress",
      [](const py::buffer& payload, unsigned long long n) {
        const std::string src = bytes_of(payload);
        std::string out;
        {
          py::gil_scoped_release release;
          out = decompress(src, n);
        }
        return py::bytes(out);
      },
      py::arg("payload"), py::arg("n"),
      "The n bytes of the one zstd frame in payload; DataError if it is not exactly that.");
}
