"""The `predictions` model reads JSON Lines and JSON arrays alike, and names the expected format when neither parses."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from recbench.backends.predictions import PredictionsBackend, read_predictions
from recbench.api.types import Request, SamplingParams

pytestmark = pytest.mark.fast


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


RECORDS = [{"id": 1, "response": "Alien (1979)[SEP]Heat (1995)"}, {"id": "q2", "response": None}]


def test_json_array_and_json_lines_give_the_same_answers(tmp_path):
    jsonl = write(tmp_path, "a.jsonl", "\n".join(json.dumps(r) for r in RECORDS) + "\n\n")
    array = write(tmp_path, "a.json", json.dumps(RECORDS, indent=2))
    expected = {"1": "Alien (1979)[SEP]Heat (1995)", "q2": ""}
    assert read_predictions(jsonl) == expected == read_predictions(array)
    assert read_predictions(write(tmp_path, "bom.json", "\ufeff  " + json.dumps(RECORDS))) == expected


def test_real_released_predictions_read_the_same_as_an_array(tmp_path, shared_data):
    files = sorted((shared_data / "recbench_plus" / "predictions").glob("*.jsonl"))
    assert files, "the released RecBench+ prediction files are part of ../shared/data"
    lines = [json.loads(ln) for ln in files[0].read_text(encoding="utf-8").splitlines() if ln.strip()]
    array = write(tmp_path, "same.json", json.dumps(lines))
    assert read_predictions(files[0]) == read_predictions(array) and len(read_predictions(array)) == len(
        {str(r["id"]) for r in lines})


@pytest.mark.parametrize("text,match", [
    ('{"id": 1, "response": "x"}\n{"id": 2, "response": \n', r"bad.txt:2: not a JSON object .*expected JSON Lines"),
    ('[{"id": 1, "response": "x"},', r"bad.txt: not valid JSON .*or a JSON array of such objects"),
    ('["just text"]', r"bad.txt: element 0: a prediction must be a JSON object, got str; expected JSON Lines"),
    ('[{"qid": 1, "answer": "x"}]', r"element 0: a prediction needs 'id' and 'response' fields, got \['answer', 'qid'\]"),
    ("id,response\n1,x\n", r"bad.txt:1: not a JSON object .*expected JSON Lines"),
])
def test_unreadable_files_name_the_expected_format(tmp_path, text, match):
    with pytest.raises(ValueError, match=match):
        read_predictions(write(tmp_path, "bad.txt", text))


def test_backend_replays_from_a_json_array(tmp_path):
    p = write(tmp_path, "answers.json", json.dumps([{"qid": "u1", "text": "yes"}, {"qid": "u2", "text": "no"}]))
    b = PredictionsBackend(str(p), id_field="qid", text_field="text")
    reqs = [Request.chat([{"role": "user", "content": "?"}], SamplingParams(), example_id=i) for i in ("u2", "u1", "u3")]
    out = b.generate(reqs)
    assert [r.text for r in out[:2]] == ["no", "yes"] and "no prediction for example id 'u3'" in out[2].error
