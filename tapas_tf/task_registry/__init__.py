"""The tasks the task command line knows, each registered once with everything it needs.

A registration (`registry.TaskSpec`) names the task and holds its reader (one interface,
`tapas_tf.data.readers.release_reader`), its preset (splits and hyper-parameters,
`tapas_tf.task_registry.presets.TaskPreset`), its conversion options (`registry.conversion_config`, the one place
that builds a ConversionConfig), its evaluation and the modes it is built for. `builtin`
registers the paper's tasks; `modules` loads a module of yours that registers more
(`--task_module`; docs/ADDING_A_TASK.md):

    from tapas_tf.task_registry import TaskSpec, register

Importing this package registers the built-in tasks. The readers load only when a release is read.

May import: `tapas_tf.data` (the readers), `tapas_tf.features` (the conversion options) and
`tapas_tf.task_registry.presets` (the presets). The create_data job and the task command line import it.
"""

from tapas_tf.task_registry.registry import (  # noqa: F401  The API of a module that registers a task.
    EVALUATIONS, MODES, TaskSpec, conversion_config, get_task, register, task_names, tasks_for)
from tapas_tf.task_registry import builtin  # noqa: F401,E402  Registers the paper's tasks, first.
