"""Canonical stores: the in-memory reference, the SQLite dialect store, and (later) PostgreSQL."""
