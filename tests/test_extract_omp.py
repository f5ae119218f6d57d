from perflsp.kernels import extract
from perflsp.kernels.omp import parse_clauses, parse_list_item, split_directive

SRC = b"""#define BS 256
void saxpy(int n, float a, float *x, float *y) {
  #pragma omp target teams distribute parallel for map(to: x[0:n]) map(tofrom: y[0:n]) thread_limit(BS)
  for (int i = 0; i < n; i++) y[i] += a * x[i];
}
namespace ns {
double dot(int n, const double *x) {
  double sum = 0;
#pragma omp target data map(to: x[0:n])
  {
#pragma omp target teams distribute parallel for reduction(+:sum) \\
        num_teams(n / BS) collapse(2) \\
        schedule(static, 4) nowait depend(in: x[0:n])
    for (int i = 0; i < n; ++i)
      for (int j = 0; n > j; j += 2)
        sum += x[i] * x[j];
#pragma omp target update from(x[0:n])
#pragma omp target
    {
#pragma omp teams distribute parallel for private(j) firstprivate(n) is_device_ptr(x)
      for (int k = 0; k < 10; k++) { }
    }
  }
  return sum;
}
}
#pragma omp declare target
int f();
#pragma omp end declare target
"""


def test_only_kernel_creating_directives():
    fk = extract(SRC)
    assert [(r.line, r.directive) for r in fk.omp_regions] == [
        (3, "target teams distribute parallel for"),
        (11, "target teams distribute parallel for"),
        (18, "target"),
    ]


def test_clauses_and_continuations():
    fk = extract(SRC)
    saxpy, dot, plain = fk.omp_regions
    maps = saxpy.clauses_named("map")
    assert [(m.modifier, m.items[0].variable, m.items[0].sections) for m in maps] == [
        ("to", "x", (("0", "n"),)), ("tofrom", "y", (("0", "n"),))]
    assert saxpy.clause("thread_limit").value.value == 256
    assert saxpy.function == "saxpy" and saxpy.name == "saxpy@l3"
    assert dot.function == "ns::dot"
    assert dot.clause("reduction").modifier == "+"
    assert dot.clause("reduction").items[0].variable == "sum"
    assert dot.clause("collapse").value.value == 2
    assert dot.clause("num_teams").value.value is None
    assert "`n`" in dot.clause("num_teams").value.reason
    sched = dot.clause("schedule")
    assert sched.modifier == "static" and sched.value.value == 4
    assert dot.clause("nowait") is not None
    assert dot.clause("depend").modifier == "in"
    assert "\\" not in dot.pragma_text and dot.pragma_text.endswith("depend(in: x[0:n])")
    assert dot.span.start.line == 10 and dot.span.end.line == 12
    assert [c.name for c in plain.clauses] == []


def test_loop_nest():
    fk = extract(SRC)
    saxpy, dot, plain = fk.omp_regions
    assert [(lp.variable, lp.lower, lp.upper, lp.condition_op, lp.step) for lp in saxpy.loops] == [("i", "0", "n", "<", "+1")]
    assert [(lp.variable, lp.upper, lp.condition_op, lp.step) for lp in dot.loops] == [("i", "n", "<", "+1"), ("j", "n", "<", "+=2")]
    # a bare `target` block: the loop under the nested teams pragma
    assert [lp.variable for lp in plain.loops] == ["k"]


def test_clause_parser_units():
    words, rest = split_directive("omp target teams distribute parallel for simd map(always, close, tofrom: a[1:n-1][:m], s.f)")
    assert words == ["target", "teams", "distribute", "parallel", "for", "simd"]
    (clause,) = parse_clauses(rest)
    assert clause.modifier == "tofrom"
    assert [(i.variable, i.sections) for i in clause.items] == [("a", (("1", "n-1"), (None, "m"))), ("s.f", ())]
    assert parse_list_item("p->data[0:len]").variable == "p->data"
    assert parse_list_item("b[i]").sections == (("i", "1"),)
    # garbage does not loop forever or raise
    assert parse_clauses("map(to: a[0:n] ) ) ( !! num_teams(") is not None


def test_pragma_lost_in_error_region_is_recovered():
    src = b"""#define WEIRD(x) x
void f(int n, float *a) {
  WEIRD(int) q = {;
#pragma omp target teams distribute parallel for map(tofrom: a[0:n])
  for (int i = 0; i < n; i++) a[i] = 0;
}
"""
    fk = extract(src)
    assert [r.line for r in fk.omp_regions] == [4]


def test_pragma_inside_a_conditional_applies_to_the_statement_after_it():
    src = b"""void f(int n, float *a) {
#ifdef OMP_TARGET
  #pragma omp target teams distribute parallel for \\
  thread_limit(128)
#endif
  for (int i = 0; i < n; i++) a[i] = 0;
}
"""
    (region,) = extract(src).omp_regions
    assert region.line == 3
    assert [lp.variable for lp in region.loops] == ["i"]
