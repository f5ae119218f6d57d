"""Prompt size: our per-kernel prompt vs a prompt that carries the whole source file.

Targets (issue "LLM advisor"): median ratio ours/whole-file <= 25 %, and 100 % of kernels within an
8k-token prompt budget (the study that labeled these kernels sent whole files and lost about half
of its kernels to such a cap).

Our prompt is what `perflsp explain` / the server actually send: the system message plus the
kernel message built by `perflsp.llm.questions.question_for` (the kernel, its device functions,
the file-scope definitions they use, launch sites, GPU figures, static evidence). The whole-file
prompt models the study's: the same system message and framing, with the kernel listing replaced
by the kernel's entire source file, quoted as it is (no line numbers). Three ratios are reported:
- full: all messages -- what a request costs (the `--check` target applies to `--metric`);
- user: the per-kernel message only (the system message is identical in both and cacheable);
- code: the quoted source only (kernel + device functions + definitions + launch sites vs file).

Tokens: tiktoken's cl100k_base encoding when tiktoken is installed and can load it offline
(its cache, or `--tiktoken-file` pointing at a `cl100k_base.tiktoken` file), else perflsp's
documented estimate (`perflsp.llm.tokens`, about 20 % above cl100k on code). Both
prompts are always counted with the same counter; the report says which one.

Inputs, either:
- labeled kernels: `--labels CSV --src DIR` (or $PERFLSP_EVAL_LABELS / $PERFLSP_EVAL_SRC), each
  located and analysed as `perflsp eval` does, on `--gpu` (default RTX 3080);
- JSON lines, each {"question": <KernelQuestion as JSON>, "file": "<path of its source>"}.

    python benchmarks/prompt_size.py --labels CSV --src DIR [--compile-commands FILE] [--json]
    python benchmarks/prompt_size.py questions.jsonl [--json] [--check] [--metric full|user|code]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from perflsp.llm.prompts import PromptRenderer, PromptTooLarge, number_lines
from perflsp.llm.request import KernelQuestion
from perflsp.llm.tokens import estimate_tokens

PROGRAM_ARGUMENTS = "program arguments of the measured run: "  # perflsp.evaluation.llm_eval's prefix

TARGET_MEDIAN_RATIO = 0.25
DEFAULT_BUDGET_TOKENS = 8000
METRICS = ("full", "user", "code")
CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"

Counter = Callable[[str], int]


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


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


@dataclass(frozen=True)
class Report:
    rows: list[Row]
    budget_tokens: int
    metric: str = "full"
    tokenizer: str = "estimate"
    skipped: int = 0  # labeled rows with no question (not located, engine error)

    def ratios(self, metric: str | None = None) -> list[float]:
        return [r for row in self.rows if (r := row.ratio(metric or self.metric)) is not None]

    def median_ratio(self, metric: str | None = None) -> float | None:
        ratios = self.ratios(metric)
        return statistics.median(ratios) if ratios else None

    def p90_ratio(self, metric: str | None = None) -> float | None:
        return _percentile(self.ratios(metric), 0.9)

    @property
    def fit_budget_pct(self) -> float:
        """Our prompts within the budget (after the renderer's trimming)."""
        fits = sum(r.ours_tokens is not None and r.ours_tokens <= self.budget_tokens for r in self.rows)
        return 100.0 * fits / len(self.rows) if self.rows else 0.0

    @property
    def whole_file_fit_budget_pct(self) -> float:
        fits = sum(r.whole_file_tokens <= self.budget_tokens for r in self.rows)
        return 100.0 * fits / len(self.rows) if self.rows else 0.0

    def median_tokens(self, whole_file: bool = False) -> float | None:
        values = [r.whole_file_tokens if whole_file else r.ours_tokens for r in self.rows]
        values = [v for v in values if v is not None]
        return statistics.median(values) if values else None

    @property
    def meets_targets(self) -> bool:
        median = self.median_ratio()
        return median is not None and median <= TARGET_MEDIAN_RATIO and self.fit_budget_pct == 100.0

    def to_json(self, with_rows: bool = True) -> dict:
        data = {
            "kernels": len(self.rows),
            "skipped": self.skipped,
            "tokenizer": self.tokenizer,
            "median_ratio": {m: self.median_ratio(m) for m in METRICS},
            "p90_ratio": {m: self.p90_ratio(m) for m in METRICS},
            "median_tokens": {"ours": self.median_tokens(), "whole_file": self.median_tokens(True)},
            "fit_budget_pct": self.fit_budget_pct,
            "whole_file_fit_budget_pct": self.whole_file_fit_budget_pct,
            "budget_tokens": self.budget_tokens,
            "metric": self.metric,
            "meets_targets": self.meets_targets,
        }
        if with_rows:
            data["rows"] = [asdict(row) for row in self.rows]
        return data


def measure(
    items: Iterable[tuple[KernelQuestion, str]],
    budget_tokens: int = DEFAULT_BUDGET_TOKENS,
    metric: str = "full",
    count: Counter = estimate_tokens,
    tokenizer: str = "estimate",
    skipped: int = 0,
) -> Report:
    ours_renderer = PromptRenderer(max_prompt_tokens=budget_tokens)
    unbounded = PromptRenderer(max_prompt_tokens=10**9)
    rows: list[Row] = []
    for question, file_text in items:
        whole = unbounded.render(
            question.model_copy(
                update={"kernel_source": file_text, "device_functions": [], "definitions": [],
                        # what is not in the file (the labels' program arguments) both prompts get
                        "launch_sites": [s for s in question.launch_sites if s.text.startswith(PROGRAM_ARGUMENTS)]}
            )
        )
        # the study quoted files as they are: no line numbers
        whole_messages = [m.content for m in whole.messages]
        whole_messages[-1] = whole_messages[-1].replace(number_lines(file_text), file_text.rstrip("\n"), 1)
        code = [question.kernel_source, *(f.source for f in question.device_functions),
                *(d.source for d in question.definitions), *(s.text for s in question.launch_sites)]
        common = {
            "kernel": question.name,
            "whole_file_tokens": sum(count(m) for m in whole_messages),
            "whole_file_user_tokens": count(whole_messages[-1]),
            "code_tokens": sum(count(c) for c in code),
            "file_tokens": count(file_text),
        }
        try:
            prompt = ours_renderer.render(question)
        except PromptTooLarge:
            rows.append(Row(ours_tokens=None, ours_user_tokens=None, trimmed=[], **common))
            continue
        rows.append(Row(ours_tokens=sum(count(m.content) for m in prompt.messages),
                        ours_user_tokens=count(prompt.messages[-1].content),
                        trimmed=list(prompt.trimmed), **common))
    return Report(rows, budget_tokens, metric, tokenizer, skipped)


# ---------------------------------------------------------------------------------------------
# token counters


def token_counter(choice: str, tiktoken_file: Path | None = None) -> tuple[Counter, str]:
    """(counter, its name). "auto": tiktoken cl100k_base when it loads offline, else the estimate."""
    if choice == "estimate":
        return estimate_tokens, "estimate (perflsp.llm.tokens)"
    try:
        encoding = _cl100k(tiktoken_file)
    except Exception as exc:  # noqa: BLE001 - any failure to load means "not available offline"
        if choice == "tiktoken":
            raise SystemExit(f"prompt_size: tiktoken is not usable offline: {exc}") from None
        return estimate_tokens, f"estimate (perflsp.llm.tokens; tiktoken unavailable: {exc})"

    def count(text: str) -> int:
        return len(encoding.encode(text, disallowed_special=()))

    return count, "tiktoken cl100k_base"


def _cl100k(tiktoken_file: Path | None):
    import tiktoken

    if tiktoken_file is not None:
        # tiktoken looks encodings up in TIKTOKEN_CACHE_DIR under the sha1 of their URL and checks
        # the file's own hash, so a copy of the official file works without a download
        with tempfile.TemporaryDirectory(prefix="perflsp-tiktoken-") as cache:
            shutil.copyfile(tiktoken_file, Path(cache) / hashlib.sha1(CL100K_URL.encode()).hexdigest())
            previous = os.environ.get("TIKTOKEN_CACHE_DIR")
            os.environ["TIKTOKEN_CACHE_DIR"] = cache
            try:
                return tiktoken.get_encoding("cl100k_base")  # read now: the folder can go
            finally:
                if previous is None:
                    os.environ.pop("TIKTOKEN_CACHE_DIR", None)
                else:
                    os.environ["TIKTOKEN_CACHE_DIR"] = previous
    return tiktoken.get_encoding("cl100k_base")


# ---------------------------------------------------------------------------------------------
# inputs


def _load_jsonl(path: Path) -> list[tuple[KernelQuestion, str]]:
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


def load_labeled(labels: Path, src: Path, gpu_name: str, gpu_files: list[str],
                 compile_commands: Path | None, limit: int | None) -> tuple[list[tuple[KernelQuestion, str]], int]:
    """Questions for the labeled kernels, as `perflsp eval --llm` builds them; and rows skipped."""
    from perflsp.evaluation.labels import LabelsError, read_labels
    from perflsp.evaluation.llm_eval import RowAnalyzer
    from perflsp.hardware import GpuConfigError, UnknownGpuError, load_database
    from perflsp.kernels.compile_db import CompileDatabase, CompileDatabaseError

    try:
        rows = read_labels(labels)
        gpu = load_database(gpu_files).get(gpu_name)
        compile_db = CompileDatabase.load(compile_commands, src) if compile_commands else None
    except (LabelsError, GpuConfigError, UnknownGpuError, CompileDatabaseError) as exc:
        raise SystemExit(f"prompt_size: {exc}") from None
    analyzer = RowAnalyzer(src, gpu, compile_db=compile_db)
    items, skipped = [], 0
    for row, _answer in rows[:limit] if limit else rows:
        analysis = analyzer.analyze(row)
        question = analyzer.question(analysis)
        if question is None:
            skipped += 1
            continue
        items.append((question, analysis.data.decode("utf-8", errors="replace")))
    return items, skipped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("questions", type=Path, nargs="?", help="JSON lines of {question, file}")
    parser.add_argument("--labels", type=Path, default=os.environ.get("PERFLSP_EVAL_LABELS"),
                        help="labels CSV (default $PERFLSP_EVAL_LABELS)")
    parser.add_argument("--src", type=Path, default=os.environ.get("PERFLSP_EVAL_SRC"),
                        help="benchmark src/ folder (default $PERFLSP_EVAL_SRC)")
    parser.add_argument("--compile-commands", type=Path, help="compile_commands.json of the benchmarks")
    parser.add_argument("--gpu", default="RTX 3080", help="GPU for the figures and the estimate")
    parser.add_argument("--gpus-file", action="append", default=[], help="extra GPU definitions (TOML)")
    parser.add_argument("--limit", type=int, help="only the first N labeled rows")
    parser.add_argument("--budget", type=int, default=DEFAULT_BUDGET_TOKENS)
    parser.add_argument("--tokenizer", choices=("auto", "tiktoken", "estimate"), default="auto")
    parser.add_argument("--tiktoken-file", type=Path, help="a local cl100k_base.tiktoken file")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--rows", action="store_true", help="list every kernel (text) / include rows (JSON)")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--metric", choices=METRICS, default="full", help="ratio the target applies to")
    args = parser.parse_args(argv)

    count, tokenizer = token_counter(args.tokenizer, args.tiktoken_file)
    skipped = 0
    if args.questions is not None:
        items = _load_jsonl(args.questions)
    elif args.labels and args.src:
        items, skipped = load_labeled(args.labels, args.src, args.gpu, args.gpus_file,
                                      args.compile_commands, args.limit)
    else:
        parser.error("give a JSON-lines file, or --labels and --src (or PERFLSP_EVAL_LABELS/PERFLSP_EVAL_SRC)")
    report = measure(items, args.budget, args.metric, count, tokenizer, skipped)
    if args.json:
        print(json.dumps(report.to_json(with_rows=args.rows or args.questions is not None), indent=2))
    else:
        _print_text(report, args.rows or args.questions is not None)
    return 1 if args.check and not report.meets_targets else 0


