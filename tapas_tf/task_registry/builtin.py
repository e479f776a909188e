"""The paper's tasks: SQA, WikiTableQuestions, WikiSQL (answers only, or with the gold SQL's
operator) and masked-LM pre-training; SYNTHETIC, questions made from any tables with their gold
cells and operator, for training between pre-training and WTQ or SQA; and TABFACT, statements
true or false of their table (a classifier).

The readers load when a split is opened: WTQ's answer matching imports SciPy (seconds), which
`--help` and the modes that read no release need not wait for.
"""

from tapas_tf.data.readers.release_reader import ReleaseReader
from tapas_tf.task_registry.presets import PRESETS, SYNTHETIC_PRESET, TABFACT_PRESET, Task
from tapas_tf.task_registry.registry import CLASSIFICATION_MODES, TaskSpec, register


def open_sqa(path: str, input_dir: str, is_training: bool) -> ReleaseReader:
    from tapas_tf.data.readers import sqa

    del is_training  # SQA's answers are cells already.
    return sqa.SqaFile(path, input_dir)


def open_wtq(path: str, input_dir: str, is_training: bool) -> ReleaseReader:
    """Answers are texts: cells come from weak supervision (`data.answer_matching`), which drops
    unusable training questions by reason and keeps every evaluation question."""
    from tapas_tf.data.readers import wtq

    return wtq.WtqFile(path, input_dir, supervision="train" if is_training else "eval")


def open_wikisql(path: str, input_dir: str, is_training: bool) -> ReleaseReader:
    """The answer is the gold SQL's result: its cells; the operator is learned."""
    from tapas_tf.data.readers import wikisql

    del is_training
    return wikisql.release_file(path, input_dir, supervised=False)


def open_wikisql_supervised(path: str, input_dir: str, is_training: bool) -> ReleaseReader:
    """The gold SQL's cells and its operator."""
    from tapas_tf.data.readers import wikisql

    del is_training
    return wikisql.release_file(path, input_dir, supervised=True)


def open_synthetic(path: str, input_dir: str, is_training: bool) -> ReleaseReader:
    """The tables of an interactions file; the questions are made (`data.synthetic_questions`)."""
    from tapas_tf.data.readers import synthetic

    del is_training
    return synthetic.TablesFile(path, input_dir)


def open_tabfact(path: str, input_dir: str, is_training: bool) -> ReleaseReader:
    """Statements with their labels; tables from the release's all_csv/ (`#`-separated)."""
    from tapas_tf.data.readers import tabfact

    del is_training
    return tabfact.TabFactFile(path, input_dir)


register(TaskSpec(Task.SQA.value, PRESETS[Task.SQA], reader=open_sqa, evaluation="sqa"))
register(TaskSpec(Task.WTQ.value, PRESETS[Task.WTQ], reader=open_wtq, evaluation="denotation"))
register(TaskSpec(Task.WIKISQL.value, PRESETS[Task.WIKISQL], reader=open_wikisql, evaluation="denotation"))
register(TaskSpec(Task.WIKISQL_SUPERVISED.value, PRESETS[Task.WIKISQL_SUPERVISED],
                  reader=open_wikisql_supervised, evaluation="denotation"))
# Trains on the masked-LM data of tapas-tf create-pretrain-data; evaluate: masked-LM accuracy.
register(TaskSpec(Task.PRETRAIN.value, PRESETS[Task.PRETRAIN]))
register(TaskSpec("SYNTHETIC", SYNTHETIC_PRESET, reader=open_synthetic, evaluation="denotation",
                  conversion={"drop_rows_to_fit": True}))
# Statements true or false of their table; rows are dropped to fit in every split (and counted).
register(TaskSpec("TABFACT", TABFACT_PRESET, reader=open_tabfact, evaluation="classification",
                  conversion={"drop_rows_to_fit": True}, modes=CLASSIFICATION_MODES))
