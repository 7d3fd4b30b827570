"""The example queries of the command line's help, kept beside the schema they query (tests run them)."""

#: `pva sql --help`: the ten compute sets that took the most cycles, over every IPU.
REPORT_SQL = (
    "SELECT cs.name, sum(s.cycles) AS cycles FROM steps_by_ipu s "
    "JOIN steps ON steps.id = s.step_id JOIN compute_sets cs ON cs.compute_set = steps.compute_set "
    "GROUP BY cs.name ORDER BY cycles DESC LIMIT 10"
)
#: `pva query --help`: the bytes each report of a dataset uses, including gaps, largest first.
FLEET_QUERY = (
    "SELECT r.path, sum(m.total_including_gaps) AS bytes FROM memory_by_tile m "
    "JOIN reports r USING (report_id) GROUP BY r.path ORDER BY bytes DESC"
)
