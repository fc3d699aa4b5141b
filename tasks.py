"""Invoke entry point: `invoke --list` shows every task.

The tasks are thin; the work is done by the `gdrkit` package beside this file.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gdrkit.tasks import ns  # noqa: E402

__all__ = ["ns"]
