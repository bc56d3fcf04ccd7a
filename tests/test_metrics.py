"""bertkit.metrics: exact hand-computed cases, agreement with sklearn / seqeval called directly, and errors."""

import json
import warnings

import numpy as np
import pytest
from seqeval import metrics as seqeval_metrics
from sklearn import metrics as skm

from bertkit.errors import BertkitError
from bertkit.metrics import (
    ClassificationMetric,
    MultiLabelMetric,
    RegressionMetric,
    SeqevalMetric,
    SquadMetric,
    best_threshold,
    classification_report_text,
    confusion_matrix_table,
    metric_for_task,
)

# Six examples, three classes. Per class (TP, FP, FN): 0 -> (2, 0, 1), 1 -> (1, 1, 1), 2 -> (1, 1, 0), so
# F1 = 4/5, 1/2, 2/3; precision = 1, 1/2, 1/2; recall = 2/3, 1/2, 1.
REFS = [0, 0, 0, 1, 1, 2]
PREDS = [0, 0, 1, 1, 2, 2]
NAMES = ["neg", "neu", "pos"]


# ---------------------------------------------------------------------------------------------------------------
# Single-label classification


def test_classification_hand_computed():
    scores = ClassificationMetric().compute(predictions=PREDS, references=REFS)
    assert scores["accuracy"] == pytest.approx(4 / 6)
    assert scores["micro_f1"] == pytest.approx(4 / 6)  # all classes scored: micro-F1 is accuracy
    assert scores["macro_f1"] == pytest.approx((4 / 5 + 1 / 2 + 2 / 3) / 3)  # 59/90
    assert scores["weighted_f1"] == pytest.approx((3 * 4 / 5 + 2 * 1 / 2 + 1 * 2 / 3) / 6)
    assert scores["macro_precision"] == pytest.approx(2 / 3)
    assert scores["macro_recall"] == pytest.approx((2 / 3 + 1 / 2 + 1) / 3)
    assert scores["mcc"] == pytest.approx(skm.matthews_corrcoef(REFS, PREDS))


def test_classification_per_class_names():
    scores = ClassificationMetric().compute(predictions=PREDS, references=REFS, label_names=NAMES)
    assert scores["f1_neg"] == pytest.approx(4 / 5)
    assert scores["precision_neu"] == pytest.approx(1 / 2)
    assert scores["recall_pos"] == pytest.approx(1.0)
    assert all(isinstance(value, float) for value in scores.values())
    assert "f1_neg" not in ClassificationMetric().compute(predictions=PREDS, references=REFS)


def test_classification_labels_restrict_the_average():
    scores = ClassificationMetric().compute(predictions=PREDS, references=REFS, labels=[0, 1])
    assert scores["macro_f1"] == pytest.approx((4 / 5 + 1 / 2) / 2)
    assert scores["accuracy"] == pytest.approx(4 / 6)  # accuracy ignores `labels`


def test_classification_matches_sklearn_on_random_data():
    rng = np.random.default_rng(0)
    y_true, y_pred = rng.integers(0, 4, 200), rng.integers(0, 4, 200)
    scores = ClassificationMetric().compute(predictions=y_pred, references=y_true)
    assert scores["macro_f1"] == pytest.approx(skm.f1_score(y_true, y_pred, average="macro"))
    assert scores["weighted_f1"] == pytest.approx(skm.f1_score(y_true, y_pred, average="weighted"))
    assert scores["macro_recall"] == pytest.approx(skm.recall_score(y_true, y_pred, average="macro"))
    assert scores["mcc"] == pytest.approx(skm.matthews_corrcoef(y_true, y_pred))


def test_classification_add_batch_equals_one_compute():
    metric = ClassificationMetric()
    metric.add_batch(predictions=PREDS[:4], references=REFS[:4])
    metric.add_batch(predictions=np.array(PREDS[4:]), references=np.array(REFS[4:]))
    assert metric.compute() == ClassificationMetric().compute(predictions=PREDS, references=REFS)


def test_classification_rejects_logits_and_unknown_ids():
    with pytest.raises(BertkitError, match="argmax"):
        ClassificationMetric().compute(predictions=np.zeros((6, 3)), references=REFS)
    with pytest.raises(BertkitError, match="label id 2"):
        ClassificationMetric().compute(predictions=PREDS, references=REFS, label_names=["neg", "pos"])
    with pytest.raises(BertkitError, match="one name per label id"):
        ClassificationMetric().compute(predictions=PREDS, references=REFS, labels=[0, 1], label_names=NAMES)


