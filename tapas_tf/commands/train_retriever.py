"""Command line: train a dual encoder for table retrieval.

    tapas-tf init-from-bert --target=retriever --model_dir=minilm_retriever \\
        --model_options='{"max_table_length": 128}'
    tapas-tf train-retriever --init_model=minilm_retriever --model_dir=my_retriever \\
        --tables=wtq_tables/ --queries=wtq_train_queries.tsv --titles=wtq_titles.tsv \\
        --tables=tabfact_tables/ --queries=tabfact_train_queries.tsv --titles=tabfact_titles.tsv \\
        --train_steps=600 --batch_size=16

Each `--tables` is a collection (a folder, a SQLite file, a SQLAlchemy URL) with its `--queries`
TSV (columns id, question, table_id: training questions whose table is known) and, optionally, its
`--titles` TSV; the three flags pair up in the order given (pass `--titles=` for none). Only the
tables the queries name are read: give training questions only, and the retriever never trains on
another split's tables. Hard negatives are mined with BM25 among those tables
(`tapas_tf.retrieval.training_pairs`).

`--init_model` is the dual-encoder directory to start from (`init-from-bert --target=retriever`,
an imported Google retriever, or another run); `--model_dir` gets the new directory, with its
checkpoints, `training_data.npz` (the converted questions and tables, reused when the run is started
again: it resumes from its newest checkpoint) and, at the end, `embedder.json`, which makes it a
`--dense_model` for `tapas-tf index`. Precision: bfloat16 where the CPU has avx512_bf16 or
amx_bf16, else float32 (`--precision` to choose).
"""

import json
import os
import shutil
import sys
from typing import List

from absl import flags

import tapas_tf.cli as cli

PROG = "train-retriever"
FLAGS = flags.FLAGS
TRAINING_DATA = "training_data.npz"


def define_flags() -> None:
    flags.DEFINE_string("model_dir", None, "The dual-encoder directory to train into (resumed if it has checkpoints).")
    flags.DEFINE_string("init_model", None, "The dual-encoder directory to start from (a new --model_dir only).")
    flags.DEFINE_multi_string("tables", [], "A collection of tables (one per source).")
    flags.DEFINE_multi_string("queries", [], "Its training questions: a TSV with id, question, table_id.")
    flags.DEFINE_multi_string("titles", [], "Its titles TSV (table_id, title); empty for none.")
    flags.DEFINE_boolean("hard_negatives", True, "Mine a BM25 hard negative per question.")
    flags.DEFINE_integer("train_steps", 1000, "Steps in all.", lower_bound=1)
    flags.DEFINE_integer("batch_size", 16, "Questions per step.", lower_bound=1)
    flags.DEFINE_float("learning_rate", 2e-5, "Peak learning rate.")
    flags.DEFINE_float("warmup_ratio", 0.1, "Share of the steps that warm the learning rate up.")
    flags.DEFINE_integer("save_checkpoints_steps", 250, "Steps between checkpoints.", lower_bound=1)
    flags.DEFINE_integer("log_steps", 25, "Steps between log lines.", lower_bound=1)
    flags.DEFINE_integer("seed", 1, "Seed of the batches and random negatives.")
    flags.DEFINE_enum("precision", None, ["float32", "bfloat16"], "Default: bfloat16 where the CPU has it.")


def _check_flags() -> None:
    for name in ("model_dir",):
        if not getattr(FLAGS, name):
            cli.fail(PROG, f"--{name} is required ({PROG} --help lists the flags)", cli.USAGE_EXIT_CODE)
    if not FLAGS.tables:
        cli.fail(PROG, "give at least one --tables with its --queries", cli.USAGE_EXIT_CODE)
    if len(FLAGS.queries) != len(FLAGS.tables):
        cli.fail(PROG, f"{len(FLAGS.tables)} --tables but {len(FLAGS.queries)} --queries: each collection needs "
                 "its queries", cli.USAGE_EXIT_CODE)
    if FLAGS.titles and len(FLAGS.titles) != len(FLAGS.tables):
        cli.fail(PROG, f"{len(FLAGS.tables)} --tables but {len(FLAGS.titles)} --titles: give one per collection "
                 "(--titles= for none) or none at all", cli.USAGE_EXIT_CODE)


