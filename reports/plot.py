#!/usr/bin/env python3
"""Plots of hla report: for each operator, the worst normwise relative error against n (log-log),
one line per implementation x precision, with the a-priori bound of that same worst cell, in the
same norm, dashed beside (absent where the cell has outputs whose denominator bound does not
exclude zero).

Only the output rows (quantity O) of the report's own head (d, dv) are drawn; its wide heads and
the backward's rows (dQ, dK, dV) are tabled in report.md.

usage: plot.py DATA_CSV PLOT_DIR D DV   (called by hla report; needs Debian's python3-matplotlib)
"""
import csv
import math
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"streaming": "tab:blue", "scan": "tab:orange", "chunked": "tab:green", "gpu-streaming": "tab:purple",
          "gpu-scan": "tab:red", "gpu-fast": "tab:brown"}
MARKERS = {"float64": "o", "float32": "s", "bf16-in/f32": "^", "bf16-in/bf16-mma": "v"}


def main(data_csv, plot_dir, d, dv):
    errors = defaultdict(lambda: defaultdict(float))  # (spec, impl, precision) -> n -> worst error
    bounds = defaultdict(dict)  # the bound of the cell with the worst error
    specs = []
    with open(data_csv, newline="") as f:
        for row in csv.DictReader(f):
            if int(row["d"]) != d or int(row["dv"]) != dv or row["quantity"] != "O":
                continue
            if row["spec"] not in specs:
                specs.append(row["spec"])
            key = (row["spec"], row["implementation"], row["precision"])
            n = int(row["n"])
            u = 2.0 ** -int(row["u_bits"])
            e = float(row["normwise_u"]) * u
            b = float(row["bound_normwise_u"]) * u
            if n not in errors[key] or e > errors[key][n]:
                errors[key][n] = e
                bounds[key][n] = b
    for spec in specs:
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), sharex=True)
        for ax, title, wanted in (
            (axes[0], "float64 (u = 2^-53)", ("float64",)),
            (axes[1], "float32 arithmetic (u = 2^-24)", ("float32", "bf16-in/f32")),
        ):
            missing_bound = False
            for (s, impl, precision), by_n in sorted(errors.items()):
                if s != spec or precision not in wanted:
                    continue
                ns = sorted(n for n in by_n if by_n[n] > 0)
                color = COLORS.get(impl, "tab:gray")
                ax.plot(ns, [by_n[n] for n in ns], color=color, marker=MARKERS.get(precision, "x"),
                        markersize=5, linewidth=1.5, label=f"{impl} {precision}")
                bound = bounds[(s, impl, precision)]
                bn = sorted(n for n in bound if 0 < bound[n] < math.inf)
                missing_bound |= len(bn) < len(ns)
                if bn and precision != "bf16-in/f32":  # bf16-in/f32's bound is float32's
                    ax.plot(bn, [bound[n] for n in bn], color=color, linestyle="--", linewidth=1,
                            label=f"{impl} {precision} bound")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_title(title)
            ax.set_xlabel("sequence length n")
            ax.grid(True, which="major", alpha=0.3)
            ax.legend(fontsize=7, loc="upper left")
            if missing_bound:
                ax.text(0.99, 0.01, "no dashed point: that case's denominator\nbound does not exclude zero",
                        transform=ax.transAxes, ha="right", va="bottom", fontsize=7, color="dimgray")
        axes[0].set_ylabel("normwise relative error ||o_hat - o||_F / ||o||_F")
        fig.suptitle(f"{spec}: worst error over decays, inputs, chunk sizes and seeds "
                     "(dashed: that case's a-priori bound)")
        fig.tight_layout()
        fig.savefig(f"{plot_dir}/{spec.replace('/', '-')}.png", dpi=90, metadata={"Software": None})
        plt.close(fig)


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
