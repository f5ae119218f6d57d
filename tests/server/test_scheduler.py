"""The document worker in-process, with a stand-in for the language server (its plumbing only:
configuration, publishing); the analysis is the real one."""

import asyncio
from pathlib import Path

import pytest

from perflsp.analysis.reader import ReadContext
from perflsp.kernels.includes import IncludeResolver
from perflsp.server.config import defaults
from perflsp.server.oneshot import analyse_text, diagnostic_keys
from perflsp.server.scheduler import DocumentWorker
from perflsp.server.text import Change
from perflsp.source.positions import Position

ROOT = Path(__file__).resolve().parents[2]
SAXPY = ROOT / "examples" / "cuda" / "saxpy.cu"
pytestmark = pytest.mark.asyncio


class Host:
    def __init__(self, fail: bool = False):
        self.config = defaults()
        self.published: list[tuple[int | None, list]] = []
        self.fail = fail
        self.idle: list[str] = []

    def config_for(self, uri):
        return self.config

    def document_enabled(self, uri, config):
        return True

    def path_for(self, uri):
        if self.fail:
            raise RuntimeError("broken host")
        return None

    def reading_for(self, uri):
        return ReadContext(IncludeResolver())

    def lint_codes(self, config):
        return None

    def publish(self, uri, version, diagnostics, as_json=None):
        self.published.append((version, as_json if as_json is not None else diagnostics))

    def document_idle(self, worker):
        self.idle.append(worker.uri)


async def test_edits_during_an_analysis_are_coalesced_and_stale_results_dropped():
    host = Host()
    text = SAXPY.read_text()
    worker = DocumentWorker(host, "file:///saxpy.cu", text, 1)
    worker._kick()
    for version in range(2, 12):  # arrive while version 1 is analysed
        worker.change(version, [Change("// x\n", Position(0, 0), Position(0, 0))])
    snap = await asyncio.wait_for(worker.current(), 30)
    assert snap.version == 11
    versions = [v for v, _ in host.published]
    assert versions == sorted(versions) and versions[-1] == 11 and len(versions) < 11
    expected = analyse_text("// x\n" * 10 + text, "file:///saxpy.cu", host.config)
    assert diagnostic_keys(host.published[-1][1]) == diagnostic_keys(expected.diagnostics)


async def test_a_failing_analysis_does_not_hang_requests():
    host = Host(fail=True)
    worker = DocumentWorker(host, "file:///saxpy.cu", SAXPY.read_text(), 1)
    worker._kick()
    assert await asyncio.wait_for(worker.current(), 10) is None
    worker.close()


async def test_hibernated_documents_wake_up_on_edit():
    host = Host()
    worker = DocumentWorker(host, "file:///saxpy.cu", SAXPY.read_text(), 1)
    worker._kick()
    first = await asyncio.wait_for(worker.current(), 30)
    assert worker.hibernate() and worker.state.doc.tree is None and first._tree is None
    assert first.tree.root_node.type == "translation_unit"  # parsed again on use
    line = next(i for i, l in enumerate(SAXPY.read_text().splitlines()) if "y[i] = a * x[i]" in l)
    worker.change(2, [Change("        y[i] += 1.0f;\n", Position(line, 0), Position(line, 0))])
    second = await asyncio.wait_for(worker.current(), 30)
    assert second.version == 2 and second.tree.root_node.has_error is False


async def test_an_erroneous_tree_is_checked_against_a_fresh_parse():
    host = Host()
    text = SAXPY.read_text()
    worker = DocumentWorker(host, "file:///saxpy.cu", text, 1)
    worker._kick()
    await asyncio.wait_for(worker.current(), 30)
    line = next(i for i, l in enumerate(text.splitlines()) if "y[i] = a * x[i]" in l)
    worker.change(2, [Change("        y[i] += (1.0f;\n", Position(line, 0), Position(line, 0))])
    snap = await asyncio.wait_for(worker.current(), 30)
    assert not snap.exact  # the tree has errors
    exact = await asyncio.wait_for(worker.current(exact=True), 30)
    assert exact.exact and exact.version == 2