def _print_text(report: Report, rows: bool) -> None:
    def pct(value: float | None) -> str:
        return "-" if value is None else f"{100 * value:.1f}%"

    if rows:
        for row in report.rows:
            ours = "over budget" if row.ours_tokens is None else f"{row.ours_tokens:6d}"
            print(f"{row.kernel:40.40s} ours {ours}  whole file {row.whole_file_tokens:7d}  "
                  f"full {pct(row.ratio('full')):>6}  user {pct(row.ratio('user')):>6}  "
                  f"code {pct(row.ratio('code')):>6}")
    print(f"kernels: {len(report.rows)} (skipped {report.skipped})  tokens: {report.tokenizer}")
    print(f"median tokens: ours {report.median_tokens():.0f}, whole file {report.median_tokens(True):.0f}"
          if report.rows else "median tokens: -")
    for metric in METRICS:
        print(f"ratio ours/whole-file [{metric}]: median {pct(report.median_ratio(metric))}, "
              f"p90 {pct(report.p90_ratio(metric))}")
    print(f"within {report.budget_tokens} tokens: ours {report.fit_budget_pct:.1f}%, "
          f"whole file {report.whole_file_fit_budget_pct:.1f}%  "
          f"(target: median {report.metric} ratio <= 25%, ours 100%)")


if __name__ == "__main__":
    sys.exit(main())
