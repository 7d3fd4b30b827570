"""Bounded streaming readers of JSON and CBOR that any importer may use.

Public face: `formats.streaming.json_events.json_events` and `formats.streaming.cbor_events.cbor_events`
(parse events one at a time, number arrays as numpy), `formats.streaming.tree.build_tree` (a document
tree from those events) and `formats.streaming.runs` (arrays of numbers kept compactly in memory or
in a spool file).
"""