async def test_a_waiter_does_not_spin_while_an_unfinished_analysis_waits_for_a_pause():
    """A first analysis left unfinished while the user types in a held definition waits for a
    pause (`CONTINUE_S`); something awaiting the complete result meanwhile (the server waits for
    it to schedule resource usage) must sleep, not restart the worker over and over: that spun
    the event loop and slowed every keystroke."""
    from benchmarks.generated_cuda import generate, unlaunched_kernel
    from perflsp.server import scheduler

    generated = generate(lines=4000, min_kernels=200)
    host = Host()
    worker = DocumentWorker(host, "file:///many.cu", generated.text, 1)
    runs = 0
    run = worker._run

    async def counted():
        nonlocal runs
        runs += 1
        await run()

    worker._run = counted
    worker._kick()
    while not host.published:  # the first publication: the analysis of the rest goes on
        await asyncio.sleep(0.001)
    line = generated.body_line(unlaunched_kernel(generated))
    worker.change(2, [Change("float t =", Position(line, 0), Position(line, 0))])  # does not parse: held
    waiter = asyncio.get_running_loop().create_task(worker.current())
    while worker._continue_timer is None and not waiter.done():
        await asyncio.sleep(0.001)
    assert not waiter.done(), "the analysis was meant to be unfinished and paused"
    before = runs
    await asyncio.sleep(scheduler.CONTINUE_S / 2)
    assert runs - before <= 1  # asleep until the pause is over
    snap = await asyncio.wait_for(waiter, 60)  # then the analysis goes on and completes
    assert snap is not None and snap.version == 2 and snap.complete


async def test_an_edit_publishes_its_verdicts_at_once_and_its_lints_after_a_pause():
    """The edited kernel is analysed first and the other kernels' results are reused: the
    verdicts are published at once; the lint groups (the plan walks every group of the file)
    wait for a pause in typing, and the edited kernel keeps its last findings until then."""
    from benchmarks.generated_cuda import generate, unlaunched_kernel

    generated = generate(lines=2000, min_kernels=100)
    text = generated.text
    edited = unlaunched_kernel(generated)
    line = generated.body_line(edited)
    # a finding in the kernel to be edited: an unsuffixed literal meeting float data
    text_lines = text.split("\n")
    text_lines.insert(line, "    float promoted = 0.5 * (float)threadIdx.x;")
    text = "\n".join(text_lines)
    host = Host()
    worker = DocumentWorker(host, "file:///many.cu", text, 1)
    worker._kick()
    await asyncio.wait_for(worker.current(), 60)
    before = [d for d in host.published[-1][1] if d["code"] == "precision/double-promotion"]
    assert [d["range"]["start"]["line"] for d in before] == [line]
    analysed = worker.analyzer.analysed
    worker.change(2, [Change("float t = 1.0f;", Position(line + 1, 0), Position(line + 1, 0))])
    snap = await asyncio.wait_for(worker.current(), 60)  # (the lints: after the typing pause)
    assert snap.version == 2 and snap.complete
    assert worker.analyzer.analysed == analysed + 1  # the edited kernel only
    assert [(p.version, p.complete) for p in worker.published][-2:] == [(2, False), (2, True)]
    partial = next(published for published in host.published if published[0] == 2)
    assert [d for d in partial[1] if d["code"] == "precision/double-promotion"] == before  # kept meanwhile
    verdicts = [d for d in host.published[-1][1] if d["code"].startswith("roofline/")]
    assert verdicts == [d for d in partial[1] if d["code"].startswith("roofline/")]
    expected = analyse_text(snap.data.decode(), "file:///many.cu", host.config)
    assert diagnostic_keys(host.published[-1][1]) == diagnostic_keys(expected.diagnostics)


async def test_diagnostics_moved_by_an_added_line_equal_fresh_ones():
    """A line added inside a kernel moves every diagnostic after it; those are copied with their
    new ranges (messages and JSON reused), and must equal what a fresh analysis publishes."""
    from pygls.protocol import default_converter

    from benchmarks.generated_cuda import generate

    generated = generate(lines=600, min_kernels=30)
    host = Host()
    worker = DocumentWorker(host, "file:///many.cu", generated.text, 1)
    worker._kick()
    await asyncio.wait_for(worker.current(), 60)
    line = generated.body_line(generated.kernels[2])
    worker.change(2, [Change("\n", Position(line, 0), Position(line, 0))])
    snap = await asyncio.wait_for(worker.current(), 60)
    published = host.published[-1]
    assert published[0] == 2
    converter = default_converter()
    assert published[1] == [converter.unstructure(d) for d in snap.diagnostics]
    text = generated.text.splitlines(keepends=True)
    fresh = analyse_text("".join(text[:line] + ["\n"] + text[line:]), "file:///many.cu", host.config)
    assert published[1] == [converter.unstructure(d) for d in fresh.diagnostics]
    later = [d for d in snap.diagnostics if d.range.start.line > line + 1]
    assert later and all(d.related_information is None or all(
        r.location.range.start.line > line for r in d.related_information) for d in later)


