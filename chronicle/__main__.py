"""`python -m chronicle`: the `chronicle` command, for an environment whose scripts directory is not on PATH."""

from chronicle.runtime.cli.entry import main

if __name__ == "__main__":
    main()
