"""Tasks and their presets: data splits, conversion defaults and the paper's hyper-parameters.

`Task` names the paper's tasks and `PRESETS` holds their hyper-parameters. What else a task is
(its reader, evaluation and modes) is registered once in `tapas_tf.task_registry`, which is also
where a task of your own gets its `TaskPreset` (docs/ADDING_A_TASK.md).
"""

import dataclasses
import enum
from typing import Optional, Tuple, Union


class Task(enum.Enum):
    SQA = "SQA"
    WTQ = "WTQ"
    WIKISQL = "WIKISQL"  # Answers only (the executed SQL's result); the operator is learned.
    WIKISQL_SUPERVISED = "WIKISQL_SUPERVISED"  # Gold cells and gold operator from the SQL.
    PRETRAIN = "PRETRAIN"


@dataclasses.dataclass(frozen=True)
class Split:
    """A data split: the release file it comes from and whether it trains."""

    name: str
    file_name: str
    is_training: bool
    required: bool = True


@dataclasses.dataclass(frozen=True)
class TaskPreset:
    """Per-task defaults (Herzig et al. 2020, appendix)."""

    splits: Tuple[Split, ...]
    train_steps: int
    learning_rate: float
    warmup_ratio: float
    train_batch_size: int
    temperature: float = 1.0
    answer_loss_cutoff: Optional[float] = None
    huber_loss_delta: Optional[float] = None
    cell_selection_preference: Optional[float] = None
    gradient_clipping: Optional[float] = None
    select_one_column: bool = True
    init_cell_selection_weights_to_zero: bool = False
    num_aggregation_labels: int = 0
    use_answer_as_supervision: bool = False
    # A classifier on the pooled [CLS] output (TabFact: 2, refuted and entailed); 0: none.
    num_classification_labels: int = 0
    # Train without the cell-selection loss (a classification task has no answer cells).
    disable_per_token_loss: bool = False
    max_seq_length: int = 512
    # With init_heads (transfer from a model fine-tuned on another task): the cell-selection head
    # starts fresh instead of being restored (the paper's WTQ setting).
    reset_cell_selection_weights: bool = False
    # Prediction: a NONE answer with no cell above the threshold takes its most probable cell. On
    # where every gold answer is non-empty (SQA, WTQ), so the rule can only turn a wrong answer
    # right (SQA dev ALL of the bundled model 0.161 -> 0.195, docs/RESULTS.md); off for WikiSQL
    # (some SQL results are empty) and by default (Google's and Hugging Face's decoding).
    fallback_to_best_cell: bool = False
    # Prediction: COUNT counts the k most probable cells, k the cells' summed probabilities (the
    # expected count that the answer loss trains) rounded, instead of the cells above 0.5. On for
    # WTQ, where COUNT is learned from answers only and the threshold often counts no cell.
    expected_count: bool = False
    # PRETRAIN: the masked-LM model on masked-LM examples; every other preset trains question answering.
    masked_lm: bool = False


_SQA_SPLITS = (
    Split("train", "random-split-1-train.tsv", is_training=True),
    Split("dev", "random-split-1-dev.tsv", is_training=False),
    Split("test", "test.tsv", is_training=False, required=False),
)

# WikiTableQuestions: the first random split of its training set; the test set is the release's
# tables unseen in training. `training.tsv` (train and dev together) is a TRAIN_FILE override.
_WTQ_SPLITS = (
    Split("train", "random-split-1-train.tsv", is_training=True),
    Split("dev", "random-split-1-dev.tsv", is_training=False),
    Split("test", "pristine-unseen-tables.tsv", is_training=False, required=False),
)

# WikiSQL: `{split}.jsonl` questions, each with its `{split}.tables.jsonl`.
_WIKISQL_SPLITS = (
    Split("train", "train.jsonl", is_training=True),
    Split("dev", "dev.jsonl", is_training=False),
    Split("test", "test.jsonl", is_training=False, required=False),
)

