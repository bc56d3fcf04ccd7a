"""Reading datasets for fine-tuning: local files and Hub datasets, column detection, label maps.

    read_table("data/en_sentiment/train.csv")       -> datasets.Dataset, rows in file order
    resolve_columns(ds.features, "train.csv")       -> ColumnMap(text="text", text_pair=None, label="label")
    LabelSpace.from_values(ds["label"])             -> LabelSpace(kind="single", names=["negative", "positive"])
    load_split("train.csv", {}, None, True)         -> all of the above, plus an encoded `labels` column

Every mistake in the input raises `BertkitError` with one line naming the file, the line as the user sees it in
an editor (a CSV header is line 1) and the column, and saying what to do. To make that possible the text formats
are parsed here, in Python, instead of by pandas / pyarrow / datasets: those report a byte offset, a pandas row
index, or a traceback from three libraries down. The files a fine-tuning run reads fit in memory, so the parsed
rows go straight into an in-memory Arrow table (no cache files, no `load_dataset` fingerprinting).

The modules, bottom up: messages, rows (where each row came from), decoding, delimited and json_rows (the text
formats), readers (`read_table`), columns, labels, splits (`load_split`), reports (`bertkit inspect`).
"""

from .columns import LABEL_COLUMNS, TEXT_COLUMNS, TEXT_PAIR_COLUMNS, ColumnMap, resolve_columns
from .decoding import read_text
from .json_rows import json_lines
from .labels import MISSING_LABELS, LabelSpace, check_missing_labels
from .readers import SUPPORTED_EXTENSIONS, read_table
from .reports import duplicate_and_overlap_report
from .rows import row_location
from .splits import check_texts, load_split


__all__ = [
    "SUPPORTED_EXTENSIONS",
    "read_text",
    "json_lines",
    "TEXT_COLUMNS",
    "TEXT_PAIR_COLUMNS",
    "LABEL_COLUMNS",
    "ColumnMap",
    "LabelSpace",
    "MISSING_LABELS",
    "check_missing_labels",
    "read_table",
    "row_location",
    "resolve_columns",
    "check_texts",
    "load_split",
    "duplicate_and_overlap_report",
]
