"""GPU database: shipped data integrity, peaks recomputed from units x rate x clock, lookup,
user GPUs from files and settings, and the errors for malformed definitions."""

from __future__ import annotations

import itertools
import tomllib
from pathlib import Path

import pytest

from perflsp.analysis.roofline import Precision as AnalysisPrecision
from perflsp.hardware import (
    GpuConfigError,
    NvidiaArchLimits,
    Precision,
    UnknownGpuError,
    load_database,
    normalize_name,
)
from perflsp.hardware.database import BUILTIN_PATH

ROOT = Path(__file__).resolve().parents[1]
STUDY = ROOT / "examples" / "gpus" / "rtx3080-study.toml"
RAW = tomllib.loads(BUILTIN_PATH.read_text(encoding="utf-8"))
DB = load_database()

EXPECTED_IDS = {
    "v100-sxm2-32gb", "a100-sxm4-40gb", "a100-sxm4-80gb", "a100-pcie-80gb", "h100-sxm5-80gb",
    "h100-pcie-80gb", "h200-sxm-141gb", "gh200-96gb", "gh200-144gb", "b200", "l4", "l40s", "a10",
    "t4", "a30", "rtx-3080-10gb", "rtx-3090", "rtx-4090", "rtx-5090", "rtx-a6000", "rtx-6000-ada",
    "mi100", "mi210", "mi250x", "mi300x", "mi325x", "max-1550",
}
ALL_PEAKS = [(g["id"], name, spec) for g in RAW["gpu"] for name, spec in g["peaks"].items()]


def _raw_gpu(gpu_id: str) -> dict:
    return next(g for g in RAW["gpu"] if g["id"] == gpu_id)


# --------------------------------------------------------------------------- shipped data


def test_database_covers_the_expected_gpus():
    assert {g.id for g in DB.all()} >= EXPECTED_IDS
    assert len(DB) >= 27
    vendors = {g.vendor for g in DB.all()}
    assert vendors == {"NVIDIA", "AMD", "Intel"}


def test_hardware_precision_values_match_analysis():
    assert {p.value for p in AnalysisPrecision} <= {p.value for p in Precision}


@pytest.mark.parametrize(("gpu_id", "precision", "spec"), ALL_PEAKS,
                         ids=[f"{g}-{p}" for g, p, _ in ALL_PEAKS])
def test_every_peak_with_a_rate_recomputes_from_units_rate_clock(gpu_id, precision, spec):
    """Straight from the TOML text: sm_count x ops/clk/SM x clock, within 1%."""
    gpu = _raw_gpu(gpu_id)
    if spec.get("origin") == "computed":
        assert "ops_per_clk_per_sm" in spec, "a computed peak must carry its per-SM rate"
    if "ops_per_clk_per_sm" not in spec:
        # only quoted figures may lack a rate; B200's are the documented conflict
        assert spec["origin"] == "quoted"
        return
    if "clock_mhz" in spec:
        clock = spec["clock_mhz"]
    else:
        clock = gpu["base_clock_mhz"] if spec.get("clock") == "base" else gpu["boost_clock_mhz"]
    recomputed = gpu["sm_count"] * spec["ops_per_clk_per_sm"] * clock * 1e6 / 1e12
    assert recomputed == pytest.approx(spec["tflops"], rel=0.01)


def test_nvidia_vector_rates_are_the_arch_table_rates():
    for gpu in DB.all():
        if gpu.vendor != "NVIDIA":
            continue
        table = gpu.limits.results_per_clk_per_sm
        expected = {Precision.FP32: 2 * table.fp32, Precision.FP64: 2 * table.fp64,
                    Precision.FP16: 2 * table.fp16, Precision.INT32: 2 * table.int32_mad}
        for precision, rate in expected.items():
            peak = gpu.peak(precision)
            if peak is not None and peak.ops_per_clk_per_sm is not None:
                assert peak.ops_per_clk_per_sm == rate, (gpu.id, precision)


def test_only_b200_vector_peaks_disagree_with_the_arch_table():
    lacking = {(g.id, p.value) for g in DB.all() if g.vendor == "NVIDIA"
               for p in (Precision.FP32, Precision.FP64) if g.peak(p).ops_per_clk_per_sm is None}
    assert lacking == {("b200", "fp32"), ("b200", "fp64")}


def test_every_nvidia_gpu_has_roofline_ridges():
    for gpu in DB.all():
        ridges = gpu.ridges()
        assert {Precision.FP64, Precision.FP32} <= set(ridges), gpu.id
        if gpu.vendor == "NVIDIA":
            assert set(ridges) == {Precision.FP64, Precision.FP32, Precision.FP16, Precision.INT32}, gpu.id
            assert gpu.warp_size == 32
            assert gpu.l2_cache_bytes or gpu.id == "b200"


