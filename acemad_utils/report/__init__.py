"""report: from saved transcripts to what a reader sees (never a model call).

tables      accuracy with n and 95% CIs, paired tests, the paper's numbers beside ours
figures     paper-style figures (CI bands and bars)
save        every table as CSV + Markdown, every figure as PNG + PDF, labelled with its source
stats       bootstrap CIs and paired tests
rescoring   transcripts -> arrays; re-deciding with any rule, eta or aggregator
words       what the notebooks' "What we see" f-strings share (the evidence caveat, a paired gain in words)
viewer      one debate as HTML, and one static page per run (viewer_model, viewer_html, viewer_page)
"""

from acemad_utils.report.save import save_figure, save_table

__all__ = ["save_figure", "save_table"]
