"""Exact, FAISS and ScaNN search for `tapas_tf.retrieval.vector_index`: build time, memory, latency, recall.

    .venv/bin/python benchmarks/vector_index.py --sizes=100000,1000000 [--dim=256] [--queries=200]
        [--faiss_nprobe=8,16,32] [--scann_leaves=20,40,80] [--output=vector_index.json]

Data (seeded, the same for every library): a mixture of Gaussians in --dim dimensions. --centres
centres (default n / 250, clamped to 1,000..4,000) drawn uniformly on the unit sphere, cluster
weights lognormal (sigma 1: some clusters ten times the size of others, as topics are), each
cluster's spread drawn from [0.6, 1.2] (norm of the noise against the centre's 1), each vector
unit-normalised. Queries are noisy copies of random database vectors (noise norm --query_noise,
renormalised), so each query has a clear best row; the other nine of its top 10 come from the same
cluster, or from neighbouring ones when its cluster is small, ordered by small score differences:
the part approximate search gets wrong.

Each (size, library) runs in its own process (this script with --child), so `resource.getrusage`
peak RSS belongs to that library alone. `rss_data_bytes` is the resident size after making the data
and the ground truth, and the kernel's peak mark is reset there (/proc/self/clear_refs), so
rss_peak_bytes is the peak while building and searching and index_rss_bytes = rss_peak - rss_data is
what the index, its build and its searches added (for exact: search temporaries only, since the
index is the data matrix itself). index_bytes is the size of the index's saved files (for these formats, what it holds in memory,
give or take small structures; exact: the float32 matrix). Latency: single-query calls (batch 1)
over --queries queries after 10 warm-up calls, median and p90. recall@k: mean over queries of
|approximate top k & exact top k| / k, exact from `ExactIndex`. Each search-time setting listed
(--faiss_nprobe, --scann_leaves, --scann_reorder) is measured on the same built index.

Threads: --threads (default: the machine's cores) for BLAS (exact), OpenMP (FAISS) and ScaNN's
training; ScaNN answers one query on one thread. On a machine shared with other jobs latencies are
pessimistic; the JSON says what else was running only if --note says so.

Prints one JSON line (and writes it to --output).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))


def _args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000", help="comma-separated vector counts")
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--centres", type=int, default=0, help="0: n / 250 clamped to 1000..4000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--query_noise", type=float, default=0.5)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--libraries", default="exact,faiss,scann")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--faiss_params", default="{}", help="JSON of FaissIndex.build params")
    parser.add_argument("--faiss_nprobe", default="", help="comma-separated nprobe values to measure")
    parser.add_argument("--scann_params", default="{}", help="JSON of ScannIndex.build params")
    parser.add_argument("--scann_leaves", default="", help="comma-separated num_leaves_to_search values")
    parser.add_argument("--scann_reorder", default="", help="comma-separated reorder values")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--note", default="", help="stored as is, e.g. what else ran on the machine")
    parser.add_argument("--output", default="")
    parser.add_argument("--child", default="", help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, default=0, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def _set_threads(threads: int) -> None:
    # Before NumPy is imported: OpenBLAS and OpenMP read these once, at load.
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = str(threads)


def make_data(n: int, dim: int, centres: int, n_queries: int, query_noise: float, seed: int):
    """(database float32 [n, dim], queries float32 [n_queries, dim], source rows [n_queries]); unit rows."""
    import numpy as np

    rng = np.random.default_rng(seed)
    m = centres or int(min(4000, max(1000, n // 250)))
    c = rng.standard_normal((m, dim), dtype=np.float32)
    c /= np.linalg.norm(c, axis=1, keepdims=True)
    weights = rng.lognormal(0.0, 1.0, m)
    spread = rng.uniform(0.6, 1.2, m).astype(np.float32)
    x = np.empty((n, dim), np.float32)
    chunk = 1 << 16  # bounds the temporary normals to 64 MB at d 256
    for start in range(0, n, chunk):
        size = min(chunk, n - start)
        a = rng.choice(m, size, p=weights / weights.sum())
        block = rng.standard_normal((size, dim), dtype=np.float32)
        block *= (spread[a] / np.sqrt(dim))[:, None]
        block += c[a]
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        x[start:start + size] = block
    source = rng.choice(n, n_queries, replace=False)
    q = x[source] + rng.standard_normal((n_queries, dim), dtype=np.float32) * (query_noise / np.sqrt(dim))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    return x, q.astype(np.float32), source


def _dir_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(root, f)) for root, _, files in os.walk(path) for f in files)


def _rss_peak_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def _rss_now_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _reset_rss_peak() -> bool:
    """Resets the kernel's peak-RSS mark (Linux >= 4.0), so getrusage's peak covers what follows only."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _latency(search, queries, k: int) -> tuple[list[float], list]:
    """Per-query milliseconds of batch-1 calls, and the rows each returned."""
    for i in range(min(10, len(queries))):  # warm-up: page faults, lazy allocations, thread pools
        search(queries[i:i + 1], k)
    times, rows = [], []
    for i in range(len(queries)):
        start = time.perf_counter()
        _, r = search(queries[i:i + 1], k)
        times.append((time.perf_counter() - start) * 1000)
        rows.append(r[0])
    return times, rows


