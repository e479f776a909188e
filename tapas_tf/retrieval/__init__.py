"""Table retrieval: finding the table a question is about, among many.

Holds table collections (`collection`: the tables of a folder of CSV/TSV files, a SQLite file
or a database URL, read lazily with a report of what was skipped or cut), the text a table is
retrieved by (`table_text`), sparse retrieval (`bm25`: BM25 over table documents), and the vector index that dense retrieval
searches (`vector_index`: exact in NumPy, FAISS or ScaNN past a measured size).

May import: `tapas_tf.data`, `tapas_tf.features`, `tapas_tf.models` and `tapas_tf.checkpoints`;
never the ask API (`qa`), `serving`, `inference` or the command lines, which may import it.
"""
