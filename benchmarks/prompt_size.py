"""Prompt size: our per-kernel prompt vs a prompt that carries the whole source file.

Targets (issue "LLM advisor"): median ratio ours/whole-file <= 25 %, and 100 % of kernels within an
8k-token prompt budget.

Both prompts use the same templates (system prompt + GPU figures + static evidence); the
whole-file prompt replaces the kernel listing, its device functions and launch sites by the
entire file. Three ratios are reported, because the fixed part weighs heavily on small files:
- full: all messages (system prompt included) -- what a request costs;
- user: the per-kernel message only (the system prompt is identical in both and cacheable);
- code: the quoted source only (kernel + device functions + launch sites vs the file).
The `--check` target applies to `--metric` (default: full). Tokens are estimated with
`perflsp.llm.tokens.estimate_tokens` (1 token per 3 characters, a deliberate overestimate:
tiktoken cannot download its encodings offline); the ratios do not depend on that constant.

Input: JSON lines, each {"question": <KernelQuestion as JSON>, "file": "<path of its source>"}
(the lead's extraction writes them; `measure()` takes the same pairs from Python).

    python benchmarks/prompt_size.py questions.jsonl [--json] [--check] [--metric full|user|code]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from perflsp.llm.prompts import PromptRenderer, PromptTooLarge
from perflsp.llm.request import KernelQuestion
from perflsp.llm.tokens import estimate_tokens

TARGET_MEDIAN_RATIO = 0.25
DEFAULT_BUDGET_TOKENS = 8000


METRICS = ("full", "user", "code")


@dataclass(frozen=True)
class Row:
    kernel: str
    ours_tokens: int | None  # all messages; None: over the budget even after trimming
    whole_file_tokens: int
    ours_user_tokens: int | None
    whole_file_user_tokens: int
    code_tokens: int
    file_tokens: int
    trimmed: list[str]

    def ratio(self, metric: str = "full") -> float | None:
        if metric == "code":
            return self.code_tokens / self.file_tokens if self.file_tokens else None
        if self.ours_tokens is None or self.ours_user_tokens is None:
            return None
        if metric == "user":
            return self.ours_user_tokens / self.whole_file_user_tokens
        return self.ours_tokens / self.whole_file_tokens


@dataclass(frozen=True)
class Report:
    rows: list[Row]
    fit_budget_pct: float
    budget_tokens: int
    metric: str = "full"

    def median_ratio(self, metric: str | None = None) -> float | None:
        ratios = [r for row in self.rows if (r := row.ratio(metric or self.metric)) is not None]
        return statistics.median(ratios) if ratios else None

    @property
    def meets_targets(self) -> bool:
        median = self.median_ratio()
        return median is not None and median <= TARGET_MEDIAN_RATIO and self.fit_budget_pct == 100.0

    def to_json(self) -> dict:
        return {
            "rows": [asdict(row) for row in self.rows],
            "median_ratio": {m: self.median_ratio(m) for m in METRICS},
            "fit_budget_pct": self.fit_budget_pct,
            "budget_tokens": self.budget_tokens,
            "metric": self.metric,
            "meets_targets": self.meets_targets,
        }


def measure(
    items: Iterable[tuple[KernelQuestion, str]],
    budget_tokens: int = DEFAULT_BUDGET_TOKENS,
    metric: str = "full",
) -> Report:
    ours_renderer = PromptRenderer(max_prompt_tokens=budget_tokens)
    unbounded = PromptRenderer(max_prompt_tokens=10**9)
    rows: list[Row] = []
    for question, file_text in items:
        whole = unbounded.render(
            question.model_copy(
                update={"kernel_source": file_text, "device_functions": [], "launch_sites": []}
            )
        )
        code = [question.kernel_source, *(f.source for f in question.device_functions),
                *(s.text for s in question.launch_sites)]
        common = dict(
            kernel=question.name,
            whole_file_tokens=whole.estimated_tokens,
            whole_file_user_tokens=estimate_tokens(whole.messages[-1].content),
            code_tokens=sum(estimate_tokens(c) for c in code),
            file_tokens=estimate_tokens(file_text),
        )
        try:
            prompt = ours_renderer.render(question)
        except PromptTooLarge:
            rows.append(Row(ours_tokens=None, ours_user_tokens=None, trimmed=[], **common))
            continue
        rows.append(Row(ours_tokens=prompt.estimated_tokens,
                        ours_user_tokens=estimate_tokens(prompt.messages[-1].content),
                        trimmed=list(prompt.trimmed), **common))
    fit = 100.0 * sum(r.ours_tokens is not None for r in rows) / len(rows) if rows else 0.0
    return Report(rows, fit, budget_tokens, metric)


def _load(path: Path) -> list[tuple[KernelQuestion, str]]:
    items = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            question = KernelQuestion.model_validate(record["question"])
            source = Path(record["file"]).read_text(encoding="utf-8", errors="replace")
        except (ValueError, KeyError, OSError) as exc:
            raise SystemExit(f"prompt_size: {path}:{number}: {exc}") from None
        items.append((question, source))
    return items


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("questions", type=Path, help="JSON lines of {question, file}")
    parser.add_argument("--budget", type=int, default=DEFAULT_BUDGET_TOKENS)
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--metric", choices=METRICS, default="full", help="ratio the target applies to")
    args = parser.parse_args(argv)
    report = measure(_load(args.questions), args.budget, args.metric)
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        def pct(value: float | None) -> str:
            return "-" if value is None else f"{100 * value:5.1f}%"

        for row in report.rows:
            ours = "over budget" if row.ours_tokens is None else f"{row.ours_tokens:6d}"
            print(f"{row.kernel:40.40s} ours {ours}  whole file {row.whole_file_tokens:7d}  "
                  f"full {pct(row.ratio('full'))}  user {pct(row.ratio('user'))}  "
                  f"code {pct(row.ratio('code'))}")
        medians = "  ".join(f"{m} {pct(report.median_ratio(m)).strip()}" for m in METRICS)
        print(f"kernels: {len(report.rows)}  median ratios: {medians} (target <= 25% on {report.metric})  "
              f"within {report.budget_tokens} tokens: {report.fit_budget_pct:.1f}% (target 100%)")
    return 1 if args.check and not report.meets_targets else 0


if __name__ == "__main__":
    sys.exit(main())
