"""An object whose constructor is defined in another source of the folder (the class declared
in a header with getters that return references to its members, `Index_t& numElem() { return
m_numElem; }`): the constructor runs with the arguments the caller folds (`new Domain(opts.nx)`
after `parse(argc, argv, &opts)` in a third source), and a region or launch bounded by a getter
reads the member it set. Small programs of our own."""

from __future__ import annotations

from pathlib import Path

from perflsp.analysis.engine import AnalysisOptions
from perflsp.analysis.models import KernelReport
from perflsp.analysis.notes import texts
from perflsp.kernels.consteval import NO_ARGUMENTS_NOTE
from tests.engine_reports import reports

HEADER = """
#pragma once
typedef int Index_t;
struct cmdLineOpts { int its; int nx; int numReg; };
void ParseCommandLineOptions(int argc, char *argv[], struct cmdLineOpts *opts);
class Domain {
 public:
  Domain(int numRanks, Index_t nx, int nr);
  Index_t& numElem() { return m_numElem; }
  Index_t& numNode() { return m_numNode; }
  const Index_t& sizeX() const { return m_sizeX; }
  Index_t& numReg() { return m_numReg; }
  Index_t& cost() { return m_cost; }
  Index_t& shells() { return m_shells; }
  void AllocateElemPersistent(Index_t numElem);
  double *m_e;
 private:
  Index_t m_sizeX;
  Index_t m_numElem;
  Index_t m_numNode;
  Index_t m_numReg;
  Index_t m_cost;
  Index_t m_shells;
};
"""

# the constructor, in its own source: locals, members over them, a call of a method that sets
# no member, a loop (that sets none either), a member set only in a loop
INIT = """
#include "domain.h"
Domain::Domain(int numRanks, Index_t nx, int nr) : m_cost(1) {
  Index_t edgeElems = nx;
  Index_t edgeNodes = edgeElems + 1;
  m_sizeX = edgeElems;
  m_numElem = edgeElems * edgeElems * edgeElems;
  m_numNode = edgeNodes * edgeNodes * edgeNodes;
  AllocateElemPersistent(numElem());
  for (Index_t i = 0; i < numElem(); ++i) m_e[i] = 0.0;
  for (int r = 0; r < numRanks; ++r) m_shells = r;
  numReg() = nr;
}

void Domain::AllocateElemPersistent(Index_t numElem) { m_e = new double[numElem]; }
"""

UTIL = """
#include <cstdlib>
#include <cstring>
#include "domain.h"
static int StrToInt(const char *token, int *out) { *out = atoi(token); return 1; }

void ParseCommandLineOptions(int argc, char *argv[], struct cmdLineOpts *opts) {
  if (argc > 1) {
    int i = 1;
    while (i < argc) {
      if (strcmp(argv[i], "-s") == 0) { StrToInt(argv[i + 1], &(opts->nx)); i += 2; }
      else if (strcmp(argv[i], "-i") == 0) { opts->its = atoi(argv[i + 1]); i += 2; }
      else { i++; }
    }
  }
}
"""

MAIN = """
#include <cstdlib>
#include "domain.h"

__global__ void scale(double *e, Index_t numElem) {
  Index_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < numElem) e[i] = 2.0 * e[i];
}

int main(int argc, char *argv[]) {
  struct cmdLineOpts opts;
  opts.its = 10;
  opts.nx = 30;
  opts.numReg = 11;
  ParseCommandLineOptions(argc, argv, &opts);
  Domain *locDom;
  locDom = new Domain(1, opts.nx, opts.numReg);
  Index_t numElem = locDom->numElem();
  Index_t numNode = locDom->numNode();
  Index_t size = locDom->sizeX();
  double *e = locDom->m_e;
  double *x = new double[numNode];
  #pragma omp target teams distribute parallel for map(tofrom: e[0:numElem])
  for (Index_t i = 0; i < numElem; ++i) e[i] = e[i] * 0.5;
  #pragma omp target teams distribute parallel for map(tofrom: x[0:numNode])
  for (Index_t i = 0; i < (size + 1) * (size + 1); ++i)
    for (Index_t k = 0; k < locDom->numReg(); ++k) x[i] += 1.0;
  #pragma omp target teams distribute parallel for map(tofrom: x[0:numNode])
  for (Index_t i = 0; i < numNode; ++i)
    for (Index_t k = 0; k < locDom->cost(); ++k) x[i] = 0.5 * x[i];
  scale<<<(numElem + 127) / 128, 128>>>(e, numElem);
  return 0;
}
"""


def program(tmp_path: Path, main: str = MAIN, init: str = INIT) -> Path:
    (tmp_path / "domain.h").write_text(HEADER)
    (tmp_path / "domain-init.cc").write_text(init)
    (tmp_path / "domain-util.cc").write_text(UTIL)
    path = tmp_path / "domain.cc"
    path.write_text(main)
    return path


