"""A task, registered once: its reader, splits, preset, conversion options, evaluation and modes.

    register(TaskSpec("TOY", preset=TaskPreset(splits=SPLITS, train_steps=1000, learning_rate=5e-5,
                                                 warmup_ratio=0.1, train_batch_size=32),
                      reader=open_toy, evaluation="denotation"))

The task command line (`run_task.py --task=TOY`, `tapas-tf create-data --task=TOY`) and the
create_data job look every task up here (`get_task`); a task of your own is registered by a module
that `--task_module` names (`tapas_tf.task_registry.modules`, docs/ADDING_A_TASK.md).
"""

import dataclasses
from typing import Any, Dict, FrozenSet, List, Mapping, Optional, Union

from tapas_tf.data.readers.release_reader import OpenReader
from tapas_tf.features.conversion_config import ConversionConfig
from tapas_tf.task_registry.presets import Task, TaskPreset

# What the task command line does, one --mode each (evaluate: masked-LM accuracy, or a classification
# task's metrics from its predictions file).
MODES = ("create_data", "train", "predict", "predict_and_evaluate", "evaluate", "export")
PREDICT_MODES = frozenset({"predict", "predict_and_evaluate"})
QUESTION_ANSWERING_MODES = frozenset({"create_data", "train", "export"}) | PREDICT_MODES
# A statement classifier (TABFACT) also scores a predictions file again (evaluate).
CLASSIFICATION_MODES = QUESTION_ANSWERING_MODES | {"evaluate"}
# PRETRAIN's data job is another (tapas-tf create-pretrain-data).
MASKED_LM_MODES = frozenset({"train", "evaluate"})
# The keys of `tapas_tf.inference.sequential.EVALUATIONS` (a test checks that they agree), and
# "classification" (`tapas_tf.inference.classification`: accuracy of a statement classifier), named
# rather than imported: the data job and `--help` must not wait for TensorFlow.
EVALUATIONS = ("sqa", "denotation", "classification")
# ConversionConfig fields a task may set. The vocabulary is the run's, max_seq_length is the
# preset's, and fail_on_dropped_answers follows the split (`ConversionConfig.for_split`).
CONVERSION_OPTIONS = tuple(f.name for f in dataclasses.fields(ConversionConfig)
                           if f.name not in ("vocab_file", "max_seq_length", "fail_on_dropped_answers"))
# The split names that --predict_split and the output layout (`pipelines.task_files`) know.
SPLIT_NAMES = ("train", "dev", "test")


@dataclasses.dataclass(frozen=True)
class TaskSpec:
    """Everything the task command line needs to know about one task.

    Attributes:
      name: the --task value, e.g. "SQA".
      preset: the training and model hyper-parameters, the decoding defaults and the splits
        (`tapas_tf.task_registry.presets.TaskPreset`).
      reader: opens one split's release file (`tapas_tf.data.readers.release_reader`); None
        when create_data does not make the task's data.
      evaluation: how predict_and_evaluate scores it: "sqa" (accuracy by position in the
        sequence), "denotation" (the answer's values against the gold texts), "classification"
        (the predicted label of each statement: accuracy, per-label precision and recall); None:
        no predict.
      conversion: ConversionConfig options of the task (`CONVERSION_OPTIONS`), under the flags
        given on the command line.
      modes: the modes it is built for; default all but evaluate, or train and evaluate for a
        masked-LM preset.
    """

    name: str
    preset: TaskPreset
    reader: Optional[OpenReader] = None
    evaluation: Optional[str] = None
    conversion: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    modes: Optional[FrozenSet[str]] = None

    def __post_init__(self):
        if self.modes is None:
            default = MASKED_LM_MODES if self.preset.masked_lm else QUESTION_ANSWERING_MODES
            object.__setattr__(self, "modes", default)
        object.__setattr__(self, "modes", frozenset(self.modes))
        problem = _problem(self)
        if problem:
            raise ValueError(f"task {self.name!r}: {problem}")

    @property
    def splits(self):
        return self.preset.splits

    @property
    def pretraining(self) -> bool:
        """Masked-LM pre-training (PRETRAIN) instead of question answering."""
        return self.preset.masked_lm