def _start_dir(model_dir: str, init_model: str) -> None:
    """A new model_dir: the start model's config and vocabulary (its weights are loaded in main)."""
    from tapas_tf.checkpoints import retriever

    if os.path.exists(retriever.config_path(model_dir)):
        return
    if not init_model:
        cli.fail(PROG, f"{model_dir} holds no dual encoder yet: give --init_model", cli.USAGE_EXIT_CODE)
    os.makedirs(model_dir, exist_ok=True)
    for name in (retriever.CONFIG_FILE, "vocab.txt"):
        source = os.path.join(init_model, name)
        if os.path.exists(source):
            shutil.copyfile(source, os.path.join(model_dir, name))


def _training_data(model_dir: str, features):
    from tapas_tf.retrieval.collection import open_collection
    from tapas_tf.retrieval.evaluation import read_queries
    from tapas_tf.retrieval.training_pairs import RetrieverTrainingData, build_training_data

    path = os.path.join(model_dir, TRAINING_DATA)
    if os.path.exists(path):
        return RetrieverTrainingData.load(path)
    titles = FLAGS.titles or [""] * len(FLAGS.tables)
    sources = [(f"s{i}", open_collection(tables, title_file or None), read_queries(queries))
               for i, (tables, queries, title_file) in enumerate(zip(FLAGS.tables, FLAGS.queries, titles))]
    data = build_training_data(features, sources, hard_negatives=FLAGS.hard_negatives)
    data.save(path)
    return data


def main(argv: List[str]) -> None:
    cli.reject_positional_arguments(PROG, argv)
    _check_flags()
    from tapas_tf.checkpoints import model_dir as model_dir_lib
    from tapas_tf.checkpoints import retriever
    from tapas_tf.retrieval.dense import DenseRetriever
    from tapas_tf.training import precision
    from tapas_tf.training.retriever_training import RetrieverTrainConfig, train_retriever

    model_dir = FLAGS.model_dir
    try:
        train_config = RetrieverTrainConfig(
            train_steps=FLAGS.train_steps, batch_size=FLAGS.batch_size, learning_rate=FLAGS.learning_rate,
            warmup_ratio=FLAGS.warmup_ratio, save_checkpoints_steps=FLAGS.save_checkpoints_steps,
            log_steps=FLAGS.log_steps, seed=FLAGS.seed)
        resuming = model_dir_lib.latest_checkpoint(model_dir) is not None
        _start_dir(model_dir, FLAGS.init_model)
        choice = precision.choose_precision(FLAGS.precision)
        precision.log_choice(choice)
        with precision.policy_scope(choice.precision):
            start = model_dir if resuming else FLAGS.init_model
            model, config = retriever.load_dual_encoder(start)
        vocab = os.path.join(model_dir, "vocab.txt")
        features = DenseRetriever.features_for(config, vocab if os.path.exists(vocab) else None)
        data = _training_data(model_dir, features)
        result = train_retriever(model, config, data, train_config, model_dir)
        checkpoint = os.path.relpath(result.checkpoint, model_dir)
        model_dir_lib.write_record(model_dir, retriever.EMBEDDER_FILE,
                                   retriever.embedder_record(model_dir, config, checkpoint, os.path.exists(vocab)))
        model_dir_lib.write_record(model_dir, "train_report.json",
                                   {"step": result.step, "stopped_by": result.stopped_by, "metrics": result.metrics,
                                    "data": data.report, "init_model": FLAGS.init_model,
                                    "precision": choice.precision, "checkpoint": checkpoint})
    except (ValueError, FileNotFoundError, OSError) as e:
        cli.fail(PROG, cli.one_line(e), cli.ERROR_EXIT_CODE)
    print(json.dumps({"model_dir": model_dir, "step": result.step, "stopped_by": result.stopped_by,
                      "questions": len(data), "loss": result.metrics.get("loss")}))


if __name__ == "__main__":
    from tapas_tf.cli import runner

    sys.exit(runner.run_module(__spec__.name, sys.argv[1:]))
