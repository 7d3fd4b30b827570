"""The report file, profile.pop: SQLite tables with Arrow chunks for the per-tile matrices.

Public face:

- `formats.pop.writer.ProfileWriter`: what a producer streams a report into.
- `formats.pop.reader.ProfileReader`: rows and per-tile matrices for `pva` to build on.
- `formats.pop.query`: the query layer, one method per question; all of pva's SQL lives there.
- `formats.pop.schema.profile_schema`: the normative schema (``schemas/profile.sql``), parsed.
- `formats.pop.check.check_report`: full validation of a file.
- `formats.pop.readonly_sql`: a user's SQL, guaranteed read-only.

The modules below them (``sqlite_reader``, ``sqlite_writer``, ``arrow_chunks``, ``arrow_tables``,
``arrow_sqlite``, ``categories``, ``schema_reference``) are shared with the trace file family.
"""
