"""The one Markdown table renderer of the reports (``bench.table_output``), by hand."""

from bench.table_output import emit, markdown_table


def test_markdown_table_by_hand():
    assert markdown_table(("policy", "a", "b"), [["None", "1.0", "2.0"], ["TinyTrain", "", "3.0"]]) == [
        "| policy | a | b |", "|---|---|---|", "| None | 1.0 | 2.0 |", "| TinyTrain |  | 3.0 |"]


def test_empty_header_cell_and_right_alignment():
    lines = markdown_table(("", "x", "y", "goal"), iter([["peak", "1", "2", ""]]), align="lrr")
    assert lines == ["| | x | y | goal |", "|---|---:|---:|---|", "| peak | 1 | 2 |  |"]
    assert markdown_table(("a",), []) == ["| a |", "|---|"]


def test_emit_writes_the_file_or_prints(tmp_path, capsys):
    emit("| a |\n", str(tmp_path / "t.md"))
    assert (tmp_path / "t.md").read_text() == "| a |\n" and capsys.readouterr().out == ""
    emit("| b |\n", None)
    assert capsys.readouterr().out == "| b |\n"
