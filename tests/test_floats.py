"""Stage version 18's models of numbers. FLOAT_TAIL (csrc/stage/floats.h): the printings of the
doubles about a short decimal, computed in exact integer arithmetic, against Python's own (correctly
rounded) conversions; the lane's number as it is read; what the model does on numbers printed from
doubles. LINE_STEP (csrc/stage/steps.h): the line above's numbers and the steps that agree; what it
does on counters and clocks."""

from __future__ import annotations

import io
import math
import random
from dataclasses import replace
from pathlib import Path

import pytest

import shazip
from shazip.format.container import Method
from shazip.format.listing import describe
from shazip.stage.adaptive import AdaptiveParams, AdaptiveStage
from core_hooks import hooks
from test_adaptive import SMALL, bigram_rows, decode, encode, records_payloads

DATA = Path(__file__).parent / "data"


def printed(x: float) -> tuple[int, int]:
    """x's 17 significant digits as an integer, and its decimal exponent (Python's exact '%.16e')."""
    mantissa, exponent = ("%.16e" % x).split("e")
    return int(mantissa.replace(".", "")), int(exponent)


def expected(d: int, q: int) -> tuple[int, int, list[int]]:
    """(E, class, S_j) of the contract, from Python's floats: float() of a decimal string is the
    nearest double, and '%.16e' prints a double's 17 digits rounded half to even."""
    offsets = (len(hooks().float_candidates(1, 0)[2]) - 1) // 2  # the core's: the doubles either side
    x = float(f"{d}e{q}")
    frac, exp = math.frexp(x)
    m, e = int(math.ldexp(frac, 53)), exp - 53
    E = printed(x)[1]
    digits = []
    for j in range(-offsets, offsets + 1):
        if not 2**52 <= m + j < 2**53:
            digits.append(0)
            continue
        S, Ej = printed(math.ldexp(m + j, e))
        digits.append(S if Ej == E else 0)
    return E, e & 15, digits


def test_float_candidates_are_the_doubles_about_the_nearest_as_printed():
    """Short decimals of every size the contract takes (1 to 18 digits, exponents -30 .. 25),
    values at powers of two and ten (where the candidates cross a binade or a decade), and ties:
    every candidate's 17 digits and exponent are Python's."""
    rng = random.Random(18)
    cases = [(65613617, -6), (43420273, -6), (1, -1), (1, 0), (1, 25), (1, -30), (9007199254740993, 0),
             (4503599627370497, 0), (999999999999999999, -30), (123456789012345678, 25), (5, -1), (25, -2),
             (1, 16), (1, 17), (99999999999999999, -17), (140737488355328, 0)]
    cases += [(rng.randrange(1, 10 ** rng.randint(1, 18)), rng.randint(-30, 25)) for _ in range(400)]
    for d, q in cases:
        E, cls, digits = hooks().float_candidates(d, q)
        assert (E, cls, digits) == expected(d, q), (d, q)


def test_float_candidates_outside_their_range_are_none():
    for d, q in ((0, 0), (1, -31), (1, 26), (10**18, 0)):
        assert hooks().float_candidates(d, q) is None


def ulps_from_nearest(text: str, places: int) -> int:
    """How many ulps the double printed as `text` lies from the one nearest to its decimal of
    `places` places (Python's round() is correctly rounded)."""
    value = float(text)
    steps, x = 0, round(value, places)
    while x != value:
        steps += 1 if value > x else -1
        x = math.nextafter(x, value)
    return steps


def test_a_lane_reads_a_number_and_keeps_the_candidates_it_agrees_with():
    tail = hooks().float_tail
    assert tail(b'"x": -65.61361699')["set"] == []  # a run of two: no candidates yet
    state = tail(b'"x": -65.613616999')
    assert (state["on"], state["digits"], state["count"], state["frac"], state["run"], state["run_digit"]) == (
        True, 65613616999, 11, 9, 3, 9)
    j = ulps_from_nearest("65.613616999999977", 6)
    assert j in state["set"] and state["E"] == 1
    assert tail(b'"x": -65.61361699999997')["set"] == [j]  # the digits so far leave one
    assert tail(b'"x": -65.613616999999977,')["on"] is False
    # numbers that make no candidates: no point, a letter before, a run of 0s with nothing before it
    assert tail(b"1000000")["set"] == tail(b"a1.0000")["set"] == tail(b"0.0000")["set"] == []
    assert tail(b"1234567890123456789.0")["on"] is False  # more digits than it tracks


def geo_text(n: int) -> bytes:
    """Coordinates as a GIS tool prints them: short decimals scaled there and back (a few ulps off
    the nearest double), then '%.17g'."""
    rng = random.Random(66)
    x, y, out = -65_613_617, 43_420_273, []
    for _ in range(n):
        x += rng.randint(-30_000, 30_000)
        y += rng.randint(-30_000, 30_000)
        lon, lat = (v / 1e6 * 0.017453292519943295 * 6378137.0 / 6378137.0 / 0.017453292519943295 for v in (x, y))
        out.append(b"[%.17g,%.17g]" % (lon, lat))
    return b'{"type":"Polygon","coordinates":[' + b",".join(out) + b"]}\n"


