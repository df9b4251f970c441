"""What the console sink gets from a run's output chunks: lines, and over-long ones cut."""

from __future__ import annotations

from repro_gate.launch.stream import CUT_MARKER, LineSplitter


def split(chunks: list[bytes], cap: int = 8) -> list[str]:
    lines: list[str] = []
    splitter = LineSplitter(lines.append, cap=cap)
    for chunk in chunks:
        splitter.feed(chunk)
    splitter.close()
    return lines


def test_lines_across_chunks_and_a_last_line_without_newline() -> None:
    assert split([b"ab", b"c\r\nde\n", b"f"]) == ["abc", "de", "f"]


def test_a_line_over_the_cap_is_cut_once_and_the_next_line_is_whole() -> None:
    lines = split([b"0123456789", b"abcdef" * 100, b"\nnext\n"])
    assert lines == ["01234567" + CUT_MARKER, "next"]


def test_an_endless_line_keeps_nothing_pending() -> None:
    splitter = LineSplitter(lambda line: None, cap=8)
    for _ in range(1000):
        splitter.feed(b"x" * 4096)
    assert splitter.pending == b""
