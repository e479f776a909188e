"""Every command line of tapas-tf, and the installed command `tapas-tf` that runs them.

`dispatch` is `tapas-tf SUBCOMMAND [flags]` (the console script of the package). Each subcommand
is a module here with one shape: `define_flags()` defines its absl flags (only the chosen
command's, so two command lines never meet), `main(argv)` runs under absl's `app.run`, and the
module's docstring is its --help: `ask`, `serve`, `verify`, `import_checkpoint`,
`init_from_bert`, `sample_data`, `make_statements`, `collect_tables`, `bundle`,
`create_pretrain_data` (its Beam options go to `PipelineOptions`). `run_task` is the task
command line (create data, train, predict, evaluate, export: one subcommand per mode), with its
flags in `task_flags`; `model_flags` and `table_flags` are the flags that ask, serve and verify
share. `python -m tapas_tf.ask`,
`python -m tapas_tf.serve` and the checkout's `run_task.py` are aliases.

May import: every room of `tapas_tf`: the commands sit on top of the data flow, and only the
aliases import them.
"""
