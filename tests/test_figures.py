"""Figures: truth-holder labels from the rosters, legible at notebook width, saved and closed."""

import base64
import io
import itertools
import re
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure
from matplotlib.layout_engine import ConstrainedLayoutEngine
from matplotlib.text import Text

from acemad_utils.data.paths import outputs
from acemad_utils.experiments import assumption_map as RA
from acemad_utils.experiments import theory
from acemad_utils.protocol.config import DebateConfig
from acemad_utils.protocol.schema import SYNTHETIC_LABEL
from acemad_utils.report import figures as F
from acemad_utils.report import save


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
    rows += [{**rows[0], "n": 1, "accuracy": 25}]  # N = 1, 3, 5: labelled points sit evenly spaced, ticks say N
    th = {"AceMAD": {1: 0, 3: 1, 5: 1}, "Voting": {3: 0, 5: 0}}
    fig = F.lines_by_benchmark(pd.DataFrame(rows), x="n", hue="family", title="t", truth_holders=th)
    ax = fig.axes[0]
    assert sorted(t.get_text() for t in ax.texts) == ["0/1", "1/3", "1/5"]
    assert list(ax.get_xticks()) == [0, 1, 2] and [t.get_text() for t in ax.get_xticklabels()] == ["1", "3", "5"]
    assert [t.xy[0] for t in ax.texts] == [0, 1, 2]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["AceMAD", "Voting (no truth-holder)"]
    assert any("k truth-holders among its N agents" in t.get_text() for t in fig.texts)
    plain = F.lines_by_benchmark(pd.DataFrame(rows), x="n", hue="family", title="t")
    assert not plain.axes[0].texts and list(plain.axes[0].get_xticks()) == [1, 3, 5]  # no labels: N to scale


def test_the_package_forces_no_matplotlib_backend():
    """Figures show inline in Jupyter only if nothing forces a backend."""
    root = Path(F.__file__).resolve().parents[1]
    forcing = [p.relative_to(root) for p in root.rglob("*.py") if "matplotlib.use(" in p.read_text(encoding="utf-8")]
    assert not forcing, f"matplotlib.use( in {forcing}"


def test_save_figure_shows_the_saved_png_at_the_inline_size_and_closes_the_figure(tmp_outputs):
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([0, 1])
    shown = save.save_figure(fig, "f")
    assert not plt.fignum_exists(fig.number)  # the inline backend would otherwise show it a second time
    png = outputs("figures") / "f.png"
    assert (outputs("figures") / "f.pdf").stat().st_size > 0
    data, meta = shown._repr_png_()  # what the notebook stores: the PNG (base64) and the width it is shown at
    assert base64.b64decode(data) == png.read_bytes()
    px = int.from_bytes(png.read_bytes()[16:20], "big")
    assert meta["width"] == round(px * 100 / 130) and 350 <= meta["width"] <= 400  # ~4 in at 100 dpi, tight


@pytest.mark.parametrize("layout", ["tight_layout", "constrained", "none"])
def test_save_figure_writes_what_savefig_tight_writes(tmp_outputs, layout, monkeypatch):
    """One tight box for both formats, a layout run once at the PNG's dpi: the PNG is
    savefig(bbox_inches="tight")'s bytes, the PDF's page within a point of its own tight box."""

    def figure():
        fig, ax = plt.subplots(1, 2, figsize=(5, 3), layout="constrained" if layout == "constrained" else None)
        ax[0].plot([0, 1], label="a long legend label")
        ax[0].legend()
        ax[1].set_title("a title that reaches out")
        fig.suptitle("suptitle")
        if layout == "tight_layout":
            fig.tight_layout()
        return fig

    expected, pdf = io.BytesIO(), io.BytesIO()
    fig = figure()
    fig.savefig(expected, format="png", dpi=save.PNG_DPI, bbox_inches="tight", metadata={"Software": None})
    fig.savefig(pdf, format="pdf", bbox_inches="tight")
    plt.close(fig)
    runs, draws = [], []
    execute, draw = ConstrainedLayoutEngine.execute, Figure.draw
    monkeypatch.setattr(ConstrainedLayoutEngine, "execute", lambda self, f: runs.append(1) or execute(self, f))
    monkeypatch.setattr(Figure, "draw", lambda self, r: draws.append(1) or draw(self, r))
    save.save_figure(figure(), "g")
    assert (outputs("figures") / "g.png").read_bytes() == expected.getvalue()
    # laid out once, and drawn once for each format (a constrained figure once more, for its layout)
    assert (len(runs), len(draws)) == ((1, 3) if layout == "constrained" else (0, 2))
    box = lambda raw: [float(x) for x in re.search(rb"MediaBox \[([^\]]*)\]", raw)[1].split()]
    assert np.allclose(box((outputs("figures") / "g.pdf").read_bytes()), box(pdf.getvalue()), atol=1.0)


