#!/usr/bin/env python3
# SPDX-License-Identifier: (BSD-2-Clause OR GPL-2.0-only)
"""test_kpath_cpt.py's sequential and parallel cases on recordings made with
`critpath record --all-syscalls` (every futex/socket/poll call from
raw_syscalls, each with its enter time), the capture the default one falls
back to: the kernel-level walk must find the same paths from it."""
import os
import sys

os.environ["CRITPATH_RECORD_ARGS"] = "--all-syscalls"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_kpath_cpt  # noqa: E402

if __name__ == "__main__":
    sys.argv = [sys.argv[0], "seq", "par"]
    test_kpath_cpt.main()