def test_int32_is_quoted_or_derived_from_the_arch_table():
    rtx = DB.get("rtx-3080-10gb").peak(Precision.INT32)
    assert rtx.origin == "derived"
    assert rtx.ops_per_s == pytest.approx(64 * 2 * 68 * 1710e6)
    a100 = DB.get("a100").peak(Precision.INT32)
    assert (a100.origin, a100.tflops) == ("quoted", 19.5)


def test_ridge_is_peak_over_bandwidth():
    h100 = DB.get("h100")
    assert h100.ridge("fp64") == pytest.approx(33.5e12 / 3350e9)
    assert h100.ridge(Precision.FP8_TENSOR) == pytest.approx(1978.9e12 / 3350e9)
    assert DB.get("mi300x").ridge("int32") is None
    assert DB.get("a100").why_missing("fp8_tensor") == "unsupported"
    assert DB.get("rtx-5090").why_missing("fp16_tensor") == "unknown"


def test_peaks_record_their_clock():
    h100 = DB.get("h100")
    assert h100.peak("fp32").clock_basis == "boost" and h100.peak("fp32").clock_mhz == 1980
    assert h100.peak("fp16_tensor").clock_mhz == 1830  # vendor tensor figures assume less
    assert DB.get("b200").peak("fp32").clock_mhz is None


def test_every_source_key_exists_and_every_figure_has_one():
    known = set(RAW["sources"])
    for key, arch in RAW["arch"].items():
        assert set(arch["sources"]) <= known, key
    for gpu in RAW["gpu"]:
        groups = gpu["sources"]
        for group, keys in groups.items():
            assert keys and set(keys) <= known, (gpu["id"], group)
        required = {"sm_count", "clocks", "memory", "tdp"}
        if "l2_cache_mib" in gpu:
            required.add("l2_cache")
        assert required <= set(groups), gpu["id"]
        for name, peak in gpu["peaks"].items():
            assert peak["sources"] and set(peak["sources"]) <= known, (gpu["id"], name)


def test_missing_precisions_are_explained():
    for gpu in DB.all():
        for precision in (Precision.FP16_TENSOR, Precision.FP8_TENSOR, Precision.INT8_TENSOR):
            if gpu.peak(precision) is None:
                assert gpu.why_missing(precision) in ("unsupported", "unknown"), (gpu.id, precision)


def test_nvidia_arch_tables_are_consistent():
    for key, lim in DB.archs.items():
        if not isinstance(lim, NvidiaArchLimits):
            continue
        assert lim.max_warps_per_sm * lim.warp_size == lim.max_threads_per_sm, key
        assert lim.shared_memory_carveouts_bytes[-1] == lim.shared_memory_per_sm_bytes, key
        assert (lim.max_shared_memory_per_block_bytes + lim.reserved_shared_memory_per_block_bytes
                <= lim.shared_memory_per_sm_bytes), key


def test_shipped_lookup_keys_do_not_collide():
    owners: dict[str, str] = {}
    for gpu in DB.all():
        for key in {normalize_name(k) for k in (gpu.id, *gpu.aliases, gpu.name)}:
            assert owners.setdefault(key, gpu.id) == gpu.id, f"'{key}' names {owners[key]} and {gpu.id}"


# --------------------------------------------------------------------------- lookup


@pytest.mark.parametrize(("name", "gpu_id"), [
    ("RTX3080", "rtx-3080-10gb"),
    ("rtx 3080", "rtx-3080-10gb"),
    ("NVIDIA GeForce RTX 3080", "rtx-3080-10gb"),  # as nvidia-smi and Nsight print it
    ("Tesla V100-SXM2-32GB", "v100-sxm2-32gb"),
    ("h100", "h100-sxm5-80gb"),
    ("H100 PCIe 80GB", "h100-pcie-80gb"),
    ("AMD Instinct MI300X", "mi300x"),
    ("Intel Max 1550", "max-1550"),
])
def test_lookup_by_name_or_alias_ignores_case_and_punctuation(name, gpu_id):
    assert DB.get(name).id == gpu_id


def test_typo_gets_suggestions():
    with pytest.raises(UnknownGpuError) as info:
        DB.get("rtx3008")
    assert "rtx-3080-10gb" in info.value.suggestions
    assert str(info.value).startswith("unknown GPU 'rtx3008'; did you mean ")
    with pytest.raises(UnknownGpuError) as info:
        DB.get("h1000")
    assert "h100-sxm5-80gb" in info.value.suggestions


