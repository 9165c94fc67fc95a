# -*- coding: utf-8 -*-
# Copyright: llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""Writing a report directory on the controller, shared by the report modules.

llmops.sglang.benchmark_report (``reports/<host>/<run_id>/``), llmops.sglang.fleet_report
(``reports/fleet/<run_id>/``) and llmops.sglang.spec_tune's decision (``decision.*``, ``speedup.png``) all
build their files in memory as ``{file name: bytes}`` and write them here:

- a file whose bytes are already on disk is left alone (so a rerun over the same records reports
  ``changed=false`` and check mode can say exactly which files would change);
- each file is written to a temporary file in the same directory, made 0644 and renamed over the old one, so a
  reader never sees half a report file;
- plots are drawn by matplotlib into a private temporary directory (:func:`plot_dir`) and read back as bytes, so
  they take part in the same comparison.

Standard library only.
"""
from __future__ import annotations

import os
import re
import shutil
import tempfile
from contextlib import contextmanager

RUN_ID_RE = re.compile(r"^[A-Za-z0-9._-]+$")


class ReportWriteError(Exception):
    """A report file could not be written: ``path`` (str) and the OS error's text (``str(exc)``)."""

    def __init__(self, path, cause):
        super(ReportWriteError, self).__init__("cannot write %s: %s" % (path, cause))
        self.path = path


def run_id_problem(name, value):
    """The refusal text for a run id (a directory name) or ``None`` when it is usable.

    ``name`` is the option's name for the message (``run_id``); ``value`` the string given. Allowed: letters,
    digits, ``.``, ``_`` and ``-`` (no ``/``, no spaces), not ``.`` or ``..``.
    """
    if RUN_ID_RE.match(value or "") and value not in (".", ".."):
        return None
    return "%s=%r: use only letters, digits, '.', '_' and '-' (it is a directory name)" % (name, value)


@contextmanager
def plot_dir(prefix="llmops-report-plots-"):
    """A temporary directory for drawing PNGs, removed afterwards whatever happens; yields its path (str)."""
    path = tempfile.mkdtemp(prefix=prefix)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def read_back(path):
    """The bytes of a file just drawn (``path``: str); the file stays where it is."""
    with open(path, "rb") as fh:
        return fh.read()


def write_report_files(outdir, content, check_mode=False):
    """Write the files of one report directory.

    ``outdir``: the directory (created when a file must be written); ``content``: ``{file name: bytes}``;
    ``check_mode``: compute, write nothing. Returns ``(files, changed_files)``: every target path (sorted by name)
    and those whose bytes differ from what is on disk (would be written in check mode). Raises
    :class:`ReportWriteError` naming the file when the directory or a file cannot be written.
    """
    files, changed = [], []
    for name in sorted(content):
        target = os.path.join(outdir, name)
        files.append(target)
        old = None
        if os.path.exists(target):
            try:
                with open(target, "rb") as fh:
                    old = fh.read()
            except (IOError, OSError) as exc:      # e.g. a directory where the file belongs
                raise ReportWriteError(target, exc)
        if old == content[name]:
            continue
        changed.append(target)
        if check_mode:
            continue
        tmp = None
        try:
            if not os.path.isdir(outdir):
                os.makedirs(outdir)
            fd, tmp = tempfile.mkstemp(dir=outdir, prefix=".%s." % name)
            with os.fdopen(fd, "wb") as fh:
                fh.write(content[name])
            os.chmod(tmp, 0o644)
            os.rename(tmp, target)
            tmp = None
        except (IOError, OSError) as exc:
            raise ReportWriteError(target, exc)
        finally:
            if tmp is not None and os.path.exists(tmp):
                os.unlink(tmp)
    return files, changed
