import sys

if sys.argv[1:2] == ["serve"]:  # before the CLI's imports: re-executing then costs only the interpreter's start
    from perflsp.server.memory import use_system_allocator

    use_system_allocator()

from perflsp.cli import main

if __name__ == "__main__":
    main()
