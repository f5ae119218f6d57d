"""benchmarks/tuning.py: the random-sampling baseline is exact (checked against every draw of
small spaces, failures included), seeds differ between spaces of equal size, and the prior's
tie-break order is a parameter its spread is measured over."""

from __future__ import annotations

import itertools
import math
import statistics

import pytest

from benchmarks import tuning as bench
from perflsp.tuning.space import TuningSpace
from perflsp.tuning.strategies import static_ranking


def brute_force(times, optimum, checkpoints, within=1.1):
    """Every ordered draw without replacement, equally likely: the mean best/optimum after n over
    draws in which something ran, and the median first index of a configuration within 10%."""
    ratios = []
    for n in checkpoints:
        bests = [min(t for t in draw if t is not None) / optimum
                 for draw in itertools.combinations(times, min(n, len(times)))
                 if any(t is not None for t in draw)]
        ratios.append(statistics.fmean(bests))
    firsts = []
    for order in itertools.permutations(range(len(times))):
        hit = next((i + 1 for i, j in enumerate(order) if times[j] is not None and times[j] <= within * optimum),
                   math.inf)
        firsts.append(hit if hit <= max(checkpoints) else math.inf)
    firsts.sort()
    lower = firsts[(len(firsts) - 1) // 2]  # the lower median: the smallest m with P(first <= m) >= 1/2
    return ratios, lower


@pytest.mark.parametrize("times", [
    [1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
    [4.0, 1.0, None, 1.05, 9.0, None, 2.5],
    [3.0, 3.0, 1.0, 8.0, 2.0],
    [None, None, 2.0, 7.0, 1.5, 1.6],
])
def test_the_random_baseline_is_the_exact_expectation(times):
    optimum = min(t for t in times if t is not None)
    checkpoints = (1, 2, 3, 4)
    ratios, median = bench.exact_random(times, optimum, checkpoints)
    expected, expected_median = brute_force(times, optimum, checkpoints)
    assert ratios == pytest.approx(expected, rel=1e-12)
    assert median == expected_median


def test_seeds_differ_between_spaces_of_equal_size():
    first = [bench.seed_for("convolution/A100", i) for i in range(20)]
    second = [bench.seed_for("convolution/A4000", i) for i in range(20)]
    assert len(set(first)) == 20 and not set(first) & set(second)
    assert first == [bench.seed_for("convolution/A100", i) for i in range(20)]  # repeatable


def test_the_prior_breaks_ties_by_values_or_by_a_seeded_random_order():
    space = TuningSpace("k", {"a": [1, 2, 3, 4], "b": [5, 6, 7]})  # no GPU, no block: every score ties
    by_values = static_ranking(space, None)
    assert by_values == sorted(by_values, key=lambda c: (c["a"], c["b"]))
    orders = {tuple(tuple(c.values()) for c in static_ranking(space, None, tie_seed=s)) for s in range(10)}
    assert len(orders) > 1
    assert static_ranking(space, None, tie_seed=3) == static_ranking(space, None, tie_seed=3)
