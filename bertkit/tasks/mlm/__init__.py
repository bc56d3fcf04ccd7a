"""Masked-LM pretraining: the mlm task (continued domain pretraining, whole-word masking, held-out perplexity).

    words.py       word ids for whole-word masking (## pieces, rjieba words), the auto mode
    masking.py     MaskingCollator (80/10/10, token or whole-word; masks a function of seed/epoch/example), fixed
                   held-out masks
    nsp.py         next-sentence pairs
    examples.py    documents and model rows from in-memory lists (read_examples, encode)
    corpus.py      the corpus through `datasets`: read, split, tokenize in workers, cached
    read_errors.py why a read failed, in one line: a full cache disk, bytes that are not UTF-8 (offset, line)
    blocks.py      group blocks, line windows and NSP pairs read on demand from the cached tokens
    streaming.py   the same rows from a streamed corpus
    vocabulary.py  domain words added to a tokenizer and model; from-scratch WordPiece and config
    heads.py       loading with an MLM head; a new head's warm-up
    evaluation.py  held-out perplexity over fixed masks
    metrics.py     masked-token accuracy and perplexity of eval predictions
    settings.py    the Settings a run saves with its model
    fill_mask.py   the predictor: fill-mask over a file, held-out perplexity of a file
"""

from bertkit.tasks.mlm.examples import encode, read_examples
from bertkit.tasks.mlm.fill_mask import FillMaskPredictor, evaluate_file, load_predictor, predict_file
from bertkit.tasks.mlm.metrics import compute_metrics_fn
from bertkit.tasks.mlm.settings import Settings

__all__ = ["read_examples", "encode", "compute_metrics_fn", "Settings", "load_predictor", "predict_file",
           "evaluate_file", "FillMaskPredictor"]
