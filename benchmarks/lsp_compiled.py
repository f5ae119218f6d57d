"""How long after opening a file its compiled counts reach the editor (`perflsp.compile`).

    python benchmarks/lsp_compiled.py [FILE] [--lines 1000] [--runs 3] [--gpu rtx3080]

Starts `perflsp serve` in a trusted workspace (a temporary folder holding FILE, or a generated
CUDA file of `--lines` lines from benchmarks/generated_cuda.py), opens the file as an editor does
and times, from `didOpen`:

- the first diagnostics (the source engine's answer);
- the server's log line "compiled NAME for sm_XX" (nvcc and nvdisasm done, counts read);
- the first hover on the file's first kernel that says "counted in the compiled code" (what the
  user sees; hovers are asked every 50 ms).

Each run uses a fresh compile cache (a cold compile, the case of a file opened for the first time),
then the same file is opened once more against the warm cache. Prints each run and the medians.
The toolchain is the one perflsp finds (settings, CUDA_HOME, PATH, the `compile` extra's wheels).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.generated_cuda import generate
from benchmarks.lsp_latency import Client

COMPILED = "counted in the compiled code"
_KERNEL = re.compile(r"__global__\s+(?:\w+\s+)*?(?:__launch_bounds__\([^)]*\)\s*)?(?:\w[\w:<>\*]*\s+)*?\**(\w+)\s*\(")


def first_kernel_position(text: str) -> tuple[int, int]:
    """(line, character) inside the name of the file's first kernel definition."""
    match = _KERNEL.search(text)
    if match is None:
        raise SystemExit("no __global__ kernel defined in the file")
    before = text[:match.start(1)]
    return before.count("\n"), match.start(1) - (before.rfind("\n") + 1) + 1


async def one_open(path: Path, text: str, gpu: str, cache: Path) -> dict[str, float]:
    """Seconds from didOpen to the first diagnostics, the compile's log line and the compiled hover."""
    env_before = os.environ.get("PERFLSP_CACHE_DIR")
    os.environ["PERFLSP_CACHE_DIR"] = str(cache)
    try:
        client, _ = await Client.start(sys.executable, "-m", "perflsp", "serve")
    finally:
        if env_before is None:
            os.environ.pop("PERFLSP_CACHE_DIR", None)
        else:
            os.environ["PERFLSP_CACHE_DIR"] = env_before
    try:
        ready = client.wait_for(lambda m: m.get("method") == "perflsp/status")
        await client.request("initialize", {
            "processId": os.getpid(), "rootUri": path.parent.as_uri(),
            "capabilities": {"textDocument": {"publishDiagnostics": {}}},
            "initializationOptions": {"workspaceTrusted": True, "gpus": [gpu]}})
        client.notify("initialized", {})
        await asyncio.wait_for(ready, 120)
        uri = path.as_uri()
        name = path.name
        diagnostics = client.wait_for(lambda m: m.get("method") == "textDocument/publishDiagnostics"
                                      and m["params"]["uri"] == uri)
        compiled = client.wait_for(lambda m: m.get("method") == "window/logMessage"
                                   and f"compiled {name} for" in m["params"]["message"])
        failed = client.wait_for(lambda m: m.get("method") == "window/logMessage"
                                 and f"compiled facts of {name}" in m["params"]["message"])
        line, character = first_kernel_position(text)
        opened = time.perf_counter()
        client.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "cuda-cpp",
                                                                "version": 1, "text": text}})
        first = await asyncio.wait_for(diagnostics, 300) - opened
        done, _ = await asyncio.wait([compiled, failed], timeout=300, return_when=asyncio.FIRST_COMPLETED)
        if failed in done:
            raise SystemExit(f"the file did not compile: see the server's log ({failed.result()})")
        if compiled not in done:
            raise SystemExit("no compile within 300 s")
        compile_s = compiled.result() - opened
        while time.perf_counter() - opened < 300:
            answer: Any = await client.request("textDocument/hover", {
                "textDocument": {"uri": uri}, "position": {"line": line, "character": character}})
            hover = answer.get("result") if isinstance(answer, dict) else None
            if hover and COMPILED in hover["contents"]["value"]:
                break
            await asyncio.sleep(0.05)
        else:
            raise SystemExit("the hover never said the counts were compiled")
        return {"first diagnostics": first, "compiled": compile_s, "hover compiled": time.perf_counter() - opened}
    finally:
        await client.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", nargs="?", type=Path, help="a CUDA file (default: a generated one)")
    parser.add_argument("--lines", type=int, default=1000, help="lines of the generated file")
    parser.add_argument("--runs", type=int, default=3, help="cold-cache opens")
    parser.add_argument("--gpu", default="rtx3080")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="perflsp-compiled-") as tmp:
        folder = Path(tmp) / "work"
        folder.mkdir()
        if args.file is not None:
            text = args.file.read_text()
            path = folder / args.file.name
        else:
            text = generate(lines=args.lines, min_kernels=1).text
            path = folder / "generated.cu"
        path.write_text(text)
        print(f"{path.name}: {text.count(chr(10))} lines, {len(_KERNEL.findall(text))} kernels; GPU {args.gpu}")
        colds = []
        for run in range(args.runs):
            cache = Path(tmp) / f"cache{run}"
            result = await one_open(path, text, args.gpu, cache)
            colds.append(result)
            print(f"cold cache, run {run + 1}: " + ", ".join(f"{k} {v:.2f} s" for k, v in result.items()))
        warm = await one_open(path, text, args.gpu, Path(tmp) / "cache0")
        print("warm cache: " + ", ".join(f"{k} {v:.2f} s" for k, v in warm.items()))
        print("median, cold: " + ", ".join(f"{k} {statistics.median(r[k] for r in colds):.2f} s" for k in colds[0])
              + " (target: compiled counts within 5 s)")
    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    asyncio.run(main())