# ---------------------------------------------------------------------------------------------------------------
# Multi-label


def test_multilabel_hand_computed():
    # Label 0: TP 2. Label 1: FN 1. Label 2: FP 1. Row 0 exact; row 1 P = R = 1/2.
    refs = [[1, 0, 0], [1, 1, 0]]
    preds = [[1, 0, 0], [1, 0, 1]]
    scores = MultiLabelMetric().compute(predictions=preds, references=refs)
    assert scores["micro_f1"] == pytest.approx(2 / 3)
    assert scores["macro_f1"] == pytest.approx(1 / 3)
    assert scores["samples_f1"] == pytest.approx(3 / 4)
    assert scores["subset_accuracy"] == pytest.approx(1 / 2)
    assert scores["hamming_loss"] == pytest.approx(2 / 6)


def test_multilabel_accepts_float_multi_hot_and_matches_sklearn():
    rng = np.random.default_rng(1)
    refs, preds = rng.integers(0, 2, (50, 5)), rng.integers(0, 2, (50, 5))
    scores = MultiLabelMetric().compute(predictions=preds.astype(np.float32), references=refs.astype(np.float32))
    assert scores["micro_f1"] == pytest.approx(skm.f1_score(refs, preds, average="micro"))
    assert scores["samples_f1"] == pytest.approx(skm.f1_score(refs, preds, average="samples", zero_division=0))


def test_multilabel_rejects_probabilities_and_ragged_rows():
    with pytest.raises(BertkitError, match="threshold"):
        MultiLabelMetric().compute(predictions=[[0.7, 0.0]], references=[[1, 0]])
    with pytest.raises(BertkitError, match="different lengths"):
        MultiLabelMetric().compute(predictions=[[1, 0], [1]], references=[[1, 0], [1, 0]])


# ---------------------------------------------------------------------------------------------------------------
# Regression


def test_regression_hand_computed():
    scores = RegressionMetric().compute(predictions=[1.0, 2.0, 3.0], references=[1.0, 2.0, 5.0])
    assert scores["mse"] == pytest.approx(4 / 3)
    assert scores["mae"] == pytest.approx(2 / 3)
    assert scores["spearman"] == pytest.approx(1.0)  # same order
    assert scores["pearson"] == pytest.approx(np.corrcoef([1, 2, 3], [1, 2, 5])[0, 1])


def test_regression_constant_input_is_zero_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scores = RegressionMetric().compute(predictions=[[2.0], [2.0], [2.0]], references=[1.0, 2.0, 3.0])
    assert scores["pearson"] == 0.0 and scores["spearman"] == 0.0
    assert scores["mse"] == pytest.approx(2 / 3)


# ---------------------------------------------------------------------------------------------------------------
# NER (seqeval)

NER_REFS = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O", "B-PER"]]
NER_PREDS = [["B-PER", "I-PER", "O", "O"], ["B-ORG", "O", "B-LOC"]]


def test_seqeval_hand_computed():
    # Gold entities: PER, LOC, ORG, PER. Predicted: PER (right), ORG (right), LOC (wrong span type).
    scores = SeqevalMetric().compute(predictions=NER_PREDS, references=NER_REFS)
    assert scores["precision"] == pytest.approx(2 / 3)
    assert scores["recall"] == pytest.approx(2 / 4)
    assert scores["f1"] == pytest.approx(2 * (2 / 3) * (1 / 2) / (2 / 3 + 1 / 2))
    assert scores["accuracy"] == pytest.approx(5 / 7)
    assert scores["f1_PER"] == pytest.approx(2 / 3) and scores["number_PER"] == 2
    assert scores["f1_LOC"] == 0.0 and scores["f1_ORG"] == 1.0


def test_seqeval_matches_seqeval_direct():
    scores = SeqevalMetric().compute(predictions=NER_PREDS, references=NER_REFS)
    assert scores["f1"] == pytest.approx(seqeval_metrics.f1_score(NER_REFS, NER_PREDS))
    assert scores["recall"] == pytest.approx(seqeval_metrics.recall_score(NER_REFS, NER_PREDS))


