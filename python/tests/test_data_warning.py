"""Given vs used through the Python API (issue 14 item 4): weft.plan and weft.simulate return the
same given-vs-used line the CLI prints on stderr."""
import json

import weft


def _write(path, lines):
    path.write_text("".join(line + "\n" for line in lines))
    return str(path)


def test_malformed_lines_and_long_videos_are_reported(tmp_path):
    lines = [json.dumps({"id": i, "text_tokens": 200,
                         "videos": [{"duration_s": 30 * i, "w": 640, "h": 480}]})
             for i in range(1, 13)]
    lines += ["not json", '{"id": ']
    data = _write(tmp_path / "d.jsonl", lines)
    runs = weft.simulate("megatron-1f1b", "tiny-vlm", data=data, iterations=1)
    warning = runs[0]["data_warning"]
    assert "14 records given" in warning and "2 malformed" in warning
    planned = weft.plan("megatron-1f1b", "tiny-vlm", data=data)
    assert planned["data_warning"] == warning


def test_clean_data_gives_an_empty_warning(tmp_path):
    lines = [json.dumps({"id": i, "text_tokens": 100, "images": [{"w": 64, "h": 64}]})
             for i in range(64)]
    data = _write(tmp_path / "d.jsonl", lines)
    assert weft.plan("megatron-1f1b", "tiny-vlm", data=data)["data_warning"] == ""