def by_line(path: Path, argv: tuple[str, ...] | None) -> dict[int, KernelReport]:
    found = reports(path.read_text(), path=path, options=AnalysisOptions(argv=argv) if argv is not None else None)
    return {r.kernel.line: r for r in found}


def trips(report: KernelReport) -> dict[str, float]:
    return {loop.variable: loop.trip_count for loop in report.facts.loops}


def unknown_trips(report: KernelReport) -> list[str]:
    return [a for a in texts(report.facts.assumptions) if "trip count of the" in a]


def test_a_member_the_sibling_constructor_computes_bounds_the_region_through_a_reference_getter(tmp_path: Path):
    found = by_line(program(tmp_path), ("-i", "100", "-s", "12"))
    region = found[23]
    # `m_numElem = edgeElems^3` in domain-init.cc, edgeElems = nx = `-s 12` (parsed in domain-util.cc)
    assert trips(region) == {"i": 12 ** 3}
    assert region.facts.work_items == 12 ** 3
    assert unknown_trips(region) == []
    launch = next(r for r in found.values() if r.kernel.name == "scale")
    assert launch.facts.work_items == (12 ** 3 + 127) // 128 * 128



def test_without_arguments_the_option_s_default_sizes_the_object_and_is_said_to_be_assumed(tmp_path: Path):
    found = by_line(program(tmp_path), None)
    region = found[23]
    # `ParseCommandLineOptions` sets nothing when run without arguments: `opts.nx = 30` holds
    assert trips(region) == {"i": 30 ** 3}
    assert NO_ARGUMENTS_NOTE in texts(region.facts.assumptions)
    assert unknown_trips(region) == []


STACK_MAIN = """
#include <cstdlib>
#include "domain.h"
int main(int argc, char *argv[]) {
  struct cmdLineOpts opts;
  opts.nx = 30;
  opts.numReg = 11;
  ParseCommandLineOptions(argc, argv, &opts);
  Domain dom(4, opts.nx, opts.numReg);
  if (argc > 8) dom.cost() = 3;
  Index_t numElem = dom.numElem();
  Index_t nreg = dom.numReg();
  Index_t cost = dom.cost();
  Index_t nshell = dom.shells();
  double *e = dom.m_e;
  #pragma omp target teams distribute parallel for map(tofrom: e[0:numElem])
  for (Index_t i = 0; i < numElem; ++i)
    for (Index_t r = 0; r < nreg; ++r) e[i] += 1.0;
  dom.numReg() = 5;
  nreg = dom.numReg();
  #pragma omp target teams distribute parallel for map(tofrom: e[0:numElem])
  for (Index_t i = 0; i < numElem; ++i)
    for (Index_t r = 0; r < nreg; ++r) e[i] += 1.0;
  #pragma omp target teams distribute parallel for map(tofrom: e[0:numElem])
  for (Index_t i = 0; i < numElem; ++i)
    for (Index_t c = 0; c < cost; ++c) e[i] *= 0.5;
  #pragma omp target teams distribute parallel for map(tofrom: e[0:numElem])
  for (Index_t i = 0; i < numElem; ++i)
    for (Index_t s = 0; s < nshell; ++s) e[i] *= 0.5;
  return 0;
}
"""


def test_a_stack_object_and_members_assigned_through_a_reference_getter(tmp_path: Path):
    found = by_line(program(tmp_path, STACK_MAIN), ("-s", "8", "-r", "3"))
    # `numReg() = nr;` in the constructor assigns `m_numReg` (nr = `opts.numReg`, 11: `-r` is not parsed)
    assert trips(found[16]) == {"i": 8 ** 3, "r": 11}
    # `dom.numReg() = 5;` by the caller, after the first region
    assert trips(found[21]) == {"i": 8 ** 3, "r": 5}
    # `m_cost(1)` of the initialiser list; `dom.cost() = 3` under `argc > 8` does not run
    assert trips(found[24]) == {"i": 8 ** 3, "c": 1}


def test_a_member_the_constructor_sets_in_a_loop_stays_unknown(tmp_path: Path):
    region = by_line(program(tmp_path, STACK_MAIN), ("-s", "8"))[27]
    assert trips(region)["i"] == 8 ** 3
    assert any("(`nshell`)" in t for t in unknown_trips(region))


def test_a_branch_that_may_assign_through_the_reference_leaves_the_member_unknown(tmp_path: Path):
    main = STACK_MAIN.replace("if (argc > 8) dom.cost() = 3;", "if (rand() > 8) dom.cost() = 3;")
    region = by_line(program(tmp_path, main), ("-s", "8"))[24]
    assert any("(`cost`)" in t for t in unknown_trips(region))
