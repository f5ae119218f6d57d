"""Per-document analysis with caching: recompute only what an edit can have changed.

Kernels and regions are analysed by the static engine one at a time; a result is reused while
its `analysis_key` (the kernel's normalised text, its launch sites, the GPUs, the options) is the
same *and* nothing outside kernel bodies changed since (the engine also reads host code, device
functions and file-level declarations: an edit there starts a new "context" and everything is
analysed again).

Lint findings are cached per group: a kernel with its launch sites, a device function, an
OpenMP region, an unresolved launch site. After an edit inside one kernel only that kernel's
group is linted again (with the device functions it calls, for typing); the other groups keep
their findings, their positions moved with the text. Fixes are not cached: code actions lint
the groups they need afresh, so every edit they offer is computed on the current text.

Runs in the document's worker thread; `step` analyses until a deadline so a large file can
publish its first diagnostics early.

Cost is bounded per file: one analysis run spends at most `ANALYSIS_BUDGET_S` in the engine
and the lints (`PERFLSP_ANALYSIS_BUDGET_S` overrides it); the kernels and regions after that
point are left out (`AnalysisState.unanalysed`, with the reason in `budget_note`) and not
linted, and the diagnostics say so. A file with more than `LINT_CHUNK` groups to lint is linted
in chunks of that many, so that the budget can stop it between chunks too. Reused results cost
nothing, so later edits fill in nothing new: the budget is a ceiling for pathological files (tens
of thousands of kernels), not a normal limit.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import logging
import operator
import os
import re
import time
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import chain, compress

from tree_sitter import Tree

from perflsp.analysis.models import Finding, KernelReport
from perflsp.analysis.options import AnalysisOptions
from perflsp.analysis.pipeline import FileAnalysis
from perflsp.hardware.models import Gpu
from perflsp.kernels.incremental import Extracted, move_spans
from perflsp.kernels.models import (
    CudaFunction,
    FileKernels,
    LaunchSite,
    OmpRegion,
    Span,
)
from perflsp.kernels.program import ProgramModel
from perflsp.kernels.symbols import TopLevelFacts
from perflsp.server import dependents
from perflsp.server import engine_adapter as engine
from perflsp.server.text import DocumentModel, TextState
from perflsp.source.positions import LineIndex, Position

Kernel = CudaFunction | OmpRegion
_FINDINGS = operator.attrgetter("findings")
Item = CudaFunction | OmpRegion | LaunchSite

log = logging.getLogger(__name__)


@dataclass
class _Anchor:
    item: Item  # the group item the span lay in when the finding was computed
    offset: int  # span start - item start at that time
    length: int
    # where the span starts and ends relative to the item's first line (lines below it, and the
    # column), when it does not start or end on that line: a reused item's text is unchanged, so
    # these positions move with the item's and need no line lookup
    start_at: tuple[int, int] | None = None
    end_at: tuple[int, int] | None = None


_LINE_NUMBER = re.compile(r"\bline \d+")


def _budget_from_env() -> float:
    try:
        return float(os.environ.get("PERFLSP_ANALYSIS_BUDGET_S", "") or 10.0)
    except ValueError:
        return 10.0


ANALYSIS_BUDGET_S = _budget_from_env()  # engine and lint time per file and analysis run
LINT_CHUNK = 2000  # groups linted per call in very large files (a normal file is linted in one call)
PRUNE_SLACK = 64  # cache entries of items gone that a run may leave before it sweeps them
LINT_STEP = 8  # groups linted between deadline checks when many are stale (a first analysis)


@dataclass
class _Group:
    items: tuple[Item, ...]
    findings: list[Finding]
    anchors: list[list[_Anchor | None]]  # per finding: main span, then each related span
    starts: tuple[int, ...]  # item starts when computed
    item_lines: tuple[int, ...] = ()  # item lines when computed (messages may quote them)
    # its findings lie in or name a definition held while it does not parse (kernels/incremental.py):
    # their spans were moved with each edit (`Analyzer._hold_findings`), not placed by their anchors
    pinned: bool = False
    carried: bool = False  # carried over a full extraction: its findings wait to be placed (`_moved`)

    @functools.cached_property
    def quotes_lines(self) -> bool:
        return any(_LINE_NUMBER.search(f.message) or any(_LINE_NUMBER.search(m) for _, m in f.related)
                   for f in self.findings)


@dataclass
class AnalysisState:
    """What one analysis run produced (immutable once `complete`)."""

    context: int
    reports: dict[int, KernelReport] = field(default_factory=dict)  # id(kernel or region) -> report
    findings: list[Finding] = field(default_factory=list)
    complete: bool = False
    lint_notes: list[str] = field(default_factory=list)
    unanalysed: tuple[Item, ...] = ()  # kernels and regions left out when the file's budget ran out
    budget_note: str | None = None  # why they were left out

    def report_for(self, item: Item) -> KernelReport | None:
        return self.reports.get(id(item))


@dataclass(slots=True)
class _Job:
    """The inputs of one analysis run (one document version in one configuration)."""

    data: bytes
    tree: Tree | None  # None for a run that reuses the last one whole (it reads no tree)
    fk: FileKernels
    gpus: tuple[Gpu, ...]
    opts: AnalysisOptions
    lines: LineIndex
    lint_codes: frozenset[str] | None
    analysis: FileAnalysis | None
    launches_by_kernel: dict[str, list[LaunchSite]] = field(default_factory=dict)

    source: TextState | None = None  # the document's text: its `tree` is read (and parsed, if need be) on first use
    top: TopLevelFacts | None = None  # the extraction's top-level facts (kept over edits inside bodies)
    document: DocumentModel | None = None  # the version's program model (the document's, `TextState.model`)

    def engine(self) -> FileAnalysis:
        if self.analysis is None:  # the program model is built when the first kernel needs it
            model = self.document.model if self.document is not None else None
            self.analysis = FileAnalysis(self.data, self.syntax(), self.fk, self.opts, self.lines, model=model,
                                         top=self.top)
        return self.analysis

    def syntax(self) -> Tree:
        if self.tree is None:
            assert self.source is not None, "a run that reads no tree was asked for one"
            self.tree = self.source.tree
        return self.tree


class Analyzer:
    """Caches of one document (worker thread only)."""

    def __init__(self) -> None:
        self.context = 0
        self._config_key: object = None
        # id(item) -> (item, launch ids, key, its report)
        self._keys: dict[int, tuple[Item, tuple[int, ...], str, KernelReport | None]] = {}
        self._reports: dict[tuple[int, str], KernelReport] = {}
        self._groups: dict[tuple[int, ...], _Group] = {}
        # (key, group) of the cached groups that have findings (most of a large file's have none;
        # per keystroke the findings are moved and shown): None when `_groups` changed since
        self._finding_groups: list[tuple[tuple[int, ...], _Group]] | None = None
        self._carried = False  # some cached groups were carried over a full extraction (`_carried_groups`)
        self._lint_facts = engine.LintFacts()  # file-level lint facts, valid within one context
        self._pending: deque[Kernel] = deque()  # kernels and regions still to analyse in this run
        self._state: AnalysisState | None = None
        self._job: _Job | None = None
        self.analysed = 0  # engine runs (for tests and logs)
        self.linted_groups = 0
        self.budget_s = ANALYSIS_BUDGET_S
        self._spent = 0.0  # engine and lint time of the current run
        self._cancelled = False
        self._last: tuple[Extracted, AnalysisState] | None = None  # the last complete run and its extraction
        self._fast = False  # this run reuses the last complete one whole (a held edit)
        self.reused_from: Extracted | None = None  # then: the extraction that run was on
        self.changed_results = False  # this run computed a report or linted a group (else it reused all)
        self._run_on: Extracted | None = None  # the extraction of the run started last
        # this run's lint work, decided once: (every group, the groups by identity, the stale
        # ones, how many of those are linted), while it goes on in steps
        self._edited_items: set[int] = set()  # this run's kernels in the edited definition (analysed first)
        self._lint_plan: tuple[list[tuple[Item, ...]], dict[tuple[int, ...], tuple[Item, ...]],
                               list[tuple[Item, ...]], int] | None = None
        # ids of kernels and regions an edit outside kernel bodies can have changed (dependents.py):
        # analysed and linted again even though their own text and launch sites are the same
        self._reanalyse: set[int] = set()
        self._relint: set[int] = set()
        self._seen: Extracted | None = None  # the extraction whose dependents were marked
        # the last text, its kernels, and the text's count of span moves then (`TextState.span_moves`):
        # a full extraction compares with it, while the kernels' spans still index that text
        self._previous: tuple[bytes, FileKernels, int | None] | None = None

    # ------------------------------------------------------------------ run

    def start(self, text: TextState, extracted: Extracted, gpus: Sequence[Gpu], lint_codes: Iterable[str] | None,
              config_key: object, lines: LineIndex, argv: Sequence[str] | None = None) -> AnalysisState:
        """Begin analysing the current text; call `step` until the state is complete."""
        previous = self._previous
        moves = text.span_moves
        self._previous = (text.data, extracted.kernels, moves)
        # the same extraction analysed again: settings, registers or the program's arguments changed
        restart = extracted is self._seen
        # (the last kernels' extents are read only now, for a full extraction, which leaves the
        # old items where they were: valid when no update moved their spans since, per keystroke
        # not a walk over every kernel)
        same_outside = not restart and extracted.change == "full" and config_key == self._config_key \
            and previous is not None and moves is not None and previous[2] == moves \
            and _outside_kernels(previous[0], [_extent(k) for k in previous[1].kernels]) \
            == _outside_kernels(text.data, [_extent(k) for k in extracted.kernels.kernels])
        if same_outside and previous is not None:
            # a full extraction (tree-sitter's error recovery spread past the edited kernel) of a
            # text that differs from the last one only inside kernels: results carry over by key,
            # lint findings by the unchanged text of their items (they still index that text)
            self._groups = _carried_groups(self._groups, previous[0], text.data, extracted.kernels)
            self._finding_groups = None
            self._carried = bool(self._groups)  # their findings wait to be placed (`_merged`)
        elif restart or config_key != self._config_key or extracted.change in ("full", "other"):
            self.context += 1
            self._config_key = config_key
            self._keys.clear()
            self._reports.clear()
            self._groups.clear()
            self._finding_groups = None
            self._lint_facts.clear()
            self._reanalyse.clear()
            self._relint.clear()
        elif extracted.change in ("host", "device") and extracted is not self._seen:
            self._lint_facts.clear()  # (file-level facts: an edit outside kernels can change them)
            marked = dependents.affected(text.model(argv).model, extracted)
            self._reanalyse |= marked
            self._relint |= marked
        moved = extracted is not self._seen and extracted.region is not None and extracted.change != "full"
        if moved:
            self._move_findings(extracted)
        # a held edit changes no analysis: the last complete run, on the extraction just before
        # this one, is the answer (its findings and the items' spans moved with the text)
        last = self._last
        previous_extraction = self._seen
        self._fast = moved and extracted.change == "held" and last is not None and last[0] is previous_extraction
        # a held edit during an unfinished run (a large file's first analysis): the run goes on
        # where it was, on the same items (their spans moved), nothing done is done again
        carry = moved and extracted.change == "held" and not self._fast and self.running \
            and self._run_on is previous_extraction
        self.reused_from = previous_extraction if self._fast or carry else None
        self.changed_results = False
        previous_run = self._state if self._run_on is previous_extraction else None
        self._seen = extracted
        self._run_on = extracted
        fk = extracted.kernels
        opts = engine.options(text.preprocessed, text.registers, argv, text.compiled)
        # kernels of a file that other sources `#include` take their launch sites
        opts = engine.with_includer_launches(opts, text, fk)
        # the tree is read when a kernel is analysed or linted (reading it may parse: a held edit
        # needs none), the program model when the engine first runs
        self._job = _Job(text.data, None, fk, tuple(gpus), opts, lines,
                         None if lint_codes is None else frozenset(lint_codes), None,
                         launches_by_kernel=_launches_by_kernel(fk), source=text, top=extracted.top,
                         document=text.model(argv))
        if carry:
            assert self._state is not None
            return self._state
        self._spent = 0.0
        if self._fast and last is not None:
            before = last[1]
            self._state = AnalysisState(self.context, dict(before.reports), list(before.findings), False,
                                        list(before.lint_notes), before.unanalysed, before.budget_note)
            self._pending = deque()
            self._lints_done = True
            return self._state
        self._lint_plan = None
        self._state = AnalysisState(self.context)
        items: list[Kernel] = [*fk.kernels, *fk.omp_regions]
        if last is not None and last[0] is previous_extraction and last[1].context == self.context \
                and previous_extraction is not None:
            # an edit after a complete run: the items it did not replace are the same objects, and
            # their reports stand unless their launch sites changed or the edit affects them
            # (`_reanalyse`); only the others are pending (not a walk over every kernel per edit)
            items = self._carry_reports(self._state, items, last[1].reports, previous_extraction.kernels, fk)
        elif previous_run is not None and previous_run.context == self.context and previous_extraction is not None:
            # an edit while the last run was unfinished (typing, its rest waiting for a pause):
            # what it finished carries over the same way, the rest stays pending
            items = self._carry_reports(self._state, items, previous_run.reports, previous_extraction.kernels, fk)
        self._edited_items = set()
        if extracted.edited is not None and items:  # what the user is typing in first
            a, b = extracted.edited
            self._edited_items = {id(i) for i in items if a <= i.span.start_byte < b}
            if len(items) > 1:
                items.sort(key=lambda item: id(item) not in self._edited_items)
        self._pending = deque(items)
        self._lints_done = False
        return self._state

    def _carry_reports(self, state: AnalysisState, items: list[Kernel], reports: dict[int, KernelReport],
                       old_fk: FileKernels, fk: FileKernels) -> list[Kernel]:
        """Put the last run's reports of unchanged items into `state`; the items left to analyse."""
        relaunched: set[str | None] = set()
        if old_fk.launches is not fk.launches:
            old_ids = {id(s) for s in old_fk.launches}
            new_ids = {id(s) for s in fk.launches}
            relaunched = {s.kernel for s in old_fk.launches if id(s) not in new_ids}
            relaunched |= {s.kernel for s in fk.launches if id(s) not in old_ids}
        # (set operations in C over the ~1,000 items of a large file, run per keystroke: a
        # Python pass only over the few items left to analyse)
        position = dict(zip(map(id, items), range(len(items))))
        carried = dict(reports)
        for key in carried.keys() - position.keys():
            del carried[key]
        for key in self._reanalyse & carried.keys():
            del carried[key]
        if relaunched:
            for item in items:
                if isinstance(item, CudaFunction) and item.qualified_name in relaunched:
                    carried.pop(id(item), None)
        state.reports.update(carried)
        return [items[position[key]] for key in sorted(position.keys() - carried.keys(), key=position.__getitem__)]

    def partial_view(self, state: AnalysisState) -> AnalysisState:
        """What an unfinished run knows: its reports, and for the kernels it has not reached yet
        their last report (the same item: unchanged text); the findings of the groups linted so
        far, in this run or before (moved with the text). Published while the run goes on."""
        job = self._job
        if job is None or state.complete:
            return state
        reports = dict(state.reports)
        if len(reports) < len(job.fk.kernels) + len(job.fk.omp_regions):  # (typing: every item has its report)
            for item in (*job.fk.kernels, *job.fk.omp_regions):
                if id(item) not in reports:
                    cached = self._keys.get(id(item))
                    if cached is not None and cached[0] is item and cached[3] is not None:
                        reports[id(item)] = cached[3]
        live: set[int] | None = None  # the ids of the items, when a group with findings asks
        edited = self._seen.edited if self._seen is not None else None
        findings = []
        for key, group in self._with_findings():
            if group.carried:
                continue
            if live is None:
                live = set(map(id, chain(job.fk.kernels, job.fk.device_functions, job.fk.omp_regions,
                                         job.fk.launches)))
            if all(i in live for i in key):
                findings.extend(group.findings)
            elif edited is not None:
                # the last findings of the definition being edited (its items were replaced; their
                # findings moved with the text): shown until it is linted again, not dropped and
                # shown again at each pause
                findings.extend(f for f in group.findings if edited[0] <= f.span.start_byte < edited[1])
        findings.sort(key=_FINDING_ORDER)
        return AnalysisState(state.context, reports, findings, False, list(state.lint_notes), state.unanalysed,
                             state.budget_note)

    def _with_findings(self) -> list[tuple[tuple[int, ...], _Group]]:
        """The cached groups that have findings, with their keys (kept until `_groups` changes)."""
        if self._finding_groups is None:
            groups = self._groups
            self._finding_groups = list(compress(groups.items(), map(_FINDINGS, groups.values())))
        return self._finding_groups

    def _move_findings(self, extracted: Extracted) -> None:
        """Move the cached findings over the edit, as the extraction moved the items' spans
        (positions kept where their line and column stand, so their diagnostics are reused).
        A held definition's groups are pinned: their items did not move with their text."""
        assert extracted.region is not None
        held = extracted.held
        spans: list[Span] = []  # (a span listed twice moves once: `move_spans`)
        for _, group in self._with_findings():
            for finding in group.findings:
                spans.append(finding.span)
                spans.extend(related for related, _ in finding.related)
            if held is not None and any(held[0] <= _extent(i)[0] and _extent(i)[1] <= held[1] for i in group.items):
                group.pinned = True
        move_spans(spans, extracted.region, *extracted.region_lines)

    def step(self, deadline: float | None = None, edit_first: bool = False) -> AnalysisState:
        """Analyse until `deadline` (then return the state, not complete). With `edit_first`
        (an edit's first step), only the edited kernels and cached results: it returns before
        the first other kernel that needs the engine, and before linting many groups."""
        state = self._state
        assert state is not None
        job = self._job
        assert job is not None
        by_kernel = job.launches_by_kernel
        progressed = False
        pending, keys, reports, context = self._pending, self._keys, self._reports, self.context
        while pending:
            if self._cancelled:
                return state  # the document was closed: never complete
            item = pending[0]
            launches = by_kernel.get(item.qualified_name, []) if isinstance(item, CudaFunction) else []
            launch_ids = tuple(map(id, launches))
            cached = keys.get(id(item))
            forced = id(item) in self._reanalyse
            if cached is not None and cached[0] is item and cached[1] == launch_ids and not forced \
                    and cached[3] is not None and (context, cached[2]) in reports:
                # unchanged (most kernels after an edit): its report, made for this item, stands
                state.reports[id(item)] = cached[3]
                pending.popleft()
                progressed = True
                if deadline is not None and not edit_first and time.monotonic() > deadline and pending:
                    return state
                continue
            if cached is not None and cached[0] is item and cached[1] == launch_ids and not forced:
                key, report = cached[2], cached[3]
                if report is not None and self._reports.get((self.context, key)) is None:
                    report = None
            else:
                key, report = engine.analysis_key(item, launches, job.gpus, job.opts), None
            if report is None:
                # identical kernels share one analysis (not one whose host code changed)
                shared = None if forced else self._reports.get((self.context, key))
                if shared is None:
                    if self._spent > self.budget_s:
                        self._over_budget(state)
                        break
                    if id(item) not in self._edited_items and (edit_first or (
                            progressed and deadline is not None and time.monotonic() > deadline)):
                        return state  # no new analysis in this step but the edited kernels'
                    began = time.monotonic()
                    shared = job.engine().report(item, job.gpus)
                    self.changed_results = True
                    self._spent += time.monotonic() - began
                    self.analysed += 1
                    self._reports[(self.context, key)] = shared
                    self._reanalyse.discard(id(item))
                report = shared
                if report.kernel is not item or [id(s) for s in report.launches] != list(launch_ids):
                    report = dataclasses.replace(report, kernel=item, launches=list(launches))
            self._keys[id(item)] = (item, launch_ids, key, report)
            state.reports[id(item)] = report
            self._pending.popleft()
            progressed = True
            # (an edit's first step goes on through reused results: all its verdicts are in the
            # publication that follows it; only the lints wait for a pause)
            if deadline is not None and not edit_first and time.monotonic() > deadline and self._pending:
                return state
        if not self._lints_done:
            if edit_first:
                # an edit's verdicts are published at once, its lint findings once the user pauses
                # (`DocumentWorker._deferred`): the lint plan walks every group of the file, and a
                # launched kernel's group spans its launch sites; until then the edited
                # definition keeps its last findings (`partial_view`)
                return state
            findings = self._lint(state, deadline)
            if findings is None:
                return state  # past the deadline: the next step lints the rest
            state.findings = findings
            self._lints_done = True
        if not self._fast:
            self._prune(state)
        self._last = (self._seen, state) if self._seen is not None else None
        state.complete = True
        self.release()
        return state

    def _over_budget(self, state: AnalysisState) -> None:
        left = list(self._pending)
        self._pending = deque()
        state.unanalysed = tuple(left)
        first = min(left, key=_start)
        state.budget_note = (
            f"perflsp: the analysis budget of {self.budget_s:g} s for one file was spent after "
            f"{len(state.reports)} kernel(s): {len(left)} more (from line {getattr(first, 'name_span', first.span).line} on) "
            f"are not analysed")

    @property
    def running(self) -> bool:
        """A run is started and not complete (`step` goes on with it)."""
        return self._state is not None and not self._state.complete

    def cancel(self) -> None:
        """Stop the run in progress at its next kernel (the document was closed)."""
        self._cancelled = True

    def release(self) -> None:
        """Forget the finished run's inputs (text, tree): only caches stay."""
        self._job = None
        self._state = None

    def _prune(self, state: AnalysisState) -> None:
        job = self._job
        assert job is not None
        fk = job.fk
        # the caches are swept when the entries of items gone outnumber PRUNE_SLACK (a sweep walks
        # every kernel: not on each keystroke; the entries left meanwhile keep their items alive)
        count = len(fk.kernels) + len(fk.omp_regions)
        if len(self._keys) > count + PRUNE_SLACK or len(self._reports) > count + PRUNE_SLACK:
            live = {id(x) for x in (*fk.kernels, *fk.omp_regions)}
            self._keys = {k: v for k, v in self._keys.items() if k in live}
            self._reanalyse &= live
            wanted = {(self.context, v[2]) for v in self._keys.values()}
            self._reports = {k: v for k, v in self._reports.items() if k in wanted}
        if job.analysis is not None:
            job.analysis.release()  # the model holds the whole text's helper structures

    # ------------------------------------------------------------------ lints

    def _lint(self, state: AnalysisState, deadline: float | None = None) -> list[Finding] | None:
        """The findings of every group (reused, or linted now); None when a deadline passed
        before every stale group was linted (those linted are kept: the next call goes on)."""
        job = self._job
        assert job is not None
        fk = job.fk
        relint = self._relint
        if self._lint_plan is None:
            groups = every = _groups_of(fk)
            if state.unanalysed:  # over budget: the left-out kernels are not linted either
                skip = {id(i) for i in state.unanalysed}
                groups = [g for g in every if not any(id(i) in skip for i in g)]
            identity = {tuple(map(id, g)): g for g in groups}
            cached = self._groups
            # (a cached group under the same key holds these very items: the cache keeps them alive,
            # so their ids cannot have been reused; only its findings' quoted lines can be stale)
            stale = [g for k, g in identity.items()
                     if (c := cached.get(k)) is None or (c.findings and not self._reusable(c, g))
                     or (relint and any(i in relint for i in k))]
            self._lint_plan = (every, identity, stale, 0)
        every, identity, stale, first = self._lint_plan
        fresh_groups: dict[tuple[int, ...], _Group] = {}
        unlinted: set[tuple[int, ...]] = set()
        if deadline is not None and LINT_STEP < len(stale) <= LINT_CHUNK:
            # many groups (a document's first analysis): in steps, so that an edit waits for one
            # step, not for the whole file; each step's groups are cached as it ends
            for index in range(first, len(stale), LINT_STEP):
                chunk = stale[index:index + LINT_STEP]
                chunk_groups = self._lint_now(state, chunk)
                self._groups.update(chunk_groups)
                self._finding_groups = None
                if relint:
                    done = {i for k in chunk_groups for i in k}
                    relint = self._relint = {i for i in relint if i not in done}
                if index + LINT_STEP < len(stale) and (time.monotonic() > deadline or self._cancelled):
                    self._lint_plan = (every, identity, stale, index + LINT_STEP)
                    return None
            stale = []
        if stale and len(stale) <= LINT_CHUNK:
            fresh_groups = self._lint_now(state, stale, whole=len(stale) == len(every))
        elif stale:  # a very large file: in chunks, within the budget
            for index in range(0, len(stale), LINT_CHUNK):
                chunk = stale[index:index + LINT_CHUNK]
                if self._spent > self.budget_s or self._cancelled:
                    unlinted.update(tuple(id(i) for i in g) for g in stale[index:])
                    break
                fresh_groups.update(self._lint_now(state, chunk))
            if unlinted:
                note = (f"perflsp: the analysis budget of {self.budget_s:g} s for one file was spent: "
                        f"{len(unlinted)} of {len(every)} kernels, functions and launch sites were not linted")
                state.lint_notes.append(note)
                state.budget_note = state.budget_note or note
        self._groups = self._merged(identity, fresh_groups, unlinted)
        self._finding_groups = None
        out = [f for group in self._groups.values() if group.findings for f in group.findings]
        if relint:
            linted = {i for k in fresh_groups for i in k}
            self._relint = {i for i in relint if i not in linted}
        out.sort(key=_FINDING_ORDER)
        return out

    def _merged(self, identity: dict[tuple[int, ...], tuple[Item, ...]], fresh: dict[tuple[int, ...], _Group],
                unlinted: set[tuple[int, ...]]) -> dict[tuple[int, ...], _Group]:
        """The group cache for the groups `identity` names: the fresh ones, else the cached ones
        (placed, when a full extraction carried them over). An edit replaces a few groups of
        thousands: the cache is updated in place then (set operations on its keys, not a walk)."""
        cached = self._groups
        if not unlinted and not any(g.carried for g in fresh.values()) and not self._carried:
            for k in cached.keys() - identity.keys():
                del cached[k]
            cached.update(fresh)
            for k in identity.keys() - cached.keys():
                items = identity[k]
                cached[k] = _Group(items, [], [], tuple(_start(i) for i in items))
            return cached
        new_cache: dict[tuple[int, ...], _Group] = {}
        for k, items in identity.items():
            if k in unlinted:
                continue  # not linted: not cached either (linted when the budget allows)
            group = fresh.get(k) or cached.get(k)
            if group is None:
                group = _Group(items, [], [], tuple(_start(i) for i in items))
            elif group.carried:
                group = _moved(group)
            new_cache[k] = group
        self._carried = False
        return new_cache

    def _lint_now(self, state: AnalysisState, groups: list[tuple[Item, ...]], whole: bool = False
                  ) -> dict[tuple[int, ...], _Group]:
        """Lint `groups` (`whole`: they are every group of the file) and cache nothing yet: their
        findings by group. The time counts against the file's budget."""
        job = self._job
        assert job is not None
        subject = job.fk if whole else _restricted(job.fk, groups, job.data)
        began = time.monotonic()
        model = _document_model(job.document)  # the one its analysis reads
        findings = engine.run_lints(job.data, job.syntax(), subject, job.gpus, job.lint_codes, state.lint_notes,
                                    lines=job.lines, shared=self._lint_facts, model=model)
        self._spent += time.monotonic() - began
        self.linted_groups += len(groups)
        self.changed_results = True
        return _assign(findings, groups, job.lines)

    def _reusable(self, cached: _Group | None, items: tuple[Item, ...]) -> bool:
        if cached is None or len(cached.items) != len(items) or not all(map(operator.is_, cached.items, items)):
            return False
        if not cached.findings:
            return True
        # a message that names a line which moved is built again
        return not (cached.quotes_lines and tuple(i.span.start.line for i in items) != cached.item_lines)