BENCHES = ["truthfulqa", "arc_challenge", "bbh", "logiqa", "medqa", "mmlu_pro", "Average"]


def _long(hue: str, hues, x=None, xs=(1,)):
    cell = {"accuracy": 30.0, "ci_lo": 25.0, "ci_hi": 35.0}
    return pd.DataFrame(
        [{"benchmark": b, hue: h, **({x: v} if x else {}), **cell} for b in BENCHES for h in hues for v in xs]
    )


def too_small(fig) -> list[str]:
    """Every visible text of `fig` under F.MIN_PT points once shrunk to notebook width."""
    fig.canvas.draw()
    scale = min(1.0, F.NOTEBOOK_WIDTH_IN / fig.get_tightbbox().width)
    texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
    return [
        f"{t.get_fontsize() * scale:.1f} pt: {t.get_text()!r}" for t in texts if t.get_fontsize() * scale < F.MIN_PT
    ]


def test_figures_are_legible_at_notebook_width():
    methods = ["Full protocol", "Self-belief only", "Uniform weights (AceMAD's debate)", "Standard MAD (no q)"]
    fig4 = F.bars_by_benchmark(_long("method", methods), hue="method", title="Figure 4 [SYNTHETIC population]")
    curves = _long("family", ["AceMAD (T=3)", "Majority Voting"], x="N", xs=(1, 2, 3, 5, 10))
    fig5 = F.lines_by_benchmark(
        curves, x="N", hue="family", title="Figure 5", note="a note", truth_holders={"AceMAD (T=3)": {3: 1, 5: 1}}
    )
    grid = itertools.product((3, 5, 7), (1, 2, 3, 5), (0.0, 1.0, 2.0, 4.0), (0.0, 0.25, 0.5, 0.75, 1.0))
    fig_d = theory.phase_diagram(pd.DataFrame(grid, columns=["N", "T", "eta", "crowd_calibration"]).assign(p_flip=0.25))
    gains = {
        f"gain_{key}{end}": -12.3 + d for key, _ in RA.HEAT_PANELS for end, d in (("", 0), ("_lo", -1), ("_hi", 1))
    }
    links = (0.0, 0.25, 0.5, 0.75, 1.0)
    grid = pd.DataFrame(itertools.product((0.1, 0.3, 0.5, 0.7, 0.9), links), columns=["insight", "knowledge_link"])
    fig_9a = RA.heatmap(grid.assign(axis="grid", **gains), SYNTHETIC_LABEL)
    for name, fig in (("Figure 4", fig4), ("Figure 5", fig5), ("phase diagram", fig_d), ("Figure 9a", fig_9a)):
        assert not too_small(fig), f"{name}: {too_small(fig)[:5]}"
        plt.close(fig)
    # the check can fail: a 20-inch figure's 10-pt tick labels are about 6 pt at notebook width
    wide, ax = plt.subplots(figsize=(20, 3))
    assert "'0.0'" in " ".join(too_small(wide))
    plt.close(wide)
