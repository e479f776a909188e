"""Command line: write a fine-tuned model directory as one of the models bundled with the package.

    tapas-tf bundle --role=conversation --model_dir=/tmp/exp/sqa_long --note="..." \
        --command="experiments/minilm_sqa_wtq.sh data" --command="..."
    tapas-tf bundle --role=aggregation --model_dir=/tmp/exp/wtq_from_sqa --weights=int8 ...
    tapas-tf bundle --role=tabfact --model_dir=/tmp/exp/tabfact --checkpoint=... ...
    tapas-tf bundle --role=conversation --model_dir=... --out_dir=my_bundle/sqa   # anywhere else
    tapas-tf bundle --role=retriever --model_dir=/tmp/exp/retriever --weights=int8 \
        --retrieval_evaluation=wtq_dev=wtq_dev.json --retrieval_evaluation=tabfact_val=tabfact_val.json

A bundle (`tapas_tf.checkpoints.bundled`: BUNDLED_DIR for the conversation model, AGGREGATION_DIR
for the aggregation model) is a compact directory: float16 (or, with --weights=int8, int8) weights,
the model config, the vocabulary (the source's own, else the default BERT one it was trained with),
and in `compact.json` the commands that made it and its dev evaluations, read from the source's
`predictions/`: SQA with the model's own previous answers (`dev_metrics.json`) and the gold ones
(`dev_gold_previous_metrics.json`), required for the conversation model, and WTQ's denotation
accuracy (`wtq_dev_metrics.json`, or the `dev_metrics.json` of `--task=WTQ`), required for the
aggregation model; TabFact's dev accuracy
(`dev_metrics.json` of `--task=TABFACT`) for the TabFact model (TABFACT_DIR). The retriever
(RETRIEVER_DIR) is a dual-encoder directory (`tapas-tf train-retriever`), written by
`checkpoints.retriever.write_compact_dual_encoder_dir`; its evaluations are the JSON lines of
`tapas-tf evaluate-retrieval` (`--retrieval_evaluation=NAME=FILE`, at least one). Every bundled model's
weights together (LiteRT copies included) must stay within MAX_BUNDLED_BYTES. Errors are one line,
`tapas-tf bundle: error: ...`. Then `tapas-tf export --export_lite --model_dir=OUT_DIR` adds the
LiteRT copy that answers first. `--training_tables=MANIFEST` (once per training stage) writes the
union of the stages' table manifests as the bundle's `training_tables.txt.gz`
(`tapas_tf.data.table_manifest`), and its count into `compact.json`.
"""

import json
import os
import shutil
from typing import Any, Dict, List

from absl import flags

import tapas_tf.cli as cli

PROG = "bundle"
FLAGS = flags.FLAGS
ROLES = ("conversation", "aggregation", "tabfact", "retriever")


def define_flags() -> None:
    flags.DEFINE_string("model_dir", None, "The fine-tuned model directory, evaluated on dev (its predictions/).")
    flags.DEFINE_string("checkpoint", None, "The checkpoint to bundle (the one evaluated); default the newest.")
    flags.DEFINE_enum("role", "conversation", list(ROLES), "Which bundled model this becomes.")
    flags.DEFINE_string("out_dir", None, "Where to write; default the package's bundled directory of --role.")
    flags.DEFINE_multi_string("command", [], "The commands that made the model, in order.")
    flags.DEFINE_string("note", "", "A sentence on what the model is.")
    flags.DEFINE_enum("weights", "float16", ["float16", "int8"], "How the weights are stored: int8 (weight-only, "
                      "a scale per row or column) is half the size; check its dev answers against float16's.")
    flags.DEFINE_multi_string("training_tables", [], "A manifest of tables that a stage of the model's training "
                              "saw (collect-tables --manifest_out, the fine-tuning mix's); repeat it for every "
                              "stage. Their union becomes the bundle's training_tables.txt.gz.")
    flags.DEFINE_multi_string("retrieval_evaluation", [], "--role=retriever: NAME=FILE, the JSON line that "
                              "`tapas-tf evaluate-retrieval` printed for the model's index of a dev set NAME.")
    flags.mark_flag_as_required("model_dir")


def _metrics(model_dir: str, run: str) -> Dict[str, Any]:
    path = os.path.join(model_dir, "predictions", f"{run}_metrics.json")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: evaluate the model on dev first (tapas-tf predict-and-evaluate)")
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _wtq_metrics(model_dir: str) -> Dict[str, Any]:
    """WTQ's dev denotation accuracy: `wtq_dev_metrics.json`, or the `dev_metrics.json` that
    `predict-and-evaluate --task=WTQ` writes (told apart from SQA's by its denotation accuracy)."""
    predictions = os.path.join(model_dir, "predictions")
    if os.path.exists(os.path.join(predictions, "wtq_dev_metrics.json")):
        return _metrics(model_dir, "wtq_dev")
    path = os.path.join(predictions, "dev_metrics.json")
    if os.path.exists(path):
        metrics = _metrics(model_dir, "dev")
        if "denotation_accuracy" in metrics:
            return metrics
        raise ValueError(f"{path}: not WTQ's metrics (no denotation_accuracy); evaluate the model on WTQ's dev "
                         "set (tapas-tf predict-and-evaluate --task=WTQ --predict_split=dev)")
    raise FileNotFoundError(f"{predictions}: neither wtq_dev_metrics.json nor dev_metrics.json; evaluate the model "
                            "on WTQ's dev set first (tapas-tf predict-and-evaluate --task=WTQ --predict_split=dev)")


