"""Check an INI-style settings file: every line is `key = value` with a well-formed key."""

import re
import sys

KEY = re.compile(r"^[A-Za-z0-9_]+$")


def main(path: str) -> int:
    with open(path) as f:
        for number, line in enumerate(f, 1):
            key, _, _ = line.partition("=")
            if not KEY.match(key.strip()):
                print(f"line {number}: bad key {key.strip()!r}")
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
