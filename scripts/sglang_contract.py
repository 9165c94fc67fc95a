# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Maintainer script: SGLang's real contract, version by version, read from the published wheels.

For every version in :data:`VERSIONS` it downloads the SGLang wheel (``pip download --no-deps``, cached
under ``.cache/sglang-wheels``), reads the Python source straight out of the wheel (nothing is installed
or imported) and extracts, with :mod:`ast`:

* the CLI flags of ``python -m sglang.launch_server`` (``ServerArgs.add_cli_args``): the
  ``parser.add_argument`` calls (every version; all flags up to 0.5.10) and the annotated dataclass fields
  ``A[T, "help"]`` / ``A[T, Arg(...)]`` that ``add_cli_args_from_dataclass`` turns into flags
  (``server_args.py`` in 0.5.14, the namespace classes of ``arg_groups/fields/*.py`` in 0.5.23), each with
  its value arity, type, choices (constants resolved across modules; choices computed at run time are
  marked dynamic) and deprecation;
* the ``Load weight end.`` log format strings (``model_runner.py``; 0.5.23 also
  ``startup_weight_load.py``), rendered into sample lines;
* the ``sglang:spec_*`` Prometheus metric names and the ``spec_*`` meta_info keys;
* ``Decode batch`` / ``Prefill batch`` lines, rendered by running the scheduler's logging functions on sample
  values (:class:`_BatchInterpreter`).

Commands::

    python3 scripts/sglang_contract.py generate   # fetch wheels, write plugins/plugin_utils/_sglang/generated_flags.py
    python3 scripts/sglang_contract.py check      # exit 1 when the generated table is stale
    python3 scripts/sglang_contract.py show 0.5.9 --flag --attention-backend

A new SGLang release is one line in :data:`VERSIONS` plus ``generate`` (and a look at the contract test,
``tests/contract/``, which imports this module). Standard library only; ``pip`` is called as
``python -m pip``. Errors: :class:`ContractError` (download failed, source layout not understood).
"""

from __future__ import annotations

import argparse
import ast
import glob
import hashlib
import os
import pprint
import re
import subprocess
import sys
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE_DIR = os.path.join(ROOT, ".cache", "sglang-wheels")
TABLE_PATH = os.path.join(ROOT, "plugins", "plugin_utils", "_sglang", "generated_flags.py")

#: (profile, pip requirement). The profile is the collection's name for the version (sglang_args.KNOWN_VERSIONS);
#: the requirement is the wheel actually published on PyPI (0.4.10 is read from 0.4.10.post2, its last patch).
VERSIONS = (
    ("0.4.10", "0.4.10.post2"),
    ("0.5.4", "0.5.4"),
    ("0.5.9", "0.5.9"),
    ("0.5.10", "0.5.10"),
    ("0.5.14", "0.5.14"),
    ("0.5.23", "0.5.23"),
)

#: Wheel tags asked of pip: 0.5.14 and later publish only platform wheels (cp311 manylinux_2_34 x86_64); the
#: Python sources inside are the same on every platform, so one fixed tag keeps the download reproducible.
PIP_TAGS = ["--only-binary=:all:", "--python-version", "3.11", "--implementation", "cp", "--abi", "cp311",
            "--platform", "manylinux_2_34_x86_64"]


class ContractError(RuntimeError):
    """A wheel could not be fetched or its source did not have the expected shape."""


# --------------------------------------------------------------------------------------------------------
# Wheels
# --------------------------------------------------------------------------------------------------------
def wheel_path(requirement, cache_dir=CACHE_DIR, download=True):
    """Path of the cached wheel ``sglang==requirement``; downloads it with ``pip download --no-deps`` if absent.

    Raises :class:`ContractError` with pip's output when the download fails (no network, no such version).
    """
    pattern = os.path.join(cache_dir, "sglang-%s-*.whl" % requirement)
    found = sorted(glob.glob(pattern))
    if found:
        return found[0]
    if not download:
        raise ContractError("wheel sglang==%s is not in %s" % (requirement, cache_dir))
    os.makedirs(cache_dir, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "-q", "-d", cache_dir]
    cmd += PIP_TAGS + ["sglang==%s" % requirement]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=600, check=False)
    found = sorted(glob.glob(pattern))
    if proc.returncode != 0 or not found:
        raise ContractError("pip download sglang==%s failed (exit %s); the contract needs network access to PyPI once, "
                            "then the wheel is cached in %s.\n%s" % (requirement, proc.returncode, cache_dir, proc.stdout[-2000:]))
    return found[0]


class Wheel(object):
    """Read-only view of the Python source files inside one wheel (a zip), parsed on demand."""

    def __init__(self, path):
        self.path = path
        self.zip = zipfile.ZipFile(path)
        self.names = set(self.zip.namelist())
        self._trees = {}
        with open(path, "rb") as handle:
            self.sha256 = hashlib.sha256(handle.read()).hexdigest()

    def has(self, relpath):
        return relpath in self.names

    def text(self, relpath):
        return self.zip.read(relpath).decode("utf-8")

    def tree(self, relpath):
        if relpath not in self._trees:
            self._trees[relpath] = ast.parse(self.text(relpath), relpath)
        return self._trees[relpath]

    def module_path(self, dotted):
        base = dotted.replace(".", "/")
        for cand in (base + ".py", base + "/__init__.py"):
            if cand in self.names:
                return cand
        return None


# --------------------------------------------------------------------------------------------------------
# A small constant evaluator (module-level constants, imports inside the sglang package, class attributes)
# --------------------------------------------------------------------------------------------------------
class Unresolved(Exception):
    """An expression that needs the running program (a registry, an enum, an environment variable)."""


class Module(object):
    def __init__(self, wheel, relpath):
        self.wheel = wheel
        self.relpath = relpath
        self.tree = wheel.tree(relpath)
        self.assigns = {}
        self.imports = {}
        self.classes = {}
        for node in self.tree.body:
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        self.assigns[target.id] = node.value
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                self.assigns[node.target.id] = node.value
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    self.imports[alias.asname or alias.name] = (node.module, alias.name)
            elif isinstance(node, ast.ClassDef):
                self.classes[node.name] = node


class Evaluator(object):
    def __init__(self, wheel):
        self.wheel = wheel
        self.modules = {}

    def module(self, relpath):
        if relpath not in self.modules:
            self.modules[relpath] = Module(self.wheel, relpath)
        return self.modules[relpath]

    def lookup(self, mod, name, depth=0):
        """(module, node) that defines ``name`` seen from ``mod``: an assignment, a class or an import."""
        if depth > 8:
            raise Unresolved(name)
        if name in mod.assigns:
            return mod, mod.assigns[name]
        if name in mod.classes:
            return mod, mod.classes[name]
        if name in mod.imports:
            dotted, orig = mod.imports[name]
            if dotted.startswith("sglang"):
                path = self.wheel.module_path(dotted)
                if path:
                    return self.lookup(self.module(path), orig, depth + 1)
        raise Unresolved(name)

    def value(self, node, mod, depth=0, scope=None):
        """Python value of a constant expression; raises :class:`Unresolved`.

        ``scope``: names of an enclosing class body (``ALL = (FULL, DISABLED)`` inside ``class Backend``).
        """
        if depth > 30:
            raise Unresolved("too deep")
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            out = []
            for elt in node.elts:
                if isinstance(elt, ast.Starred):
                    out.extend(self.value(elt.value, mod, depth + 1, scope))
                else:
                    out.append(self.value(elt, mod, depth + 1, scope))
            return out
        if isinstance(node, ast.Dict):
            return dict((self.value(k, mod, depth + 1), None) for k in node.keys if k is not None)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return list(self.value(node.left, mod, depth + 1, scope)) + list(self.value(node.right, mod, depth + 1, scope))
        if isinstance(node, ast.Name):
            if scope and node.id in scope:
                return self.value(scope[node.id], mod, depth + 1, scope)
            where, target = self.lookup(mod, node.id)
            if isinstance(target, ast.ClassDef):
                raise Unresolved(node.id)
            return self.value(target, where, depth + 1)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            where, target = self.lookup(mod, node.value.id)
            if isinstance(target, ast.ClassDef):
                body = {}
                for stmt in target.body:
                    if isinstance(stmt, ast.Assign):
                        for t in stmt.targets:
                            if isinstance(t, ast.Name):
                                body[t.id] = stmt.value
                    elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
                        body[stmt.target.id] = stmt.value
                if node.attr in body:
                    return self.value(body[node.attr], where, depth + 1, body)
            raise Unresolved(ast.dump(node))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("list", "tuple", "sorted", "set") \
                and len(node.args) == 1:
            return list(self.value(node.args[0], mod, depth + 1))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "keys" and not node.args:
            return list(self.value(node.func.value, mod, depth + 1))
        raise Unresolved(ast.dump(node)[:80])


def _src(node):
    try:
        return ast.unparse(node)
    except Exception:  # pragma: no cover - ast.unparse exists from Python 3.9
        return ast.dump(node)


def _text(node):
    """Literal text of a str constant or f-string (placeholders as ``{}``), else ''."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    return ""


# --------------------------------------------------------------------------------------------------------
# Flags
# --------------------------------------------------------------------------------------------------------
_VALUELESS_ACTIONS = ("store_true", "store_false", "store_const", "count", "help", "version", "append_const")


def _action_nargs(ev, mod, action_node, explicit_nargs):
    """0 when an action takes no value, else None (decided by the explicit nargs or the action class's default)."""
    if explicit_nargs is not None:
        return explicit_nargs
    if action_node is None:
        return None
    if isinstance(action_node, ast.Constant):
        return 0 if action_node.value in _VALUELESS_ACTIONS else None
    name = action_node.attr if isinstance(action_node, ast.Attribute) else getattr(action_node, "id", None)
    if name == "BooleanOptionalAction":
        return 0
    try:
        where, cls = ev.lookup(mod, name)
    except Unresolved:
        return None
    if isinstance(cls, ast.ClassDef):
        for stmt in cls.body:
            if isinstance(stmt, ast.FunctionDef) and stmt.name == "__init__":
                args = stmt.args
                positional = args.args[len(args.args) - len(args.defaults):]
                for arg, default in list(zip(positional, args.defaults)) + list(zip(args.kwonlyargs, args.kw_defaults)):
                    if arg.arg == "nargs" and isinstance(default, ast.Constant):
                        return default.value
    return None


def _action_raises(ev, mod, action_node, kwargs):
    """True when using the flag is an error (0.4.10-0.5.10 ``DeprecatedAction`` raises; 0.5.14+ only with error_message)."""
    name = getattr(action_node, "id", None)
    if not name or not name.startswith("Deprecated"):
        return False
    try:
        where, cls = ev.lookup(mod, name)
    except Unresolved:
        return False
    if not isinstance(cls, ast.ClassDef):
        return False
    for stmt in cls.body:
        if isinstance(stmt, ast.FunctionDef) and stmt.name == "__call__":
            body = stmt.body
            if any(isinstance(s, ast.Raise) for s in body):
                return True
            if any(isinstance(s, ast.If) and "error_message" in _src(s.test) for s in body):
                return "error_message" in kwargs
    return False


def _record(table, names, info):
    for name in names:
        if name.startswith("-"):
            table[name] = dict(info, primary=names[0])


def _add_argument_calls(ev, mod, func, table):
    for node in ast.walk(func):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument"):
            continue
        names = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        if not names:
            continue
        kw = dict((k.arg, k.value) for k in node.keywords if k.arg)
        nargs = kw["nargs"].value if isinstance(kw.get("nargs"), ast.Constant) else (None if "nargs" not in kw else "?")
        arity = _action_nargs(ev, mod, kw.get("action"), nargs)
        choices, dynamic = None, False
        if "choices" in kw:
            try:
                choices = [str(c) for c in ev.value(kw["choices"], mod)]
            except Unresolved:
                dynamic = True
        typ = kw.get("type")
        help_text = _text(kw.get("help")) if "help" in kw else ""
        action = kw.get("action")
        action_name = action.value if isinstance(action, ast.Constant) else (
            getattr(action, "id", None) or getattr(action, "attr", None))
        deprecated = bool(action_name and str(action_name).startswith("Deprecated")) or bool(
            re.search(r"^\W*deprecated|\(deprecated|\[deprecated\]", help_text, re.IGNORECASE))
        new_flag = _text(kw.get("new_flag")) or None
        if deprecated and not new_flag:
            m = re.search(r"[Uu]se (--[a-z0-9-]+(?:[={][^ ]*)?)", help_text)
            new_flag = m.group(1).rstrip(".)") if m else None
        info = {
            "takes_value": arity != 0,
            "nargs": None if arity in (None, 0) else arity,
            "type": _src(typ) if typ is not None else ("bool" if arity == 0 else "str"),
            "choices": choices, "dynamic_choices": dynamic,
            "deprecated": deprecated, "replacement": new_flag,
            "fails": _action_raises(ev, mod, action, kw),
            "negatable": action_name == "BooleanOptionalAction",
        }
        _record(table, names, info)
        if info["negatable"]:
            for name in names:
                if name.startswith("--"):
                    _record(table, ["--no-" + name[2:]], dict(info, takes_value=False))


def _unwrap(node):
    """Strip Optional[...] / X | None from an annotation node."""
    while True:
        if isinstance(node, ast.Subscript) and _src(node.value) in ("Optional", "typing.Optional"):
            node = node.slice
            continue
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            parts = [p for p in (node.left, node.right) if not (isinstance(p, ast.Constant) and p.value is None)]
            if len(parts) == 1:
                node = parts[0]
                continue
        if isinstance(node, ast.Subscript) and _src(node.value) in ("Union",) and isinstance(node.slice, ast.Tuple):
            parts = [p for p in node.slice.elts if not (isinstance(p, ast.Constant) and p.value is None)]
            if len(parts) == 1:
                node = parts[0]
                continue
        return node


def _dataclass_fields(ev, mod, cls, table):
    """Flags ``add_cli_args_from_dataclass`` derives from ``A[T, meta]`` fields (0.5.14 / 0.5.23 arg_utils.py)."""
    for stmt in cls.body:
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        ann = stmt.annotation
        if not (isinstance(ann, ast.Subscript) and _src(ann.value) in ("A", "Annotated") and isinstance(ann.slice, ast.Tuple)):
            continue
        raw, metas = ann.slice.elts[0], ann.slice.elts[1:]
        meta = None
        for m in metas:
            if isinstance(m, ast.Call) and _src(m.func) == "Arg":
                meta = dict((k.arg, k.value) for k in m.keywords if k.arg)
                break
            if isinstance(m, (ast.Constant, ast.JoinedStr)):
                meta = {"help": m}
                break
        if meta is None:
            continue
        if isinstance(meta.get("no_cli"), ast.Constant) and meta["no_cli"].value is True:
            continue
        field = stmt.target.id
        cli = _text(meta["cli_name"]) if "cli_name" in meta else "--" + field.replace("_", "-")
        names = [cli]
        if "aliases" in meta:
            names += [str(a) for a in ev.value(meta["aliases"], mod)]
        help_text = _text(meta.get("help")) if "help" in meta else ""
        inner = _unwrap(raw)
        choices, dynamic, takes_value, nargs, typ = None, False, True, None, "str"
        if "action" in meta:
            kwargs = {}
            if isinstance(meta.get("action_kwargs"), ast.Dict):
                kwargs = dict((k.value, v) for k, v in zip(meta["action_kwargs"].keys, meta["action_kwargs"].values)
                              if isinstance(k, ast.Constant))
            explicit = kwargs["nargs"].value if isinstance(kwargs.get("nargs"), ast.Constant) else None
            arity = _action_nargs(ev, mod, meta["action"], explicit)
            takes_value = arity != 0
            nargs = None if arity in (None, 0) else arity
            typ = "bool" if not takes_value else "str"
        elif isinstance(inner, ast.Subscript) and _src(inner.value) in ("Literal", "typing.Literal"):
            vals = inner.slice.elts if isinstance(inner.slice, ast.Tuple) else [inner.slice]
            literal = [ev.value(v, mod) for v in vals]
            typ = type(literal[0]).__name__ if literal else "str"
            choices = literal
            if "choices" in meta:
                try:
                    choices = ev.value(meta["choices"], mod)
                except Unresolved:
                    dynamic, choices = True, None
        elif isinstance(inner, ast.Subscript) and _src(inner.value) in ("List", "list", "typing.List") and "type_parser" not in meta:
            nargs = _text(meta["nargs"]) if "nargs" in meta else "+"
            typ = _src(inner.slice) if _src(inner.slice) in ("int", "float", "str") else "str"
        elif _src(inner) == "bool":
            takes_value, typ = False, "bool"
        else:
            typ = _src(meta["type_parser"]) if "type_parser" in meta else (_src(inner) if _src(inner) in ("int", "float", "str") else "str")
            if "nargs" in meta:
                nargs = _text(meta["nargs"]) or None
        if "choices" in meta and choices is None and not dynamic:
            try:
                choices = ev.value(meta["choices"], mod)
            except Unresolved:
                dynamic = True
        deprecated = bool(re.search(r"^\W*deprecated|\(deprecated|\[deprecated\]", help_text, re.IGNORECASE))
        _record(table, names, {
            "takes_value": takes_value, "nargs": nargs, "type": typ,
            "choices": [str(c) for c in choices] if choices is not None else None, "dynamic_choices": dynamic,
            "deprecated": deprecated, "replacement": None, "fails": False, "negatable": False,
        })


def extract_flags(wheel):
    """Dict ``--flag -> info`` of one wheel's ``launch_server`` parser.

    ``info``: ``takes_value`` (bool), ``nargs`` (None, ``"?"``, ``"+"``, ``"*"`` or an int), ``type`` (the
    ``type=`` callable's source, ``bool`` for switches), ``choices`` (list of str or None), ``dynamic_choices``
    (choices computed at run time, e.g. registered parsers: not checkable from the source), ``deprecated``,
    ``replacement`` (the flag SGLang names instead), ``fails`` (using it is a parser error), ``negatable``,
    ``primary`` (first spelling of the same argument). Raises :class:`ContractError` if ``ServerArgs`` or
    ``add_cli_args`` is not found.
    """
    ev = Evaluator(wheel)
    mod = ev.module("sglang/srt/server_args.py")
    cls = mod.classes.get("ServerArgs")
    if cls is None:
        raise ContractError("%s: no class ServerArgs in sglang/srt/server_args.py" % wheel.path)
    add = [s for s in cls.body if isinstance(s, ast.FunctionDef) and s.name == "add_cli_args"]
    if not add:
        raise ContractError("%s: ServerArgs has no add_cli_args" % wheel.path)
    table = {}
    uses_dataclass = "add_cli_args_from_dataclass" in _src(add[0])
    if uses_dataclass:
        _dataclass_fields(ev, mod, cls, table)
        field_files = sorted(n for n in wheel.names if re.match(r"^sglang/srt/arg_groups/fields/[^/]+\.py$", n))
        for relpath in field_files:
            fmod = ev.module(relpath)
            for fcls in fmod.classes.values():
                if any(isinstance(s, ast.Assign) and any(getattr(t, "id", None) == "_NS_PATH" for t in s.targets) for s in fcls.body):
                    _dataclass_fields(ev, fmod, fcls, table)
    _add_argument_calls(ev, mod, add[0], table)
    if "--model-path" not in table or "--port" not in table:
        raise ContractError("%s: extraction found no --model-path/--port (%d flags): source layout changed" % (wheel.path, len(table)))
    return table


# --------------------------------------------------------------------------------------------------------
# Log formats, metrics, meta_info keys
# --------------------------------------------------------------------------------------------------------
SAMPLE_FLOAT = 12.34
SAMPLE_TEXT = {"type": "Qwen3NextForCausalLM", "dtype": "torch.bfloat16"}


def _render_fstring(node):
    """Render an f-string with sample values: ``{x:.2f}`` -> 12.34, ``type(...).__name__`` -> a model class,
    ``self.dtype`` -> ``torch.bfloat16``, ``{a if c else ''}`` -> the else branch (no quantization)."""
    out = []
    for part in node.values:
        if isinstance(part, ast.Constant):
            out.append(part.value)
            continue
        expr = part.value
        if isinstance(expr, ast.IfExp):
            out.append(_text(expr.orelse))
            continue
        spec = _text(part.format_spec) if part.format_spec is not None else ""
        prev = "".join(out)
        if spec:
            out.append(format(SAMPLE_FLOAT, spec))
        elif prev.endswith("dtype="):
            out.append(SAMPLE_TEXT["dtype"])
        elif prev.endswith("type="):
            out.append(SAMPLE_TEXT["type"])
        else:
            out.append("7")
    return "".join(out)


def _render_percent(fmt):
    return re.sub(r"%(\.\d+)?[fds]", lambda m: format(SAMPLE_FLOAT, (m.group(1) or "") + "f") if m.group(0).endswith("f") else "7", fmt)


def extract_load_weight_lines(wheel):
    """Sample ``Load weight end.`` messages (without the log prefix) rendered from the wheel's format strings.

    Each is a dict ``{"file", "line", "message"}``; the f-string form (``model_runner.py``) and, from 0.5.23,
    the overlapped-startup %-format (``startup_weight_load.py``).
    """
    out = []
    for relpath in sorted(n for n in wheel.names if n.startswith("sglang/srt/model_executor/") and n.endswith(".py")):
        text = wheel.text(relpath)
        if "Load weight end" not in text:
            continue
        for node in ast.walk(wheel.tree(relpath)):
            if not (isinstance(node, ast.Call) and node.args and _src(node.func).endswith(".info")):
                continue
            first = node.args[0]
            if isinstance(first, ast.JoinedStr) and _text(first).startswith("Load weight end"):
                out.append({"file": relpath, "line": node.lineno, "message": _render_fstring(first)})
            elif isinstance(first, ast.Constant) and str(first.value).startswith("Load weight end"):
                out.append({"file": relpath, "line": node.lineno, "message": _render_percent(first.value)})
    return out


class _Unknown(object):
    """A value the batch-line interpreter cannot know (concatenating with it stays unknown)."""

    def __add__(self, other):
        return self

    __radd__ = __add__


UNKNOWN = _Unknown()

#: Batch-line variants rendered per version: (name, kind, speculative decoding on, hybrid mamba model).
BATCH_VARIANTS = (("decode_spec", "Decode", True, False), ("decode_spec_hybrid", "Decode", True, True), ("decode_plain", "Decode", False, False),
                  ("prefill_hybrid", "Prefill", False, True), ("prefill_plain", "Prefill", False, False))


class _BatchInterpreter(object):
    """Runs the straight-line part of a scheduler logging function on sample values and records what it logs.

    Branch conditions are decided by their source text (``spec_algorithm.is_none()`` -> speculation off,
    ``is_hybrid_ssm`` -> hybrid model, everything optional - disaggregation, SWA, LOG_FORWARD_ITERS, language-only,
    hisparse - off); f-string fields print ``7`` (``12.34`` with a float format, ``True`` for the CUDA graph flag,
    ``cuda graph`` for the graph backend label); helper methods that build parts (0.5.23
    ``get_decode_usage_msg_parts``) are looked up in the wheel and run the same way.
    """

    def __init__(self, wheel, spec, hybrid):
        self.wheel = wheel
        self.spec = spec
        self.hybrid = hybrid
        self.logged = []
        self._functions = None

    def oracle(self, test, env):
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            return not self.oracle(test.operand, env)
        if isinstance(test, ast.BoolOp):
            values = [self.oracle(v, env) for v in test.values]
            return all(values) if isinstance(test.op, ast.And) else any(values)
        if isinstance(test, ast.Name) and test.id in env and env[test.id] is not UNKNOWN:
            return bool(env[test.id])
        if isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id in env and len(test.ops) == 1 \
                and isinstance(test.ops[0], (ast.Is, ast.IsNot)) and isinstance(test.comparators[0], ast.Constant) \
                and test.comparators[0].value is None:
            is_none = env[test.left.id] is None
            return is_none if isinstance(test.ops[0], ast.Is) else not is_none
        text = _src(test)
        if re.search(r"device\s*==\s*['\"]cuda['\"]", text):
            return True
        if "spec_algorithm.is_none()" in text:
            return not self.spec
        if "is_hybrid_ssm" in text or "is_hybrid_gdn" in text:
            return self.hybrid
        if "logging_rank" in text or "metrics_enabled" in text:
            return True
        return False

    def function(self, name):
        if self._functions is None:
            self._functions = {}
            for relpath in sorted(self.wheel.names):
                if relpath.startswith("sglang/srt/managers/") and relpath.endswith(".py") and "_msg_parts" in self.wheel.text(relpath):
                    for node in ast.walk(self.wheel.tree(relpath)):
                        if isinstance(node, ast.FunctionDef):
                            self._functions.setdefault(node.name, node)
        return self._functions.get(name)

    def fmt(self, part, env):
        if isinstance(part.value, ast.IfExp):
            chosen = self.value(part.value, env)
            if isinstance(chosen, str):
                return chosen
        text = _src(part.value)
        if "graph_backend" in text:
            return "cuda graph"
        if "cuda_graph" in text:
            return "True"
        spec = _text(part.format_spec) if part.format_spec is not None else ""
        return format(SAMPLE_FLOAT, spec) if spec else "7"

    def value(self, node, env):
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.JoinedStr):
            out = ""
            for part in node.values:
                if isinstance(part, ast.Constant):
                    out += part.value
                elif isinstance(part.value, ast.Name) and isinstance(env.get(part.value.id), str):
                    out += env[part.value.id]
                else:
                    out += self.fmt(part, env)
            return out
        if isinstance(node, ast.IfExp):
            return self.value(node.body if self.oracle(node.test, env) else node.orelse, env)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self.value(node.left, env), self.value(node.right, env)
            if isinstance(left, (str, list)) and type(left) is type(right):
                return left + right
            return UNKNOWN
        if isinstance(node, ast.Name):
            return env.get(node.id, UNKNOWN)
        if isinstance(node, ast.List):
            return [self.value(e, env) for e in node.elts]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr == "join" and isinstance(node.func.value, ast.Constant) and node.args:
                items = self.value(node.args[0], env)
                return node.func.value.value.join(items) if isinstance(items, list) and all(isinstance(i, str) for i in items) else UNKNOWN
            helper = self.function(node.func.attr) if node.func.attr.endswith("_msg_parts") else None
            if helper is not None:
                return self.run(helper.body, {})
        return UNKNOWN

    def run(self, body, env):
        """Run statements; returns the value of a ``return`` (or None)."""
        for stmt in body:
            if isinstance(stmt, ast.Assign):
                value = self.value(stmt.value, env)
                for target in stmt.targets:
                    if isinstance(target, ast.Name):
                        env[target.id] = list(value) if isinstance(value, list) else value
                    elif isinstance(target, (ast.Tuple, ast.List)):
                        for elt in target.elts:
                            name = elt.value if isinstance(elt, ast.Starred) else elt
                            if isinstance(name, ast.Name):
                                env[name.id] = UNKNOWN
            elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name) and isinstance(stmt.op, ast.Add):
                current, extra = env.get(stmt.target.id, UNKNOWN), self.value(stmt.value, env)
                env[stmt.target.id] = current + extra if isinstance(current, (str, list)) and type(current) is type(extra) else UNKNOWN
            elif isinstance(stmt, ast.If):
                result = self.run(stmt.body if self.oracle(stmt.test, env) else stmt.orelse, env)
                if result is not None:
                    return result
            elif isinstance(stmt, (ast.With, ast.Try)):
                result = self.run(stmt.body, env)
                if result is not None:
                    return result
            elif isinstance(stmt, ast.Return):
                return self.value(stmt.value, env) if stmt.value is not None else "<return>"
            elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
                call = stmt.value
                name = _src(call.func)
                if name.endswith(".append") and isinstance(call.func.value, ast.Name) and call.args:
                    target = env.get(call.func.value.id)
                    if isinstance(target, list):
                        target.append(self.value(call.args[0], env))
                elif name.endswith(".info") and call.args:
                    message = self.value(call.args[0], env)
                    if isinstance(message, str) and re.match(r"^(Decode|Prefill) batch", message):
                        self.logged.append(message)
        return None


def extract_batch_lines(wheel):
    """Sample ``Decode batch`` / ``Prefill batch`` messages per :data:`BATCH_VARIANTS`, rendered by running the
    wheel's scheduler logging functions (``scheduler_metrics_mixin.py`` up to 0.5.10, ``metrics_reporter.py`` from
    0.5.14) with :class:`_BatchInterpreter`. Returns ``{variant: message}``; a variant whose message could not be
    rendered is missing (the contract test then fails)."""
    out = {}
    sources = [n for n in sorted(wheel.names) if (n.startswith("sglang/srt/managers/") or n.startswith("sglang/srt/observability/"))
               and n.endswith(".py") and ("metrics_mixin" in n or "metrics_reporter" in n)]
    for name, kind, spec, hybrid in BATCH_VARIANTS:
        for relpath in sources:
            text = wheel.text(relpath)
            if "%s batch" % kind not in text:
                continue
            for node in ast.walk(wheel.tree(relpath)):
                if isinstance(node, ast.FunctionDef) and "%s batch" % kind in _src(node) and not node.name.startswith("_"):
                    interp = _BatchInterpreter(wheel, spec, hybrid)
                    interp.run(node.body, {})
                    for message in interp.logged:
                        if message.startswith(kind):
                            out.setdefault(name, message)
    return out


def extract_spec_metrics(wheel):
    """Sorted ``sglang:spec_*`` metric names declared with ``name="sglang:..."`` in the metrics collectors
    (``sglang/srt/metrics/collector.py`` up to 0.5.9, ``sglang/srt/observability/metrics_collector.py`` from 0.5.10)."""
    names = set()
    for relpath in wheel.names:
        # the collectors live in observability/ (0.5.10+) or metrics/ (up to 0.5.9); reading every file costs seconds
        if relpath.startswith("sglang/srt/") and relpath.endswith(".py") and ("metrics" in relpath or "observability" in relpath):
            text = wheel.text(relpath)
            if "sglang:spec_" in text:
                names.update(re.findall(r"name=\"(sglang:spec_[a-z_]+)\"", text))
    return sorted(names)


#: The ``/metrics`` names the health rules read (plugin_utils/_watch/rules.py): running and queued requests, generation
#: throughput, accept length, and the two counters that tell traffic from idleness. Every profile must declare each.
HEALTH_METRIC_NAMES = ("sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:gen_throughput", "sglang:spec_accept_length",
                       "sglang:generation_tokens_total", "sglang:num_requests_total")


def extract_health_metrics(wheel):
    """``{name: "gauge"|"counter"|"histogram"}`` for :data:`HEALTH_METRIC_NAMES`, read from the ``Gauge(name=...)`` /
    ``Counter(name=...)`` / ``Histogram(name=...)`` calls of the metrics collectors (AST). A name the version does not
    declare raises :class:`ContractError` (the rules would read a series that never exists)."""
    found = {}
    for relpath in wheel.names:
        if relpath.startswith("sglang/srt/") and relpath.endswith(".py") and ("metrics" in relpath or "observability" in relpath):
            if "sglang:" not in wheel.text(relpath):
                continue
            for sub in ast.walk(wheel.tree(relpath)):
                if not isinstance(sub, ast.Call):
                    continue
                func = sub.func.id if isinstance(sub.func, ast.Name) else getattr(sub.func, "attr", None)
                if func not in ("Gauge", "Counter", "Histogram"):
                    continue
                for kw in sub.keywords:
                    if kw.arg == "name" and isinstance(kw.value, ast.Constant) and kw.value.value in HEALTH_METRIC_NAMES:
                        found.setdefault(kw.value.value, func.lower())
    missing = [n for n in HEALTH_METRIC_NAMES if n not in found]
    if missing:
        raise ContractError("%s declares no %s" % (os.path.basename(wheel.path), ", ".join(missing)))
    return found


def extract_meta_info_spec_keys(wheel):
    """Sorted ``spec_*`` keys the tokenizer manager writes into a response's ``meta_info``.

    Read from the ``meta_info["spec_..."] = ...`` assignments in ``sglang/srt/managers/*.py``
    (``tokenizer_manager.py`` and its helper modules).
    """
    keys = set()
    for relpath in sorted(wheel.names):
        if not (relpath.startswith("sglang/srt/managers/") and relpath.endswith(".py")):
            continue
        if not re.search(r"meta_info\[\s*[\"']spec_", wheel.text(relpath)):
            continue
        for sub in ast.walk(wheel.tree(relpath)):
            if isinstance(sub, ast.Subscript) and isinstance(sub.ctx, ast.Store) and _src(sub.value).endswith("meta_info") \
                    and isinstance(sub.slice, ast.Constant) and str(sub.slice.value).startswith("spec_"):
                keys.add(sub.slice.value)
    return sorted(keys)


# --------------------------------------------------------------------------------------------------------
# The generated table
# --------------------------------------------------------------------------------------------------------
def collect(download=True, cache_dir=CACHE_DIR):
    """``{profile: {"requirement", "wheel", "sha256", "flags", "load_weight_lines", "spec_metrics", "meta_info_spec_keys",
    "batch_lines"}}``."""
    data = {}
    for profile, requirement in VERSIONS:
        wheel = Wheel(wheel_path(requirement, cache_dir, download))
        data[profile] = {
            "requirement": requirement,
            "wheel": os.path.basename(wheel.path),
            "sha256": wheel.sha256,
            "flags": extract_flags(wheel),
            "load_weight_lines": extract_load_weight_lines(wheel),
            "spec_metrics": extract_spec_metrics(wheel),
            "health_metrics": extract_health_metrics(wheel),
            "meta_info_spec_keys": extract_meta_info_spec_keys(wheel),
            "batch_lines": extract_batch_lines(wheel),
        }
    return data


def build_rows(data):
    """One row per flag: ``{flag: {"versions": (...), "takes_value", "nargs", "type", "choices": {v: (...)},
    "dynamic_choices": (...), "deprecated": {v: replacement-or-""}; choices are grouped as
    ``((versions, choices), ...)`` so that versions sharing a list share one entry, "fails": (...), "primary"}}``. Attributes
    that differ between versions are dicts ``{version: value}``."""
    profiles = [p for p, _req in VERSIONS]
    rows = {}
    for flag in sorted(set(f for p in profiles for f in data[p]["flags"])):
        present = [p for p in profiles if flag in data[p]["flags"]]
        infos = dict((p, data[p]["flags"][flag]) for p in present)
        row = {"versions": tuple(present)}
        for attr in ("takes_value", "nargs", "type", "primary"):
            vals = dict((p, infos[p][attr]) for p in present)
            row[attr] = vals[present[0]] if len(set(map(repr, vals.values()))) == 1 else vals
        groups = []
        for p in present:
            if infos[p]["choices"] is None:
                continue
            choices = tuple(infos[p]["choices"])
            if groups and groups[-1][1] == choices:
                groups[-1] = (groups[-1][0] + (p,), choices)
            else:
                groups.append(((p,), choices))
        row["choices"] = tuple(groups)
        row["dynamic_choices"] = tuple(p for p in present if infos[p]["dynamic_choices"])
        row["deprecated"] = dict((p, infos[p]["replacement"] or "") for p in present if infos[p]["deprecated"])
        row["fails"] = tuple(p for p in present if infos[p]["fails"])
        if row["primary"] == flag:
            del row["primary"]
        for key in ("choices", "dynamic_choices", "deprecated", "fails", "nargs"):
            if not row[key] and row[key] != 0:
                del row[key]
        rows[flag] = row
    return rows


HEADER = '''# -*- coding: utf-8 -*-
# Copyright: (c) 2026, llmops.sglang developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# GENERATED FILE - do not edit. Regenerate with:  python3 scripts/sglang_contract.py generate
# (downloads the wheels below with `pip download --no-deps` into .cache/sglang-wheels and reads their source).
# Note that this plugin util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""SGLang's launch_server CLI per version, extracted from the published wheels' ``server_args.py`` (AST).

``FLAGS``: one row per flag spelling, ``{"--flag": {"versions": (profiles that accept it), "takes_value": bool,
"nargs": None|"?"|"+"|"*"|int, "type": source of argparse's type= ("int", "str", "float", "bool" for switches,
or a helper name), "choices": (((profile, ...), (choice, ...)), ...) (only where argparse restricts the value),
"dynamic_choices": (profiles whose choices are computed at run time: not checked), "deprecated": {profile:
replacement flag or ""}, "fails": (profiles where using it is a parser error), "primary": first spelling}}``.
Attributes that differ between versions are ``{profile: value}`` dicts; empty attributes (no choices, not
deprecated, nargs None, primary = the flag itself) are left out of a row.
``WHEELS``: ``{profile: (wheel file name, sha256)}``. ``SPEC_METRICS`` / ``META_INFO_SPEC_KEYS``: per profile,
the ``sglang:spec_*`` Prometheus names and the ``spec_*`` meta_info keys. ``HEALTH_METRICS``: per profile, the
``/metrics`` names the health rules read and their type (gauge, counter, histogram). ``LOAD_WEIGHT_LINES``: per profile,
``Load weight end.`` messages rendered from the real format strings with sample values. ``BATCH_LINES``: per profile,
``Decode batch`` / ``Prefill batch`` messages (variants decode_spec, decode_spec_hybrid, decode_plain, prefill_hybrid,
prefill_plain) rendered by running the scheduler's logging code on sample values (7, 12.34, True).
Standard library only (nothing but literals); read by plugins/plugin_utils/_sglang/launch.py.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

'''


def _assign(name, value):
    """``NAME = (`` + the pretty-printed value indented by 4 + ``)``: pep8-clean whatever the value's width."""
    text = pprint.pformat(value, width=140, compact=True, sort_dicts=True)
    return "%s = (\n%s\n)\n\n" % (name, "\n".join("    " + line for line in text.splitlines()))


def render_table(data):
    """Source text of plugins/plugin_utils/_sglang/generated_flags.py for :func:`collect`'s data."""
    profiles = tuple(p for p, _req in VERSIONS)
    parts = [HEADER]
    parts.append(_assign("VERSIONS", profiles))
    parts.append(_assign("WHEELS", dict((p, (data[p]["wheel"], data[p]["sha256"])) for p in profiles)))
    parts.append(_assign("SPEC_METRICS", dict((p, tuple(data[p]["spec_metrics"])) for p in profiles)))
    parts.append(_assign("HEALTH_METRICS", dict((p, data[p]["health_metrics"]) for p in profiles)))
    parts.append(_assign("META_INFO_SPEC_KEYS", dict((p, tuple(data[p]["meta_info_spec_keys"])) for p in profiles)))
    parts.append(_assign("LOAD_WEIGHT_LINES", dict((p, tuple(x["message"] for x in data[p]["load_weight_lines"])) for p in profiles)))
    parts.append(_assign("BATCH_LINES", dict((p, data[p]["batch_lines"]) for p in profiles)))
    parts.append(_assign("FLAGS", build_rows(data)).rstrip("\n") + "\n")
    return "".join(parts)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("generate", help="fetch the wheels and write %s" % os.path.relpath(TABLE_PATH, ROOT))
    sub.add_parser("check", help="exit 1 if the generated table differs from the wheels")
    show = sub.add_parser("show", help="print one version's extraction")
    show.add_argument("version")
    show.add_argument("--flag", help="only this flag")
    args = parser.parse_args(argv)
    try:
        data = collect()
    except ContractError as err:
        print("error: %s" % err, file=sys.stderr)
        return 2
    if args.cmd == "show":
        entry = data[args.version]
        if args.flag:
            pprint.pprint(entry["flags"].get(args.flag))
        else:
            pprint.pprint(dict((k, v) for k, v in entry.items() if k != "flags"))
            print("%d flags" % len(entry["flags"]))
        return 0
    text = render_table(data)
    if args.cmd == "check":
        with open(TABLE_PATH) as handle:
            current = handle.read()
        if current != text:
            print("%s is stale: run python3 scripts/sglang_contract.py generate" % TABLE_PATH, file=sys.stderr)
            return 1
        print("up to date")
        return 0
    with open(TABLE_PATH, "w") as handle:
        handle.write(text)
    print("wrote %s (%d flags, versions %s)" % (TABLE_PATH, len(build_rows(data)), ", ".join(p for p, _req in VERSIONS)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
