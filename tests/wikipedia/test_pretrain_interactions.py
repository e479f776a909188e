"""An extracted table as an Interaction, in the format of Google's released pre-training corpus."""

import pytest
from google.protobuf import text_format

from tapas_tf.data.protos import interaction_pb2
from tapas_tf.data.readers.common import make_table
from tapas_tf.wikipedia.pretrain_interactions import ExtractedTable, page_url, table_id, to_interaction

ID = "http://en.wikipedia.org/wiki/ARY_Film_Award_for_Best_Dialogue_1"


def test_google_released_example_round_trips():
    """The example of PRETRAIN_DATA.md, with the fields this extractor adds."""
    rows = [["2013\n(1st)", "", ""], ["2013\n(1st)", "Main Hoon Shahid Afridi", "Vasay Chaudhry"]]
    table = make_table(ID, ["Year", "Film", "Dialogue-writer(s)"], rows)
    extracted = ExtractedTable(table, {"TITLE": "ARY Film Award for Best Dialogue", "SEGMENT_TITLE": "2010s",
                                       "CAPTION": "", "DESCRIPTION": "The ARY Film Award ..."},
                               "wikitable", document_url=page_url("ARY Film Award for Best Dialogue"))
    expected = text_format.Parse(f"""
        id: "{ID}"
        table {{
          columns {{ text: "Year" }} columns {{ text: "Film" }} columns {{ text: "Dialogue-writer(s)" }}
          rows {{ cells {{ text: "2013\\n(1st)" }} cells {{ text: "" }} cells {{ text: "" }} }}
          rows {{ cells {{ text: "2013\\n(1st)" }} cells {{ text: "Main Hoon Shahid Afridi" }}
                  cells {{ text: "Vasay Chaudhry" }} }}
          table_id: "{ID}"
          document_title: "ARY Film Award for Best Dialogue"
          document_url: "http://en.wikipedia.org/wiki/ARY_Film_Award_for_Best_Dialogue"
          context_heading: "2010s"
        }}
        questions {{ id: "TITLE" original_text: "ARY Film Award for Best Dialogue" }}
        questions {{ id: "DESCRIPTION" original_text: "The ARY Film Award ..." }}
        questions {{ id: "SEGMENT_TITLE" original_text: "2010s" }}
        """, interaction_pb2.Interaction())
    assert to_interaction(extracted) == expected
    assert not extracted.table.HasField("document_title")  # The extracted table is left as it was.
    assert "CAPTION" not in extracted.texts


def test_ids_and_validation():
    assert table_id("Economy of Estonia", 0) == "http://en.wikipedia.org/wiki/Economy_of_Estonia_0"
    assert table_id("Economy of Estonia", 2, "infobox") == (
        "http://en.wikipedia.org/wiki/Economy_of_Estonia_infobox2")
    with pytest.raises(ValueError, match="kind"):
        ExtractedTable(interaction_pb2.Table(), {}, "chart")
    with pytest.raises(ValueError, match="unknown text keys"):
        ExtractedTable(interaction_pb2.Table(), {"ABSTRACT": "x"}, "infobox")
