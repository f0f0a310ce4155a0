// shazip._testing's block hooks, on jobs the core made: whether a job's model runs on threads of
// its own beside the coder, and its pipeline set before it runs (how far the model may run ahead,
// the cut drawn at random every step), so that tests reach every interleaving of the two sides.
// The bytes depend on neither.
#include <pybind11/pybind11.h>

#include "block/job.h"

namespace py = pybind11;
using namespace shazip;

void bind_block_hooks(py::module_& m) {
  m.def(
      "pipelined", [](const block::Job& job) { return job.pipelined(); }, py::arg("job"),
      "Whether the job's model runs on threads of its own beside the coder (two threads or more; decoding, two "
      "lanes or more).");
  m.def(
      "pipeline", [](block::Job& job, i64 ring, u64 cut_seed) { job.set_pipeline(ring, cut_seed); }, py::arg("job"),
      py::arg("ring") = block::RING_STEPS, py::arg("cut_seed") = 0,
      "Before the job runs: the steps' rows its model may run ahead (>= 1), and cut_seed (0: the cut follows "
      "the time; else every step's cut drawn from a generator with this seed).");
}
