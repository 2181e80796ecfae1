"""``python -m ao_calib.score``: BFCL cases with anyone's completions in, every field kept plus verdicts out."""

import json

from ao_calib.score import main
from tests.helpers.bfcl_rows import completion_rows
from tests.helpers.commands import run_cli


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_scores_keep_every_field_and_add_valid_and_components(tmp_path, capsys):
    rows = completion_rows()
    source, target = _write(tmp_path / "in.jsonl", rows), tmp_path / "out.jsonl"
    assert main(["task=function_call", f"input={source}", f"output={target}"]) == 0
    out = [json.loads(line) for line in target.read_text().splitlines()]
    assert len(out) == len(rows)
    for row, scored in zip(rows, out):
        assert {k: scored[k] for k in row} == row
        assert scored["valid"] is (not row["completion"].startswith("Sure"))
        assert {"bfcl_ast", "bfcl_parseable", "bfcl_calls", "bfcl_params", "error_type"} <= set(scored)
    assert "valid: 0.500" in capsys.readouterr().out
    # the lenient format accepts the prose-wrapped calls
    assert main(["task=function_call", "task.strict_format=false", f"input={source}", f"output={target}"]) == 0
    assert all(json.loads(line)["valid"] for line in target.read_text().splitlines())


def test_bad_row_names_file_line_and_field_and_writes_nothing(tmp_path):
    rows = completion_rows()
    rows[1] = {k: v for k, v in rows[1].items() if k != "completion"}
    source, target = _write(tmp_path / "in.jsonl", rows), tmp_path / "out.jsonl"
    result = run_cli("ao_calib.score", "task=function_call", f"input={source}", f"output={target}")
    assert result.returncode == 2, result.stderr
    assert f"{source}: row 1, field 'completion'" in result.stderr and "line 2" in result.stderr
    assert not target.exists()


def test_missing_arguments_exit_2(tmp_path, capsys):
    assert main(["task=function_call", f"input={tmp_path / 'x.jsonl'}"]) == 2
    assert "output= required" in capsys.readouterr().err


def test_missing_or_unreadable_input_exits_2_naming_file_and_line(tmp_path, capsys):
    target = tmp_path / "out.jsonl"
    assert main(["task=function_call", f"input={tmp_path / 'absent.jsonl'}", f"output={target}"]) == 2
    assert f"input file not found: {tmp_path / 'absent.jsonl'}" in capsys.readouterr().err
    rows = completion_rows()[:2]
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps(rows[0]) + "\n\n{not json\n")
    assert main(["task=function_call", f"input={source}", f"output={target}"]) == 2
    assert f"{source}: row 1" in (err := capsys.readouterr().err) and "(line 3) not valid JSON" in err
    source.write_bytes(json.dumps(rows[0]).encode() + b"\n\xff\n")
    assert main(["task=function_call", f"input={source}", f"output={target}"]) == 2
    assert "line 2: not valid UTF-8" in capsys.readouterr().err
    assert not target.exists()
