"""The normative file formats of pva: SQL DDL, Arrow matrix schemas, legacy JSON Schemas.

This package holds data files only; `formats.pop.schema` reads them through the package loader (pkgutil.get_data).
"""