def _document_model(document: DocumentModel | None) -> ProgramModel | None:
    """The version's program model for its lints; None (they read the file's own macros) when
    there is none or it cannot be built (its analysis reports that failure, once per kernel)."""
    if document is None:
        return None
    try:
        return document.model
    except Exception as exc:  # noqa: BLE001 - the analysis names the failure; the lints go on without the model
        log.warning("the program model could not be built for the lints: %s: %s", type(exc).__name__, exc)
        return None


def lint_fresh(data: bytes, tree: Tree, fk: FileKernels, gpus: Sequence[Gpu], lint_codes: Iterable[str] | None,
               items: Sequence[Item], model: ProgramModel | None = None) -> list[Finding]:
    """Findings for the groups of `items`, computed on this text (code actions).

    Only those groups are linted; the findings carry fix requests, which the code action builds
    and validates against the whole file (`fixes.build_fixes` with the file's extraction)."""
    if not items:
        return []
    wanted = {id(i) for i in items}
    groups = [g for g in _groups_of(fk) if any(id(i) in wanted for i in g)]
    if not groups:
        return []
    codes = None if lint_codes is None else frozenset(lint_codes)
    extents = [_extent(i) for g in groups for i in g]
    return [f for f in engine.run_lints(data, tree, _restricted(fk, groups, data), gpus, codes, model=model)
            if any(s <= f.span.start_byte <= e for s, e in extents)]


