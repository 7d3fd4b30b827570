"""Cerebras compile reports (compile_report.txt).

Public face: `formats.cerebras.importer` (parsing, and conversion into profile.pop).
"""
