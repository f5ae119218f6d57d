"""Measure the LLM path on labeled kernels (`perflsp eval --llm`).

    result = await evaluate_llm(labeled_rows, src_root, gpu, advisor)
    print(json.dumps(result.to_json()))

Each located kernel is analysed exactly as `perflsp eval` analyses it (same launch shape, program
arguments and launch sites from the benchmark's other files), its question is built by
`perflsp.llm.questions.question_for` (task "verdict", with the static evidence), and the advisor
is asked; the advisor's own limit (`max_concurrent`) bounds the requests in flight.

Scores: `final` counts the verdict the user would see (the LLM's, or the static one when the
advisor fell back), `llm_only` the rows the model answered, `static` the engine alone on the same
rows. A "latency" verdict is wrong under a compute/bandwidth label. Fallbacks are counted with
their reasons, and tokens are reported per kernel (median) and in total, as the endpoint counted
them, with perflsp's own prompt estimate beside them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import shlex
import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tree_sitter import Tree

from perflsp.analysis.costs import CostModel
from perflsp.analysis.models import KernelReport
from perflsp.analysis.options import AnalysisOptions
from perflsp.analysis.pipeline import FileAnalysis
from perflsp.evaluation.labels import Answer, KernelRow
from perflsp.evaluation.locate import Locator
from perflsp.evaluation.run import Prediction, Score, _LaunchIndex, score
from perflsp.hardware.models import Gpu
from perflsp.kernels.compile_db import CompileDatabase
from perflsp.kernels.models import CudaFunction, FileKernels, LaunchSite
from perflsp.kernels.program import ProgramModel
from perflsp.llm.advisor import Advisor, AdvisorResult
from perflsp.llm.prompts import PromptTooLarge
from perflsp.llm.questions import question_for
from perflsp.llm.request import KernelQuestion, LaunchSiteFacts

MAX_REASON_CHARS = 160
PROGRAM_ARGUMENTS = "program arguments of the measured run: "  # prefix of the launch fact it adds


# ---------------------------------------------------------------------------------------------
# analysing one labeled row (what `perflsp eval` does, keeping the report)


@dataclass(slots=True)
class RowAnalysis:
    row: KernelRow
    report: KernelReport | None = None
    file: FileKernels | None = None
    data: bytes = b""
    tree: Tree | None = None
    reason: str | None = None  # why there is no report (not located, engine error)
    model: ProgramModel | None = None  # the program model the report was analysed over


class RowAnalyzer:
    """Locate and analyse labeled rows under a source root, each file read and parsed once."""

    def __init__(self, src_root: Path, gpu: Gpu, cost: CostModel | None = None,
                 compile_db: CompileDatabase | None = None):
        self.src_root = src_root
        self.gpu = gpu
        self.cost = cost or CostModel()
        self.locator = Locator(src_root, compile_db)
        self._launches = _LaunchIndex(self.locator, src_root)

    def analyze(self, row: KernelRow) -> RowAnalysis:
        argv = tuple(shlex.split(row.exe_args)) if row.exe_args else ()
        try:
            located = self.locator.locate(row, argv)
        except Exception as exc:  # noqa: BLE001 - an extraction bug must not stop the other rows
            return RowAnalysis(row, reason=f"extraction error: {type(exc).__name__}: {exc}")
        if located.kernel is None or located.file is None:
            return RowAnalysis(row, reason=located.reason)
        file = located.file
        override = (row.grid, row.block) if row.grid and row.block else None
        external: tuple[LaunchSite, ...] = ()
        if isinstance(located.kernel, CudaFunction) and not file.launches_of(located.kernel):
            external = self._launches.for_kernel(row.target, located.kernel.name, argv)
        program = self.locator.read(row.file, argv)
        data, tree = program.data, program.tree
        options = AnalysisOptions(argv=argv, launch_override=override, include_env=program.options.include_env,
                                  external_launches=external, cost=self.cost, instantiation=row.instantiation)
        # the one pipeline: an engine failure comes back as an `uncertain` report naming it
        analysis = FileAnalysis.of(program, options)
        report = analysis.report(located.kernel, [self.gpu])
        return RowAnalysis(row, report, file, data, tree, model=analysis.model_if_built())

    def question(self, analysis: RowAnalysis, task: str = "verdict") -> KernelQuestion | None:
        """The question the advisor gets for an analysed row, or None when it has no report."""
        if analysis.report is None or analysis.file is None:
            return None
        row = analysis.row
        return question_for(
            analysis.report, analysis.report.estimates[0], self.gpu, analysis.data, analysis.file,
            task,  # type: ignore[arg-type]
            kernel_id=f"{row.file}#{row.kernel}@{row.line}",
            tree=analysis.tree,
            extra_launch_sites=row_launch_facts(row),
            model=analysis.model,
        )


def row_launch_facts(row: KernelRow) -> list[LaunchSiteFacts]:
    """The program's arguments from the labels (the launch shape reaches the question through the
    engine, which analyses the kernel with it: see the estimate's "work" line)."""
    if not row.exe_args.strip():
        return []
    return [LaunchSiteFacts(text=PROGRAM_ARGUMENTS + row.exe_args.strip())]


