import os
import subprocess
import sys

import pytest

from perflsp.kernels import extract
from perflsp.kernels.extract import extract_path
from perflsp.source.files import SkippedFile


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"/* unterminated comment __global__ void k() {",
        b"__global__ void k(float *a) { { { a[0] = 1;",
        b"}}}} __global__ void k() {} }}}",
        b"#pragma omp target teams map(to: a[0:",
        b"__global__ void k<<<>>>(",
        b"\xff\xfe__global__ void k() {}",
        "__global__ void ké(float *ü) { ü[0] = 1; }".encode(),
        b"k<<<1>>>();",
        b"#define A A\n__global__ void k() { int x = A; }\nint main(){ k<<<A, A>>>(); }",
    ],
)
def test_broken_sources_never_raise(data):
    fk = extract(data.decode("utf-8", errors="replace").encode())
    assert fk is not None


def test_files(tmp_path):
    binary = tmp_path / "blob.cu"
    binary.write_bytes(b"\x00\x01\x02__global__")
    latin = tmp_path / "latin1.cu"
    latin.write_bytes(b"// caf\xe9\n__global__ void k(float *a) { a[0] = 1; }\n")
    empty = tmp_path / "empty.cu"
    empty.write_bytes(b"")
    assert isinstance(extract_path(binary), SkippedFile)
    fk = extract_path(latin)
    assert [k.name for k in fk.kernels] == ["k"] and fk.kernels[0].line == 2
    assert any("UTF-8" in n for n in fk.notes)
    assert extract_path(empty).kernels == []
    missing = extract_path(tmp_path / "nope.cu")
    assert isinstance(missing, SkippedFile) and missing.reason == "no such file"


@pytest.mark.skipif(os.geteuid() == 0, reason="root can read any file")
def test_unreadable_file(tmp_path):
    f = tmp_path / "secret.cu"
    f.write_text("__global__ void k() {}")
    f.chmod(0)
    assert extract_path(f).reason == "permission denied"


def test_large_generated_file_is_handled(tmp_path):
    body = "".join(f"__global__ void k{i}(float *a) {{ a[{i}] = {i}.0f; }}\n" for i in range(60000))
    big = tmp_path / "generated.cu"
    big.write_text(body)
    assert big.stat().st_size > 3_000_000
    fk = extract_path(big)
    assert len(fk.kernels) == 60000


def test_cli_reports_skips_with_exit_code(tmp_path):
    good = tmp_path / "good.cu"
    good.write_text("__global__ void k(float *a) { a[0] = 1; }\n")
    binary = tmp_path / "blob.cu"
    binary.write_bytes(b"\x00\x00")
    proc = subprocess.run([sys.executable, "-m", "perflsp", "kernels", "--json", str(tmp_path), str(tmp_path / "missing.cu")],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 3
    assert "Traceback" not in proc.stderr
    assert "blob.cu: binary file" in proc.stderr
    assert "missing.cu: no such file or directory" in proc.stderr
    import json
    entries = json.loads(proc.stdout)
    assert [(e["kind"], e["name"], e["line"]) for e in entries] == [("cuda", "k", 1)]


def test_a_latin1_byte_in_a_kernel_name_keeps_the_kernel(tmp_path):
    latin = tmp_path / "latin1_name.cu"
    latin.write_bytes(b"__global__ void k\xe9rnel(float *a) { a[threadIdx.x] = 1; }\n"
                      b"int main() { float *a; k\xe9rnel<<<1, 32>>>(a); }\n")
    fk = extract_path(latin)
    assert [k.name for k in fk.kernels] == ["k\u00e9rnel"] and fk.launches[0].kernel == "k\u00e9rnel"
    assert any("UTF-8" in n for n in fk.notes)
