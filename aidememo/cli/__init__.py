"""The `aidememo` command line (CPython only): tokens, bootstrap, admin, health and serve.

Parsing is stdlib `argparse`; `serve` imports uvicorn (the `origin` extra) only when it runs.
"""