def test_seqeval_strict_mode_drops_entities_without_b():
    refs, preds = [["B-PER", "I-PER", "O"]], [["I-PER", "I-PER", "O"]]
    assert SeqevalMetric().compute(predictions=preds, references=refs)["f1"] == 1.0  # conlleval: I- starts one
    assert SeqevalMetric().compute(predictions=preds, references=refs, mode="strict", scheme="IOB2")["f1"] == 0.0


def test_seqeval_bioes_is_iobes():
    refs, preds = [["S-PER", "O", "B-LOC", "E-LOC"]], [["S-PER", "O", "B-LOC", "I-LOC"]]
    bioes = SeqevalMetric().compute(predictions=preds, references=refs, mode="strict", scheme="BIOES")
    iobes = SeqevalMetric().compute(predictions=preds, references=refs, mode="strict", scheme="IOBES")
    assert bioes == iobes and bioes["f1_PER"] == 1.0 and bioes["recall_LOC"] == 0.0


def test_seqeval_option_and_tag_errors():
    with pytest.raises(BertkitError, match="mode='strict'"):
        SeqevalMetric().compute(predictions=NER_PREDS, references=NER_REFS, scheme="IOB2")
    with pytest.raises(BertkitError, match="unknown tagging scheme"):
        SeqevalMetric().compute(predictions=NER_PREDS, references=NER_REFS, mode="strict", scheme="XYZ")
    with pytest.raises(BertkitError, match="scheme="):
        SeqevalMetric().compute(predictions=[["S-PER"]], references=[["S-PER"]], mode="strict", scheme="IOB2")
    with pytest.raises(BertkitError, match="sentence 1"):
        SeqevalMetric().compute(predictions=[["O"], ["O"]], references=[["O"], ["O", "O"]])


# ---------------------------------------------------------------------------------------------------------------
# QA (SQuAD / CMRC)


def squad(predictions, references, **kwargs):
    return SquadMetric().compute(predictions=predictions, references=references, **kwargs)


def test_squad_english_normalisation():
    assert squad(["The Cat!"], [["cat"]]) == {"exact_match": 100.0, "f1": 100.0}
    # pred tokens [red, dog], gold [big, red, dog]: precision 1, recall 2/3, F1 4/5
    scores = squad(["red dog"], [["the big red dog"]])
    assert scores["exact_match"] == 0.0
    assert scores["f1"] == pytest.approx(80.0)


def test_squad_max_over_gold_answers():
    scores = squad(["Denver Broncos", "Paris"], [["Broncos", "the Denver Broncos"], ["London", "paris."]])
    assert scores == {"exact_match": 100.0, "f1": 100.0}


def test_squad_chinese_character_tokens():
    scores = squad(["北京"], [["北京大学"]], lang="zh")
    assert scores["exact_match"] == 0.0
    assert scores["f1"] == pytest.approx(100 * 2 * (2 / 2 * 2 / 4) / (2 / 2 + 2 / 4))  # 66.67
    assert squad(["《北京》。"], [["北京"]], lang="zh")["exact_match"] == 100.0  # punctuation dropped
    # Full-width letters/digits fold to ASCII; a run of ASCII is one token, each CJK character is one token:
    # [iphone, 12, 发, 布] vs [iphone, 发, 布] -> precision 3/4, recall 1
    assert squad(["ｉＰｈｏｎｅ１２"], [["iPhone12"]], lang="zh")["exact_match"] == 100.0
    assert squad(["iPhone 12 发布"], [["iphone发布"]], lang="zh")["f1"] == pytest.approx(100 * 2 * 0.75 / 1.75)


def test_squad_unanswerable():
    assert squad([""], [[]]) == {"exact_match": 100.0, "f1": 100.0}
    assert squad(["a wrong guess"], [[]]) == {"exact_match": 0.0, "f1": 0.0}
    scores = squad(["cat", "", "dog"], [["cat"], [], []])
    assert scores["exact_match"] == pytest.approx(200 / 3)
    assert (scores["HasAns_exact"], scores["HasAns_f1"]) == (100.0, 100.0)
    assert (scores["NoAns_exact"], scores["NoAns_f1"]) == (50.0, 50.0)


def test_squad_accepts_dataset_answer_dicts():
    scores = squad(["cat"], [{"text": ["a cat"], "answer_start": [3]}])
    assert scores == {"exact_match": 100.0, "f1": 100.0}


