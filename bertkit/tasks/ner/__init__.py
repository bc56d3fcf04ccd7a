"""Named-entity recognition: the ner task, shared by recipes/ner.py, `bertkit predict` and `bertkit evaluate`.

    read_examples("train.conll", ReadOptions())  -> NerData(sentences=[Sentence(words, tags, ...)], scheme="IOB2")
    encode(tokenizer, sentences, 128, 32, label2id)  -> SentenceWindows: overlapping token windows + labels
    windows.word_probabilities(window_probs, o_id, C)  -> one (words, C) array per sentence
    entities_from_tags(sentence, tags, scores)       -> [{"text", "type", "start", "end", "score"}]

Inputs: CoNLL-style column files and JSONL rows of tokens + tags or text + character-offset entities (read.py);
raw text becomes words the way BERT's basic tokenizer splits it, or one word per character (words.py). Tags may be
IOB2, IOB1 (converted to IOB2) or BIOES (tags.py). Labels go on each word's first sub-token and long sentences are
cut into overlapping windows (encode.py); predictions are decoded and scored per entity (scoring.py) by the tagger
(predict.py), which reads the settings its run saved with the model (settings.py).
"""

from .encode import (SentenceWindows, align_labels, encode, first_tokens, sentence_windows, stitch_windows,
                     window_rows)
from .predict import Tagger, evaluate_file, load_predictor, predict_file, predict_word_probabilities
from .read import NerData, ReadOptions, read_examples, read_texts
from .scoring import compute_metrics_fn, decode, entities_from_tags, entity_report, predicted_tags, score_tags
from .settings import Settings, legacy_settings
from .tags import (SCHEMES, continuation_ids, label_names, repair_tags, scheme_violations, spans_to_tags, split_tag,
                   tags_to_spans)
from .words import Sentence, split_words

__all__ = [
    "read_examples", "encode", "compute_metrics_fn", "Settings", "load_predictor", "predict_file", "evaluate_file",
    "Sentence", "ReadOptions", "NerData", "SentenceWindows", "Tagger", "read_texts", "split_words", "SCHEMES",
    "split_tag", "tags_to_spans", "spans_to_tags", "scheme_violations", "repair_tags", "label_names",
    "continuation_ids", "align_labels", "first_tokens", "sentence_windows", "stitch_windows", "window_rows",
    "predicted_tags", "entities_from_tags", "decode", "score_tags", "entity_report", "predict_word_probabilities",
    "legacy_settings",
]
