"""ao_calib.core.io's JSON-lines writer."""

import json

from ao_calib.core.io import write_jsonl


def test_write_jsonl_replaces_the_file_with_one_json_line_per_record(tmp_path):
    records = [{"a": 1, "b": [True, None]}, {"path": tmp_path}]  # default=str: a Path is written as its text
    written = tmp_path / "written.jsonl"
    written.write_text('{"old": 1}\n' * 5)
    write_jsonl(written, records)
    lines = written.read_text().splitlines()
    assert [json.loads(line) for line in lines] == [{"a": 1, "b": [True, None]}, {"path": str(tmp_path)}]
    assert written.read_text().endswith("\n")
    assert not list(tmp_path.glob(".*.tmp"))  # no temporary file left behind
