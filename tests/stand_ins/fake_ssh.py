"""A stand-in for `ssh HOST COMMAND...`: like ssh, it joins the remote command with spaces and
hands the string to a shell (here a local `sh -c`), which splits it again."""

import subprocess
import sys

args = sys.argv[1:]
while args and args[0].startswith("-"):
    args = args[1:]
host, command = args[0], " ".join(args[1:])
sys.exit(subprocess.run(["sh", "-c", command], check=False).returncode)
