"""Reproducible performance measurements: each figure beside a baseline measured in the same run."""
