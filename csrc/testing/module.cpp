// shazip._testing: the core's parts alone, for tests: the adaptive stage's components (here), one
// kernel (kernels.cpp), the categorical coder's quantized rows (coder.cpp), a block job's pipeline
// (block.cpp). An extension apart from shazip._core, which holds only what the package uses. Its
// functions take the stages and jobs _core made (the two modules share pybind11's type registry),
// so no kernel code is built here: a stage's kernel path comes with it. Import it after _core
// (testkit/core_hooks.py does). Bad arguments (shazip::ArgumentError, a std::invalid_argument)
// reach Python as ValueError.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "stage/stage.h"

namespace py = pybind11;
using namespace shazip;
using namespace shazip::stage;

void bind_kernel_hooks(py::module_& m);  // kernels.cpp
void bind_coder_hooks(py::module_& m);   // coder.cpp
void bind_block_hooks(py::module_& m);   // block.cpp

namespace {

u32 counter_update(const std::shared_ptr<Stage>& s, u32 cell, int y, int limit) {
  require(limit >= 1 && limit <= COUNT_LIMIT_MAX, "limit must be in [1, 1023]");
  s->tables().update(cell, y, limit);
  return cell;
}

// one mixer prediction and update: (p16, new weights); with `warm`, after `seen` updates of its set
py::tuple mixer_step(const std::shared_ptr<Stage>& s, std::vector<i32> w, const std::vector<i32>& x, int y, int lr,
                     int warm, int seen) {
  require(w.size() == x.size() && !x.empty() && x.size() <= size_t(MAX_INPUTS), "bad sizes");
  require(warm >= 0 && seen >= 0, "warm and seen must be >= 0");
  Mixer m(s->kernels(), int(x.size()), 1, lr, w, warm);
  const std::vector<i32> none(x.size(), 0);
  for (int i = 0; i < seen; ++i) m.update(none.data(), 0, 0, 0);  // counts an update, moves no weight
  const int p = s->tables().sq(m.dot(x.data(), 0));
  m.update(x.data(), 0, y, p);
  return py::make_tuple(p, m.weights());
}

// the kernel path's mixer_dot and mixer_train on m rows at once: (each row's sum w x, the rows after
// learning their errors e)
py::tuple mixer_rows(const std::shared_ptr<Stage>& s, std::vector<std::vector<i32>> w, const std::vector<i32>& x,
                     const std::vector<i64>& e) {
  require(!w.empty() && w.size() == e.size() && !x.empty() && x.size() <= size_t(MAX_INPUTS), "bad sizes");
  std::vector<i32*> rows;
  for (auto& r : w) {
    require(r.size() == x.size(), "bad sizes");
    rows.push_back(r.data());
  }
  const i64 m = i64(rows.size()), n = i64(x.size());
  std::vector<i64> sums(rows.size());
  s->kernels().mixer_dot(rows.data(), m, x.data(), n, sums.data());
  s->kernels().mixer_train(rows.data(), e.data(), m, x.data(), n);
  return py::make_tuple(sums, w);
}

// SEED_SETS on one mixer of `sets` sets starting at `init`: each step (set, from, y) seeds the set from
// set `from`, predicts x and learns bit y; returns every set's weights after the steps
std::vector<i32> mixer_seed_steps(const std::shared_ptr<Stage>& s, int sets, const std::vector<i32>& init,
                                  const std::vector<i32>& x, const std::vector<std::array<int, 3>>& steps, int lr,
                                  int warm) {
  require(init.size() == x.size() && !x.empty() && x.size() <= size_t(MAX_INPUTS), "bad sizes");
  require(sets >= 1 && warm >= 0, "sets must be >= 1 and warm >= 0");
  Mixer m(s->kernels(), int(x.size()), sets, lr, init, warm);
  for (const auto& [set, from, y] : steps) {
    require(set >= 0 && set < sets && from >= 0 && from < sets && (y == 0 || y == 1), "bad step");
    m.seed(set, m.set_weights(from));
    m.update(x.data(), set, y, s->tables().sq(m.dot(x.data(), set)));
  }
  return {m.weights().begin(), m.weights().end()};
}

// A lane's state after `data` with every model on, and the context bytes formed for the next byte
Lane lane_after(const std::string& s) {
  Lane L;
  auto byte_at = [&](u32 q) { return int(u8(s[q])); };
  int before = 0;
  for (unsigned char c : s) {
    L.above = field_above(L, byte_at);
    cells_before(L, byte_at);
    ++L.coded;
    L.hist = L.hist << 8 | c;
    track(L, c, before, EXTRAS_ALL);
    before = c;
  }
  L.above = field_above(L, byte_at);
  cells_before(L, byte_at);
  return L;
}

// a lane's structure after `data` (one line-and-bracket state machine, every model on; all of
// `data` known): (field, field starts of this line, field count of the previous line and its
// starts, open brackets (innermost lowest), depth, inside a string, shape, the next byte's
// field_above, field_eq, the current field's hash, the digits ending there, mixer 3's weight set
// at bit 0 with DIGITS, NUMBER's digits before the point, after it and whether it has one, and
// CLASS_MIX's and STATE_MIX's weight sets at bit 0, the cell, this line's cell starts, the next
// byte's left and left_eq, up and up_eq, the last number, GROUPS's groups and repeat, and TOKENS's
// current token and last 3 tokens)
py::tuple structure_after(const py::bytes& data) {
  const Lane L = lane_after(std::string(data));
  std::vector<u32> starts(L.field_start.begin(), L.field_start.begin() + L.field + 1);
  std::vector<u32> prev(L.prev_field_start.begin(), L.prev_field_start.begin() + L.prev_fields);
  return py::make_tuple(L.field, starts, prev, L.stack, L.depth, L.quoted, L.shape, L.above,
                        L.field_eq, L.value, L.digits, last_byte_set(L, 0, true), L.num_int, L.num_frac,
                        L.num_point, class_set(L, 0), state_set(L, 0), L.cell,
                        std::vector<u32>(L.cell_start.begin(), L.cell_start.begin() + L.cell + 1), L.left, L.left_eq,
                        L.up, L.up_eq, L.last_num, L.groups, L.group_repeat, L.token,
                        std::vector<u32>(L.tokens.begin(), L.tokens.end()));
}

// INDIRECT's entries for the byte after `data` (one lane, tables of `table_bits`): what followed its
// last 1, 2 and 3 bytes the last two times
std::array<u32, 3> indirect_after(const py::bytes& data, int table_bits) {
  require(table_bits >= 12 && table_bits <= 24, "table_bits in [12, 24]");
  Indirect ind(table_bits);
  u64 hist = 0;
  for (unsigned char c : std::string(data)) {
    ind.update(hist, c);
    hist = hist << 8 | c;
  }
  return ind.entries(hist);
}

// CELL_ORDER's and CELL_LEFT's map contexts after `data`, at bit k with the bits so far c0, and
// CELL_UP's context bytes
py::tuple cell_contexts(const py::bytes& data, int k, int c0) {
  require(k >= 0 && k < 8 && c0 >> k == 1, "bit k in 0..7 and c0 with k bits after its leading 1");
  const Lane L = lane_after(std::string(data));
  return py::make_tuple(order_context(L, k, c0), left_band(L), up_context(L));
}

// RECOVER's state after byte c: (ptr, len, misses) from the recovering match's (ptr, len, misses)
// and predicted byte r, and the match models' (len, ptr, predicted byte) before c (-1: none)
py::tuple recover_step_of(u64 ptr, u32 len, u32 miss, int r, const std::vector<std::tuple<u32, u64, int>>& matches,
                       int c) {
  if (matches.size() > 2) throw std::invalid_argument("at most two match models");
  Lane::Match M[2];
  int predicted[2] = {-1, -1};
  for (size_t m = 0; m < matches.size(); ++m) {
    M[m].len = std::get<0>(matches[m]);
    M[m].ptr = std::get<1>(matches[m]);
    predicted[m] = std::get<2>(matches[m]);
  }
  const Lane::Recovering R = stage::recover_step({ptr, len, miss}, r, M, predicted, int(matches.size()), c);
  return py::make_tuple(R.ptr, R.len, R.miss);
}

// LINE_MATCH's matchers after each byte of `data`, coded in one lane of one block by a stage of
// `squash` with that model alone (on the kernel path of the stage `on`): per byte, ((ptr, len) of matcher 0, of matcher 1), ptr 0 while len is 0
py::list line_match_trace(const std::shared_ptr<Stage>& on, const std::vector<i64>& squash, const py::bytes& data) {
  const std::string s(data);
  Stage st(squash, Params{16, 16, 12, 6, 16, {1}, false, false, false, false, false, false, LINE_MATCH},
           on->kernels());
  std::vector<Lane> lanes(1);
  const Where at{0, std::max<u64>(s.size(), 1), 1, &lanes};
  py::list out;
  for (unsigned char c : s) {
    st.end_byte(lanes, 0, at, c);
    py::list row;
    for (const Lane::Match& M : lanes[0].line_match) row.append(py::make_tuple(M.len ? M.ptr : 0, M.len));
    out.append(py::tuple(row));
  }
  return out;
}

// one APM prediction and update on a single context: (p16, new cells)
py::tuple apm_step(const std::shared_ptr<Stage>& s, const std::vector<i32>& cells, int x, int y) {
  require(cells.size() == size_t(APM_CELLS), "an APM context has 33 cells");
  APM a(s->tables(), 1);
  a.cells().assign(cells.begin(), cells.end());
  const int p = a.p16(x, 0);
  a.update(y);
  return py::make_tuple(p, a.cells());
}

std::vector<int> bit_history(const std::shared_ptr<Stage>& s, int state) {
  const BitHistory& h = s->tables().history;
  require(state >= 0 && state < h.states(), "no such state");
  return {h.n0(state), h.n1(state), h.next(state, 0), h.next(state, 1)};
}

}  // namespace