async def test_an_edit_in_one_kernel_reuses_every_other_diagnostic():
    """Diagnostics (and their JSON) of kernels an edit did not touch are the very objects of the
    last publication, and the publication equals a fresh analysis's."""
    from pygls.protocol import default_converter

    from benchmarks.generated_cuda import generate

    generated = generate(lines=600, min_kernels=30)
    host = Host()
    worker = DocumentWorker(host, "file:///many.cu", generated.text, 1)
    worker._kick()
    await asyncio.wait_for(worker.current(), 60)
    before = host.published[-1][1]
    edited = generated.kernels[3]
    line = generated.body_line(edited)
    column = next(i for i, c in enumerate(generated.text.split("\n")[line]) if not c.isspace())
    version = 2
    worker.change(version, [Change("int unused = 1;", Position(line, column), Position(line, column))])
    await asyncio.wait_for(worker.current(), 60)
    after = host.published[-1][1]
    assert host.published[-1][0] == version and len(after) == len(before)
    others = [(a, b) for a, b in zip(after, before) if a["data"]["kernel"] != edited]
    assert len(others) >= len(after) - 2 and all(a is b for a, b in others)
    fresh = analyse_text(worker.snapshot.data.decode(), "file:///many.cu", host.config)
    assert host.published[-1][1] == [default_converter().unstructure(d) for d in fresh.diagnostics]



async def test_verdicts_copied_from_the_last_build_equal_a_fresh_analysis_after_any_edit():
    """A build copies the runs of unchanged verdicts from the last one (`diagnostics._verdicts`):
    after each kind of edit (a digit in a kernel, a line added above kernels, a launch site
    moved on its line, a kernel renamed, one removed, one launched more) the publication is
    exactly a fresh analysis's, and an edit inside one kernel leaves the others' objects as they were."""
    from pygls.protocol import default_converter

    from benchmarks.generated_cuda import generate

    generated = generate(lines=600, min_kernels=30)
    host = Host()
    worker = DocumentWorker(host, "file:///many.cu", generated.text, 1)
    worker._kick()
    await asyncio.wait_for(worker.current(), 60)
    version = 1
    # a kernel between the launched one and `main`: a line added in it moves the launch site
    # (and its related information) while the launched kernel's verdict stays where it is
    following = generated.kernels[generated.kernels.index(generated.launched) + 1:]
    other = next(k for k in following if k not in (generated.launched, *generated.launched_by_helpers))

    def lines() -> list[str]:
        return worker.snapshot.data.decode().split("\n")

    def find(needle: str, after: int = 0) -> tuple[int, int]:
        text = lines()
        number = next(i for i in range(after, len(text)) if needle in text[i])
        return number, text[number].index(needle)

    async def edit(start: tuple[int, int], end: tuple[int, int], typed: str) -> list:
        nonlocal version
        version += 1
        worker.change(version, [Change(typed, Position(*start), Position(*end))])
        await asyncio.wait_for(worker.current(), 60)
        published = host.published[-1]
        assert published[0] == version
        fresh = analyse_text(worker.snapshot.data.decode(), "file:///many.cu", host.config)
        assert published[1] == [default_converter().unstructure(d) for d in fresh.diagnostics]
        return published[1]

    body = generated.body_line(other)
    before = host.published[-1][1]
    at = find(".", body)
    after = await edit(at, at, "7")  # a digit in an unlaunched kernel: only its verdict is built again
    unchanged = [(a, b) for a, b in zip(after, before) if a["data"]["kernel"] != other]
    assert len(unchanged) == len(after) - 1 and all(a is b for a, b in unchanged)
    await edit((body, 0), (body, 0), "    int spare = 0;\n")  # a line added: every verdict below moves
    launch = find("<<<")
    await edit((launch[0], 0), (launch[0], 0), "  ")  # the launch site moves on its line
    name = find(other)
    await edit(name, (name[0], name[1] + len(other)), other + "_renamed")  # its verdict's anchor changes
    start = find(f"__global__ void {generated.kernels[1]}")[0]
    end = find("}", start + 1)[0]
    await edit((start, 0), (end + 1, 0), "")  # a kernel removed: one verdict fewer
    launch = find("<<<")
    call = lines()[launch[0]].replace(generated.launched, other + "_renamed")
    await edit((launch[0] + 1, 0), (launch[0] + 1, 0), call + "\n")  # one more kernel launched



