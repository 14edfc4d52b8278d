"""`python -m aidememo`: the same command line as the `aidememo` script."""

from aidememo.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
