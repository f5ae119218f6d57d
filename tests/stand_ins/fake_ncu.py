"""A stand-in for Nsight Compute's `ncu`, for tests: parses the options perflsp passes, then
replays or generates output as the environment says. Installed by the tests as an executable
named `ncu` whose shebang is the test interpreter.

FAKE_NCU_MODE     replay (default) | sleep | exit | perm | garbage | truncated | no-kernels |
                  flood | timing
FAKE_NCU_FIXTURE  CSV file to print (replay, truncated, exit)
FAKE_NCU_LOG      append one JSON line per call: argv, app argv, block-size env var, cwd
FAKE_NCU_SLEEP_S  seconds to sleep (sleep mode); FAKE_NCU_PID_FILE gets "<pid> <child pid>"
FAKE_NCU_EXIT     exit status (exit mode)
FAKE_NCU_EXEC_APP run the application first (its output precedes the table, as with real ncu)
FAKE_NCU_TIMES    timing mode: "128:2000,256:1400" nanoseconds per launch by block size
FAKE_NCU_IGNORE_BLOCK  timing mode: the "program" always launches 128 threads per block
"""

import json
import os
import subprocess
import sys
import time

VALUE_OPTIONS = {
    "--page",
    "--print-units",
    "--metrics",
    "--clock-control",
    "--kernel-name",
    "--launch-count",
    "--launch-skip",
    "-k",
    "-c",
    "--target-processes",
    "--import",
}
KERNEL = "void ns::saxpy<float>(const float *, float *, int)"


def split_argv(argv):
    options, i = {}, 0
    while i < len(argv) and argv[i].startswith("-"):
        if argv[i] in VALUE_OPTIONS:
            options[argv[i]] = argv[i + 1]
            i += 2
        else:
            options[argv[i]] = True
            i += 1
    return options, argv[i:]


def timing_csv(app, metrics):
    block = None
    if "--block" in app:
        block = int(app[app.index("--block") + 1])
    elif os.environ.get("PERFLSP_BLOCK_SIZE"):
        block = int(os.environ["PERFLSP_BLOCK_SIZE"])
    if os.environ.get("FAKE_NCU_IGNORE_BLOCK"):
        block = 128
    times = dict(item.split(":") for item in os.environ["FAKE_NCU_TIMES"].split(","))
    duration = int(times[str(block)])
    header = [
        "ID",
        "Process ID",
        "Process Name",
        "Host Name",
        "Kernel Name",
        "Context",
        "Stream",
        "Block Size",
        "Grid Size",
        "Device",
        "CC",
        *metrics,
    ]
    units = {"gpu__time_duration.sum": "nsecond", "launch__block_size": "", "launch__grid_size": ""}
    rows = [header, ["", "", "", "", "", "", "", "", "", "", "", *(units.get(m, "") for m in metrics)]]
    for launch in range(3):
        values = {
            "gpu__time_duration.sum": f"{duration:,}",
            "launch__block_size": str(block),
            "launch__grid_size": str(4096 // block),
        }
        rows.append(
            [
                str(launch),
                "4242",
                "app",
                "127.0.0.1",
                KERNEL,
                "1",
                "7",
                f"({block}, 1, 1)",
                f"({4096 // block}, 1, 1)",
                "0",
                "8.6",
                *(values.get(m, "0") for m in metrics),
            ]
        )
    return "\n".join(",".join(f'"{cell}"' for cell in row) for row in rows) + "\n"


def main():
    argv = sys.argv[1:]
    if argv == ["--version"]:
        print("NVIDIA (R) Nsight Compute Command Line Profiler")
        print("Copyright (c) 2018-2024 NVIDIA Corporation")
        print("Version 2024.1.0.0 (build 33681293) (public-release)")
        return 0
    options, app = split_argv(argv)
    log = os.environ.get("FAKE_NCU_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(
                json.dumps(
                    {
                        "argv": argv,
                        "options": options,
                        "app": app,
                        "block_env": os.environ.get("PERFLSP_BLOCK_SIZE"),
                        "cwd": os.getcwd(),
                    }
                )
                + "\n"
            )
    if options.get("--page") != "raw" or options.get("--print-units") != "base" or "--csv" not in options:
        print("==ERROR== fake ncu: expected --csv --page raw --print-units base", file=sys.stderr)
        return 1
    mode = os.environ.get("FAKE_NCU_MODE", "replay")
    sys.stdout.write("==PROF== Connected to process 4242 (app)\n")
    if os.environ.get("FAKE_NCU_EXEC_APP") and app:
        sys.stdout.flush()
        subprocess.run(app, check=False)
    if mode == "sleep":
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        pid_file = os.environ.get("FAKE_NCU_PID_FILE")
        if pid_file:
            with open(pid_file, "w") as fh:
                fh.write(f"{os.getpid()} {child.pid}")
        time.sleep(float(os.environ.get("FAKE_NCU_SLEEP_S", "60")))
        return 0
    if mode == "perm":
        print(
            "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU "
            "Performance Counters on the target device 0. For instructions on enabling permissions "
            "and to get more information see https://developer.nvidia.com/ERR_NVGPUCTRPERM"
        )
        print("==PROF== Disconnected from process 4242")
        print("==WARNING== No kernels were profiled.")
        return 0
    if mode == "garbage":
        sys.stdout.write("\x00\x17 segmentation fault?? @@@\nnot,a,table\n")
        return 0
    if mode == "no-kernels":
        print("==PROF== Disconnected from process 4242")
        print("==WARNING== No kernels were profiled.")
        return 0
    if mode == "flood":
        chunk = "x" * 65536 + "\n"
        for _ in range(10_000):
            sys.stdout.write(chunk)
        return 0
    if mode == "timing":
        sys.stdout.write("==PROF== Disconnected from process 4242\n")
        sys.stdout.write(timing_csv(app, options["--metrics"].split(",")))
        return 0
    text = open(os.environ["FAKE_NCU_FIXTURE"], encoding="utf-8").read()
    if mode == "truncated":
        text = text[: len(text) * 2 // 3]
    if mode == "exit":
        print("==ERROR== The application returned an error code (3).", file=sys.stderr)
        return int(os.environ.get("FAKE_NCU_EXIT", "3"))
    sys.stdout.write("==PROF== Disconnected from process 4242\n")
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
