"""Stage 1b, Wikipedia: tables and the text around them, from dumps and rendered pages, as Interactions.

Holds the streaming reader of MediaWiki `pages-articles` XML dumps (`dump_reader`), table
extraction from wikitext with a real MediaWiki parser (`wikitext_tables`, mwparserfromhell) and
from rendered article HTML with a real HTML parser (`html_tables`, lxml), and the rules both share
(`table_grid`: colspan and rowspan expanded, a header row required, at most 500 cells, infoboxes
transposed; `pretrain_interactions`: a table and its text snippets as an Interaction in the
format of Google's released pre-training corpus). Every table or page that is dropped is dropped
with a reason from a fixed set, which the Beam job counts.

May import: `tapas_tf.data`.
"""
