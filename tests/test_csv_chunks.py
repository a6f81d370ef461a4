"""The CSV splitter cuts whole lines (line feeds inside quoted fields do not end a line),
repeats the header, counts the file's lines, and refuses a line longer than the limit: whether
a stretch of the stream holds quotes (each byte looked at) or not (only its first and last line
feed)."""

from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quicsm.qlog import tabular
from quicsm.qlog.tabular import _TooLong, csv_chunks

FIELD = st.sampled_from(["a", "bb", "12.5", "", '"x\ny"', '"q,""r"""', "longer-field-value"])
LINE = st.lists(FIELD, min_size=1, max_size=4).map(",".join)


def lines_of(body: str) -> list[str]:
    """The lines of ``body`` (each with its line feed), cut at line feeds outside quotes."""
    out, start, quoted = [], 0, False
    for i, ch in enumerate(body):
        if ch == '"':
            quoted = not quoted
        elif ch == "\n" and not quoted:
            out.append(body[start : i + 1])
            start = i + 1
    if start < len(body):
        out.append(body[start:])
    return out


@settings(max_examples=300, deadline=None)
@given(
    rows=st.lists(LINE, max_size=30),
    block=st.integers(1, 40),
    scan=st.integers(1, 16),
    chunk=st.integers(1, 60),
    limit=st.integers(2, 60),
)
def test_chunks_are_the_lines_of_the_stream(
    rows: list[str], block: int, scan: int, chunk: int, limit: int
) -> None:
    header = "trace,time_ms,state\n"
    body = "".join(r + "\n" for r in rows)
    data = (header + body).encode()
    blocks = [data[i : i + block] for i in range(0, len(data), block)]
    too_long = any(len(line.encode()) > limit for line in lines_of(body))
    with mock.patch.object(tabular, "_SCAN_BYTES", scan):
        if too_long:
            with pytest.raises(_TooLong):
                list(csv_chunks(blocks, chunk_bytes=chunk, max_line_bytes=limit))
            return
        chunks = list(csv_chunks(blocks, chunk_bytes=chunk, max_line_bytes=limit))
    texts = [c.decode() for c, _ in chunks]
    assert all(t.startswith(header) for t in texts)
    bodies = [t[len(header) :] for t in texts]
    joined = "".join(bodies)
    # a blank rest after the last whole chunk is not a chunk of its own
    assert joined == body or (body.startswith(joined) and not body[len(joined) :].strip())
    line = 2
    for (_, first), part in zip(chunks, bodies, strict=True):
        assert first == line
        assert "".join(lines_of(part)) == part  # whole lines only
        assert not part or lines_of(part)[-1].endswith("\n") or part is bodies[-1]
        line += part.count("\n")  # lines of the file (quoted line feeds too)