def test_squad_errors():
    with pytest.raises(BertkitError, match="lang="):
        squad(["x"], [["x"]], lang="fr")
    with pytest.raises(BertkitError, match="list of gold answers"):
        squad(["x"], ["x"])


# ---------------------------------------------------------------------------------------------------------------
# Helpers


def test_confusion_matrix_table_hand_computed():
    table = confusion_matrix_table(REFS, PREDS, NAMES)
    assert table == {"labels": NAMES, "matrix": [[2, 1, 0], [0, 1, 1], [0, 0, 1]]}
    assert json.loads(json.dumps(table)) == table


def test_classification_report_text_is_sklearns():
    text = classification_report_text(REFS, PREDS, NAMES)
    expected = skm.classification_report(REFS, PREDS, target_names=NAMES, digits=4, zero_division=0)
    assert text == expected and "neu" in text


def test_best_threshold_finds_the_unique_best():
    # Only t in (0.27, 0.33] separates the classes; on the 0.05 grid that is 0.30.
    refs = [[1], [1], [0], [0]]
    assert best_threshold([[0.8], [0.33], [0.27], [0.1]], refs) == pytest.approx(0.30)
    assert best_threshold([[0.8], [0.30], [0.27], [0.1]], refs) == pytest.approx(0.30)  # prob == t is positive


def test_best_threshold_ties_go_to_closest_to_half():
    assert best_threshold([[0.9], [0.1]], [[1], [0]]) == pytest.approx(0.5)
    assert best_threshold([[0.4], [0.1]], [[1], [0]]) == pytest.approx(0.4)  # best band 0.15..0.40
    assert best_threshold([[0.9], [0.1]], [[1], [0]], grid=[0.2, 0.8]) == pytest.approx(0.2)  # equal distance: lower


def test_best_threshold_errors():
    with pytest.raises(BertkitError, match="sigmoid"):
        best_threshold([[2.5], [-1.0]], [[1], [0]])
    with pytest.raises(BertkitError, match="one row per example"):
        best_threshold([[0.5, 0.5]], [[1]])


def test_metric_for_task():
    assert isinstance(metric_for_task("single_label_classification"), ClassificationMetric)
    assert isinstance(metric_for_task("multi_label_classification"), MultiLabelMetric)
    assert isinstance(metric_for_task("regression"), RegressionMetric)
    assert isinstance(metric_for_task("ner"), SeqevalMetric)
    assert isinstance(metric_for_task("qa"), SquadMetric)
    with pytest.raises(BertkitError, match="use one of"):
        metric_for_task("summarization")


# ---------------------------------------------------------------------------------------------------------------
# Errors shared by every metric

VALID_PAIRS = [
    (ClassificationMetric, [0, 1], [0, 1]),
    (MultiLabelMetric, [[0, 1], [1, 0]], [[0, 1], [1, 0]]),
    (RegressionMetric, [0.5, 1.5], [0.5, 1.5]),
    (SeqevalMetric, [["O"], ["B-PER"]], [["O"], ["B-PER"]]),
    (SquadMetric, ["a", "b"], [["a"], ["b"]]),
]


@pytest.mark.parametrize(("metric_class", "predictions", "references"), VALID_PAIRS)
def test_every_metric_rejects_length_mismatch(metric_class, predictions, references):
    with pytest.raises(BertkitError, match="2 predictions but 1 references"):
        metric_class().compute(predictions=predictions, references=references[:1])


@pytest.mark.parametrize("metric_class", [pair[0] for pair in VALID_PAIRS])
def test_every_metric_rejects_empty_input(metric_class):
    with pytest.raises(BertkitError, match="no examples"):
        metric_class().compute(predictions=[], references=[])
    with pytest.raises(BertkitError, match="nothing to score"):
        metric_class().compute()


def test_helpers_reject_bad_input():
    with pytest.raises(BertkitError, match="2 predictions but 3 references"):
        confusion_matrix_table([0, 1, 1], [0, 1], NAMES)
    with pytest.raises(BertkitError, match="no examples"):
        classification_report_text([], [], NAMES)
    with pytest.raises(BertkitError, match="label id 3"):
        confusion_matrix_table([0, 3], [0, 1], NAMES)
