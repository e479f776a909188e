"""Beam transforms of the data jobs, and their reports.

Each stage is a named PTransform (`classifier_data.ReadReleaseFile`,
`AnnotateNumbers`, `ToClassifierExamples`; `pretrain_data.ExtractTables`,
`ReadInteractionFiles`, `ToPretrainExamples`) whose per-element work is a plain
function of `data`, `wikipedia` or `features`; every skip is counted by reason and sent to a
`failed` output. `task_files` says where a task's files are, `reports` turns
counters into the job's JSON report, `runners` chooses the runner (and says whether the steps
run in this process), `progress` shows the items done while a job runs in this process, and
`beam_options` checks the arguments meant for Beam against its options. The jobs in
`beam_jobs/` only parse options and compose these.

May import: `tapas_tf.data`, `tapas_tf.wikipedia`, `tapas_tf.features`, `tapas_tf.task_registry.presets`, and
`tapas_tf.cli` (the command lines' shared flag helpers).
"""
