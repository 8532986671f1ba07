"""Figure options that carry information: the truth-holder labels of curves over N come from the rosters."""

import pandas as pd

from acemad_utils.protocol.config import DebateConfig
from acemad_utils.report import figures as F


def test_truth_holders_follow_the_roster():
    cfgs = [DebateConfig(method=m, n_agents=n) for m in ("acemad", "majority") for n in (1, 2, 3, 5, 10, 15)]
    th = F.truth_holders(cfgs)
    ace = DebateConfig(method="acemad").family
    assert th[ace] == {1: 0, 2: 0, 3: 1, 5: 1, 10: 2, 15: 3}
    assert set(th["Majority Voting"].values()) == {0}  # homogeneous roster: nobody is a truth-holder


def test_lines_label_points_with_truth_holders_and_mark_hues_without():
    rows = [
        {"benchmark": "Average", "family": f, "n": n, "accuracy": a, "ci_lo": a - 1, "ci_hi": a + 1}
        for f, pts in (("AceMAD", [(3, 30), (5, 20)]), ("Voting", [(3, 10), (5, 9)]))
        for n, a in pts
    ]
    fig = F.lines_by_benchmark(
        pd.DataFrame(rows),
        x="n",
        hue="family",
        title="t",
        truth_holders={"AceMAD": {3: 1, 5: 1}, "Voting": {3: 0, 5: 0}},
    )
    ax = fig.axes[0]
    assert sorted(t.get_text() for t in ax.texts) == ["1/3", "1/5"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["AceMAD", "Voting (no truth-holder)"]
    assert any("k truth-holders among its N agents" in t.get_text() for t in fig.texts)
    plain = F.lines_by_benchmark(pd.DataFrame(rows), x="n", hue="family", title="t")
    assert not plain.axes[0].texts
