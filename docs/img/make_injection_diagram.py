"""Draws docs/img/activation_injection.svg, the activation-injection diagram of docs/concepts/oracle.md.

    python docs/img/make_injection_diagram.py [OUT]      # default OUT: docs/img/activation_injection.svg

The format follows OUT's suffix (.svg, .png, ...). The mechanics drawn are the code's: activations are the output
of decoder block int(L·pct/100) of the base model (ao_calib/steering/activations.py), at the positions of
task.activations, less the training mean with task.activations.center=true (tasks/oracle/activations.py); the
oracle's prompt is ``Layer: N\\n`` + " ?" per vector + `` \\n`` + the question (tasks/oracle/prompt.py); they are
injected at the output of decoder block task.injection_layer (1), at the placeholders only, norm-matched
(ao_calib/steering/inject.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle

OUT = Path(__file__).resolve().parent / "activation_injection.svg"

TARGET = "#d95f02"  # the target model's activations
TARGET_LIGHT = "#fde0c5"
ORACLE = "#5e3c99"  # the oracle and the injection
ORACLE_LIGHT = "#e3dcf0"
GREY = "#d9d9d9"
FAINT = "#f2f2f2"
INK = "#222222"

TOKEN_H = 3.2
BAND_H = 3.0


def box(ax, x, y, w, h, text="", face="white", edge=INK, size=10, color=INK, weight="normal", lw=1.0, ls="-",
        round_=0.4, family="sans-serif", alpha=1.0):
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle=f"round,pad=0,rounding_size={round_}", facecolor=face,
                                edgecolor=edge, linewidth=lw, linestyle=ls, alpha=alpha))
    if text:
        ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=size, color=color, weight=weight,
                family=family)


def arrow(ax, start, end, color=INK, rad=0.0, lw=1.4, style="-|>", ls="-"):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle=style, mutation_scale=12, color=color, linewidth=lw,
                                 linestyle=ls, connectionstyle=f"arc3,rad={rad}", shrinkA=0, shrinkB=0))


def tokens(ax, x0, y, labels, widths, faces, edges, gap=0.5, size=9.5):
    """Token boxes left to right from x0; returns each box's centre x."""
    centres, x = [], x0
    for label, w, face, edge in zip(labels, widths, faces, edges):
        box(ax, x, y, w, TOKEN_H, label, face=face, edge=edge, size=size, family="monospace", round_=0.3)
        centres.append(x + w / 2)
        x += w + gap
    return centres


def bands(ax, x0, x1, y0, specs, labels_right=False):
    """Decoder blocks bottom-up: (label, face, edge, style[, gap above]); returns each block's bottom y."""
    bottoms, y = [], y0
    lx, align = (x1 + 0.8, "left") if labels_right else (x0 - 0.8, "right")
    for label, face, edge, ls, *gap in specs:
        if label == "⋮":
            ax.text(lx, y + 0.9, "⋮", ha=align, va="center", fontsize=13, color="#777777")
            bottoms.append(y)
            y += 2.0
            continue
        ax.add_patch(Rectangle((x0, y), x1 - x0, BAND_H, facecolor=face, edgecolor=edge, linewidth=1.0,
                               linestyle=ls))
        ax.text(lx, y + BAND_H / 2, label, ha=align, va="center", fontsize=10, color=INK)
        bottoms.append(y)
        y += BAND_H + (gap[0] if gap else 1.2)
    return bottoms