# --------------------------------------------------------------------------- groups


def _launches_by_kernel(fk: FileKernels) -> dict[str, list[LaunchSite]]:
    out: dict[str, list[LaunchSite]] = {}
    for site in fk.launches:
        if site.kernel is not None:
            out.setdefault(site.kernel, []).append(site)
    return out


def _groups_of(fk: FileKernels) -> list[tuple[Item, ...]]:
    groups: list[tuple[Item, ...]] = []
    by_kernel: dict[str, list[LaunchSite]] = {}
    unresolved: list[LaunchSite] = []
    for site in fk.launches:
        if site.kernel is None:
            unresolved.append(site)
        else:
            by_kernel.setdefault(site.kernel, []).append(site)
    seen_names: set[str] = set()
    for kernel in fk.kernels:
        sites = by_kernel.get(kernel.qualified_name, []) if kernel.qualified_name not in seen_names else []
        seen_names.add(kernel.qualified_name)
        groups.append((kernel, *sites))
    for name, sites in by_kernel.items():
        if name not in seen_names:  # launches of a kernel that is gone: lint them alone
            groups.extend((s,) for s in sites)
    groups.extend((fn,) for fn in fk.device_functions)
    groups.extend((r,) for r in fk.omp_regions)
    groups.extend((s,) for s in unresolved)
    return groups


