"""A T2 truth file must belong to the data file it is given with (refused with one line naming both files)."""

import json

import pytest

from groundstate.cli import main
from groundstate.errors import InputError
from groundstate.eval.benchmarks.offquery.published import load_offquery
from groundstate.eval.benchmarks.offquery.t2_files import default_facts_path
from tests.helpers import DATA

PUBLISHED = DATA / "offquery" / "published"
WARD = PUBLISHED / "datasets" / "ward.json"
WARD_TRUTH = PUBLISHED / "task2_evaluation" / "truth" / "ward.json"
WARD_FACTS = PUBLISHED / "task2_evaluation" / "facts" / "ward.json"
EASY = DATA / "offquery" / "mediQ_easy.json"
EASY_TRUTH = DATA / "offquery" / "mediQ_easy_t2.json"


def test_matching_files_load_and_the_facts_file_is_found_beside_the_truth_file():
    assert default_facts_path(WARD_TRUTH) == WARD_FACTS
    instances = load_offquery(WARD, t2_truth=WARD_TRUTH)
    assert [len(x.t2_facts) for x in instances] == [4, 3, 4]
    assert len(load_offquery(EASY, t2_truth=EASY_TRUTH)) == 3


@pytest.mark.parametrize("data, truth", [(EASY, WARD_TRUTH), (WARD, EASY_TRUTH)])
def test_a_truth_file_of_another_data_file_is_refused(data, truth, capsys):
    with pytest.raises(InputError, match="does not belong"):
        load_offquery(data, t2_truth=truth)
    assert main(["data", "validate", "--data", str(data), "--t2-truth", str(truth)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and str(data) in err and str(truth) in err


def test_the_facts_file_checks_each_fact_exactly(tmp_path):
    truth = json.loads(WARD_TRUTH.read_text())
    truth[1]["sampled_facts"][0] = truth[1]["sampled_facts"][0].replace("61", "67")  # one changed value
    layout = tmp_path / "task2_evaluation"
    (layout / "truth").mkdir(parents=True)
    (layout / "facts").mkdir()
    (layout / "truth" / "ward.json").write_text(json.dumps(truth))
    (layout / "facts" / "ward.json").write_text(WARD_FACTS.read_text())
    with pytest.raises(InputError, match="record 1.*not among the instance's facts"):
        load_offquery(WARD, t2_truth=layout / "truth" / "ward.json")
