"""Our Keras TAPAS against Hugging Face's PyTorch TAPAS, in one run, on the same inputs.

    python benchmarks/compare_with_torch.py --sizes tiny,mini,base \
        --peer_python .peer-env/bin/python --json_out speed.jsonl --markdown_out speed.md

Runs `tf_tapas_bench.py` (this interpreter, or --tf_python) and `torch_tapas_bench.py` (the peer
environment, --peer_python) as subprocesses, one measurement at a time and alternating between
the frameworks for each size, so a change in the machine's load hits both alike:

    size X: TF train (XLA), torch train, TF train (no XLA) [, TF train (no XLA) in the trainer's
            start-up precision where that is bfloat16] [then TF train with and without XLA
            again for the next --tf_onednn setting], TF infer, torch infer (padded to 512),
            torch infer (unpadded, at the example's real length), then size Y ...

--tf_onednn runs TF training with oneDNN's CPU kernels on (tapas-tf's default, which
`import tapas_tf` sets) or off (TensorFlow's own default on CPUs without AVX-512 VNNI/BF16 or AMX),
or both; every TF record says which ran (`onednn`).

Both benches build their batches with `synthetic_tables.make_batch` from the same seeds (seq_len
512, a 20 x 6 table of ~450 real tokens) and run with 2 threads. Before each measurement the
1-minute load average is read from /proc/loadavg; above --max_load, the run sleeps --poll_seconds
and reads it again, for at most --max_wait_seconds (then measures anyway and records the load).

Prints the machine (CPU model and instruction set, `machine.py`: the ratios depend on it), a
markdown table of training examples/s (TF with and without XLA, TF's default, torch, the ratios)
and single-question latencies; every JSON line of both benches, plus the load before it started
and the machine, goes to --json_out. TF's default is what the trainer does on this machine when
no flag says otherwise: with oneDNN on (tapas-tf's default) no XLA (`tapas_tf.training.xla_choice`
does not measure there), in the precision it chooses at start-up (`tapas_tf.training.precision`:
bfloat16 on CPUs with avx512_bf16 or amx_bf16, float32 elsewhere); with oneDNN off the faster of
XLA and no XLA in float32, which a run of 1,000 steps or more times at start-up. PyTorch trains in
float32 (its default).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
import synthetic_tables  # noqa: E402  (benchmarks/ is not a package)
from machine import machine, machine_line  # noqa: E402

from tapas_tf.training.precision import cpu_bf16_flags  # noqa: E402  (no TensorFlow: reads /proc/cpuinfo)

BUCKETS = (64, 128, 256, 512)


def load_average() -> float:
    """The 1-minute load average of the machine."""
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def wait_for_quiet(max_load: float, poll_seconds: float, max_wait_seconds: float) -> float:
    """Sleeps until the 1-minute load is at most max_load (or the wait runs out); returns it."""
    waited = 0.0
    load = load_average()
    while load > max_load and waited < max_wait_seconds:
        print(f"# load {load:.2f} > {max_load}: waiting {poll_seconds:.0f} s", file=sys.stderr, flush=True)
        time.sleep(poll_seconds)
        waited += poll_seconds
        load = load_average()
    return load


def run_bench(command: List[str], label: str, args: argparse.Namespace,
              env: Optional[dict] = None) -> List[dict]:
    """Runs one bench subprocess (with `env` added to the environment) after waiting for a quiet
    machine; returns its JSON records."""
    load = wait_for_quiet(args.max_load, args.poll_seconds, args.max_wait_seconds)
    print(f"# {label} (load {load:.2f}): {' '.join(command)}", file=sys.stderr, flush=True)
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env={**os.environ, **(env or {})})
    if result.returncode != 0:
        raise RuntimeError(f"{label} failed ({result.returncode}):\n{result.stderr[-3000:]}")
    records = []
    for line in result.stdout.splitlines():
        if line.startswith("{"):
            record = dict(json.loads(line), load_average_1min_before=load, label=label, machine=machine())
            records.append(record)
            if args.json_out:
                with open(args.json_out, "a") as f:
                    f.write(json.dumps(record) + "\n")
    if not records:
        raise RuntimeError(f"{label} printed no measurement:\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}")
    return records


def standard_real_length(seq_len: int) -> int:
    """Real tokens of the single-question example both benches use (make_batch seed 2)."""
    return int(synthetic_tables.make_batch(1, seq_len, seed=2)["input_mask"].sum())


def measure_size(size: str, args: argparse.Namespace) -> List[dict]:
    """All measurements of one size, alternating TF and torch."""
    tf_bench = [args.tf_python, os.path.join(HERE, "tf_tapas_bench.py"), "--sizes", size]
    torch_bench = [args.peer_python, os.path.join(HERE, "torch_tapas_bench.py"), "--sizes", size]
    common = ["--warmup", str(args.warmup), "--threads", str(args.threads)]
    train = ["--measures", "train", "--steps", str(args.steps)]
    infer = ["--measures", "infer", "--infer_runs", str(args.infer_runs)]
    real = standard_real_length(512)
    lengths = [n for n in args.infer_lengths.split(",") if n]
    records = []
    if "train" in args.measures:
        onednn_settings = [v for v in args.tf_onednn.split(",") if v]
        for i, onednn in enumerate(onednn_settings):
            env = {"TF_ENABLE_ONEDNN_OPTS": "1" if onednn == "on" else "0"}
            records += run_bench(tf_bench + common + train + ["--jit_compile", "true"],
                                 f"tf train xla oneDNN {onednn} {size}", args, env)
            if i == 0:  # The peer once, between TF measurements.
                records += run_bench(torch_bench + common + train, f"torch train {size}", args)
            if not args.skip_no_xla:
                records += run_bench(tf_bench + common + train + ["--jit_compile", "false"],
                                     f"tf train oneDNN {onednn} {size}", args, env)
            if onednn == "on" and cpu_bf16_flags():  # The trainer's start-up choice is bfloat16.
                records += run_bench(tf_bench + common + train + ["--jit_compile", "false", "--precision", "default"],
                                     f"tf train default precision oneDNN {onednn} {size}", args, env)
    if "infer" not in args.measures:
        return records
    records += run_bench(
        tf_bench + common + infer + ["--jit_compile", "true,false", "--infer_lengths", ",".join(lengths)],
        f"tf infer {size}", args,
    )
    records += run_bench(torch_bench + common + infer, f"torch infer padded {size}", args)
    # HF's pipeline pads a single question only to its own length: the peer's best case.
    for length in [str(real)] + lengths:
        records += run_bench(
            torch_bench + common + infer + ["--seq_len", length], f"torch infer {length} tokens {size}", args
        )
    return records


def _find(records: List[dict], **conditions) -> Optional[dict]:
    for record in records:
        if all(record.get(key) == value for key, value in conditions.items()):
            return record
    return None


def _ratio(ours: Optional[float], theirs: Optional[float], faster_is_larger: bool = True) -> str:
    if not ours or not theirs:
        return "n/a"
    return f"{(ours / theirs if faster_is_larger else theirs / ours):.2f}x"


def _fmt(record: Optional[dict], key: str, digits: int = 1) -> str:
    return "n/a" if record is None or record.get(key) is None else f"{record[key]:.{digits}f}"


def markdown(records: List[dict], sizes: List[str], lengths: List[int]) -> str:
    """Training and latency tables; ratios are TF speed / torch speed (> 1: TF faster)."""
    machines = [r["machine"] for r in records if r.get("machine")]
    lines = [
        f"Machine: {machine_line(machines[0]) if machines else 'not recorded'}",
        "",
        "| size, batch | TF XLA ex/s | TF no-XLA ex/s | TF default precision ex/s | torch ex/s | TF XLA / torch | "
        "TF no-XLA / torch | TF default / torch | load before (TF XLA, torch) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    onednn_settings = sorted({r.get("onednn") for r in records if r.get("framework") == "tensorflow"
                              and r.get("measure") == "train"}, key=lambda v: (v is None, not v))
    for size, onednn in [(size, onednn) for size in sizes for onednn in onednn_settings]:
        train = dict(framework="tensorflow", size=size, measure="train", onednn=onednn)
        float32 = [r for r in records if r.get("precision", "float32") == "float32"]
        xla = _find(float32, jit_compile=True, **train)
        plain = _find(float32, jit_compile=False, **train)
        chosen = _find(records, jit_compile=False, precision_requested="default", **train)
        torch = _find(records, framework="pytorch", size=size, measure="train")
        batch = (xla or torch or {}).get("batch_size", "?")
        loads = ", ".join(_fmt(r, "load_average_1min_before", 2) for r in (xla, torch))
        setting = {True: ", oneDNN on", False: ", oneDNN off", None: ""}[onednn]
        lines.append(
            f"| {size}, {batch}{setting} | {_fmt(xla, 'examples_per_s', 2)} | {_fmt(plain, 'examples_per_s', 2)} | "
            f"{_precision_cell(chosen)} | {_fmt(torch, 'examples_per_s', 2)} | {_ratio(_get(xla), _get(torch))} | "
            f"{_ratio(_get(plain), _get(torch))} | {_ratio(_default(xla, plain, chosen, onednn), _get(torch))} | "
            f"{loads} |"
        )
    lines += [
        "",
        "Single question, batch 1, median ms (torch / TF > 1: TF faster):",
        "",
        "| size | real tokens | TF XLA padded 512 | TF no-XLA padded 512 | TF XLA bucketed (seq) | "
        "TF no-XLA bucketed | torch padded 512 | torch unpadded | torch padded / TF XLA padded | "
        "torch unpadded / TF XLA bucketed |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for size in sizes:
        tf_infers = [r for r in records if r.get("framework") == "tensorflow" and r.get("size") == size
                     and r.get("measure") == "infer"]
        for real in sorted({r["real_tokens"] for r in tf_infers}, reverse=True):
            bucket_xla = _find(tf_infers, mode="bucketed", real_tokens=real, jit_compile=True)
            bucket_plain = _find(tf_infers, mode="bucketed", real_tokens=real, jit_compile=False)
            padded_xla = _find(tf_infers, mode="padded", real_tokens=real, jit_compile=True)
            padded_plain = _find(tf_infers, mode="padded", real_tokens=real, jit_compile=False)
            torch_padded = _find(records, framework="pytorch", size=size, measure="infer", seq_len=512) \
                if padded_xla else None
            torch_exact = _find(records, framework="pytorch", size=size, measure="infer", seq_len=real)
            seq = bucket_xla["seq_len"] if bucket_xla else "?"
            lines.append(
                f"| {size} | {real} | {_fmt(padded_xla, 'median_ms')} | {_fmt(padded_plain, 'median_ms')} | "
                f"{_fmt(bucket_xla, 'median_ms')} ({seq}) | {_fmt(bucket_plain, 'median_ms')} | "
                f"{_fmt(torch_padded, 'median_ms')} | {_fmt(torch_exact, 'median_ms')} | "
                f"{_ratio(_ms(padded_xla), _ms(torch_padded), faster_is_larger=False)} | "
                f"{_ratio(_ms(bucket_xla), _ms(torch_exact), faster_is_larger=False)} |"
            )
    return "\n".join(lines) + "\n"


def _default(xla: Optional[dict], plain: Optional[dict], chosen: Optional[dict],
             onednn: Optional[bool]) -> Optional[float]:
    """The trainer's default training speed. With oneDNN on (tapas-tf's default) the trainer does
    not use XLA and computes in its start-up precision (`chosen`, where the machine has bfloat16;
    else float32); with oneDNN off it times both paths in float32 and keeps the faster
    (`tapas_tf.training.xla_choice`)."""
    if onednn:
        return _get(chosen) or _get(plain)
    speeds = [v for v in (_get(xla), _get(plain)) if v]
    return max(speeds) if speeds else None


def _precision_cell(record: Optional[dict]) -> str:
    if record is None:
        return "float32 (as no-XLA)"
    return f"{record['examples_per_s']:.2f} ({record.get('precision')})"


def _get(record: Optional[dict]) -> Optional[float]:
    return None if record is None else record.get("examples_per_s")


def _ms(record: Optional[dict]) -> Optional[float]:
    return None if record is None else record.get("median_ms")


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="tiny,mini,base")
    parser.add_argument("--steps", type=int, default=10, help="timed training steps per bench")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps / runs per bench")
    parser.add_argument("--infer_runs", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--infer_lengths", default="100,200", help="extra single-question table lengths (tokens)")
    parser.add_argument("--peer_python", default=".peer-env/bin/python")
    parser.add_argument("--tf_python", default=sys.executable)
    parser.add_argument("--measures", default="train,infer", help="train, infer or both")
    parser.add_argument("--tf_onednn", default="on", help="TF training with oneDNN's CPU kernels: on, off or on,off "
                        "(TF_ENABLE_ONEDNN_OPTS; tapas-tf's default is on)")
    parser.add_argument("--skip_no_xla", action="store_true", help="train TF with XLA only")
    parser.add_argument("--max_load", type=float, default=1.5)
    parser.add_argument("--poll_seconds", type=float, default=60)
    parser.add_argument("--max_wait_seconds", type=float, default=1200)
    parser.add_argument("--json_out", default="", help="append every JSON record to this file")
    parser.add_argument("--markdown_out", default="", help="also write the markdown table here")
    parser.add_argument("--from_json", default="", help="only print the table of records in this file")
    args = parser.parse_args(argv)
    sizes = [s for s in args.sizes.split(",") if s]
    lengths = [int(n) for n in args.infer_lengths.split(",") if n]
    if not set(args.measures.split(",")) <= {"train", "infer"}:
        raise ValueError(f"--measures takes train and/or infer, got {args.measures!r}")

    if args.from_json:
        with open(args.from_json) as f:
            records = [json.loads(line) for line in f if line.startswith("{")]
    else:
        if not os.path.exists(args.peer_python):
            raise ValueError(f"--peer_python {args.peer_python} does not exist; see benchmarks/README.md")
        records = []
        for size in sizes:
            records += measure_size(size, args)
    table = markdown(records, sizes, lengths)
    print(table)
    print(f"# machine: {machine_line()}", file=sys.stderr)
    if args.markdown_out:
        with open(args.markdown_out, "w") as f:
            f.write(table)


if __name__ == "__main__":
    main()
