#!/usr/bin/env python3
"""GPU benchmark, one command on a machine with a CUDA GPU and PyTorch:

    python3 bench/gpu/run.py --binary build/hla_bench_gpu --out perf-gpu.md

In one run: hla2, ahla and hla3 masked forward (GPU chunk scan, streaming kernel and the fast path; float32 inputs, and
bf16 inputs with float32 accumulation) from build/hla_bench_gpu; causal
torch.nn.functional.scaled_dot_product_attention in bf16 at the same shapes; the device-to-device
copy bandwidth and the dense matrix rates (bf16, and float32 without TF32); and each hla row's
roofline floors (bytes over the copy bandwidth, FLOPs of the chunk form over the matrix rate).
Then forward plus backward at --backward-n: hla's GPU scan (forward, and its backward from
`--pass backward`), the fast path where it has a backward (`--pass train --methods fast`: the
forward that writes its checkpoints, then the backward), the PyTorch peer through autograd (the
same chunked code), causal SDPA and, where the `fla` package (flash-linear-attention) is importable
(PYTHONPATH), its first-order chunk_simple_gla as the field's reference point.
Prints the markdown tables and writes them, with the date and the card, to --out, which must not
exist yet (the benchmark writes only files it creates).
"""

import argparse
import csv
import datetime
import io
import math
import os
import subprocess
import sys

import torch


