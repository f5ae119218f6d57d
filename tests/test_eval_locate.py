"""Every labeled kernel is found at its exact file and line (needs the benchmark sources)."""

from collections import Counter

import pytest

from perflsp.evaluation.labels import read_labels
from perflsp.evaluation.locate import Locator

pytestmark = pytest.mark.eval


def test_all_labeled_kernels_are_located(eval_data):
    labels, src = eval_data
    locator = Locator(src)
    listed: Counter[str] = Counter()
    found: Counter[str] = Counter()
    misses = []
    for row, _ in read_labels(labels):
        listed[row.language] += 1
        result = locator.locate(row)
        if result.kernel is None:
            misses.append(result.reason)
        else:
            found[row.language] += 1
    for language in sorted(listed):
        print(f"located {language}: {found[language]}/{listed[language]}")
    assert not misses, "\n".join(misses[:20])
