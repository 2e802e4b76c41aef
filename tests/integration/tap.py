# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""TAP output for integration tests (tests/run.sh counts "ok" / "not ok")."""
import os
import re
import sys

BUILD = os.environ.get("CRITPATH_BUILD") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "build")
# CRITPATH_BIN: another build's critpath (tests/run.sh's sanitized run of
# test_agent.py) against this build's workloads and demo
CRITPATH = os.environ.get("CRITPATH_BIN") or os.path.join(BUILD, "critpath")
WORKLOADS = os.path.join(BUILD, "workloads")
_SAN_RE = re.compile(r"ERROR: \w+Sanitizer|runtime error: |SUMMARY: \w+Sanitizer")


def sanitizer_report(text):
    """The first lines of a sanitizer's report in a program's output, or ""
    (a sanitized build's finding must fail a test whatever its exit status)."""
    m = _SAN_RE.search(text or "")
    if not m:
        return ""
    start = text.rfind("\n", 0, m.start()) + 1
    return "\n".join(text[start:].splitlines()[:25])


class Tap:
    def __init__(self):
        self.n = 0
        self.failed = 0

    def ok(self, name, cond, detail=""):
        """One check. detail is printed under a failure: say what was seen."""
        self.n += 1
        if cond:
            print(f"ok {self.n} - {name}", flush=True)
        else:
            self.failed += 1
            print(f"not ok {self.n} - {name}", flush=True)
            for line in str(detail).splitlines() or [""]:
                print(f"# {line}", flush=True)
        return bool(cond)

    def gap(self, name, cond, detail="", issue=21):
        """A check of a goal not met yet on every run: ok when met, else a
        skip that says so (with what was seen), never a silent pass."""
        if cond:
            return self.ok(name, cond)
        self.skip(name, f"not met yet (issue {issue})")
        for line in str(detail).splitlines()[:12] or [""]:
            print(f"# {line}", flush=True)
        return False

    def skip(self, name, reason):
        self.n += 1
        print(f"ok {self.n} - {name} # SKIP {reason}", flush=True)

    def done(self):
        print(f"1..{self.n}", flush=True)
        sys.exit(1 if self.failed else 0)