async def test_a_whole_text_replacement_never_clears_the_diagnostics_before_its_results():
    """A client that sends the whole text (no range) makes a full extraction and a new analysis
    context: its first step knows no verdict yet. That empty view is not published (it would
    clear every diagnostic until the next publication); the last ones stay until results come."""
    from benchmarks.generated_cuda import generate

    generated = generate(lines=3000, min_kernels=150)
    host = Host()
    worker = DocumentWorker(host, "file:///many.cu", generated.text, 1)
    worker._kick()
    await asyncio.wait_for(worker.current(), 120)
    shown = len(host.published[-1][1])
    assert shown >= 150
    worker.change(2, [Change("// a comment outside every kernel\n" + generated.text)])
    snap = await asyncio.wait_for(worker.current(), 120)
    assert snap.complete and host.published[-1][0] == 2
    second = [diagnostics for version, diagnostics in host.published if version == 2]
    assert all(second) and len(second[-1]) == shown



async def test_an_edit_during_the_first_analysis_keeps_what_the_opening_showed():
    """A large document's first diagnostics come from the top of its text (opening.py); an edit
    made before its first analysis completes publishes what that analysis knows so far, plus
    the opening's diagnostics above the edited line (no edit moved them): it does not take back
    what the editor shows. The complete publication then equals a fresh analysis."""
    from pygls.protocol import default_converter

    from benchmarks.generated_cuda import generate

    generated = generate(lines=10_000, min_kernels=500)
    host = Host()
    worker = DocumentWorker(host, "file:///many.cu", generated.text, 1)
    worker._kick()
    while not host.published:
        await asyncio.sleep(0.001)
    opening = host.published[0][1]
    assert host.published[0][0] == 1 and opening and worker.snapshot is None
    line = generated.body_line(generated.launched)
    assert all(d["range"]["end"]["line"] < line for d in opening)
    worker.change(2, [Change("1", Position(line, 0), Position(line, 0))])
    while not any(version == 2 for version, _ in host.published):
        await asyncio.sleep(0.001)
    first_of_edit = next(diagnostics for version, diagnostics in host.published if version == 2)
    assert all(d in first_of_edit for d in opening)
    worker.change(3, [Change("", Position(line, 0), Position(line, 1))])
    snap = await asyncio.wait_for(worker.current(), 120)
    assert snap.complete and host.published[-1][0] == 3
    fresh = analyse_text(generated.text, "file:///many.cu", host.config)
    assert host.published[-1][1] == [default_converter().unstructure(d) for d in fresh.diagnostics]


async def test_the_diagnostic_cache_drops_the_entries_of_results_that_are_gone():
    """Entries persist from build to build (no copy per build), and are swept once the owners
    gone outnumber the live ones: a long session of edits does not grow the cache."""
    from perflsp.server.features.diagnostics import DiagnosticCache

    class Owner:
        pass

    cache = DiagnosticCache()
    live = [Owner() for _ in range(10)]
    for owner in live:
        cache.remember(owner, (owner,), [], [])
    for _ in range(50):  # results replaced edit after edit
        gone = [Owner() for _ in range(10)]
        for owner in gone:
            cache.remember(owner, (owner,), [], [])
        cache.finish([], [], live)
        assert len(cache.memo_table()) <= 2 * len(live) + 64 + len(gone)
    cache.finish([], [], live)
    assert all(id(owner) in cache.memo_table() for owner in live)


async def test_a_document_whose_analysis_waits_for_a_typing_pause_is_not_hibernated():
    """Hibernation frees the syntax trees; the rest of an analysis that waits for a pause in
    typing needs them (and its job), so the document stays awake until that analysis is done."""
    from benchmarks.generated_cuda import generate, unlaunched_kernel
    from perflsp.server import scheduler

    generated = generate(lines=600, min_kernels=30)
    host = Host()
    worker = DocumentWorker(host, "file:///many.cu", generated.text, 1)
    worker._kick()
    await asyncio.wait_for(worker.current(), 60)
    line = generated.body_line(unlaunched_kernel(generated))
    worker.change(2, [Change("float t = 1.0f;", Position(line, 0), Position(line, 0))])
    while not worker.published or worker.published[-1].version != 2:  # the verdicts, at once
        await asyncio.sleep(0.001)
    assert worker.analyzer.running and worker._paused  # the lints wait for the pause
    assert not worker.hibernate()
    await asyncio.sleep(scheduler.TYPING_PAUSE_S)
    snap = await asyncio.wait_for(worker.current(), 60)
    assert snap.complete and not worker.analyzer.running
    assert worker.hibernate() and worker.state.doc.tree is None