_FINDING_ORDER = operator.attrgetter("span.start_byte", "span.end_byte", "code")
_CALL = re.compile(rb"([A-Za-z_]\w*)\s*(?:<[^<>;{}]*>)?\s*\(")


def _restricted(fk: FileKernels, groups: Sequence[tuple[Item, ...]], data: bytes) -> FileKernels:
    """The items of `groups`, plus the device functions their code calls (for typing calls)."""
    kernels: list[CudaFunction] = []
    device: list[CudaFunction] = []
    regions: list[OmpRegion] = []
    launches: list[LaunchSite] = []
    for group in groups:
        for item in group:
            if isinstance(item, LaunchSite):
                launches.append(item)
            elif isinstance(item, OmpRegion):
                regions.append(item)
            elif item.space == "global":
                kernels.append(item)
            else:
                device.append(item)
    by_name: dict[str, list[CudaFunction]] = {}
    for fn in fk.device_functions:
        by_name.setdefault(fn.name, []).append(fn)
    chosen = {id(d) for d in device}
    todo: list[Kernel] = [*kernels, *device, *regions]
    while todo:  # calls, transitively
        caller = todo.pop()
        start, end = _extent(caller)
        for m in _CALL.finditer(data, start, end):
            for fn in by_name.get(m.group(1).decode("ascii", "replace"), ()):
                if id(fn) not in chosen:
                    chosen.add(id(fn))
                    device.append(fn)
                    todo.append(fn)
    device.sort(key=lambda f: f.span.start_byte)
    return FileKernels(path=fk.path, kernels=kernels, device_functions=device, omp_regions=regions,
                       launches=sorted(launches, key=lambda s: s.span.start_byte), has_errors=fk.has_errors)


