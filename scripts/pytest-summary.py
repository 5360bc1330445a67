#!/usr/bin/env python3
"""Adds up the closing lines of several pytest runs into one, in pytest's own words, e.g.
`930 passed, 6 skipped, 1 xfailed in 612.40s`: scripts/integration-tests.sh runs the suite in
two parts (on workers, then the serial tests alone) and ends with this line, as one pytest run
would. Each argument is a file holding one run's output; a run that printed no summary (it
was killed, or collected nothing) adds nothing."""

from __future__ import annotations

import re
import sys

# pytest's order in its closing line; "deselected" is left out: each part deselects the other's
# tests.
ORDER = ["failed", "passed", "skipped", "xfailed", "xpassed", "warnings", "error"]
COUNT = re.compile(r"(\d+) (failed|passed|skipped|deselected|xfailed|xpassed|warnings?|errors?)\b")
CLOSING = re.compile(r"^=*\s*(?:\d+ \w+(?:, )?)+.* in (\d+(?:\.\d+)?)s\b")


def closing_line(text: str) -> str | None:
    for line in reversed(text.splitlines()):
        if CLOSING.match(line.strip()) and COUNT.search(line):
            return line
    return None


def main(paths: list[str]) -> int:
    counts: dict[str, int] = {}
    seconds = 0.0
    for path in paths:
        with open(path, errors="replace") as f:
            line = closing_line(f.read())
        if line is None:
            continue
        seconds += float(CLOSING.match(line.strip()).group(1))
        for number, word in COUNT.findall(line):
            key = "warnings" if word.startswith("warning") else "error" if word.startswith("error") else word
            counts[key] = counts.get(key, 0) + int(number)
    parts = []
    for key in ORDER:
        if counts.get(key):
            n = counts[key]
            word = "errors" if key == "error" and n != 1 else "warning" if key == "warnings" and n == 1 else key
            parts.append(f"{n} {word}")
    print(f"{', '.join(parts) or 'no tests ran'} in {seconds:.2f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