// A lane after `data` through one model of numbers alone (its bit `mask` on)
template <class Model>
Lane model_lane(u64 mask, const std::string& data) {
  Params p{};
  p.extras = mask;
  Model model(p);
  Lane L;
  for (unsigned char c : data) model.after_byte(L, c);
  return L;
}

PYBIND11_MODULE(_testing, m) {
  m.doc() = "The core's parts alone, for tests (not shazip's API)";
  bind_kernel_hooks(m);
  bind_coder_hooks(m);
  bind_block_hooks(m);
  m.def("squash", [](const std::shared_ptr<Stage>& s, int x) { return s->tables().sq(x); });
  m.def("stretch", [](const std::shared_ptr<Stage>& s, int p) { return s->tables().st(p); });
  m.def("final_rate", [](const std::shared_ptr<Stage>& s) { return Mixers::final_rate(s->params()); });
  m.def("counter_update", &counter_update);
  m.def("mixer_step", &mixer_step, py::arg("stage"), py::arg("w"), py::arg("x"), py::arg("y"), py::arg("lr"),
        py::arg("warm") = 0, py::arg("seen") = 0);
  m.def("mixer_rows", &mixer_rows);
  m.def("structure_after", &structure_after);
  m.def("indirect_after", &indirect_after);
  m.def("places_context", [](const py::bytes& data) { return places_context(lane_after(std::string(data))); });
  m.def("this_token_context",
        [](const py::bytes& data) { return this_token_context(lane_after(std::string(data))); });
  m.def("mixer_seed_steps", &mixer_seed_steps);
  m.def("order2_set", [](const py::bytes& data, int c0) {
    require(c0 >= 1 && c0 < 256, "c0 must be in [1, 255]");
    return order2_set(lane_after(std::string(data)), c0);
  });
  m.def("place_set", [](const py::bytes& data, int c0) {
    require(c0 >= 1 && c0 < 256, "c0 must be in [1, 255]");
    return place_set(lane_after(std::string(data)), c0);
  });
  m.def("predicted_set", [](int e, int c0) {
    require(e >= -1 && e < 256 && c0 >= 1 && c0 < 256, "e must be in [-1, 255], c0 in [1, 255]");
    return predicted_set(e, c0);
  });
  m.def("nest_context", [](const py::bytes& data) { return nest_context(lane_after(std::string(data))); });
  m.def("float_candidates", [](u64 d, int q) -> py::object {
    std::array<u64, CANDIDATES> S;
    int E = 0;
    u32 cls = 0;
    if (!float_candidates(d, q, S, E, cls)) return py::none();
    return py::make_tuple(E, cls, std::vector<u64>(S.begin(), S.end()));
  });
  m.def("line_step", [](const py::bytes& data) {  // LINE_STEP's lane after `data`: the numbers above and the current one
    const Lane L = model_lane<LineStep>(LINE_STEP, data);
    const Lane::Steps& S = L.steps;
    std::vector<std::pair<u64, int>> above;
    for (u32 i = 0; i < S.above_count; ++i) above.emplace_back(S.above_value[i], S.above_width[i]);
    std::vector<int> set;
    for (int j = 0; j < STEPS; ++j)
      if (S.set >> j & 1) set.push_back(j - STEP_BELOW);
    return py::dict(py::arg("above") = above, py::arg("count") = S.count, py::arg("in") = S.in,
                    py::arg("value") = S.value, py::arg("width") = S.width, py::arg("set") = set);
  });
  m.def("number_echo", [](const py::bytes& data) {  // NUMBER_ECHO's lane after `data`: the numbers kept and the current one
    const Lane L = model_lane<NumberEcho>(NUMBER_ECHO, data);
    const Lane::Echoes& E = L.echoes;
    std::vector<std::string> kept;  // rank 0 first
    for (u32 r = 0; r < ECHO_NUMBERS && (E.kept >> r & 1); ++r) {
      const size_t at = (E.head + ECHO_NUMBERS - r) % ECHO_NUMBERS;
      std::string digits;
      for (u32 i = 0; i < E.width[at]; ++i) digits += char('0' + E.numbers[at][i]);
      kept.push_back(digits);
    }
    std::vector<int> set;
    for (u32 r = 0; r < ECHO_NUMBERS; ++r)
      if (E.set >> r & 1) set.push_back(int(r));
    return py::dict(py::arg("kept") = kept, py::arg("in") = E.in, py::arg("count") = E.count,
                    py::arg("set") = set, py::arg("label") = E.label);
  });
  m.def("float_tail", [](const py::bytes& data) {  // FLOAT_TAIL's lane after `data`: its number and candidates
    Params p{};
    p.extras = FLOAT_TAIL;
    FloatTail model(p);
    Lane L;
    int before = 0;
    for (unsigned char c : std::string(data)) {
      model.after_byte(L, c, before);
      before = c;
    }
    const Lane::Decimal& N = L.decimal;
    std::vector<int> set;
    for (int j = 0; j < CANDIDATES; ++j)
      if (N.set >> j & 1) set.push_back(j - OFFSETS);
    return py::dict(py::arg("on") = N.on, py::arg("digits") = N.digits, py::arg("count") = N.count,
                    py::arg("frac") = N.frac, py::arg("run") = N.run, py::arg("run_digit") = N.run_digit,
                    py::arg("E") = N.E, py::arg("set") = set);
  });
  m.def("cell_contexts", &cell_contexts);
  m.def("byte_class", [](int c) {
    require(c >= 0 && c < 256, "a byte");
    return byte_class(c);
  });
  m.def("apm_step", &apm_step);
  m.def("recover_step", &recover_step_of);
  m.def("run_after", [](u32 e, u32 chk, int c) {
    require(chk < 256 && c >= 0 && c < 256, "a check byte and a byte");
    return run_after(e, chk, c);
  });
  m.def("line_match_trace", &line_match_trace);
  m.def("bit_history", &bit_history);
}