def _outside_kernels(data: bytes, extents: list[tuple[int, int]]) -> bytes:
    """The text with every kernel cut out (what the analysis reads besides the kernels)."""
    parts, at = [], 0
    for start, end in sorted(extents):
        if start >= at:
            parts.append(data[at:start])
            at = end
    parts.append(data[at:])
    return b"\x00".join(parts)


def _carried_groups(groups: dict[tuple[int, ...], _Group], old_data: bytes, data: bytes,
                    fk: FileKernels) -> dict[tuple[int, ...], _Group]:
    """The lint groups of a new extraction whose items have the same text as a group of the
    last one, with that group's findings (anchored to the new items; `_moved` places them)."""
    def texts(source: bytes, items: tuple[Item, ...]) -> tuple[bytes, ...]:
        return tuple(source[slice(*_extent(i))] for i in items)

    by_text = {texts(old_data, g.items): g for g in groups.values()}
    out: dict[tuple[int, ...], _Group] = {}
    for items in _groups_of(fk):
        old = by_text.get(texts(data, items))
        if old is None:
            continue
        renamed = {id(a): b for a, b in zip(old.items, items)}
        anchors = [[None if a is None else dataclasses.replace(a, item=renamed.get(id(a.item), a.item)) for a in spans]
                   for spans in old.anchors]
        if any(a is not None and id(a.item) not in {id(i) for i in items} for spans in anchors for a in spans):
            continue
        out[tuple(id(i) for i in items)] = _Group(items, old.findings, anchors, old.starts, old.item_lines,
                                                  carried=True)
    return out


