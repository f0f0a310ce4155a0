"""Stage version 19's NUMBER_ECHO (csrc/stage/echoes.h): the numbers a lane keeps (their points left
out), the ranks that agree with the number so far, and what the model does where a record prints a
value again in another shape (a GC log's pause time, then its workers' start in milliseconds)."""

from __future__ import annotations

import random
import re
from dataclasses import replace

import pytest

import shazip
from shazip.stage.adaptive import AdaptiveStage
from core_hooks import hooks
from test_adaptive import SMALL, bigram_rows, decode, encode, records_payloads
from test_floats import frozen

def test_a_lane_keeps_its_numbers_without_their_points():
    echo = hooks().number_echo
    state = echo(b"pause 6414.452 s, 10.0.0.1 at 42. next 7")
    assert state["kept"] == ["42", "10001", "6414452"]  # the latest first
    assert state["in"] and state["count"] == 1 and state["set"] == []  # no kept number begins with 7
    state = echo(b"pause 6414.452 s 64")
    assert state["kept"] == ["6414452"] and state["set"] == [0] and state["count"] == 2
    assert echo(b"v 1.2..3 ")["kept"] == ["3", "12"]  # a second '.' ends a number
    assert echo(b"x 1234567890" * 3 + b"1234567890123456789012345678 ")["kept"][0] == "123456789012345678901234"


def test_the_label_is_the_text_since_the_last_number():
    echo = hooks().number_echo
    assert echo(b"a 1 start (ms):  ")["label"] == echo(b"b 22 start (ms):  ")["label"]
    assert echo(b"a 1 start (ms):  ")["label"] != echo(b"a 1 end (ms):  ")["label"]
    assert echo(b"a 1. x")["label"] != echo(b"a 1 x")["label"]  # the '.' that ended the number is the label's
    assert echo(b"")["label"] == 0 and echo(b"12")["label"] == 0


def test_the_lane_keeps_at_most_its_ranks():
    echo = hooks().number_echo
    kept = echo(b" ".join(b"%d" % i for i in range(200)) + b" ")["kept"]
    assert kept == [str(i) for i in range(199, 199 - len(kept), -1)] and 16 <= len(kept) < 200


def gc_text(n: int) -> bytes:
    """A JVM's GC log as it prints each pause: the seconds since start, then its workers' start and
    end in milliseconds (the same clock), and times that vary."""
    rng = random.Random(5)
    t, out = 2086.711, []
    for _ in range(n):
        t += rng.uniform(20, 90)
        total = rng.uniform(5, 30)
        start = t * 1000 + rng.uniform(0.1, 0.9)
        out.append(b"%.3f: [GC pause (young), %.7f secs]\n   [Parallel Time: %.1f ms]\n"
                   b"      [GC Worker Start (ms):  %.1f]\n      [Object Copy (ms):  %.1f]\n"
                   b"      [GC Worker End (ms):  %.1f]\n"
                   % (t, total / 1000, total, start, rng.uniform(1, 20), start + total))
    return b"".join(out)


def test_the_model_codes_echoed_numbers_smaller_and_decodes_them():
    """On such a log the stage with the model codes at least 5 % smaller than without it, in one
    lane and in three, and decodes."""
    data = gc_text(120)
    rows = bigram_rows(data)
    params = replace(SMALL, number_echo=True)
    for lanes in (1, 3):
        payload, _ = encode(AdaptiveStage(params), data, lanes, rows)
        without, _ = encode(AdaptiveStage(replace(params, number_echo=False)), data, lanes, rows)
        assert len(payload) < 0.95 * len(without)
        assert decode(AdaptiveStage(params), payload, len(data), lanes, rows, data) == data


def test_without_numbers_the_model_changes_no_payload(text):
    """Where no number has a digit after its first the model has no candidates: its inputs are 0
    and it learns nothing, so text without numbers gets version 18's payloads."""
    data = re.sub(rb"[0-9]+", b"#", text[:6000])
    rows = bigram_rows(data)
    params = replace(SMALL, number_echo=True)
    for lanes in (1, 3):
        payload, _ = encode(AdaptiveStage(params), data, lanes, rows)
        assert payload == encode(AdaptiveStage(replace(params, number_echo=False)), data, lanes, rows)[0]


def echo_text() -> bytes:
    return gc_text(40) + b"GET /item/4471 200 5123\nGET /item/4471.json 200 5123\n" * 3


@pytest.mark.parametrize("lanes", [1, 2])
def test_golden_number_echo_archive(trained, lanes):
    """Stage version 19's model frozen on what it predicts (golden-echoes-s19-LANES.shz: echo_text()
    with AdaptiveParams().at_version(19), tests/data/README.md)."""
    frozen(trained, f"golden-echoes-s19-{lanes}.shz", echo_text(), 19, lanes)


def test_the_model_codes_alike_on_every_kernel_path_and_thread_count(trained):
    """Its inputs feed the mixers, whose arithmetic each kernel path runs: every path this CPU runs
    makes the same payloads (3 lanes, then 1), decoded by another stage; and a level 6 archive of
    them is the same at one thread and at two."""
    from shazip import _core
    data = echo_text()
    params = replace(SMALL, number_echo=True)
    assert len({tuple(records_payloads(params, path, data)) for path in _core.available_kernels()}) == 1
    archives = {shazip.compress(data * 3, model=trained, level=6, block_size=8000, threads=t) for t in (1, 2)}
    assert len(archives) == 1
    assert shazip.decompress(archives.pop(), model=trained) == data * 3
