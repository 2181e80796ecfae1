"""ao_calib.io's JSON-lines writers."""

from ao_calib.io import append_jsonl, write_jsonl


def test_write_jsonl_replaces_the_file_with_the_lines_append_jsonl_writes(tmp_path):
    records = [{"a": 1, "b": [True, None]}, {"path": tmp_path}]  # default=str: a Path is written as its text
    appended, written = tmp_path / "appended.jsonl", tmp_path / "written.jsonl"
    append_jsonl(appended, records)
    written.write_text('{"old": 1}\n' * 5)
    write_jsonl(written, records)
    assert written.read_bytes() == appended.read_bytes()
    assert not list(tmp_path.glob(".*.tmp"))  # no temporary file left behind