def _retrieval_evaluations(specs: List[str]) -> Dict[str, Any]:
    """{NAME: evaluate-retrieval's object} of `--retrieval_evaluation=NAME=FILE` flags."""
    if not specs:
        raise ValueError("--role=retriever needs --retrieval_evaluation=NAME=FILE (evaluate-retrieval's JSON "
                         "line on a dev set), at least one")
    evaluations = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise ValueError(f"--retrieval_evaluation={spec}: expected NAME=FILE")
        with open(path, encoding="utf-8") as f:
            text = f.read().strip().splitlines()
        try:
            value = json.loads(text[-1]) if text else None
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: its last line is not JSON ({e})") from None
        if not isinstance(value, dict) or "methods" not in value:
            raise ValueError(f"{path}: not the output of evaluate-retrieval (no \"methods\")")
        evaluations[name] = value
    return evaluations


def main(argv: List[str]) -> None:
    cli.reject_positional_arguments(PROG, argv)
    try:
        _bundle()
    except (ValueError, OSError) as e:
        cli.fail(PROG, cli.one_line(e), cli.ERROR_EXIT_CODE)


def _bundle() -> None:
    from tapas_tf.checkpoints.bundled import (AGGREGATION_DIR, BUNDLED_DIR, MAX_BUNDLED_BYTES, RETRIEVER_DIR,
                                              TABFACT_DIR, bundled_weights_bytes)
    from tapas_tf.data import table_manifest

    default_dir = {"conversation": BUNDLED_DIR, "aggregation": AGGREGATION_DIR, "tabfact": TABFACT_DIR,
                   "retriever": RETRIEVER_DIR}
    out_dir = FLAGS.out_dir or default_dir[FLAGS.role]
    notes = {"about": FLAGS.note, "role": FLAGS.role, "commands": FLAGS.command}
    # Read before anything is written, so that a bad manifest leaves no half-made bundle.
    training_tables = table_manifest.merge_manifests(FLAGS.training_tables)
    if FLAGS.training_tables:
        notes["training_tables"] = {"file": table_manifest.MANIFEST_FILE, "tables": len(training_tables),
                                    "stages": [os.path.basename(p) for p in FLAGS.training_tables]}
    if FLAGS.role == "retriever":
        from tapas_tf.checkpoints import retriever

        notes["retrieval"] = _retrieval_evaluations(FLAGS.retrieval_evaluation)
        info = retriever.write_compact_dual_encoder_dir(FLAGS.model_dir, out_dir, checkpoint=FLAGS.checkpoint,
                                                        weights=FLAGS.weights, notes=notes)
    else:
        info = _bundle_reader(out_dir, notes)
    if FLAGS.training_tables:
        table_manifest.write_manifest(os.path.join(out_dir, table_manifest.MANIFEST_FILE), training_tables)
    sizes = {name: os.path.getsize(os.path.join(out_dir, name)) for name in sorted(os.listdir(out_dir))}
    print(json.dumps({"out_dir": out_dir, "files": sizes, "weights_bytes": info["weights_bytes"],
                      "max_abs_rounding_error": info["max_abs_rounding_error"]}, indent=2))
    bundled = os.path.dirname(os.path.abspath(out_dir))
    total = bundled_weights_bytes(bundled)
    print(f"{bundled}: bundled weights {total:,} bytes (limit {MAX_BUNDLED_BYTES:,})")
    if total > MAX_BUNDLED_BYTES:
        raise ValueError(f"{bundled}: bundled weights of {total:,} bytes exceed {MAX_BUNDLED_BYTES:,}")


def _bundle_reader(out_dir: str, notes: Dict[str, Any]) -> Dict[str, Any]:
    """Writes a reader (QA or TabFact model) bundle with its dev scores in the notes; returns compact.json's object."""
    from tapas_tf.checkpoints import compact
    from tapas_tf.features.vocab import resolve_vocab_file

    conversation = FLAGS.role == "conversation"
    predictions = os.path.join(FLAGS.model_dir, "predictions")
    if FLAGS.role == "tabfact":  # TabFact dev (val) accuracy, from predict_and_evaluate --task=TABFACT.
        notes["tabfact_dev"] = _metrics(FLAGS.model_dir, "dev")
    elif conversation or os.path.exists(os.path.join(predictions, "dev_gold_previous_metrics.json")):
        notes["sqa_dev_predicted_previous"] = _metrics(FLAGS.model_dir, "dev")
        notes["sqa_dev_gold_previous"] = _metrics(FLAGS.model_dir, "dev_gold_previous")
    if FLAGS.role == "aggregation" or (conversation and os.path.exists(os.path.join(predictions,
                                                                                     "wtq_dev_metrics.json"))):
        notes["wtq_dev"] = _wtq_metrics(FLAGS.model_dir)
    info = compact.write_compact_model_dir(FLAGS.model_dir, out_dir, checkpoint=FLAGS.checkpoint, notes=notes,
                                          weights=FLAGS.weights)
    # The bundle carries its vocabulary either way, so that it never depends on where the default
    # BERT vocabulary comes from on the user's machine.
    vocab = os.path.join(FLAGS.model_dir, "vocab.txt")
    shutil.copy(vocab if os.path.exists(vocab) else resolve_vocab_file(None), os.path.join(out_dir, "vocab.txt"))
    return info


if __name__ == "__main__":  # python -m tapas_tf.commands.bundle: the same as `tapas-tf bundle`.
    import sys

    from tapas_tf.cli import runner

    sys.exit(runner.run_module(__spec__.name, sys.argv[1:]))
