"""hla check --report: the error along the sequence from tokens.csv (written by hla check).
Usage: plot_check.py TOKENS_CSV OUT_PNG OWN_NAME OUTPUT_FORMAT"""

import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(tokens_csv, out_png, own_name, output_format):
    with open(tokens_csv, newline="") as f:
        rows = list(csv.DictReader(f))
    token = [int(r["token"]) for r in rows]
    series = {key: [float(r[key]) for r in rows] for key in ("worst_ratio", "distance_units", "own_distance_units")}
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 6.5), sharex=True)
    top.semilogy(token, [max(x, 1e-12) for x in series["worst_ratio"]], lw=0.8, label="the kernel")
    top.axhline(1, color="black", lw=0.8, ls="--", label="the sound bound")
    top.set_ylabel("worst |error| / sound bound")
    top.legend(loc="best")
    # The running rms up to each token (every token has the same number of outputs): a departure
    # shows where it starts, and the single tokens' rounding flips average out.
    def running(values):
        out, total = [], 0.0
        for i, x in enumerate(values):
            total += x * x
            out.append(max((total / (i + 1)) ** 0.5, 1e-6))
        return out

    bottom.semilogy(token, running(series["own_distance_units"]), lw=1.2, ls="--", label=f"the toolkit's {own_name}")
    bottom.semilogy(token, running(series["distance_units"]), lw=0.9, label="the kernel")
    bottom.set_ylabel(f"distance from the rounded reference\n(running rms, {output_format} units)")
    bottom.set_xlabel("token")
    bottom.legend(loc="best")
    fig.tight_layout()
    fig.savefig(out_png, dpi=110)


if __name__ == "__main__":
    main(*sys.argv[1:5])
