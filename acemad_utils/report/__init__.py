"""report: from saved transcripts to what a reader sees (never a model call): tables (accuracy with CIs, paired
tests, the paper beside ours), figures, save, stats, rescoring (any rule, eta or aggregator), premise, viewer."""

from acemad_utils.report.save import save_figure, save_table

__all__ = ["save_figure", "save_table"]
