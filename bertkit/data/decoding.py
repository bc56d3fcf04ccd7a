"""A data file's bytes as text: existence, permissions, emptiness, strict UTF-8 with a guess at the real encoding."""

from __future__ import annotations

import re
from pathlib import Path

from bertkit.errors import BertkitError

from .messages import clip


def read_text(path: str) -> str:
    """The file decoded as strict UTF-8 without its BOM (Excel writes one; it would end up in the first column name)."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise BertkitError(f"no such file: {path} — check the path") from None
    except OSError as err:
        raise BertkitError(f"{path} cannot be read ({clip(err, 80)}) — check its permissions") from None
    if not data.strip():
        raise BertkitError(f"{path} is empty — put the data in it")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise BertkitError(
            f"{path} is not UTF-8: byte 0x{data[err.start]:02x} at offset {err.start} (line {line}) cannot be "
            f"decoded{_encoding_guess(data)} — re-save the file as UTF-8"
        ) from None
    return text.removeprefix("\ufeff")


def _encoding_guess(data: bytes) -> str:
    """A hint for the two encodings users most often have by accident: Excel's 'Unicode text' and Chinese GBK."""
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return " (it is UTF-16, as Excel's 'Unicode Text' writes)"
    try:
        text = data.decode("gb18030")
    except UnicodeDecodeError:
        return ""
    if re.search("[\u4e00-\u9fff]", text):
        return " (it looks like GBK/GB18030; e.g. `iconv -f GB18030 -t UTF-8`)"
    return ""


__all__ = ["read_text"]
