"""groundstate.schema: one pydantic error as one line naming the file, the record and the field."""

from typing import Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field, StrictInt

from groundstate.errors import InputError
from groundstate.schema import read_model, validate


class Inner(BaseModel):
    flag: bool
    kind: Literal["a", "b"] = "a"


class Outer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    count: StrictInt = Field(default=0, ge=0)
    either: StrictInt | str = 0
    inner: Inner | None = None
    items: list[Inner] = Field(default_factory=list)


@pytest.mark.parametrize("value, expected", [
    ([1], "f.json: must be a JSON object (got a JSON list)"),
    ({}, "f.json, field 'name': is missing"),
    ({"name": ["x"]}, "f.json, field 'name': must be a string (got a JSON list)"),
    ({"name": "x", "count": -1}, "f.json, field 'count': must be greater than or equal to 0"),
    ({"name": "x", "count": True}, "f.json, field 'count': must be a whole number (got a JSON boolean)"),
    ({"name": "x", "either": [1]}, "f.json, field 'either': must be a whole number or a string (got a JSON list)"),
    ({"name": "x", "inner": {}}, "f.json, field 'inner.flag': is missing"),
    ({"name": "x", "inner": {"flag": True, "kind": "c"}}, "f.json, field 'inner.kind': must be 'a' or 'b'"),
    ({"name": "x", "items": [{"flag": True}, {"flag": []}]},
     "f.json, field 'items[1].flag': must be true or false (got a JSON list)"),
    ({"name": "x", "extra": 1}, "f.json, field 'extra': is not a known field here"),
])
def test_the_first_error_is_one_line_naming_the_field(value, expected):
    with pytest.raises(InputError) as info:
        validate(Outer, value, file="f.json")
    assert str(info.value) == expected
    assert "\n" not in str(info.value)


def test_record_and_location_prefix_are_named():
    with pytest.raises(InputError) as info:
        validate(Inner, {"flag": "maybe"}, file="r.jsonl", record="at line 4", loc=("outputs", 2))
    assert str(info.value).startswith("r.jsonl, record at line 4, field 'outputs[2].flag': ")


def test_read_model_reads_through_the_reading_layer(tmp_path):
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text('{"name": "x", "inner": {"flag": false}}')
    bad.write_text('{"name": "x", "count": NaN}')
    assert read_model(good, Outer).inner.flag is False
    with pytest.raises(InputError, match="NaN"):
        read_model(bad, Outer)
    with pytest.raises(InputError, match="file not found"):
        read_model(tmp_path / "missing.json", Outer)