def _summary(times: list[float], rows: list, truth, k: int) -> dict:
    import numpy as np

    times_sorted = sorted(times)
    recall = float(np.mean([len(set(r[r >= 0].tolist()) & set(t.tolist())) / k for r, t in zip(rows, truth)]))
    return {"median_ms": round(statistics.median(times), 3),
            "p90_ms": round(times_sorted[min(len(times) - 1, int(0.9 * len(times)))], 3),
            f"recall_at_{k}": round(recall, 4)}


def child(args: argparse.Namespace) -> dict:
    """One library at one size, in this process."""
    _set_threads(args.threads)
    from tapas_tf.retrieval.vector_index import ExactIndex, FaissIndex, ScannIndex

    start = time.perf_counter()
    x, q, _ = make_data(args.size, args.dim, args.centres, args.queries, args.query_noise, args.seed)
    data_s = time.perf_counter() - start
    _, truth = ExactIndex().build(x).search(q, args.k)  # batched; the reference for recall
    # Data generation and the batched ground truth have transient peaks of their own: reset the
    # mark so rss_peak_bytes is the peak while building and searching, on top of rss_data_bytes.
    peak_reset = _reset_rss_peak()
    rss_data = _rss_now_bytes()
    result: dict = {"library": args.child, "size": args.size, "data_s": round(data_s, 2)}
    start = time.perf_counter()
    if args.child == "exact":
        index = ExactIndex().build(x)
    elif args.child == "faiss":
        import faiss
        faiss.omp_set_num_threads(args.threads)
        index = FaissIndex().build(x, threads=args.threads, **json.loads(args.faiss_params))
    elif args.child == "scann":
        index = ScannIndex().build(x, threads=args.threads, **json.loads(args.scann_params))
    else:
        raise SystemExit(f"unknown library {args.child}")
    result["build_s"] = round(time.perf_counter() - start, 2)
    result["params"] = index.params
    settings: list[dict] = [{}]
    if args.child == "faiss" and args.faiss_nprobe:
        settings = [{"nprobe": int(v)} for v in args.faiss_nprobe.split(",")]
    if args.child == "scann" and (args.scann_leaves or args.scann_reorder):
        leaves = [int(v) for v in args.scann_leaves.split(",")] if args.scann_leaves else [None]
        reorders = [int(v) for v in args.scann_reorder.split(",")] if args.scann_reorder else [None]
        settings = [{key: value for key, value in (("num_leaves_to_search", leaf), ("reorder", r))
                     if value is not None} for leaf in leaves for r in reorders]
    result["points"] = []
    for setting in settings:
        times, rows = _latency(lambda queries, k: index.search(queries, k, **setting), q, args.k)
        result["points"].append({**setting, **_summary(times, rows, truth, args.k)})
    result["rss_data_bytes"] = rss_data
    result["rss_peak_bytes"] = _rss_peak_bytes()
    result["rss_peak_reset"] = peak_reset
    result["index_rss_bytes"] = result["rss_peak_bytes"] - rss_data if peak_reset else None
    directory = tempfile.mkdtemp(prefix="vector_index_bench_")
    try:
        index.save(directory)
        result["index_bytes"] = _dir_bytes(directory)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    if args.child == "faiss":
        import faiss
        result["library_version"] = faiss.__version__
    elif args.child == "scann":
        from importlib.metadata import version
        result["library_version"] = version("scann")
    return result


def main(argv=None) -> None:
    args = _args(argv)
    if args.child:
        print(json.dumps(child(args)))
        return
    from machine import machine

    results = []
    for size in [int(s) for s in args.sizes.split(",")]:
        for library in args.libraries.split(","):
            command = [sys.executable, os.path.abspath(__file__), *(argv if argv is not None else sys.argv[1:]),
                       f"--child={library}", f"--size={size}"]
            done = subprocess.run(command, capture_output=True, text=True)
            if done.returncode:
                sys.stderr.write(done.stderr[-3000:])
                results.append({"library": library, "size": size, "error": f"exit {done.returncode}"})
                continue
            results.append(json.loads(done.stdout.strip().splitlines()[-1]))
            print(json.dumps(results[-1]), file=sys.stderr)  # progress
    report = {"benchmark": "vector_index", "dim": args.dim, "k": args.k, "queries": args.queries,
              "query_noise": args.query_noise, "threads": args.threads, "seed": args.seed,
              "note": args.note, "machine": machine(), "results": results}
    line = json.dumps(report)
    print(line)
    if args.output:
        os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
        with open(args.output, "w") as f:
            f.write(line + "\n")


if __name__ == "__main__":
    main()
