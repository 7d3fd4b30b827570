"""Helpers shared by the tests: report builders, hostile-input corpora, worker scripts, doc generators."""
