"""Read a debate: one transcript record as rounds x agents, and one static HTML page per run.

    from acemad_utils.report import viewer as V
    V.show(record)                                   # inline in Jupyter (an IPython HTML object)
    html = V.debate_html(record, meta)               # the same view as a self-contained HTML fragment
    ex = V.pick_examples(records, "AceMAD (T=3)")    # {"overturned": [...], "not_overturned": [...]}
    V.write_run_page("default/main")                 # -> outputs/viewer/default/main.html
    V.page_link("default/main")                      # for a notebook: the command and the page as a link
    python -m acemad_utils.report.viewer default/main       # the same from a shell

Above the debate: the question and its options (escaped; a synthetic item says its text is generated), from the
run's questions.json. Each agent cell shows its belief p and peer prediction q as text bars, one line per option
(the correct option's line bold and starred), its answer, for AceMAD its round score and its weight after that
round, and its argument. Each round row ends with the plurality answer (one vote per agent whose commitment
parsed) and the weighted answer: AceMAD's sum_i w_i^k p_i with the weights after that round (k = the method's
weight_exponent, so the last round's is the method's decision), or the mean belief of the parsing agents for the
other debates. Single Agent records show their independent runs as the "agents" of one round; Centralized MAD
adds the moderator's summary.

The fragment is plain HTML (no script, SVG or style: it reads the same trusted or not); the run page embeds the
same fragments and only lists and filters them. Parts by concern: `viewer_model` (the view of a record, examples
by rule), `viewer_html` (the fragment), `viewer_page` (the run page, built on request).
"""

from __future__ import annotations

from acemad_utils.protocol.schema import SYNTHETIC_LABEL  # noqa: F401
from acemad_utils.report.viewer_html import CSS, debate_html, show  # noqa: F401  (the public API, one import for notebooks)
from acemad_utils.report.viewer_model import (  # noqa: F401
    is_correct,
    pick_examples,
    round1_plurality,
    source_of,
    view,
)
from acemad_utils.report.viewer_page import page_link, page_path, write_run_page  # noqa: F401

if __name__ == "__main__":
    import sys

    if len(sys.argv) != 2:
        sys.exit("usage: python -m acemad_utils.report.viewer <experiment>   (e.g. default/main)")
    print(write_run_page(sys.argv[1]))