class GatedPool:
    """A work pool whose first job running `gated` waits in its thread for `gate` (a job that a
    close overtakes between being handed to its thread and reading the document)."""

    def __init__(self, gated: str):
        import threading

        self.gated = gated
        self.gate = threading.Event()
        self.waiting = asyncio.Event()
        self.futures: list[asyncio.Future] = []
        self.busy = False

    async def run(self, rank, fn, *args):
        loop = asyncio.get_running_loop()
        inner = getattr(fn, "args", ())  # (the worker hands its jobs over as partials)
        name = getattr(inner[0], "__name__", "") if inner else getattr(fn, "__name__", "")
        hold = name == self.gated and not self.gate.is_set() and not self.waiting.is_set()

        def job():
            if hold:
                loop.call_soon_threadsafe(self.waiting.set)
                self.gate.wait(30)
            return fn(*args)

        future = loop.run_in_executor(None, job)
        self.futures.append(future)
        return await asyncio.shield(future)


async def test_a_close_while_a_step_is_handed_to_its_thread_runs_nothing_of_the_closed_document(caplog):
    """The race of issue 28: a document closed while its next analysis step (`_resume`) was
    handed to the pool's thread but had not read the document yet; the step then ran on the
    dropped state (`assert state is not None` in `Analyzer.step`). It must do nothing."""
    from benchmarks.generated_cuda import generate

    generated = generate(lines=2000, min_kernels=100)
    host = Host()
    host.pool = GatedPool("_resume")
    worker = DocumentWorker(host, "file:///many.cu", generated.text, 1)
    assert worker._pool is host.pool
    worker._kick()
    await asyncio.wait_for(host.pool.waiting.wait(), 60)  # a step is in its thread, not started
    worker.close()
    assert worker.state is None and worker.snapshot is None  # (no job reads it: dropped at once)
    host.pool.gate.set()
    results = await asyncio.gather(*host.pool.futures, return_exceptions=True)
    assert [type(r).__name__ for r in results if isinstance(r, BaseException)] == ["Closed"]
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")]


async def test_a_close_during_a_step_keeps_the_state_until_the_step_is_out(caplog):
    """A step already reading the document when it closes finishes on the state it read; the
    state is dropped after it (in another thread: the event loop never waits for a step)."""
    import threading

    from benchmarks.generated_cuda import generate

    generated = generate(lines=2000, min_kernels=100)
    host = Host()
    worker = DocumentWorker(host, "file:///many.cu", generated.text, 1)
    inside, gate = asyncio.Event(), threading.Event()
    loop = asyncio.get_running_loop()
    resume = worker._resume

    def held_resume(snap):
        loop.call_soon_threadsafe(inside.set)
        gate.wait(30)
        return resume(snap)

    worker._resume = held_resume
    worker._kick()
    await asyncio.wait_for(inside.wait(), 60)  # a step holds the document
    worker.close()
    assert worker.state is not None  # (the step may read it)
    gate.set()
    for _ in range(500):
        if worker.state is None:
            break
        await asyncio.sleep(0.01)
    assert worker.state is None and worker.snapshot is None and worker.latest is None
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")]


async def test_a_threaded_read_whose_request_was_cancelled_ends_quietly():
    """A code action cancelled while its thread reads: the thread's own ending (an exception) is
    retrieved, not logged by asyncio as never retrieved, and the text lock comes back."""
    import gc
    import threading

    host = Host()
    worker = DocumentWorker(host, "file:///saxpy.cu", SAXPY.read_text(), 1)
    worker._kick()
    assert await asyncio.wait_for(worker.current(), 10) is not None
    loop = asyncio.get_running_loop()
    unretrieved: list[dict[str, object]] = []
    loop.set_exception_handler(lambda _loop, context: unretrieved.append(context))
    started, go_on = threading.Event(), threading.Event()

    def slow_reader(_snap):
        started.set()
        go_on.wait(10)
        raise RuntimeError("stopped after its request was cancelled")

    request = asyncio.create_task(worker.read(slow_reader, in_thread=True))
    while not started.is_set():
        await asyncio.sleep(0.005)
    request.cancel()
    with pytest.raises(asyncio.CancelledError):
        await request
    go_on.set()
    while worker.text_lock.locked():
        await asyncio.sleep(0.005)
    await asyncio.sleep(0.05)
    gc.collect()
    await asyncio.sleep(0)
    assert unretrieved == []
    assert await worker.read(lambda snap: snap.uri, in_thread=True) == "file:///saxpy.cu"
    worker.close()