def median_ms(fn, reps=5, warmup=2):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    times.sort()
    return times[len(times) // 2]


def copy_bandwidth():
    """Bytes read plus bytes written per second by a 4 GiB device-to-device copy."""
    src = torch.randn(1 << 30, device="cuda")
    dst = torch.empty_like(src)
    ms = median_ms(lambda: dst.copy_(src))
    return 2 * src.numel() * 4 / (ms * 1e-3)


def matrix_rate(dtype):
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    torch.backends.cuda.matmul.allow_tf32 = False
    ms = median_ms(lambda: a @ b)
    return 2 * n**3 / (ms * 1e-3)


def sdpa_ms(batch, heads, n, d):
    q, k, v = (torch.randn(batch, heads, n, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    fn = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    return median_ms(fn, reps=3 if n >= 32768 else 5)


def train_ms(forward, shapes, dtype):
    """Forward plus backward of `forward` through autograd on fresh inputs of `shapes` (q, k, v in
    `dtype`), with dO drawn like the output; the gradients are dropped between runs."""
    q, k, v = (torch.randn(*shape, device="cuda", dtype=dtype).div_(shape[-1] ** 0.25).requires_grad_()
               for shape in shapes)
    d_out = torch.randn_like(forward(q, k, v))  # the output's own type: no cast inside the timing

    def step():
        q.grad = k.grad = v.grad = None
        forward(q, k, v).backward(d_out)

    ms = median_ms(step, reps=3)
    del q, k, v, d_out
    torch.cuda.empty_cache()
    return ms


def fla_gla_train_ms(batch, heads, n, d):
    """FLA's chunk_simple_gla (first-order linear attention with a decay, in Triton) forward plus
    backward through autograd: bf16 [B, T, H, D] inputs, a data-independent decay per head (g_gamma =
    log 0.999, as hla's decayed rows), queries unscaled; nan where FLA is not importable. (Its gates
    per token, g, refuse the backward on Hopper with Triton below 3.7.1: FLA issue #640.)"""
    try:
        from fla.ops.simple_gla import chunk_simple_gla
    except ImportError:
        return math.nan
    g_gamma = torch.full((heads,), math.log(0.999), device="cuda")
    return train_ms(lambda q, k, v: chunk_simple_gla(q, k, v, g_gamma=g_gamma, scale=1.0)[0],
                    [(batch, n, heads, d)] * 3, torch.bfloat16)


def hla2_chunked_torch(q, k, v, chunk=64):
    """Masked hla2 (gamma = 1, unnormalized) fully parallel over chunks, as hla's chunk form
    (Hla2MaskedChunks): o_t = sum_{j<=t} (q_t . u_j) v_j with u_j = S_j q_j and S_j the inclusive key
    moment. Chunk summaries by batched products, prefixes over chunks by cumulative sums."""
    B, H, n, d = q.shape
    Q, K, V = (x.float().reshape(B, H, n // chunk, chunk, -1) for x in (q, k, v))
    L = torch.ones(chunk, chunk, device=q.device).tril()
    U_local = ((Q @ K.transpose(-1, -2)) * L) @ K  # rows u_j - S_prev q_j
    key_moment = K.transpose(-1, -2) @ K  # each chunk's K^T K
    S_prev = torch.cumsum(key_moment, 2) - key_moment  # exclusive prefix over chunks
    added = S_prev @ (Q.transpose(-1, -2) @ V) + U_local.transpose(-1, -2) @ V  # chunk's part of F = sum u_j v_j^T
    F_prev = torch.cumsum(added, 2) - added
    U = Q @ S_prev + U_local
    O = Q @ F_prev + ((Q @ U.transpose(-1, -2)) * L) @ V
    return O.reshape(B, H, n, -1)


def ahla_chunked_torch(q, k, v, chunk=64):
    """Masked ahla (gamma = 1, unnormalized): o_t = sum_{j<=i<=t} (q_t . k_i)(q_i . k_j) v_j, with
    P the prefix of k v^T and E = sum_i k_i q_i^T P_i, chunked the same way."""
    B, H, n, d = q.shape
    Q, K, V = (x.float().reshape(B, H, n // chunk, chunk, -1) for x in (q, k, v))
    L = torch.ones(chunk, chunk, device=q.device).tril()
    A = (Q @ K.transpose(-1, -2)) * L
    AV = A @ V  # rows q_i^T P_local,i
    key_value = K.transpose(-1, -2) @ V
    P_prev = torch.cumsum(key_value, 2) - key_value
    routed = (K.transpose(-1, -2) @ Q) @ P_prev + K.transpose(-1, -2) @ AV  # chunk's part of E
    E_prev = torch.cumsum(routed, 2) - routed
    O = Q @ E_prev + A @ (Q @ P_prev + AV)
    return O.reshape(B, H, n, -1)


def hla3_chunked_torch(q, k, v, chunk=64):
    """Masked hla3 (gamma = 1, unnormalized), as hla's chunk form (Hla3MaskedChunks): with S^K and P the
    exclusive prefixes of k k^T and k v^T over chunks, Z = Q S^K + (A . L) K and R = Q P + (A . L) V
    (rows z_t = S^K_t q_t, r_t = q_t^T P_t), F the exclusive prefix of the chunks' Z^T R, and
    o_t = q_t^T F + sum_{u<=t in the chunk} (q_t . z_u) r_u."""
    B, H, n, d = q.shape
    Q, K, V = (x.float().reshape(B, H, n // chunk, chunk, -1) for x in (q, k, v))
    L = torch.ones(chunk, chunk, device=q.device).tril()
    A = (Q @ K.transpose(-1, -2)) * L
    key_moment = K.transpose(-1, -2) @ K
    key_value = K.transpose(-1, -2) @ V
    S_prev = torch.cumsum(key_moment, 2) - key_moment
    P_prev = torch.cumsum(key_value, 2) - key_value
    Z = Q @ S_prev + A @ K
    R = Q @ P_prev + A @ V
    added = Z.transpose(-1, -2) @ R
    F_prev = torch.cumsum(added, 2) - added
    O = Q @ F_prev + ((Q @ Z.transpose(-1, -2)) * L) @ R
    return O.reshape(B, H, n, -1)


PEERS = {"hla2": hla2_chunked_torch, "ahla": ahla_chunked_torch, "hla3": hla3_chunked_torch}
TABLES = ("forward", "backward", "heads", "goals", "batches")


def verify_peers(binary, n=4096, heads=2, d=64):
    """The peers compute hla's operator: run hla's GPU scan on bf16 inputs, dump inputs and output,
    and compare the peer's output on the same inputs (relative Frobenius difference)."""
    import os
    import tempfile
    import numpy as np
    worst = {}
    for variant, peer in PEERS.items():
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run([binary, "--batch", "1", "--heads", str(heads), "--n", str(n), "--variants", variant,
                            "--precisions", "bf16", "--methods", "scan", "--reps", "1", "--dump", tmp],
                           check=True, capture_output=True)
            load = lambda name, cols: torch.from_numpy(
                np.fromfile(os.path.join(tmp, name), dtype=np.float32).reshape(1, heads, n, cols)).cuda()
            q, k, v, num = load("q.f32", d), load("k.f32", d), load("v.f32", d), load("num.f32", d)
            got = peer(q.double(), k.double(), v.double())
            worst[variant] = ((got - num.double()).norm() / got.norm()).item()
    return worst


def chunk_flops(variant, n, d, dv, c):
    """FLOPs per token of the chunk form (2 per multiply-add), the products docs/perf.md lists."""
    if variant == "hla2":  # Hla2MaskedChunks: W, U = W_g K, S, C, F, Q S, weights, weights V, Q F; scan
        per_token = 2 * c * d + 2 * c * d + 2 * d * d + 2 * d * dv + 2 * d * dv + 2 * d * d + 2 * c * d + 2 * c * dv + 2 * d * dv
        per_token += 4 * d * d * dv / c
    elif variant == "ahla":  # W, W V, W (W V), R, P, E, Q E, Q P, routed (Q P); scan
        per_token = 2 * c * d + 2 * c * dv + 2 * c * dv + 2 * d * d + 2 * d * dv + 2 * d * dv + 2 * d * dv + 2 * d * dv + 2 * c * dv
        per_token += 4 * d * d * dv / c
    else:  # hla3 (Hla3MaskedChunks): A, Q S^K, A K, Q P, A V, S^K, P, W = Q Z^T, Q F, W R, F
        per_token = 2 * c * d + 2 * d * d + 2 * c * d + 2 * d * dv + 2 * c * dv + 2 * d * d + 2 * d * dv
        per_token += 2 * c * d + 2 * d * dv + 2 * c * dv + 2 * d * dv
    return per_token * n


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", default="build/hla_bench_gpu")
    parser.add_argument("--out", default="perf-gpu.md")
    parser.add_argument("--n", default="1024,2048,4096,16384,65536")
    parser.add_argument("--methods", default="scan,streaming,fast")
    parser.add_argument("--backward-n", default="4096,65536", help="lengths of the forward + backward table; empty: none")
    parser.add_argument("--head-sizes", default="32,64",
                        help="d = dv of the fast path's head-size table (at the longest --n); empty: none")
    parser.add_argument("--tables", default=",".join(TABLES),
                        help="which tables, of " + ", ".join(TABLES) + " (goals: issue 19's, at n = 65536)")
    args = parser.parse_args()
    tables = args.tables.split(",")
    if not tables or any(t not in TABLES for t in tables):
        sys.exit(f"--tables {args.tables}: a comma-separated list of " + ", ".join(TABLES))
    if os.path.exists(args.out):
        sys.exit(f"--out {args.out}: exists; give a path that does not (the benchmark does not replace files)")
    if not os.path.isdir(os.path.dirname(os.path.abspath(args.out))):
        sys.exit(f"--out {args.out}: its directory does not exist")
    batch, heads, d, dv, chunk = 8, 16, 64, 64, 64
    lengths = [int(x) for x in args.n.split(",")]

    card = torch.cuda.get_device_name(0)
    bandwidth = copy_bandwidth()
    bf16_rate, f32_rate = matrix_rate(torch.bfloat16), matrix_rate(torch.float32)
    lines = [f"{card}, {datetime.date.today().isoformat()}: measured ceilings in the same run: copy "
             f"{bandwidth / 1e12:.2f} TB/s (read + write), bf16 matrix product {bf16_rate / 1e12:.0f} TFLOP/s, "
             f"float32 (no TF32) {f32_rate / 1e12:.1f} TFLOP/s.",
             f"Command: `python3 bench/gpu/run.py {' '.join(sys.argv[1:])}`"]
    print(lines[0], flush=True)  # progress: the tables come at the end
    if "forward" in tables:
        lines += ["", *forward_table(args.binary, args.n, args.methods, batch, heads, d, dv, chunk, bandwidth,
                                     bf16_rate, f32_rate)]
    backward_lengths = [int(x) for x in args.backward_n.split(",") if x]
    if backward_lengths and "backward" in tables:
        torch.cuda.empty_cache()  # the forward peers' memory back before the backward runs
        lines += ["", *backward_table(args.binary, batch, heads, d, dv, chunk, backward_lengths)]
    head_sizes = [int(x) for x in args.head_sizes.split(",") if x]
    if head_sizes and "heads" in tables:
        lines += ["", *head_size_table(args.binary, batch, heads, head_sizes, max(lengths))]
    if "goals" in tables:
        lines += ["", *goals_table(args.binary, batch, heads)]
    if "batches" in tables:
        lines += ["", *batch_table(args.binary, batch, heads)]
    table = "\n".join(lines)
    print(table)
    with open(args.out, "x") as f:  # created here: never an existing file
        f.write(table + "\n")


def forward_table(binary, n_list, methods, batch, heads, d, dv, chunk, bandwidth, bf16_rate, f32_rate):
    """The forward of every variant and method at each length, beside the PyTorch peer and SDPA, with
    each row's roofline floors."""
    lengths = [int(x) for x in n_list.split(",")]
    sdpa = {n: sdpa_ms(batch, heads, n, d) for n in lengths}
    print("sdpa:", sdpa, flush=True)
    agreement = verify_peers(binary)
    print("peer vs hla (relative Frobenius):", agreement, flush=True)
    peer = {}
    for variant, fn in PEERS.items():
        for n in lengths:
            q, k, v = (torch.randn(batch, heads, n, d, device="cuda", dtype=torch.bfloat16) / d**0.25
                       for _ in range(3))
            peer[variant, n] = median_ms(lambda: fn(q, k, v, chunk), reps=3)
            del q, k, v
    print("peer:", peer, flush=True)

    command = [binary, "--batch", str(batch), "--heads", str(heads), "--d", str(d), "--dv", str(dv),
               "--chunk", str(chunk), "--n", n_list, "--methods", methods, "--variants", ",".join(PEERS),
               "--reps", "3"]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"{binary} failed: {result.stderr.strip()}")
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    times = {(r["variant"], r["precision"], r["method"], int(r["n"])): float(r["median_ms"]) for r in rows}

    lines = [
        f"GPU forward; masked, unnormalized, B = {batch}, H = {heads}, "
        f"d = dv = {d}, chunk {chunk}; medians of 3 runs after a warm-up (CUDA events).",
        "Peer: the same operator chunked in PyTorch (bf16 inputs, float32 products, cumulative sums over "
        "chunk summaries; `hla2_chunked_torch`, `ahla_chunked_torch`, `hla3_chunked_torch`), timed on its own bf16 inputs; its "
        "output on hla's inputs (B = 1, H = 2, n = 4096, float64) differs from hla's GPU scan by "
        + ", ".join(f"{v} {e:.1e}" for v, e in agreement.items()) + " (relative Frobenius).",
        "",
        "| variant | inputs | n | fast ms | GPU scan ms | GPU streaming ms | torch chunked ms | SDPA bf16 ms | SDPA / fast | torch / fast | byte floor ms | FLOP floor ms | fast / floor |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for variant in PEERS:
        for precision in ("f32", "bf16"):
            for n in lengths:
                scan = times.get((variant, precision, "scan", n), math.nan)
                fast = times.get((variant, precision, "fast", n), math.nan)
                stream = times.get((variant, precision, "streaming", n), math.nan)
                in_bytes = 2 if precision == "bf16" else 4
                tokens = batch * heads * n
                moved = tokens * ((2 * d + dv) * in_bytes + (dv + 1) * 4)
                byte_floor = moved / bandwidth * 1e3
                flop_floor = batch * heads * chunk_flops(variant, n, d, dv, chunk) / (
                    bf16_rate if precision == "bf16" else f32_rate) * 1e3
                floor = max(byte_floor, flop_floor)
                lines.append(
                    f"| {variant} | {precision} | {n} | {fast:.3f} | {scan:.3f} | {stream:.3f} | {peer[variant, n]:.3f} | "
                    f"{sdpa[n]:.3f} | {sdpa[n] / fast:.2f} | {peer[variant, n] / fast:.2f} | {byte_floor:.3f} | "
                    f"{flop_floor:.3f} | {fast / floor:.1f} |")
    return lines


def backward_table(binary, batch, heads, d, dv, chunk, lengths):
    """Forward plus backward: hla's GPU scan (its forward and its `--pass backward`, float32 and bf16
    inputs), the fast path's `--pass train` (bf16 inputs), the PyTorch peer and causal SDPA
    through autograd (bf16 inputs)."""
    hla = {}
    # The fast backward covers hla2 and ahla (hla3's fast columns stay nan).
    runs = [("scan", "forward", "plain", ",".join(PEERS)), ("scan", "backward", "plain", ",".join(PEERS)),
            ("fast", "train", "plain,decayed,normalized-decayed", "hla2,ahla")]
    for method, pass_, options, variants in runs:
        command = [binary, "--batch", str(batch), "--heads", str(heads), "--d", str(d), "--dv", str(dv),
                   "--chunk", str(chunk), "--n", ",".join(map(str, lengths)), "--methods", method,
                   "--variants", variants, "--options", options, "--reps", "3", "--pass", pass_]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            sys.exit(f"{binary} failed: {result.stderr.strip()}")
        for r in csv.DictReader(io.StringIO(result.stdout)):
            hla[r["variant"], r["precision"], int(r["n"]), pass_, r["options"]] = float(r["median_ms"])
    sdpa = {n: train_ms(lambda q, k, v: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True),
                        [(batch, heads, n, d)] * 3, torch.bfloat16) for n in lengths}
    fla = {n: fla_gla_train_ms(batch, heads, n, d) for n in lengths}
    lines = [
        f"Forward plus backward (gradients of <dO, O>, dO Gaussian), B = {batch}, H = {heads}, d = dv = {d}; "
        "hla's GPU scan: its forward plus `hla_bench_gpu --pass backward --methods scan` (float32 gradients); "
        "the fast path: `--pass train --methods fast` (its forward writing the checkpoints, then its backward; "
        "bf16 inputs, float32 gradients), without decay, with gamma = 0.999 (`--options decayed`) and normalized with it (eps = 1/4; the readouts' adjoints drawn, their elementwise formation from dO not timed); the PyTorch peer, SDPA and FLA's first-order chunk_simple_gla with a "
        "decay per head (nan without the `fla` package) through autograd on bf16 inputs.",
        "",
        "| variant | n | GPU scan f32 fwd + bwd ms | GPU scan bf16 fwd + bwd ms | fast path fwd + bwd ms | fast path decayed fwd + bwd ms | fast path normalized decayed fwd + bwd ms | torch chunked fwd + bwd ms | SDPA bf16 fwd + bwd ms | FLA chunk_simple_gla decayed fwd + bwd ms | fast decayed / FLA |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for variant, fn in PEERS.items():
        for n in lengths:
            total = {p: hla.get((variant, p, n, "forward", "plain"), math.nan) +
                     hla.get((variant, p, n, "backward", "plain"), math.nan) for p in ("f32", "bf16")}
            peer = train_ms(lambda q, k, v: fn(q, k, v, chunk), [(batch, heads, n, d)] * 3, torch.bfloat16)
            fast = hla.get((variant, "bf16", n, "train", "plain"), math.nan)
            fast_decayed = hla.get((variant, "bf16", n, "train", "decayed"), math.nan)
            fast_normalized = hla.get((variant, "bf16", n, "train", "normalized-decayed"), math.nan)
            lines.append(f"| {variant} | {n} | {total['f32']:.2f} | {total['bf16']:.2f} | {fast:.2f} | {fast_decayed:.2f} "
                         f"| {fast_normalized:.2f} "
                         f"| {peer:.2f} | {sdpa[n]:.2f} | {fla[n]:.2f} | {fast_decayed / fla[n]:.2f} |")
            print(lines[-1], flush=True)
    return lines


def head_size_table(binary, batch, heads, sizes, n):
    """The fast path at each head size d = dv (narrower than 64: read zero-padded to the tiles' 64
    columns): hla2, ahla and hla3 forward with bf16 output, hla2 and ahla forward with checkpoints plus
    backward, and each time's ratio to d = dv = 64's (nan where 64 is not in the table)."""
    times = {}
    for size in sizes:
        for pass_, variants in (("forward", ",".join(PEERS)), ("train", "hla2,ahla")):
            command = [binary, "--batch", str(batch), "--heads", str(heads), "--d", str(size), "--dv", str(size),
                       "--n", str(n), "--methods", "fast", "--precisions", "bf16", "--variants", variants,
                       "--reps", "3", "--pass", pass_] + (["--out", "bf16"] if pass_ == "forward" else [])
            result = subprocess.run(command, capture_output=True, text=True)
            if result.returncode != 0:
                sys.exit(f"{binary} failed: {result.stderr.strip()}")
            for r in csv.DictReader(io.StringIO(result.stdout)):
                times[r["variant"], size, pass_] = float(r["median_ms"])
    lines = [
        f"Head sizes on the fast path, B = {batch}, H = {heads}, n = {n}, bf16 inputs: the forward with bf16 "
        "output, and forward (writing the checkpoints) plus backward (`--pass train`), unnormalized, gamma = 1; "
        "ratios to d = dv = 64 in the same run.",
        "",
        "| variant | d = dv | forward ms | forward / d = 64 | fwd + bwd ms | fwd + bwd / d = 64 |",
        "|---|---|---|---|---|---|",
    ]
    for variant in PEERS:
        for size in sizes:
            forward, train = (times.get((variant, size, p), math.nan) for p in ("forward", "train"))
            base_forward, base_train = (times.get((variant, 64, p), math.nan) for p in ("forward", "train"))
            lines.append(f"| {variant} | {size} | {forward:.3f} | {forward / base_forward:.2f} | {train:.2f} | "
                         f"{train / base_train:.2f} |")
    return lines


def goals_table(binary, batch, heads, n=65536, reps=10):
    """Issue 19's goals for the fast path, each measured here in this one run and set beside its
    target: bf16 inputs and outputs, float32 state, n = 65536; the forward of every variant and option
    at d = dv = 64, the head sizes 32 and 128, and hla2's
    forward with checkpoints plus backward."""
    runs = [(64, "forward", "hla2,ahla,hla3", "plain,normalized,decayed,normalized-decayed"),
            (32, "forward", "hla2,ahla,hla3", "plain"), (128, "forward", "hla2,ahla,hla3", "plain"),
            (64, "train", "hla2", "plain,decayed")]
    ms = {}
    for size, pass_, variants, options in runs:
        command = [binary, "--batch", str(batch), "--heads", str(heads), "--d", str(size), "--dv", str(size),
                   "--n", str(n), "--methods", "fast", "--precisions", "bf16", "--variants", variants,
                   "--options", options, "--reps", str(reps), "--pass", pass_] + \
                  (["--out", "bf16"] if pass_ == "forward" else [])
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            sys.exit(f"{binary} failed: {result.stderr.strip()}")
        for r in csv.DictReader(io.StringIO(result.stdout)):
            ms[r["variant"], size, pass_, r["options"]] = float(r["median_ms"])
    get = lambda variant, size=64, pass_="forward", options="plain": ms.get((variant, size, pass_, options), math.nan)
    rows = [("hla2 forward ms", get("hla2"), 1.15)]
    for variant in ("hla2", "ahla"):
        for options in ("normalized", "decayed", "normalized-decayed"):
            rows.append((f"{variant} {options} / plain", get(variant, options=options) / get(variant), 1.15))
    rows += [("ahla / hla2", get("ahla") / get("hla2"), 1.0), ("hla3 / hla2", get("hla3") / get("hla2"), 2.5)]
    rows += [(f"{v} d = dv = 128 / 64", get(v, 128) / get(v), 2.5) for v in PEERS]
    rows += [(f"{v} d = dv = 32 / 64", get(v, 32) / get(v), 0.6) for v in PEERS]
    rows += [("hla2 forward + backward ms", get("hla2", pass_="train"), 11.3),
             ("hla2 forward + backward ms, the moonshot", get("hla2", pass_="train"), 8.0),
             ("hla2 decayed forward + backward ms", get("hla2", pass_="train", options="decayed"), 11.3)]
    lines = [
        f"Issue 19's goals in one run: the fast path, B = {batch}, H = {heads}, n = {n}, bf16 inputs, float32 "
        f"state, the forward's output in bf16, medians of {reps} runs (`hla_bench_gpu --methods fast --precisions "
        "bf16`; decayed: gamma = 0.999; normalized: eps = 1/4).",
        "",
        "| goal | measured | at most | met |",
        "|---|---|---|---|",
    ]
    for name, value, bound in rows:
        lines.append(f"| {name} | {value:.3f} | {bound:g} | {'yes' if value <= bound else 'no'} |")
    return lines


def batch_table(binary, batch, heads, n=65536, reps=5):
    """Few sequence-heads on the fast path (issue 19: the segment split for B x H below the SMs): hla2 and
    ahla, unnormalized, gamma = 1, bf16 inputs, at d = dv = 64 and 128, the forward (bf16 output) and
    forward plus backward (`--pass train`), at B = 1 with H = 2 and 16 and at B = batch, H = heads; each
    time also per sequence-head as a multiple of the full batch's: 1, a head as cheap as in the full batch;
    (batch x heads) / (B x H), the full batch's time, as if each head's walk alone set it."""
    shapes = [(1, 2), (1, 16), (batch, heads)]
    ms = {}
    for size in (64, 128):
        for b, h in shapes:
            for pass_ in ("forward", "train"):
                command = [binary, "--batch", str(b), "--heads", str(h), "--d", str(size), "--dv", str(size),
                           "--n", str(n), "--methods", "fast", "--precisions", "bf16", "--variants", "hla2,ahla",
                           "--options", "plain", "--reps", str(reps), "--pass", pass_] + \
                          (["--out", "bf16"] if pass_ == "forward" else [])
                result = subprocess.run(command, capture_output=True, text=True)
                if result.returncode != 0:
                    sys.exit(f"{binary} failed: {result.stderr.strip()}")
                for r in csv.DictReader(io.StringIO(result.stdout)):
                    ms[r["variant"], size, b, h, pass_] = float(r["median_ms"])
    lines = [
        f"Few sequence-heads on the fast path, n = {n}, bf16 inputs, unnormalized, gamma = 1, medians of {reps} runs: "
        "the forward with bf16 output and forward plus backward (`--pass train`); per head: the time per "
        f"sequence-head over B = {batch}, H = {heads}'s in the same run.",
        "",
        "| variant | d = dv | B | H | forward ms | forward per head | fwd + bwd ms | fwd + bwd per head |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for variant in ("hla2", "ahla"):
        for size in (64, 128):
            for b, h in shapes:
                cells = []
                for pass_ in ("forward", "train"):
                    t = ms.get((variant, size, b, h, pass_), math.nan)
                    full = ms.get((variant, size, batch, heads, pass_), math.nan)
                    cells += [f"{t:.3f}", f"{(t / (b * h)) / (full / (batch * heads)):.2f}"]
                lines.append(f"| {variant} | {size} | {b} | {h} | " + " | ".join(cells) + " |")
    return lines


if __name__ == "__main__":
    main()