# ---------------------------------------------------------------------------------------------
# results


@dataclass(slots=True)
class RowOutcome:
    row: KernelRow
    label: str
    static_verdict: str | None  # the engine's (compute | bandwidth | uncertain), None: not analysed
    verdict: str | None  # what the advisor answered (compute | bandwidth | latency), None: not asked
    source: str | None  # "llm" | "static" (fallback) | None
    fallback_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated_prompt_tokens: int | None = None
    from_cache: bool = False
    reason: str | None = None  # why the row was not asked

    def to_json(self) -> dict[str, Any]:
        return {
            "target": self.row.target, "language": self.row.language, "kernel": self.row.kernel,
            "file": self.row.file, "line": self.row.line, "label": self.label,
            "static_verdict": self.static_verdict, "verdict": self.verdict, "source": self.source,
            "fallback_reason": self.fallback_reason, "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens, "estimated_prompt_tokens": self.estimated_prompt_tokens,
            "from_cache": self.from_cache, "reason": self.reason,
        }


@dataclass(slots=True)
class TokenStats:
    kernels: int  # kernels with a figure
    median: float | None
    total: int
    max: int | None

    @classmethod
    def of(cls, values: Sequence[int]) -> TokenStats:
        values = [v for v in values if v > 0]
        if not values:
            return cls(0, None, 0, None)
        return cls(len(values), float(statistics.median(values)), sum(values), max(values))

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(slots=True)
class LlmEvalResult:
    gpu: str
    model: str | None
    endpoint: str | None
    listed: int
    asked: int  # rows with a question (located and analysed)
    llm_answers: int  # answered by the model (from the cache included)
    from_cache: int
    static_fallbacks: int
    fallback_reasons: dict[str, int]
    final: Score  # the verdict shown: the LLM's, or the static fallback
    llm_only: Score  # rows the model answered
    static: Score  # the static engine on every listed row
    by_language: dict[str, Score]  # `final`, per language
    overrides: dict[str, int]  # the model disagreed with the engine: how often, right, wrong
    prompt_tokens: TokenStats
    completion_tokens: TokenStats
    estimated_prompt_tokens: TokenStats
    rows: list[RowOutcome] = field(default_factory=list)

    def summary_lines(self) -> list[str]:
        """The result as a few lines of text (what `perflsp eval --llm` prints without --json)."""

        def acc(s: Score) -> str:
            return f"accuracy {s.accuracy:.3f}, balanced {s.balanced_accuracy:.3f} (n={s.listed})"

        def tokens(t: TokenStats) -> str:
            return "-" if t.median is None else f"median {t.median:.0f}, total {t.total:,}"

        lines = [
            f"LLM path on {self.gpu}: {self.model or 'no model'} at {self.endpoint or '-'}",
            f"kernels: {self.listed} listed, {self.asked} asked, {self.llm_answers} answered by the LLM "
            f"({self.from_cache} from the cache), {self.static_fallbacks} static fallbacks",
            f"shown verdict (LLM, else static): {acc(self.final)}",
            f"LLM answers only: {acc(self.llm_only)}",
            f"static engine alone: {acc(self.static)}",
            "per language (shown verdict): " + "; ".join(f"{k} {v.balanced_accuracy:.3f} balanced (n={v.listed})"
                                                         for k, v in self.by_language.items()),
            f"LLM overrode the engine on {self.overrides['total']} kernels: {self.overrides['right']} right, "
            f"{self.overrides['wrong']} wrong",
            f"tokens per kernel (endpoint's count): prompt {tokens(self.prompt_tokens)}; "
            f"completion {tokens(self.completion_tokens)}; perflsp's prompt estimate "
            f"{tokens(self.estimated_prompt_tokens)}",
        ]
        lines += [f"fallback ({count}x): {reason}" for reason, count in list(self.fallback_reasons.items())[:5]]
        return lines

    def to_json(self, with_rows: bool = False) -> dict[str, Any]:
        data: dict[str, Any] = {
            "gpu": self.gpu, "model": self.model, "endpoint": self.endpoint, "listed": self.listed,
            "asked": self.asked, "llm_answers": self.llm_answers, "from_cache": self.from_cache,
            "static_fallbacks": self.static_fallbacks, "fallback_reasons": self.fallback_reasons,
            "final": self.final.to_json(), "llm_only": self.llm_only.to_json(), "static": self.static.to_json(),
            "by_language": {k: v.to_json() for k, v in self.by_language.items()},
            "overrides": self.overrides,
            "tokens_per_kernel": {
                "prompt": self.prompt_tokens.to_json(),
                "completion": self.completion_tokens.to_json(),
                "estimated_prompt": self.estimated_prompt_tokens.to_json(),
            },
        }
        if with_rows:
            data["rows"] = [r.to_json() for r in self.rows]
        return data


