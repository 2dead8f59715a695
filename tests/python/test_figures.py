# The figure table (client/figures.h) is the one list of figures: every row is a --stats choice in
# pbench --help, a key of pbench's --json and a line of its text when asked for, a method of
# psched.array, and the same value in each. A figure added to the table but not reaching one of
# them, or an output that lists a figure the table lacks, fails here.
import math
import os
import subprocess
from fractions import Fraction

import pytest

from conftest import BIN_DIR, pbench_json

pa = pytest.importorskip("psched.array")
from psched import _native  # noqa: E402  (after the skip: the module may be unbuilt)

NAMES = [f["name"] for f in _native.FIGURES]
# arange 0 .. 11 as 3 x 4 under pbench's default selection (every other row, odd columns): 1, 3, 9,
# 11, the closed forms: sum 24, mean 6, var (ddof 0) 17, std sqrt(17).
ARANGE = ["-x", "3", "-y", "4", "--chunk-x", "2", "--chunk-y", "3", "--generator", "arange"]


def pbench_text(scheduler_file, *args):
    return subprocess.run([os.path.join(BIN_DIR, "pbench"), "-d", "--scheduler-file", scheduler_file, "-q", *args],
                          check=True, capture_output=True, text=True, timeout=120).stdout


def test_the_table_lists_the_figures_every_job_had_and_var_and_std_in_their_order():
    assert NAMES == ["sum", "count", "mean", "min", "max", "var", "std"]


def test_every_figure_is_a_stats_choice_in_pbench_help():
    help_text = subprocess.run([os.path.join(BIN_DIR, "pbench"), "--help"], check=True, capture_output=True,
                               text=True, timeout=60).stdout
    stats = next(line for line in help_text.splitlines() if "--stats" in line)
    assert "{" + ",".join(NAMES) + "}" in stats


def test_every_figure_is_a_key_of_the_json_and_a_method_of_psched_array_with_the_same_value(cluster, client):
    doc = pbench_json(cluster.scheduler_file, *ARANGE, "--stats", ",".join(NAMES), "--ddof", "1")
    x = pa.arange(0, 12, chunks=12).reshape(3, 4).rechunk((2, 3))[::2, 1::2]
    for f in _native.FIGURES:
        assert f["name"] in doc, f["name"]
        kwargs = {"ddof": 1} if f["ddof"] else {}
        assert float(getattr(x, f["name"])(**kwargs).compute()) == float(doc[f["name"]]), f["name"]
    assert (doc["sum"], doc["count"], doc["mean"], doc["min"], doc["max"]) == (24, 4, 6, 1, 11)
    assert doc["var"] == float(Fraction(68, 3)) and doc["ddof"] == 1
    doc = pbench_json(cluster.scheduler_file, *ARANGE, "--stats", ",".join(NAMES))
    assert doc["var"] == 17.0 and doc["std"] == math.sqrt(17) and doc["ddof"] == 0


def test_a_figure_of_its_own_line_is_printed_only_when_asked_and_its_parts_computed_only_then(cluster):
    own_line = [f for f in _native.FIGURES if f["label"]]
    plain = pbench_text(cluster.scheduler_file, *ARANGE)
    assert "Sum: 24  Mean: 6  Count: 4  Min: 1  Max: 11\n" in plain
    for f in own_line:
        name = f["name"]
        label = f["label"] + ":"
        assert label not in plain
        asked = pbench_text(cluster.scheduler_file, *ARANGE, "--stats", name)
        assert sum(line.startswith(label) for line in asked.splitlines()) == 1, name
        for other in own_line:
            if other is not f:
                assert other["label"] + ":" not in asked
        doc = pbench_json(cluster.scheduler_file, *ARANGE, "--stats", name)
        assert name in doc
        if not f["squares"]:
            assert "var" not in doc  # asked for no figure that needs squares: none computed