def _extent(item: Item) -> tuple[int, int]:
    if isinstance(item, OmpRegion):
        return item.span.start_byte, max(item.span.end_byte, item.body_span.end_byte if item.body_span else 0)
    return item.span.start_byte, item.span.end_byte


def _start(item: Item) -> int:
    return item.span.start_byte


def _assign(findings: list[Finding], groups: Sequence[tuple[Item, ...]], lines: LineIndex) -> dict[tuple[int, ...], _Group]:
    """Give each finding to the group whose innermost item contains its span."""
    entries: list[tuple[int, int, int, Item, tuple[int, ...]]] = []  # start, -end, order, item, group key
    for group in groups:
        key = tuple(id(i) for i in group)
        for item in group:
            start, end = _extent(item)
            entries.append((start, -end, len(entries), item, key))
    entries.sort(key=lambda e: (e[0], e[1], e[2]))
    starts = [e[0] for e in entries]
    out = {tuple(id(i) for i in g): _Group(g, [], [], tuple(_start(i) for i in g), tuple(i.span.start.line for i in g))
           for g in groups}

    def innermost(offset: int) -> tuple[Item, tuple[int, ...]] | None:
        best: tuple[Item, tuple[int, ...]] | None = None
        best_size = None
        for index in range(bisect.bisect_right(starts, offset) - 1, -1, -1):
            start, neg_end, _, item, key = entries[index]
            if offset <= -neg_end and (best_size is None or -neg_end - start < best_size):
                best, best_size = (item, key), -neg_end - start
        return best

    for finding in findings:
        hit = innermost(finding.span.start_byte)
        if hit is None:
            continue
        _, key = hit
        target = out[key]
        anchors: list[_Anchor | None] = [_anchor_in(target.items, finding.span)]
        anchors += [_anchor_in(target.items, span) for span, _ in finding.related]
        target.findings.append(_rebound(finding, lines))
        target.anchors.append(anchors)
    return out