def test_on_prose_the_float_tail_changes_no_payload(trained, text):
    """Where no number ends in a run of 0s or 9s the float tail's inputs are 0 and it learns nothing:
    with it (and without version 18's other model) prose gets version 17's payloads (golden-mixed-v5)."""
    from test_codec import records
    adapt = replace(AdaptiveParams().at_version(18), line_step=False)
    made = shazip.compress(text[:6000], model=trained, lanes=3, block_size=2500, methods=frozenset({Method.MIXED}),
                           adapt=adapt)
    assert records(made)[0]["adapt_version"] == 18
    assert records(made)[1] == records((DATA / "golden-mixed-v5.shz").read_bytes())[1]


def log_text(n: int) -> bytes:
    """Log lines as a daemon writes them: a clock that goes on by a second or two, a pid that stays
    for a session and then goes up by a few, a counter."""
    rng = random.Random(7)
    t, pid, out = 6 * 3600 + 55 * 60 + 46, 24200, []
    for i in range(n):
        t += rng.choice((0, 0, 0, 1, 1, 2))
        pid += rng.choice((0,) * 5 + (2, 3))
        out.append(b"Dec 10 %02d:%02d:%02d LabSZ sshd[%d]: session %d opened for user admin\n"
                   % (t // 3600, t // 60 % 60, t % 60, pid, 1000 + i))
    return b"".join(out)


def test_a_lane_keeps_the_line_aboves_numbers_and_the_steps_that_agree():
    step = hooks().line_step
    state = step(b"at 07:59:58 pid 0098 n=3\nat 07:5")
    assert state["above"] == [(7, 2), (59, 2), (58, 2), (98, 4), (3, 1)]
    assert state["count"] == 1 and state["value"] == 5 and state["width"] == 1
    # number 1 above is 59 (width 2): the steps that print 5x are 50..59, -9 .. 0
    assert state["set"] == list(range(-9, 1))
    assert step(b"at 07:59:58 pid 0098\nat 07:59:58 pid 01")["set"] == list(range(2, 48))  # 0100..0145, padded
    assert step(b"x 3\nx 4")["set"] == [1] + list(range(37, 47))  # 4 and 40..49 (3 - 16 .. 3 + 47, at least 0)


@pytest.mark.parametrize("model, text, least", [("float_tail", lambda: geo_text(400), 0.05),
                                                ("line_step", lambda: log_text(300), 0.03)])
def test_each_model_codes_its_numbers_smaller_and_decodes_them(model, text, least):
    """On numbers printed from doubles (the float tail) and on log lines whose clock, pid and
    counter go up by a little from line to line (the line steps), the stage with the model codes
    at least `least` smaller than the same stage without it, in one lane and in three, and decodes."""
    data = text()
    rows = bigram_rows(data)
    params = replace(SMALL, **{model: True})
    for lanes in (1, 3):
        payload, _ = encode(AdaptiveStage(params), data, lanes, rows)
        without, _ = encode(AdaptiveStage(replace(params, **{model: False})), data, lanes, rows)
        assert len(payload) < (1 - least) * len(without)
        assert decode(AdaptiveStage(params), payload, len(data), lanes, rows, data) == data


def numbers_text() -> bytes:
    return geo_text(150) + log_text(60)


def frozen(trained, name: str, data: bytes, version: int, lanes: int) -> None:
    """The golden archive `name` (mixed blocks of `data` in `lanes` lanes, stage `version`) is of
    that version, decodes, and is what compressing again gives."""
    golden = (DATA / name).read_bytes()
    assert describe(io.BytesIO(golden))[0]["adapt_version"] == version
    assert shazip.decompress(golden, model=trained) == data
    assert shazip.compress(data, model=trained, lanes=lanes, methods=frozenset({Method.MIXED}),
                           adapt=AdaptiveParams().at_version(version)) == golden


@pytest.mark.parametrize("lanes", [1, 2])
def test_golden_number_models_archive(trained, lanes):
    """Stage version 18's models frozen on what they predict (golden-numbers-s18-LANES.shz:
    numbers_text() with AdaptiveParams().at_version(18), tests/data/README.md)."""
    frozen(trained, f"golden-numbers-s18-{lanes}.shz", numbers_text(), 18, lanes)


def test_the_number_models_code_alike_on_every_kernel_path_and_thread_count(trained):
    """Their inputs feed the mixers, whose arithmetic each kernel path runs: every path this CPU
    runs makes the same payloads of numbers in two blocks (3 lanes, then 1), decoded by another
    stage; and an archive of them is the same at one thread and at two."""
    from shazip import _core
    data = numbers_text()
    params = replace(SMALL, float_tail=True, line_step=True)
    assert len({tuple(records_payloads(params, path, data)) for path in _core.available_kernels()}) == 1
    archives = {shazip.compress(data * 4, model=trained, level=6, block_size=8000, threads=t) for t in (1, 2)}
    assert len(archives) == 1
    assert shazip.decompress(archives.pop(), model=trained) == data * 4
