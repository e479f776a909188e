"""The installed command `tapas-tf`, and the task command line that it and `run_task.py` run.

`dispatch` is `tapas-tf SUBCOMMAND [flags]` (the console script of the package): it maps a
subcommand to a command line (`ask`, `serve`, `import`, `init-from-bert`, `sample-data`, the
modes of `run_task`, `create-pretrain-data`), imports only that one and runs it under the name
`tapas-tf SUBCOMMAND`. `run_task` is the task command line (create data, train, predict,
evaluate, export) whose logic used to sit in the checkout's `run_task.py`, now a thin shim.

May import: every room of `tapas_tf` and the root command lines (`ask`, `serve`,
`import_checkpoint`, `init_from_bert`, `sample_data`): the commands sit on top of the data flow,
and nothing imports them.
"""
