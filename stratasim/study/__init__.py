"""Running one study: building the workload and backends it names, simulating, and checking what came out."""

from stratasim.study.run import check_study, run_study

__all__ = ["check_study", "run_study"]
