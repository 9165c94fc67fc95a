# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""Check an SGLang ``launch_server`` argv against the real parser of one SGLang version.

The parser's shape comes from the generated table ``sglang_flags.FLAGS`` (written by
``scripts/sglang_contract.py`` from the published wheels' ``server_args.py``). Standard library only.

:func:`check_argv` walks an argv the way argparse would (``--flag value``, ``--flag=value``, ``nargs``
lists, switches) and returns one :class:`Problem` per flag the version does not have, per value outside
the version's ``choices``, per value its ``type=`` (int/float) rejects, per flag whose use is a parser error,
plus deprecation notes. Abbreviations are refused on purpose: argparse accepts a unique prefix, but a
prefix that is unique in one version becomes ambiguous in the next (0.5.23's ``--cuda-graph-max-bs``).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import difflib
import re

from ansible_collections.llmops.sglang.plugins.plugin_utils._sglang.generated_flags import FLAGS, VERSIONS

_NUMBER_RE = re.compile(r"^-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")


class Problem(object):
    """One finding of :func:`check_argv`.

    ``kind``: ``unknown_flag`` | ``bad_choice`` | ``bad_type`` | ``missing_value`` | ``fails`` | ``deprecated``
    (only ``deprecated`` is a warning, every other kind makes SGLang exit at startup). ``index``: position of
    the flag in the argv; ``flag``; ``value`` (str or None); ``message`` (one sentence with the closest valid
    spelling when there is one); ``suggestion`` (that spelling or None).
    """

    def __init__(self, kind, index, flag, value, message, suggestion=None):
        self.kind = kind
        self.index = index
        self.flag = flag
        self.value = value
        self.message = message
        self.suggestion = suggestion

    @property
    def is_error(self):
        return self.kind != "deprecated"

    def __repr__(self):
        return "Problem(%s, %s, %r, %r)" % (self.kind, self.index, self.flag, self.value)


def _attr(row, name, profile, default=None):
    value = row.get(name, default)
    if isinstance(value, dict) and name not in ("deprecated",):
        return value.get(profile, default)
    return value


def flag_info(flag, profile):
    """The table row of ``flag`` as seen by SGLang ``profile`` (a dict), or None when that version lacks it.

    Keys: ``takes_value`` (bool), ``nargs`` (None, ``"?"``, ``"+"``, ``"*"`` or int), ``type`` (``"int"``,
    ``"float"``, ``"str"``, ``"bool"`` or a helper's name), ``choices`` (tuple or None: not restricted or
    computed at run time), ``deprecated`` (None or the replacement SGLang names, possibly ``""``), ``fails``.
    """
    row = FLAGS.get(flag)
    if row is None or profile not in row["versions"]:
        return None
    choices = None
    for versions, values in row.get("choices", ()):
        if profile in versions:
            choices = values
    deprecated = row.get("deprecated", {}).get(profile)
    return {"takes_value": _attr(row, "takes_value", profile), "nargs": _attr(row, "nargs", profile),
            "type": _attr(row, "type", profile, "str"), "choices": choices, "deprecated": deprecated,
            "fails": profile in row.get("fails", ())}


def flags_of(profile):
    """Sorted list of every flag spelling SGLang ``profile`` accepts."""
    return sorted(f for f, row in FLAGS.items() if profile in row["versions"])


def choices_of(flag, profile):
    """Tuple of the values SGLang ``profile`` accepts for ``flag`` (``--attention-backend`` ...), or None."""
    info = flag_info(flag, profile)
    return info["choices"] if info else None


def closest(word, candidates):
    """The closest spelling of ``word`` among ``candidates`` (difflib, cutoff 0.6), or None."""
    found = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return found[0] if found else None


def _versions_having(flag):
    row = FLAGS.get(flag)
    return list(row["versions"]) if row else []


def _check_value(problems, index, flag, info, value, profile):
    choices = info["choices"]
    if choices is not None and value not in choices:
        near = closest(value, choices)
        problems.append(Problem("bad_choice", index, flag, value, "SGLang %s: %s %r is not one of its choices (%s)%s"
                                % (profile, flag, value, ", ".join(choices), "; did you mean %r?" % near if near else ""), near))
        return
    kind = info["type"]
    if value.startswith("${") and value.endswith("}"):
        return
    if kind in ("int", "float"):
        try:
            int(value) if kind == "int" else float(value)
        except ValueError:
            problems.append(Problem("bad_type", index, flag, value, "SGLang %s: %s takes an %s value, %r is not one"
                                    % (profile, flag, "integer" if kind == "int" else "number", value)))


def check_argv(argv, profile):
    """Check ``argv`` (flags only, without ``python3 -m sglang.launch_server``) against SGLang ``profile``.

    :param argv: list of str. :param profile: one of ``VERSIONS`` (``"0.5.9"``).
    :returns: list of :class:`Problem` in argv order (empty when SGLang's parser accepts every item).
    :raises ValueError: for a profile the table does not describe.
    """
    if profile not in VERSIONS:
        raise ValueError("SGLang %s is not in the generated flag table (versions %s)" % (profile, ", ".join(VERSIONS)))
    known = flags_of(profile)
    problems = []
    i = 0
    argv = [str(a) for a in argv]
    while i < len(argv):
        item = argv[i]
        if not item.startswith("-") or _NUMBER_RE.match(item):
            problems.append(Problem("unknown_flag", i, item, None, "SGLang %s: %r is not a flag (launch_server takes no positional "
                                    "arguments; a value must follow its flag)" % (profile, item)))
            i += 1
            continue
        flag, eq, inline = item.partition("=")
        info = flag_info(flag, profile)
        if info is None:
            near = closest(flag, known)
            others = _versions_having(flag)
            why = ("exists only in SGLang %s" % ", ".join(others)) if others else "is not a flag of any supported SGLang version"
            problems.append(Problem("unknown_flag", i, flag, inline if eq else None, "SGLang %s has no %s (it %s)%s"
                                    % (profile, flag, why, "; the closest valid spelling is %s" % near if near else ""), near))
            i += 1
            # skip the values that follow an unknown flag, so they are not reported a second time
            while not eq and i < len(argv) and not (argv[i].startswith("-") and not _NUMBER_RE.match(argv[i])):
                i += 1
            continue
        if info["fails"]:
            problems.append(Problem("fails", i, flag, None, "SGLang %s refuses %s (argparse error: the flag was removed)" % (profile, flag)))
        elif info["deprecated"] is not None:
            problems.append(Problem("deprecated", i, flag, None, "SGLang %s deprecates %s%s" % (
                profile, flag, "; use %s" % info["deprecated"] if info["deprecated"] else ""), info["deprecated"] or None))
        i += 1
        if not info["takes_value"]:
            if eq:
                problems.append(Problem("bad_type", i - 1, flag, inline, "SGLang %s: %s is a switch and takes no value" % (profile, flag)))
            continue
        nargs = info["nargs"]
        if eq:
            _check_value(problems, i - 1, flag, info, inline, profile)
            continue
        values = []
        while i < len(argv) and not (argv[i].startswith("-") and not _NUMBER_RE.match(argv[i])):
            values.append(argv[i])
            i += 1
            if nargs is None or nargs == "?" or (isinstance(nargs, int) and len(values) >= nargs):
                break
        if not values and nargs not in ("?", "*"):
            problems.append(Problem("missing_value", i - 1, flag, None, "SGLang %s: %s needs a value" % (profile, flag)))
        for value in values:
            _check_value(problems, i - 1, flag, info, value, profile)
    return problems