def test_unknown_name_without_anything_close():
    with pytest.raises(UnknownGpuError, match="perflsp gpus"):
        DB.get("zzzzzzzz")


# --------------------------------------------------------------------------- user GPUs


def test_study_gpu_reproduces_the_eval_ridges():
    gpu = load_database([STUDY]).get("rtx3080-study")
    assert gpu.ridge("fp32") == pytest.approx(128 * 68 * 1.44e9 * 2 / 760.3e9, rel=1e-12)
    assert round(gpu.ridge("fp32"), 4) == 32.9706
    assert round(gpu.ridge("fp64"), 5) == 0.51517
    assert round(gpu.ridge("int32"), 4) == 16.4853
    assert gpu.ridge("fp16") is None  # not part of the study's rule
    assert gpu.peak("fp32").clock_basis == "base"
    assert gpu.defined_in == str(STUDY)


def _write(tmp_path: Path, text: str, name: str = "gpus.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


MY_CARD = """
[[gpu]]
id = "ok-card"
vendor = "NVIDIA"
compute_capability = "8.9"
sm_count = 10
boost_clock_mhz = 2000
memory_bandwidth_gbs = 100

[[gpu]]
id = "MyCard"
vendor = "NVIDIA"
compute_capability = "8.6"
sm_count = 10
boost_clock_mhz = 1500
memory_bandwidth_gbs = {bandwidth}
{extra}
"""


def _problems(tmp_path: Path, bandwidth="100", extra="") -> list[str]:
    path = _write(tmp_path, MY_CARD.format(bandwidth=bandwidth, extra=extra))
    with pytest.raises(GpuConfigError) as info:
        load_database([path])
    return info.value.problems


def test_negative_bandwidth_names_file_gpu_and_field(tmp_path):
    problems = _problems(tmp_path, bandwidth="-5")
    # the file and the field's line
    assert problems == [f"{tmp_path / 'gpus.toml'}:16: [[gpu]] #2 'MyCard': memory_bandwidth_gbs: must be > 0 (got -5)"]


def test_missing_field(tmp_path):
    path = _write(tmp_path, '[[gpu]]\nid = "x"\nvendor = "NVIDIA"\ncompute_capability = "8.6"\n'
                            'boost_clock_mhz = 1000\nmemory_bandwidth_gbs = 1\n')
    with pytest.raises(GpuConfigError, match=r"gpus.toml:1: \[\[gpu\]\] #1 'x': sm_count: required field is missing"):
        load_database([path])


def test_unknown_precision(tmp_path):
    problems = _problems(tmp_path, extra="[gpu.peaks]\nfp99 = { tflops = 1.0 }\nfp3 = { tflops = 2.0 }")
    assert problems[0].endswith("'MyCard': peaks.fp99: unknown precision 'fp99' (known: "
                                + ", ".join(p.value for p in Precision) + ")")
    assert "peaks.fp3: unknown precision 'fp3' (did you mean 'fp32'?)" in problems[1]


def test_unknown_field_suggests_the_right_one(tmp_path):
    problems = _problems(tmp_path, extra="memory_bandwith_gbs = 5")
    assert problems == [f"{tmp_path / 'gpus.toml'}:17: [[gpu]] #2 'MyCard': memory_bandwith_gbs: "
                        "unknown field (did you mean 'memory_bandwidth_gbs'?)"]


def test_unknown_compute_capability_and_vendor_mismatch(tmp_path):
    path = _write(tmp_path, MY_CARD.format(bandwidth=1, extra="").replace('"8.6"', '"8.7"'))
    with pytest.raises(GpuConfigError, match=r"compute_capability: unknown compute capability '8.7' \(known: 10.0, 12.0, 7.0"):
        load_database([path])
    path = _write(tmp_path, MY_CARD.format(bandwidth=1, extra='gfx_target = "gfx90a"'))
    with pytest.raises(GpuConfigError, match="gfx_target: not used for NVIDIA GPUs"):
        load_database([path])


def test_peak_value_and_rate_must_agree(tmp_path):
    problems = _problems(tmp_path, extra="[gpu.peaks]\nfp32 = { tflops = 9.0, ops_per_clk_per_sm = 256 }")
    assert "peaks.fp32: tflops 9 disagrees with sm_count x rate x clock = 10 x 256 x 1500 MHz = 3.84" in problems[0]


def test_base_clock_peak_needs_a_base_clock(tmp_path):
    problems = _problems(tmp_path, extra='[gpu.peaks]\nfp32 = { results_per_clk_per_sm = 128, clock = "base" }')
    assert problems[0].endswith("peaks.fp32: clock = \"base\" but the GPU has no base_clock_mhz")


def test_unsupported_list_is_checked(tmp_path):
    problems = _problems(tmp_path, extra='unsupported = ["fp8_tensr"]')
    assert "unsupported: unknown precision or field 'fp8_tensr' (did you mean 'fp8_tensor'?)" in problems[0]


def test_broken_toml_and_unreadable_file(tmp_path):
    path = _write(tmp_path, "[[gpu]\nid=")
    with pytest.raises(GpuConfigError, match=r"gpus.toml:1:\d+: invalid TOML"):
        load_database([path])
    with pytest.raises(GpuConfigError, match=r"nope.toml: cannot read the file"):
        load_database([tmp_path / "nope.toml"])
    path = _write(tmp_path, 'gpu = "x"\n[other]\n', name="odd.toml")
    with pytest.raises(GpuConfigError) as info:
        load_database([path])
    assert any("unknown top-level key(s) other" in p for p in info.value.problems)
    assert any("'gpu' must be an array of tables" in p for p in info.value.problems)


def test_all_problems_are_reported_together(tmp_path):
    good = _write(tmp_path, MY_CARD.format(bandwidth=0, extra="sm_count_x = 1"), name="a.toml")
    with pytest.raises(GpuConfigError) as info:
        load_database([good], [{"id": "s", "vendor": "AMD", "gfx_target": "gfx942", "sm_count": 0,
                                "boost_clock_mhz": 1, "memory_bandwidth_gbs": 1}])
    assert len(info.value.problems) == 3
    assert info.value.problems[-1] == "settings: [[gpu]] #1 's': sm_count: must be > 0 (got 0)"


def test_user_gpu_overrides_builtin_and_its_aliases_win(tmp_path):
    path = _write(tmp_path, """
[[gpu]]
id = "rtx-3080-10gb"
name = "My RTX 3080"
vendor = "NVIDIA"
compute_capability = "8.6"
sm_count = 68
base_clock_mhz = 1440
boost_clock_mhz = 1440
memory_bandwidth_gbs = 760.3
[gpu.peaks]
fp32 = { results_per_clk_per_sm = 128 }

[[gpu]]
id = "lab-a100"
aliases = ["a100"]
vendor = "NVIDIA"
compute_capability = "8.0"
sm_count = 108
boost_clock_mhz = 1410
memory_bandwidth_gbs = 1555
""")
    db = load_database([path])
    gpu = db.get("rtx3080")
    assert (gpu.name, gpu.defined_in) == ("My RTX 3080", str(path))
    assert gpu.peak("fp32").tflops == pytest.approx(128 * 2 * 68 * 1.44e-3)
    assert gpu.peak("int32").origin == "derived"  # every NVIDIA GPU gets an int32 peak
    assert db.get("a100").id == "lab-a100"
    assert db.get("a100-sxm4-40gb").id == "a100-sxm4-40gb"  # ids still reach the builtin
    assert len(db) == len(DB) + 1


def test_settings_tables_come_last_and_keep_the_old_database_usable():
    table = {"id": "tiny", "name": "Tiny", "vendor": "AMD", "gfx_target": "gfx942", "sm_count": 8,
             "boost_clock_mhz": 2000, "memory_bandwidth_gbs": 500,
             "peaks": {"fp32": {"ops_per_clk_per_sm": 256}}}
    db = load_database(user_tables=[table], tables_origin=".perflsp.toml")
    tiny = db.get("tiny")
    assert tiny.defined_in == ".perflsp.toml"
    assert tiny.peak("fp32").tflops == pytest.approx(8 * 256 * 2.0e-3)
    assert tiny.warp_size == 64
    with pytest.raises(GpuConfigError, match=r"^\.perflsp\.toml: \[\[gpu\]\] #1 'tiny': memory_bandwidth_gbs"):
        load_database(user_tables=[{**table, "memory_bandwidth_gbs": -1}], tables_origin=".perflsp.toml")
    assert db.get("tiny") is tiny  # the caller's last good database is untouched


def test_duplicate_ids_in_one_file(tmp_path):
    card = MY_CARD.format(bandwidth=1, extra="")
    path = _write(tmp_path, card + card.replace("ok-card", "other"))
    with pytest.raises(GpuConfigError, match="id: 'MyCard' is defined twice"):
        load_database([path])


def test_summary_json_has_the_documented_keys():
    data = DB.get("a100").summary_json()
    for key in ("name", "aliases", "compute_capability", "sm_count", "memory_bandwidth_gbs",
                "peaks_tflops", "ridge_ops_per_byte", "l2_cache_bytes", "warp_size"):
        assert key in data
    assert data["peaks_tflops"]["fp32"] == 19.5
    assert all(isinstance(v, float) for v in itertools.chain(data["ridge_ops_per_byte"].values()))