def _anchor_in(items: tuple[Item, ...], span: Span) -> _Anchor | None:
    for item in sorted(items, key=lambda i: _extent(i)[1] - _extent(i)[0]):
        start, end = _extent(item)
        if start <= span.start_byte and span.end_byte <= end:
            first = item.span.start.line
            return _Anchor(item, span.start_byte - item.span.start_byte, span.end_byte - span.start_byte,
                           _below(span.start, first), _below(span.end, first))
    return None


def _below(position: Position, first_line: int) -> tuple[int, int] | None:
    lines = position.line - first_line
    return (lines, position.character) if lines > 0 else None


def _rebound(finding: Finding, lines: LineIndex) -> Finding:
    """The finding with its spans on the document's line index and without fixes (fixes carry
    byte offsets that other edits would invalidate; code actions recompute them)."""
    return dataclasses.replace(
        finding,
        span=Span(finding.span.start_byte, finding.span.end_byte, lines=lines),
        related=tuple((Span(s.start_byte, s.end_byte, lines=lines), m) for s, m in finding.related),
        fixes=(),
    )


def _moved(group: _Group) -> _Group:
    """Place a reused group's findings where their anchors put them when its items moved without
    their findings (a full extraction carried the group over: `_carried_groups`). Edits that
    keep the items move the findings with them (`Analyzer._move_findings`)."""
    if not group.carried:
        return group
    starts = tuple(_start(i) for i in group.items)
    if not group.findings or group.pinned or starts == group.starts:
        return dataclasses.replace(group, carried=False)
    findings: list[Finding] = []
    anchors: list[list[_Anchor | None]] = []
    for finding, spans in zip(group.findings, group.anchors):
        main = spans[0]
        if main is None:
            continue  # cannot follow the text: dropped until the group is linted again
        _place(main, finding.span)
        for anchor, (span, _) in zip(spans[1:], finding.related):
            _place(anchor, span)
        findings.append(finding)
        anchors.append(spans)
    return _Group(group.items, findings, anchors, starts, group.item_lines)


def _place(anchor: _Anchor | None, span: Span) -> None:
    """Put `span` where its anchor's item now puts it (positions are recomputed on demand)."""
    if anchor is None:
        return
    item_span = anchor.item.span
    start = item_span.start_byte + anchor.offset
    span.start_byte, span.end_byte = start, start + anchor.length
    span._start = span._end = None
    if anchor.start_at is not None:
        line = item_span.start.line
        span._start = Position(line + anchor.start_at[0], anchor.start_at[1])
        if anchor.end_at is not None:
            span._end = Position(line + anchor.end_at[0], anchor.end_at[1])
