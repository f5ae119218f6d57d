"""Reading ncu CSV: the raw page with its units row, the long form, and everything malformed."""

from __future__ import annotations

import pytest
from profiling_helpers import MIXED, NCU_FIXTURES

from perflsp.profiling import metrics as M
from perflsp.profiling.errors import ProfilingError
from perflsp.profiling.metrics import parse_number, to_base_unit
from perflsp.profiling.ncu_csv import parse_dim3, parse_ncu_csv


@pytest.mark.parametrize(
    ("text", "value"),
    [("1,605,632", 1605632.0), ("12.5", 12.5), ("3e+09", 3e9), ("0", 0.0), ("1,250.00", 1250.0), ('"7"', 7.0)],
)
def test_numbers(text, value):
    assert parse_number(text) == value


@pytest.mark.parametrize("text", ["", "n/a", "N/A", "-"])
def test_missing_numbers(text):
    assert parse_number(text) is None


@pytest.mark.parametrize("text", ["1,2", "12,34,567", "abc", "1.2.3", "0x10", "1 000"])
def test_not_numbers(text):
    with pytest.raises(ValueError):
        parse_number(text)


def test_units_convert_to_base():
    assert to_base_unit(M.DRAM_READ, 2.5, "Mbyte") == 2.5e6
    assert to_base_unit(M.DURATION, 12.8, "usecond") == pytest.approx(12800)
    assert to_base_unit(M.SM_CLOCK, 1.44, "cycle/nsecond") == pytest.approx(1.44e9)
    assert to_base_unit(M.INTEGER_METRIC, 5, "inst") == 5
    with pytest.raises(ValueError, match="unexpected unit"):
        to_base_unit(M.DURATION, 1, "byte")


def test_dim3():
    assert parse_dim3("(256, 1, 1)") == (256, 1, 1)
    assert parse_dim3("32,4,2") == (32, 4, 2)
    assert parse_dim3("n/a") is None


def test_raw_page_fixture():
    text = "synthetic app output line\n==PROF== Connected to process 1\n" + MIXED.read_text(encoding="utf-8")
    table = parse_ncu_csv(text)
    assert table.has_units
    assert [launch.kernel_name for launch in table.launches] == [
        "void ns::saxpy<float>(const float *, float *, int)",
        "void ns::saxpy<float>(const float *, float *, int)",
        "dgemm_tile(const double *, const double *, double *, int)",
        "__omp_offloading_fd00_1a2b3c__Z6smoothPfi_l42",
        "_Z10histogram8PKhPji",
    ]
    first = table.launches[0]
    assert first.block == (256, 1, 1) and first.grid == (4096, 1, 1)
    assert first.metrics[M.DRAM_READ] == 8_388_608  # thousands separators
    assert first.metrics[M.SM_CLOCK] == 1.44e9
    assert first.metrics[M.OCCUPANCY] == 85.5
    assert first.text[M.DEVICE_NAME] == "NVIDIA GeForce RTX 3080"
    assert "==PROF== Connected to process 1" in table.messages
    last = table.launches[-1]
    assert "sm__sass_thread_inst_executed_op_hadd_pred_on.sum" not in last.metrics  # n/a


def test_scaled_units_fixture():
    (launch,) = parse_ncu_csv((NCU_FIXTURES / "synthetic-raw-scaled-units.csv").read_text(encoding="utf-8")).launches
    assert launch.metrics[M.DRAM_READ] == pytest.approx(2.5e6)
    assert launch.metrics[M.DRAM_WRITE] == pytest.approx(1.25e6)
    assert launch.metrics[M.DURATION] == pytest.approx(12_800)
    assert launch.metrics[M.SM_CLOCK] == pytest.approx(1.44e9)


def test_long_form_fixture_matches_raw_page():
    (long_launch,) = parse_ncu_csv((NCU_FIXTURES / "synthetic-details-long.csv").read_text(encoding="utf-8")).launches
    raw_launch = parse_ncu_csv(MIXED.read_text(encoding="utf-8")).launches[2]
    assert long_launch.kernel_name == raw_launch.kernel_name
    for metric in (M.DRAM_READ, M.DRAM_WRITE, M.DURATION, M.INTEGER_METRIC, *M.FLOP_METRICS[M.Precision.FP64]):
        assert long_launch.metrics[metric] == raw_launch.metrics[metric]


def test_without_units_row_values_are_taken_as_base():
    lines = MIXED.read_text(encoding="utf-8").splitlines()
    table = parse_ncu_csv("\n".join([lines[0], *lines[2:]]))
    assert not table.has_units and len(table.launches) == 5


def _error(text: str) -> ProfilingError:
    with pytest.raises(ProfilingError) as info:
        parse_ncu_csv(text, source="out.csv")
    assert info.value.code == "parse"
    assert "Traceback" not in info.value.message
    return info.value


def test_garbage():
    assert "no Nsight Compute CSV table" in _error("\x00\x17 segfault\nnot,a,table\n").message
    assert "no Nsight Compute CSV table" in _error("").message


def test_truncated_in_a_quoted_field():
    text = MIXED.read_text(encoding="utf-8")
    cut = text[: text.index("dgemm_tile") + 4]
    message = _error(cut).message
    assert "truncated" in message and "line 5" in message


def test_truncated_at_a_field_boundary():
    text = MIXED.read_text(encoding="utf-8")
    lines = text.splitlines()
    cells = lines[3].split('","')
    message = _error("\n".join([*lines[:3], '","'.join(cells[:7]) + '"'])).message
    assert "line 4 has 7 fields" in message and "truncated" in message


def test_non_numeric_roofline_value():
    text = MIXED.read_text(encoding="utf-8").replace('"8,388,608"', '"lots"', 1)
    message = _error(text).message
    assert "line 3" in message and "dram__bytes_read.sum" in message and "'lots'" in message


def test_unexpected_unit():
    text = MIXED.read_text(encoding="utf-8").replace('"nsecond"', '"furlong"', 1)
    assert "unexpected unit 'furlong'" in _error(text).message


def test_duplicate_header():
    assert "duplicate" in _error('"ID","Kernel Name","ID"\n"","",""\n').message
