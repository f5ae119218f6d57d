"""Real VS Code (code-server + Chromium): perflsp activates only where it can matter. A C/C++-only
workspace (no .cu/.cuh, no .perflsp.toml) starts no perflsp process, even with C++ files open; the
first CUDA file opened in the same window does start it (so the check below can see a server)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.editors.tools import ENABLED, SKIP_REASON, artifacts, clean_env, server_launcher

pytestmark = pytest.mark.skipif(not ENABLED, reason=SKIP_REASON)

if ENABLED:
    from tests.editors.vscode_driver import CodeServer, Workbench, browser_page

CPP_MAIN = """#include <vector>
#include "util.h"

int main() {
    std::vector<float> v(1024, 1.0f);
    return static_cast<int>(sum(v));
}
"""
CPP_HEADER = """#pragma once
#include <vector>

inline float sum(const std::vector<float>& v) {
    float s = 0.0f;
    for (float x : v) s += x;
    return s;
}
"""
CUDA_KERNEL = """__global__ void scale(float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}

void run(float* x, int n) { scale<<<(n + 255) / 256, 256>>>(x, 2.0f, n); }
"""


def descends_from(pid: int, ancestor: int) -> bool:
    for _ in range(64):
        if pid == ancestor:
            return True
        if pid <= 1:
            return False
        stat = Path(f"/proc/{pid}/stat").read_text()
        pid = int(stat.rsplit(")", 1)[1].split()[1])  # the field after the state: ppid
    return False


def perflsp_servers(code_server: int) -> list[str]:
    """Command lines of `-m perflsp serve` processes started by this code-server: in its session
    (CodeServer starts it with start_new_session) or below it in the process tree."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if b"perflsp" not in argv or b"serve" not in argv:
                continue
            pid = int(entry.name)
            if os.getsid(pid) == code_server or descends_from(pid, code_server):
                found.append(" ".join(a.decode(errors="replace") for a in argv if a))
        except (OSError, ProcessLookupError):
            continue  # the process ended while we looked
    return found


def test_cpp_only_workspace_starts_no_perflsp_process(vsix, tmp_path):
    ws = tmp_path / "cpp-only"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "main.cpp").write_text(CPP_MAIN)
    (ws / "src" / "util.h").write_text(CPP_HEADER)
    (ws / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.20)\nproject(demo CXX)\nadd_executable(demo src/main.cpp)\n")
    python = server_launcher(tmp_path / "bin")
    server = CodeServer(tmp_path, vsix, ws, {"perflsp.python.path": python}, clean_env())
    url = server.start()
    try:
        with browser_page(url) as page:
            wb = Workbench(page, artifacts("vscode"))
            wb.open_file("src/main.cpp")
            wb.open_file("src/util.h")
            page.locator(".statusbar-item", has_text="Ln ").first.wait_for(timeout=30_000)
            # the extension host has had every chance to activate perflsp: C++ files open, the
            # workspace scanned for workspaceContains; give a late activation time to show up
            deadline = time.monotonic() + 8
            while time.monotonic() < deadline:
                assert not perflsp_servers(server.proc.pid), perflsp_servers(server.proc.pid)
                page.wait_for_timeout(250)
            assert wb.status_item().count() == 0, "the perflsp status item shows in a C++-only workspace"
            wb.screenshot("16-cpp-only-quiet")
            # a CUDA file in the same window activates perflsp: its server is what the check looks for
            (ws / "src" / "scale.cu").write_text(CUDA_KERNEL)
            wb.open_file("src/scale.cu")
            wb.status_item().first.wait_for(timeout=60_000)
            deadline = time.monotonic() + 60
            while not perflsp_servers(server.proc.pid) and time.monotonic() < deadline:
                page.wait_for_timeout(250)
            assert perflsp_servers(server.proc.pid), "opening a .cu file started no perflsp server"
    finally:
        server.stop()