_WIKISQL_WEAK = TaskPreset(
    splits=_WIKISQL_SPLITS, train_steps=50_000, learning_rate=6.17164e-5, warmup_ratio=0.142400,
    train_batch_size=512, temperature=0.107515, answer_loss_cutoff=0.185567,
    huber_loss_delta=1265.74, cell_selection_preference=0.611754, gradient_clipping=10.0,
    select_one_column=False, num_aggregation_labels=4, use_answer_as_supervision=True)

PRESETS = {
    Task.SQA: TaskPreset(
        splits=_SQA_SPLITS, train_steps=200_000, learning_rate=1.25e-5, warmup_ratio=0.2,
        train_batch_size=128, select_one_column=True, init_cell_selection_weights_to_zero=False,
        fallback_to_best_cell=True),
    Task.WIKISQL: _WIKISQL_WEAK,
    # The same schedule; the operator is a label (an aggregation loss) instead of being inferred
    # from the scalar answer.
    Task.WIKISQL_SUPERVISED: dataclasses.replace(_WIKISQL_WEAK, use_answer_as_supervision=False),
    Task.WTQ: TaskPreset(
        splits=_WTQ_SPLITS, train_steps=50_000, learning_rate=1.93581e-5, warmup_ratio=0.128960,
        train_batch_size=512, temperature=0.0352513, answer_loss_cutoff=0.664694,
        huber_loss_delta=0.121194, cell_selection_preference=0.207951, gradient_clipping=10.0,
        select_one_column=True, init_cell_selection_weights_to_zero=True,
        num_aggregation_labels=4, use_answer_as_supervision=True, reset_cell_selection_weights=True,
        fallback_to_best_cell=True, expected_count=True),
    Task.PRETRAIN: TaskPreset(
        splits=(), train_steps=1_000_000, learning_rate=5e-5, warmup_ratio=0.01,
        train_batch_size=512, max_seq_length=128, masked_lm=True),
}


# SYNTHETIC (`tapas_tf.task_registry.builtin`): questions made from tables, with gold cells and
# operator (`data.synthetic_questions`), trained as WikiSQL with the gold operator but selecting
# one column as WTQ and SQA do, so that both heads carry over to them (`--init_heads`). The
# schedule is for a tiny model from random initialisation (issue 25); split files are
# interactions files whose tables are used.
SYNTHETIC_PRESET = TaskPreset(
    splits=(Split("train", "train.tfrecord", is_training=True),
            Split("dev", "dev.tfrecord", is_training=False, required=False)),
    train_steps=3_000, learning_rate=5e-4, warmup_ratio=0.1, train_batch_size=32, gradient_clipping=1.0,
    select_one_column=True, num_aggregation_labels=4, use_answer_as_supervision=False,
    fallback_to_best_cell=True)


# TABFACT (`tapas_tf.task_registry.builtin`): is a statement entailed by its table (Chen et al.
# 2020)? The release's split files; `val` is the dev split. A classifier on the pooled output, no
# cell selection. The schedule is for a tiny model from an earlier stage (issue 44); Google's base
# models used 5e-5 ... 2e-5 at batch 512.
TABFACT_PRESET = TaskPreset(
    splits=(Split("train", "train_examples.json", is_training=True, required=False),
            Split("dev", "val_examples.json", is_training=False, required=False),
            Split("test", "test_examples.json", is_training=False, required=False)),
    train_steps=4_000, learning_rate=5e-4, warmup_ratio=0.1, train_batch_size=32, gradient_clipping=1.0,
    select_one_column=False, num_classification_labels=2, disable_per_token_loss=True)


def preset_of(task: Union[Task, TaskPreset]) -> TaskPreset:
    """The preset of a task: `PRESETS[task]` for a `Task`; a registered task's own preset as it is."""
    return task if isinstance(task, TaskPreset) else PRESETS[task]


def task_label(task: Union[Task, TaskPreset]) -> str:
    """How messages name a task: "SQA" for a `Task`, "this task" for a preset of its own."""
    return task.value if isinstance(task, Task) else "this task"
