"""Stage 1, data: what a table question is, read from the releases and annotated.

Holds the Interaction protos (`protos/`, wire-compatible with the original
`interaction.proto`), interaction file IO, the readers that turn data set
releases into Interactions (`readers/`: SQA, WikiTableQuestions), text
normalisation, number and date parsing (`number_parsing`; WTQ answer dates as
its official evaluator reads them: `wtq_dates`) and numeric annotation
(`number_annotation`), a small sample data set, the check that an output
directory can be written (`paths`), and CSV files and DataFrames as tables of
text (`table_files`: the rules the ask API and retrieval share).

May import: nothing of tapas_tf. Everything else builds on it.
"""
