"""aidememo: memory and coordination for AI agent teams.

The package root stays import-light: the core (domain, ports, stores, service, http) is
stdlib-only so that it runs unchanged under CPython and under Pyodide at the edge.
"""

__version__ = "0.1.0"
