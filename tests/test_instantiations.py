"""Kernel templates judged per instantiation: each instantiation the compiled code holds gets its
own facts and verdict, shown beside the template's (check's text and JSON, the explanation),
and an evaluation row is scored on the instantiation it measured."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from perflsp.analysis.instantiations import differing_verdicts, same_arguments
from perflsp.analysis.models import InstantiationReport, KernelReport
from perflsp.analysis.options import AnalysisOptions
from perflsp.analysis.pipeline import FileAnalysis
from perflsp.analysis.reader import ReadContext, read_program
from perflsp.analysis.report import kernel_json
from perflsp.compiled.build import CompileCache
from perflsp.compiled.service import Compiler
from perflsp.compiled.toolchain import find_toolchain
from perflsp.evaluation.labels import KernelRow
from perflsp.evaluation.run import prediction_from
from perflsp.hardware import load_database
from perflsp.kernels.includes import IncludeResolver
from tests.template_programs import SCALE_REGION, SCALE_TEMPLATE

TOOLCHAIN = find_toolchain()
RTX3080 = load_database().get("rtx3080")
REQUIRED = bool(os.environ.get("PERFLSP_REQUIRE_TOOLCHAIN"))


def _needs(language: str):
    missing = TOOLCHAIN.missing(language)
    return pytest.mark.skipif(missing is not None and not REQUIRED, reason=missing or "")


def _report(tmp_path: Path, name: str, text: str, compiled: bool = True,
            options: AnalysisOptions | None = None) -> KernelReport:
    source = tmp_path / name
    source.write_text(text)
    prepared = read_program(source, source.read_bytes(), ReadContext(IncludeResolver()), options or AnalysisOptions())
    chosen = prepared.options
    if compiled:
        compiler = Compiler(TOOLCHAIN, CompileCache(tmp_path / "cache"))
        try:
            chosen = dataclasses.replace(chosen, compiled=compiler.compiled(source, ["sm_86"],
                                                                            omp_regions=name.endswith(".cpp")))
        finally:
            compiler.close()
    (report,) = FileAnalysis.of(prepared, chosen).reports([RTX3080])
    return report


def _by_arguments(report: KernelReport) -> dict[tuple[str, ...], InstantiationReport]:
    return {inst.arguments: inst for inst in report.instantiations}


@_needs("cuda")
def test_each_instantiation_of_a_kernel_template_is_judged_in_its_own_precision(tmp_path):
    report = _report(tmp_path, "scale.cu", SCALE_TEMPLATE)
    judged = _by_arguments(report)
    assert set(judged) == {("float",), ("double",)}
    single, double = judged[("float",)], judged[("double",)]
    # SASS: 64 FFMA vs 64 DFMA per thread, 4-byte vs 8-byte load and store
    assert single.facts.per_item.fp32 == pytest.approx(128.0) and single.facts.per_item.fp64 == 0.0
    assert double.facts.per_item.fp64 == pytest.approx(128.0) and double.facts.per_item.fp32 == 0.0
    assert double.facts.per_item.global_load_bytes == pytest.approx(2 * single.facts.per_item.global_load_bytes)
    assert (single.estimates[0].verdict, double.estimates[0].verdict) == ("bandwidth", "compute")
    # the template's own verdict (the first call's, float) says the other one beside it
    assert report.estimates[0].verdict == "bandwidth"
    said = differing_verdicts(report, report.estimates[0])
    assert said is not None and "`scale<double>` compute-bound" in said and "`scale<float>` bandwidth-bound" in said


@_needs("omp")
def test_each_instantiation_of_a_region_in_a_function_template_is_judged(tmp_path):
    report = _report(tmp_path, "scale.cpp", SCALE_REGION)
    judged = _by_arguments(report)
    assert set(judged) == {("float",), ("double",)}
    assert judged[("float",)].facts.per_item.fp32 == pytest.approx(128.0, rel=0.05)
    assert judged[("double",)].facts.per_item.fp64 == pytest.approx(128.0, rel=0.05)
    assert judged[("double",)].facts.per_item.fp32 == 0.0


@_needs("cuda")
def test_check_json_lists_the_instantiations_and_the_finding_names_them(tmp_path):
    from perflsp.analysis.report import Verdict, verdict_finding

    report = _report(tmp_path, "scale.cu", SCALE_TEMPLATE)
    finding = verdict_finding(report, report.estimates[0])
    assert "per instantiation:" in finding.message
    as_json = kernel_json(report, [Verdict(report, report.estimates[0], RTX3080, finding)])
    names = {i["name"]: i for i in as_json["instantiations"]}
    assert set(names) == {"scale<float>", "scale<double>"}
    assert names["scale<double>"]["estimates"][0]["verdict"] == "compute"
    assert names["scale<double>"]["facts"]["total"]["fp64"] > 0


@_needs("cuda")
def test_an_evaluation_row_is_scored_on_the_instantiation_it_measured(tmp_path):
    report = _report(tmp_path, "scale.cu", SCALE_TEMPLATE)
    row = KernelRow(target="scale-cuda", language="cuda", kernel="scale",
                    signature="void scale<double>(T1 *, T1 *, T1, int)", file="scale.cu", line=2,
                    block=None, grid=None, exe_args="")
    prediction = prediction_from(row, report)
    assert prediction.verdict == "compute"
    assert prediction.totals is not None and prediction.totals.fp64 > 0 and prediction.totals.fp32 == 0


def test_without_compiled_code_the_instantiations_the_source_spells_out_are_judged(tmp_path):
    # `scale<T>` launched in `run<T>`, called as `run<float>` and `run<double>`
    report = _report(tmp_path, "scale.cu", SCALE_TEMPLATE, compiled=False)
    judged = _by_arguments(report)
    assert set(judged) == {("float",), ("double",)}
    assert judged[("float",)].facts.per_item.fp32 == 128 and judged[("float",)].facts.per_item.fp64 == 0
    assert judged[("double",)].facts.per_item.fp64 == 128 and judged[("double",)].facts.per_item.fp32 == 0
    assert judged[("double",)].facts.per_item.global_load_bytes == 8
    # an OpenMP region in a function template: the types its calls pass
    region = _by_arguments(_report(tmp_path, "scale.cpp", SCALE_REGION, compiled=False))
    assert set(region) == {("float",), ("double",)}
    assert region[("double",)].facts.per_item.fp64 > 0 and region[("double",)].facts.per_item.fp32 == 0


def test_a_kernel_template_launched_once_is_judged_once(tmp_path):
    report = _report(tmp_path, "once.cu", SCALE_TEMPLATE.replace("  run<double>(1 << 24);\n", ""), compiled=False)
    assert report.instantiations == []
    assert differing_verdicts(report, report.estimates[0]) is None


@_needs("cuda")
def test_a_report_of_a_named_instantiation_lists_no_others(tmp_path):
    report = _report(tmp_path, "scale.cu", SCALE_TEMPLATE, options=AnalysisOptions(instantiation=("double",)))
    assert report.instantiations == []
    assert report.facts.per_item.fp64 == pytest.approx(128.0)


def test_template_arguments_compare_as_the_same_instantiation():
    assert same_arguments(("unsigned char", "8ul"), ("unsigned  char", "8"))
    assert same_arguments(("double",), ("double",))
    assert not same_arguments(("float",), ("double",))
    assert not same_arguments(("float", "8"), ("float",))


@_needs("cuda")
def test_the_llm_question_carries_each_instantiations_verdict(tmp_path):
    from perflsp.kernels.extract import extract
    from perflsp.llm.questions import question_for

    report = _report(tmp_path, "scale.cu", SCALE_TEMPLATE)
    data = (tmp_path / "scale.cu").read_bytes()
    question = question_for(report, report.estimates[0], RTX3080, data, extract(data, path="scale.cu"))
    said = next(line for line in question.static.evidence if "instantiations, each judged" in line)
    assert "`scale<double>` compute-bound (FP64 intensity" in said
    assert "`scale<float>` bandwidth-bound (FP32 intensity" in said


def test_an_instantiation_the_engine_fails_on_is_left_out_and_the_templates_report_stands(tmp_path, caplog):
    from perflsp.analysis.instantiations import judge_instantiations

    source = tmp_path / "scale.cu"
    source.write_text(SCALE_TEMPLATE)
    prepared = read_program(source, source.read_bytes(), ReadContext(IncludeResolver()), AnalysisOptions())
    analysis = FileAnalysis.of(prepared, prepared.options)
    (report,) = analysis.reports([RTX3080])
    unit = analysis._prepared_unit()
    assert unit is not None and len(report.instantiations) == 2

    def failing(named: AnalysisOptions) -> KernelReport:
        if named.instantiation == ("double",):
            raise ValueError("no walk for this one")
        return report

    # one judged instantiation says nothing beside the template's own verdict: none are listed
    assert judge_instantiations(report, unit, failing) == []
    assert "scale<double>: ValueError: no walk for this one" in caplog.text
