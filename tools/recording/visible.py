"""Host text, shown and not obeyed: the control characters a terminal would act on, written out as text.

Command output, job logs and transcripts come from the host, and a terminal obeys what is in them: an ESC
sequence can move the cursor over earlier lines, retitle the window, write the clipboard (OSC 52) or hide text;
a bidi override (U+202E) can show a command other than the one that runs. Every such character becomes its
escape as Python writes it (ESC as `\\x1b`, U+202E as `\\u202e`), so the operator sees it and the terminal does
nothing. Newline and tab stay; a CRLF line end becomes a newline (a log written on Windows reads as it should).
"""

from __future__ import annotations

import re

# C0 but tab and newline, DEL, C1 (its 8-bit CSI and OSC are ESC [ and ESC ] to many terminals), and the bidi
# embeddings, overrides and isolates (LRE RLE PDF LRO RLO, LRI RLI FSI PDI) that reorder what is shown.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _shown(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """`text` with every character a terminal would act on written out as its escape; the rest as it was."""
    if not _CONTROL.search(text):
        return text  # the usual case, and the cheap one: nothing to show
    return _CONTROL.sub(_shown, text.replace("\r\n", "\n"))