# ---------------------------------------------------------------------------------------------
# the evaluation


async def evaluate_llm(
    rows: Sequence[tuple[KernelRow, Answer]],
    src_root: Path,
    gpu: Gpu,
    advisor: Advisor,
    *,
    cost: CostModel | None = None,
    compile_db: CompileDatabase | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> LlmEvalResult:
    """Ask `advisor` about every located kernel of `rows` and score its verdicts.

    Analysis runs first (CPU, in a worker thread so the event loop stays free), then the
    questions go out together; the advisor's `max_concurrent` keeps at most that many requests in
    flight. `progress(done, total)` is called as answers arrive. The advisor is not closed.
    """
    analyzer = RowAnalyzer(src_root, gpu, cost, compile_db)

    def prepare() -> list[tuple[KernelRow, Answer, RowAnalysis, KernelQuestion | None, int | None]]:
        prepared = []
        for row, answer in rows:
            analysis = analyzer.analyze(row)
            question = analyzer.question(analysis) if analysis.report is not None else None
            estimated = None
            if question is not None:
                try:
                    estimated = advisor.renderer.render(question, few_shot=advisor.settings.few_shot).estimated_tokens
                except PromptTooLarge:
                    estimated = None
            prepared.append((row, answer, analysis, question, estimated))
        return prepared

    prepared = await asyncio.to_thread(prepare)
    asked = [item for item in prepared if item[3] is not None]
    done = 0

    async def ask(question: KernelQuestion) -> AdvisorResult:
        nonlocal done
        result = await advisor.ask(question)
        done += 1
        if progress is not None:
            progress(done, len(asked))
        return result

    answers = await asyncio.gather(*(ask(item[3]) for item in asked))  # type: ignore[arg-type]
    by_index = {id(item): result for item, result in zip(asked, answers)}

    outcomes: list[RowOutcome] = []
    for item in prepared:
        row, answer, analysis, _question, estimated = item
        static_verdict = analysis.report.estimates[0].verdict if analysis.report is not None else None
        result = by_index.get(id(item))
        if result is None:
            outcomes.append(RowOutcome(row, answer.label, static_verdict, None, None,
                                       reason=analysis.reason or "no question could be built"))
            continue
        verdict: str = result.verdict
        if result.source == "static" and static_verdict == "uncertain":
            verdict = "uncertain"  # the question's placeholder verdict is no answer: score it as none
        outcomes.append(RowOutcome(
            row, answer.label, static_verdict, verdict, result.source,
            fallback_reason=result.fallback_reason, prompt_tokens=result.prompt_tokens,
            completion_tokens=result.completion_tokens, estimated_prompt_tokens=estimated,
            from_cache=result.from_cache,
        ))
    provider = advisor.provider
    return summarize(outcomes, gpu.name, provider.model if provider else None,
                     provider.endpoint if provider else None)


def summarize(outcomes: Sequence[RowOutcome], gpu: str, model: str | None = None,
              endpoint: str | None = None) -> LlmEvalResult:
    """Scores, fallback counts and token figures of per-row outcomes."""

    def pairs(verdict_of: Callable[[RowOutcome], str | None], keep: Callable[[RowOutcome], bool] = lambda o: True
              ) -> list[tuple[Prediction, Answer]]:
        return [(Prediction(o.row, verdict_of(o)), Answer(o.label)) for o in outcomes if keep(o)]

    final = pairs(lambda o: o.verdict)
    by_language: dict[str, list[tuple[Prediction, Answer]]] = {}
    for pair in final:
        by_language.setdefault(pair[0].row.language, []).append(pair)
    llm_rows = [o for o in outcomes if o.source == "llm"]
    overrides = [o for o in llm_rows if o.static_verdict in ("compute", "bandwidth") and o.verdict != o.static_verdict]
    reasons = Counter(_short(o.fallback_reason or "unknown") for o in outcomes if o.source == "static")
    return LlmEvalResult(
        gpu=gpu, model=model, endpoint=endpoint,
        listed=len(outcomes),
        asked=sum(o.source is not None for o in outcomes),
        llm_answers=len(llm_rows),
        from_cache=sum(o.from_cache for o in llm_rows),
        static_fallbacks=sum(o.source == "static" for o in outcomes),
        fallback_reasons=dict(reasons.most_common()),
        final=score(final),
        llm_only=score(pairs(lambda o: o.verdict, lambda o: o.source == "llm")),
        static=score(pairs(lambda o: o.static_verdict)),
        by_language={k: score(v) for k, v in sorted(by_language.items())},
        overrides={"total": len(overrides), "right": sum(o.verdict == o.label for o in overrides),
                   "wrong": sum(o.verdict != o.label for o in overrides)},
        prompt_tokens=TokenStats.of([o.prompt_tokens for o in llm_rows]),
        completion_tokens=TokenStats.of([o.completion_tokens for o in llm_rows]),
        estimated_prompt_tokens=TokenStats.of([o.estimated_prompt_tokens or 0 for o in outcomes]),
        rows=list(outcomes),
    )


def _short(reason: str) -> str:
    """One bucket per kind of failure: figures and kernel names vary from row to row."""
    reason = re.sub(r"\bkernel \S+", "kernel K", " ".join(reason.split()))
    reason = re.sub(r"https?://\S+", "the endpoint", reason)  # the result names the endpoint once
    reason = re.sub(r"(?<!HTTP )\b\d+(?:\.\d+)?", "N", reason)  # keep status codes
    return reason if len(reason) <= MAX_REASON_CHARS else reason[: MAX_REASON_CHARS - 3] + "..."


def run_llm_eval(rows: Sequence[tuple[KernelRow, Answer]], src_root: Path, gpu: Gpu, advisor: Advisor,
                 **kwargs: Any) -> LlmEvalResult:
    """`evaluate_llm` from synchronous code (the CLI): runs its own event loop, closes the advisor."""

    async def main() -> LlmEvalResult:
        try:
            return await evaluate_llm(rows, src_root, gpu, advisor, **kwargs)
        finally:
            await advisor.aclose()

    return asyncio.run(main())