def draw(out: Path) -> Path:
    plt.rcParams.update({"svg.hashsalt": "ao_calib", "font.size": 10})
    fig = plt.figure(figsize=(14.5, 5.2))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, 145)
    ax.set_ylim(0, 52)
    ax.axis("off")

    # ---- left: the target model ------------------------------------------------------------------------------
    ax.text(2, 49, "1. Target model: the base model, adapter off", fontsize=13, weight="bold", color=TARGET)
    ax.text(2, 46.2, "its prompt as one user turn of the chat template", fontsize=10, color="#555555")
    ax.text(2, 43.4, "reading layer ℓ = int(L·pct/100) for each pct of task.layer_percents", fontsize=10,
            color=TARGET)
    ax.text(2, 40.9, "(SmolLM2-135M: L = 30 blocks, 50 % → ℓ = 15)", fontsize=9.5, color="#555555")
    labels = ["<s>", "I", "feel", "calm", "in", "Oslo", "today", "."]
    widths = [3.6, 2.4, 4.0, 4.0, 2.4, 4.0, 4.8, 2.4]
    read = [False, False, False, False, True, True, True, True]  # last_k with k=4
    x0 = 13
    xs = tokens(ax, x0, 6, labels, widths,
                faces=["#eeeeee"] + [TARGET_LIGHT if r else "white" for r in read[1:]],
                edges=["#999999"] + [TARGET if r else INK for r in read[1:]])
    x_left, x_right = x0 - 0.6, x0 + sum(widths) + 0.5 * (len(widths) - 1) + 0.6
    blocks = bands(ax, x_left, x_right, 12.0, [
        ("block 0", GREY, "#999999", "-"),
        ("block 1", GREY, "#999999", "-"),
        ("⋮", None, None, None),
        ("block ℓ", TARGET_LIGHT, TARGET, "-"),
        ("ℓ+1 … L−1", FAINT, "#bbbbbb", "--"),
    ])
    layer_top = blocks[3] + BAND_H
    ax.text((x_left + x_right) / 2, blocks[4] + BAND_H / 2, "not run: the pass stops after the deepest ℓ",
            ha="center", va="center", fontsize=9, color="#777777")
    for x, r in zip(xs, read):  # the residual stream leaving block ℓ at each position
        ax.plot([x], [layer_top], marker="o", markersize=7 if r else 5, color=TARGET if r else "white",
                markeredgecolor=TARGET if r else "#999999", zorder=5)
    first_read = xs[read.index(True)] - widths[read.index(True)] / 2
    last_read = xs[-1] + widths[-1] / 2
    ax.plot([first_read, first_read, last_read, last_read], [5.4, 4.6, 4.6, 5.4], color=TARGET, lw=1.2)
    ax.text((first_read + last_read) / 2, 4.0, "positions: task.activations\n(last_k here; window, full)",
            ha="center", va="top", fontsize=9, color=TARGET)
    ax.text(xs[0] + 1.0, 4.0, "skip_first: the\nattention sink", ha="center", va="top", fontsize=8.5,
            color="#777777")

    # ---- middle: the vectors ---------------------------------------------------------------------------------
    mx = 72  # the middle column's centre
    ax.text(mx, 43.4, "2. K vectors, d numbers each", ha="center", fontsize=13, weight="bold", color=TARGET)
    for i in range(4):
        left = mx - 6.6 + i * 3.4
        box(ax, left, 31.5, 2.4, 10.0, face=TARGET_LIGHT, edge=TARGET, round_=0.2)
        ax.text(left + 1.2, 36.5, f"$v_{i + 1}$", ha="center", va="center", fontsize=11)
    ax.text(mx, 30.6, "cached as safetensors under .cache/ao_calib/activations/", ha="center", va="top",
            fontsize=8.5, color="#555555")
    arrow(ax, (xs[-1], layer_top + 0.4), (mx - 7.4, 36.5), color=TARGET, rad=-0.3)
    box(ax, mx - 11, 17.5, 22, 8.0, face="white", edge=TARGET, ls="--")
    ax.text(mx, 23.2, "centre (optional)", ha="center", fontsize=10.5, weight="bold", color=TARGET)
    ax.text(mx, 20.7, r"$v \leftarrow v - \bar{v}_{\mathrm{train}}$, per layer", ha="center", fontsize=10.5)
    ax.text(mx, 18.4, "task.activations.center=true", ha="center", fontsize=8.5, family="monospace",
            color="#555555")
    arrow(ax, (mx, 28.4), (mx, 25.5), color=TARGET)

    # the injection rule, under the centring
    box(ax, mx - 18.5, 0.8, 37, 14.2, face="white", edge=ORACLE)
    fx = mx - 17.3
    ax.text(fx, 12.6, "at the output of block 1, at each placeholder:", fontsize=9.5, color=ORACLE, weight="bold")
    ax.text(fx, 9.3, r"add (default):  $h' = h + c\,\Vert h\Vert\,\dfrac{v}{\Vert v\Vert}$", fontsize=11.5)
    ax.text(fx, 5.4, r"replace:  $h' = c\,\Vert h\Vert\,\dfrac{v}{\Vert v\Vert}$", fontsize=11.5)
    ax.text(fx, 1.5, "h: the residual stream there; c: task.steering_coefficient (1);\n"
            "mode: model.steering_mode; block: task.injection_layer (1)", fontsize=8.2, color="#555555")

    # ---- right: the oracle ------------------------------------------------------------------------------------
    ox = 93
    ax.text(ox, 49, "3. Oracle: the same base model + LoRA", fontsize=13, weight="bold", color=ORACLE)
    ax.text(ox, 46.2, "prompt: \"Layer: 15\\n\" + one \" ?\" per vector + \" \\n\" + the question",
            fontsize=10, color="#555555")
    o_labels = ["Layer: 15\\n", " ?", " ?", " ?", " ?", " \\n", "Is the mood calm?", "…"]
    o_widths = [9.6, 2.4, 2.4, 2.4, 2.4, 3.2, 14.4, 2.0]
    placeholder = [False, True, True, True, True, False, False, False]
    oxs = tokens(ax, ox, 6, o_labels, o_widths,
                 faces=[ORACLE_LIGHT if p else "white" for p in placeholder],
                 edges=[ORACLE if p else INK for p in placeholder], gap=0.4, size=9)
    o_left, o_right = ox - 0.6, ox + sum(o_widths) + 0.4 * (len(o_widths) - 1) + 0.6
    o_blocks = bands(ax, o_left, o_right, 12.0, [
        ("block 0", GREY, "#999999", "-"),
        ("block 1", ORACLE_LIGHT, ORACLE, "-", 4.4),
        ("block 2", GREY, "#999999", "-"),
        ("⋮", None, None, None),
        ("block L−1", GREY, "#999999", "-"),
    ], labels_right=True)
    inject_y = o_blocks[1] + BAND_H
    for x, p in zip(oxs, placeholder):
        if p:
            ax.plot([x], [inject_y], marker="o", markersize=7, color=ORACLE, zorder=5)
    ax.text(oxs[3] + 1.2, 4.0, "placeholders, found from the token ids and checked in every pass",
            ha="center", va="top", fontsize=8.5, color=ORACLE)
    # the (centred) vectors go in at the placeholders, one each
    rail = inject_y + 2.6
    ax.plot([oxs[1] - 2.0, oxs[4]], [rail, rail], color=ORACLE, lw=1.4)
    arrow(ax, (mx + 11, 21.5), (oxs[1] - 2.0, rail), color=ORACLE, style="-", lw=1.4)
    for x in oxs[1:5]:
        arrow(ax, (x, rail), (x, inject_y + 0.45), color=ORACLE, lw=1.2)

    # the answer
    top = o_blocks[4] + BAND_H
    box(ax, o_right - 33, 35.5, 33, 5.0, "[epistemic status: 85] Yes", face="white", edge=ORACLE, size=12,
        family="monospace", lw=1.6)
    ax.text(o_right - 16.5, 41.6, "generated after the prompt; 85: its stated chance of being right", ha="center",
            fontsize=9, color=ORACLE)
    arrow(ax, (o_right - 5, top), (o_right - 5, 35.5), color=ORACLE)

    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, metadata={"Date": None} if out.suffix == ".svg" else None, dpi=110)
    plt.close(fig)
    return out


if __name__ == "__main__":
    print(draw(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT))
