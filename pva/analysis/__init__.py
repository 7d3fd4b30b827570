"""Analyses over the public object model and the query layer: summary, comparison, operator times,
estimates, charts, HTML and fleet queries."""