def _problem(spec: TaskSpec) -> Optional[str]:
    """What is wrong with a registration, or None."""
    if not spec.name or not spec.name.replace("_", "").isalnum() or not spec.name[0].isalpha():
        return "a name is letters, digits and _, starting with a letter"
    if not isinstance(spec.preset, TaskPreset):
        return f"preset must be a tapas_tf.task_registry.presets.TaskPreset, not {type(spec.preset).__name__}"
    unknown = sorted(spec.modes - set(MODES))
    if unknown:
        return f"unknown modes {unknown}; modes are {', '.join(MODES)}"
    classifier = spec.evaluation == "classification"
    allowed = (MASKED_LM_MODES if spec.pretraining else
               CLASSIFICATION_MODES if classifier else QUESTION_ANSWERING_MODES)
    if spec.modes - allowed:
        kind = "a masked-LM" if spec.pretraining else "a classification" if classifier else "a question-answering"
        return (f"{kind} task is built for {', '.join(sorted(allowed))} at most, "
                f"not {sorted(spec.modes - allowed)}")
    if "create_data" in spec.modes and not callable(spec.reader):
        return "create_data needs a reader (path, input_dir, is_training) -> ReleaseReader"
    if spec.evaluation is not None and spec.evaluation not in EVALUATIONS:
        return f"evaluation {spec.evaluation!r} is not one of {', '.join(EVALUATIONS)}"
    if spec.modes & PREDICT_MODES and spec.evaluation is None:
        modes = " and ".join(sorted(spec.modes & PREDICT_MODES))
        return f"{modes} need an evaluation ({', '.join(EVALUATIONS)})"
    unknown = sorted(set(spec.conversion) - set(CONVERSION_OPTIONS))
    if unknown:
        return f"conversion options {unknown} are not among {', '.join(CONVERSION_OPTIONS)}"
    return _splits_problem(spec)


def _splits_problem(spec: TaskSpec) -> Optional[str]:
    names = [split.name for split in spec.splits]
    if "create_data" in spec.modes and "train" not in names:
        return "create_data needs a split named train"
    for split in spec.splits:
        if split.name not in SPLIT_NAMES or names.count(split.name) > 1:
            return f"split names are {', '.join(SPLIT_NAMES)}, each once; not {split.name!r}"
        if split.is_training != (split.name == "train"):
            return f"split {split.name!r}: train (and only train) has is_training=True"
    return None


_TASKS: Dict[str, TaskSpec] = {}


def register(spec: TaskSpec) -> TaskSpec:
    """Adds `spec` under its name and returns the registration; the same one again is no change.

    Raises:
      ValueError: another task has that name.
    """
    if not isinstance(spec, TaskSpec):
        raise ValueError(f"register takes a TaskSpec, not {type(spec).__name__}")
    known = _TASKS.get(spec.name)
    if known is not None and known != spec:
        raise ValueError(f"task {spec.name!r} is registered already; give yours another name")
    return _TASKS.setdefault(spec.name, spec)


def get_task(task: Union[str, Task, TaskSpec]) -> TaskSpec:
    """The registration of `task`: a name ("SQA"), a `tapas_tf.task_registry.presets.Task`, or a TaskSpec as it is.

    Raises:
      ValueError: no task of that name is registered.
    """
    if isinstance(task, TaskSpec):
        return task
    name = task.value if isinstance(task, Task) else task
    if name not in _TASKS:
        raise ValueError(f"unknown task {name!r}; registered: {', '.join(_TASKS)} (a module of yours "
                         "registers others: --task_module, docs/ADDING_A_TASK.md)")
    return _TASKS[name]


def task_names() -> List[str]:
    """The registered tasks' names, in the order they were registered."""
    return list(_TASKS)


def tasks_for(mode: str) -> List[str]:
    """The names of the tasks built for `mode`."""
    return [name for name, spec in _TASKS.items() if mode in spec.modes]


def conversion_config(task: Union[str, Task, TaskSpec], vocab_file: Optional[str] = None,
                      **options: Any) -> ConversionConfig:
    """How the task's interactions become examples: a task's ConversionConfig, built as every one
    is by `ConversionConfig.from_options` (a model's own table limits, for asking and serving:
    `qa.ask_encoding.TableEncoder.for_model`).

    Precedence, lowest first: ConversionConfig's defaults; the task's (its preset's
    max_seq_length, `TaskSpec.conversion`, drop_rows_to_fit None: rows are dropped to fit in dev
    and test, not in train); then the `options` that are not None (the flags given).

    Args:
      vocab_file: the WordPiece vocabulary; None: BERT's uncased one (`features.vocab.resolve_vocab_file`).
      **options: max_seq_length or any of `CONVERSION_OPTIONS`.

    Raises:
      ValueError: an option ConversionConfig does not have, or a value it refuses.
      FileNotFoundError: `vocab_file` does not exist.
    """
    spec = get_task(task)
    unknown = sorted(set(options) - set(CONVERSION_OPTIONS) - {"max_seq_length"})
    if unknown:
        raise ValueError(f"unknown conversion options {unknown}")
    values: Dict[str, Any] = {"max_seq_length": spec.preset.max_seq_length, "drop_rows_to_fit": None,
                              **spec.conversion}
    values.update({name: value for name, value in options.items() if value is not None})
    return ConversionConfig.from_options(vocab_file, **values)
