"""Stage 2, features: Interactions to model inputs.

Holds the BERT WordPiece tokeniser and its vocabulary, table encoding (cell
tokens, ranks, numeric relations), the conversion of an Interaction's questions
into classifier examples, the tf.Example feature names and encoding
(`example_features`), and the conversion config with its fixed set of skip
reasons.

May import: `tapas_tf.data`. No TensorFlow model code, no Beam.
"""
