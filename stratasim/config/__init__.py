"""The study file: YAML read strictly, ``--set`` overrides applied, sections validated into a frozen study."""

from stratasim.config.study_file import Study, load_study, parse_study

__all__ = ["Study", "load_study", "parse_study"]
