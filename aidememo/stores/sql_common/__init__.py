"""What the SQLite and PostgreSQL stores share: statements, dialect conversions, row mapping.

`statements.SharedSql` is the SQL both dialects run alike, `dialect.Dialect` renders it for
one dialect and carries the few value conversions that differ, and `rows.SqlReadRows` and
`rows.SqlWriteRows` turn rows into the domain's value objects over any `RowExecutor`. Each
store keeps only what is its own: its executor, a command's begin and commit, search, the
schema and tenant deletion.
"""
