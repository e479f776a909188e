"""The subcommands of the installed `tapas-tf` command: a name, a line of help and the module that runs it.

Modules are named, not imported: `tapas-tf --help` loads nothing heavy, only the chosen
subcommand's module is imported (`runner.run`), and the script files that run a command of their
own (`python beam_jobs/create_pretrain_data.py`) find it here without importing the command layer.
"""

from typing import Dict, NamedTuple, Optional

COMMAND = "tapas-tf"
_RUN_TASK = "tapas_tf.commands.run_task"  # The task command line: its --mode is the subcommand.
_BEAM_FLAGS = "tapas_tf.pipelines.beam_options:known_beam_flags"


class Subcommand(NamedTuple):
    summary: str  # One line for `tapas-tf --help`.
    module: str  # The command module: define_flags() and main(argv), run under absl's app.run.
    mode: Optional[str] = None  # Or: this run_task --mode (module tapas_tf.commands.run_task).
    # "module:function" returning the flags of another parser that takes what the command does not
    # define (Beam's PipelineOptions); None: an undefined flag is an error.
    other_flags: Optional[str] = None

    @property
    def pipeline_options(self) -> bool:
        """Whether flags the command does not define go to Beam's PipelineOptions."""
        return self.other_flags is not None


def _command(name: str) -> str:
    return f"tapas_tf.commands.{name}"


SUBCOMMANDS: Dict[str, Subcommand] = {
    "ask": Subcommand("Ask a table (a CSV file) a question, or hold a conversation on stdin.", _command("ask")),
    "serve": Subcommand("A local web page for asking tables (needs pip install 'tapas-tf[web]').",
                        _command("serve")),
    "sample-data": Subcommand("Write the small SQA-format sample data set (input of create-data).",
                              _command("sample_data")),
    "create-data": Subcommand("A task's release files -> interactions and TFRecords (a Beam job).",
                              _RUN_TASK, "create_data"),
    "train": Subcommand("Train (or resume) a model on the data of create-data; --task=PRETRAIN pre-trains.",
                        _RUN_TASK, "train"),
    "predict": Subcommand("Predict a split with a model: MODEL_DIR/predictions/.", _RUN_TASK, "predict"),
    "predict-and-evaluate": Subcommand("Predict a split and write its metrics.", _RUN_TASK, "predict_and_evaluate"),
    "evaluate": Subcommand("Metrics of a split's predictions; masked-LM accuracy of a pre-trained model "
                           "(--task=PRETRAIN).", _RUN_TASK, "evaluate"),
    "export": Subcommand("Export a model as a SavedModel for TF Serving.", _RUN_TASK, "export"),
    "export-retriever": Subcommand("Export a table-retrieval dual encoder as a SavedModel for TF Serving (query "
                                   "and table embeddings), and its query tower for LiteRT.",
                                   _command("export_retriever")),
    "import": Subcommand("Import a Hugging Face or original (TF1) TAPAS checkpoint as a model directory.",
                         _command("import_checkpoint")),
    "init-from-bert": Subcommand("A model directory whose encoder starts from a text BERT (default MiniLM).",
                                 _command("init_from_bert")),
    "verify": Subcommand("Is a statement about a table (a CSV file) true? TabFact: entailed or refuted, "
                         "with P(entailed).", _command("verify")),
    "make-statements": Subcommand("TabFact: true and false statements from a split's tables (intermediate "
                                  "pre-training).", _command("make_statements")),
    "bundle": Subcommand("Write a fine-tuned model directory as a compact (float16 or int8) bundled model, with "
                         "its dev scores.", _command("bundle")),
    "collect-tables": Subcommand("The distinct tables of interaction files, without evaluation tables (the "
                                 "synthetic stage's input).", _command("collect_tables")),
    "index": Subcommand("Index a collection of tables (a folder of CSV/TSV files, a SQLite file, a database URL) "
                        "for search and answers.", _command("index_tables")),
    "search": Subcommand("The tables of an index that best match a question, with their scores.",
                         _command("search_tables")),
    "make-ict-pairs": Subcommand("Inverse-cloze pairs for pre-training a table retriever: sentences of a table's "
                                 "page as its questions, under the training-data rule.", _command("make_ict_pairs")),
    "train-retriever": Subcommand("Train a dual encoder for table retrieval on training questions whose table is "
                                  "known (in-batch and BM25 hard negatives).", _command("train_retriever")),
    "evaluate-retrieval": Subcommand("Recall@k and MRR of an index's methods on questions whose table is known.",
                                     _command("evaluate_retrieval")),
    "create-pretrain-data": Subcommand("Wikipedia pages -> masked-LM pre-training examples (a Beam job).",
                                       _command("create_pretrain_data"), other_flags=_BEAM_FLAGS),
    "encode-tables": Subcommand("Embed every table of a collection with a model into shards a vector index is "
                                "built from (a Beam job).", _command("encode_tables"), other_flags=_BEAM_FLAGS),
}
ALIASES = {"import-checkpoint": "import"}  # Besides "_" for "-": create_data, init_from_bert, ...
