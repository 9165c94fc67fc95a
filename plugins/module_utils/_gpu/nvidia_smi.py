# -*- coding: utf-8 -*-
# Copyright: llmops.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
# Do not use this from other collections or standalone plugins/modules!
"""Parsers for NVIDIA driver outputs (one parser per format).

Formats and their sources (all recorded from real hosts, see ``tests/fixtures/nvidia``):

- ``nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]`` (R580, e.g. 580.95.05 and
  580.159.04): one line per GPU, fields joined by ``", "`` (comma + space), never quoted even when
  a name contains spaces; with a header the header names the fields (``memory.total [MiB]``) and
  values carry units (``143771 MiB``).
- ``nvidia-smi topo -p2p r|w|n|a|p``: a whitespace/tab separated matrix with rows ``GPU<n>`` and
  the legend tokens ``X OK CNS GNS TNS NS U``; matrices are not guaranteed to be symmetric.
- ``nvidia-smi topo -m``: TAB separated cells, header row starting with a tab, self cell `` X ``,
  link tokens ``X SYS NODE PHB PXB PIX NV<n>``, then ``CPU Affinity``/``NUMA Affinity`` columns.
- plain ``nvidia-smi`` and ``nvidia-smi -q``: the banner/``Key : value`` reports (driver version,
  CUDA version, product architecture, virtualization mode, fabric state).
- ``/proc/driver/nvidia/version``: ``NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  <ver>
  Release Build ...`` (open) or ``NVRM version: NVIDIA UNIX x86_64 Kernel Module  <ver>  <date>``
  (proprietary); ``modinfo -F license nvidia``: ``Dual MIT/GPL`` (open) or ``NVIDIA`` (proprietary).
- nvidia-smi error outputs (no driver, no devices, NVML version mismatch, bad field) -> a state.

Real output is messy: every parser first passes its input through :func:`clean_output`, which
removes terminal escape sequences, carriage returns (CRLF), trailing spaces/tabs and blank lines.
Functions never raise on unexpected text; they return what they could parse (documented per
function) so that the gpu_facts module can report a state instead of a traceback.
"""
from __future__ import annotations

import re

# The exact query gpu_facts runs. The sandbox's stand-in nvidia-smi answers exactly this query,
# so the field list and its order are a contract: do not reorder.
QUERY_FIELDS = ("index", "name", "pci.bus_id", "driver_version", "compute_cap", "memory.total", "uuid")
QUERY_ARGS = (
    "--query-gpu=" + ",".join(QUERY_FIELDS),
    "--format=csv,noheader,nounits",
)

SMI_STATES = ("ok", "missing", "no_driver", "no_devices", "version_mismatch", "error")
P2P_TOKENS = ("X", "OK", "CNS", "GNS", "TNS", "NS", "U")
P2P_MODES = {"r": "read", "w": "write", "n": "nvlink", "a": "atomics", "p": "pcie"}

# Compute capability major -> architecture (NVIDIA CUDA GPUs table; cc 10.x B200/GB200,
# 11.x Thor, 12.x RTX PRO 6000 / RTX 50 are all Blackwell).
_ARCH_BY_MAJOR = {
    3: "Kepler",
    5: "Maxwell",
    6: "Pascal",
    7: "Volta",  # 7.5 is Turing, handled below
    8: "Ampere",  # 8.9 is Ada, handled below
    9: "Hopper",
    10: "Blackwell",
    11: "Blackwell",
    12: "Blackwell",
}
_ARCH_BY_CC = {"7.5": "Turing", "8.9": "Ada"}

_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_CTRL_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_UNIT_RE = re.compile(r"^(?P<num>-?[0-9]+(?:\.[0-9]+)?)\s*(?:MiB|GiB|KiB|W|MHz|%|C)$")
_HEADER_UNIT_RE = re.compile(r"\s*\[[^\]]*\]\s*$")
_BUS_ID_RE = re.compile(r"^(?:(?P<domain>[0-9A-Fa-f]{4,8}):)?(?P<bus>[0-9A-Fa-f]{2}):(?P<dev>[0-9A-Fa-f]{2})\.(?P<fn>[0-7])$")
_VERSION_RE = re.compile(r"\b([0-9]{3}\.[0-9]{1,3}(?:\.[0-9]{1,3})?)\b")
_P2P_ROW_RE = re.compile(r"^\s*GPU(\d+)\s")
_NV_RE = re.compile(r"^NV(\d+)$")


def clean_output(text):
    """Return ``text`` as a list of clean, non-empty lines.

    Removes ANSI/VT100 escape sequences (CSI, OSC, two-byte ESC), other control characters
    except TAB, carriage returns (CRLF and bare CR), trailing whitespace (spaces and tabs) and
    blank lines. Leading whitespace and inner TABs are kept because ``topo`` matrices use them.
    ``text`` may be ``str``, ``bytes`` (decoded as UTF-8 with replacement) or ``None`` (-> ``[]``).
    """
    if text is None:
        return []
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    text = _ANSI_RE.sub("", text)
    lines = []
    for raw in re.split(r"\r\n|\r|\n", text):
        line = _CTRL_RE.sub("", raw).rstrip()
        if line.strip():
            lines.append(line)
    return lines


def normalise_pci_bus_id(bus_id):
    """Normalise a PCI address to the sysfs form ``DDDD:BB:DD.F`` in lower case.

    Accepts nvidia-smi's ``00000000:AF:00.0`` (8 hex digit domain), the sysfs form
    ``0000:af:00.0`` and the short ``af:00.0`` (domain 0 assumed). Returns ``None`` when the text
    is not a PCI address. Example: ``00000000:17:00.0`` -> ``0000:17:00.0``.
    """
    if bus_id is None:
        return None
    m = _BUS_ID_RE.match(str(bus_id).strip())
    if not m:
        return None
    domain = int(m.group("domain") or "0", 16)
    return "%04x:%s:%s.%s" % (domain, m.group("bus").lower(), m.group("dev").lower(), m.group("fn"))


def architecture_from_cc(compute_capability):
    """Map a compute capability string (``"9.0"``, ``"12.0"``) to an architecture name.

    Returns one of ``Kepler, Maxwell, Pascal, Volta, Turing, Ampere, Ada, Hopper, Blackwell`` or
    ``unknown`` for text that is not ``<major>.<minor>`` or a major not in the table
    (source: NVIDIA "CUDA GPUs" compute capability table; 10.x/11.x/12.x are all Blackwell).
    """
    cc = str(compute_capability or "").strip()
    if cc in _ARCH_BY_CC:
        return _ARCH_BY_CC[cc]
    m = re.match(r"^(\d+)\.(\d+)$", cc)
    if not m:
        return "unknown"
    return _ARCH_BY_MAJOR.get(int(m.group(1)), "unknown")


def _strip_unit(value):
    m = _UNIT_RE.match(value)
    return m.group("num") if m else value


def _to_int(value):
    try:
        return int(float(value))
    except (TypeError, ValueError):
        return None


def _header_name(cell):
    return _HEADER_UNIT_RE.sub("", cell).strip()


def parse_query_gpu(text, fields=QUERY_FIELDS):
    """Parse ``nvidia-smi --query-gpu`` CSV into a list of GPU dicts.

    Works with and without header (``--format=csv`` / ``csv,noheader``) and with and without units
    (``nounits``): a first line whose first cell is a field name (``index``) is taken as the header
    and selects the fields (extra columns such as ``power.limit [W]`` are kept under their name);
    otherwise ``fields`` (default :data:`QUERY_FIELDS`) names the columns in order. Units
    (``MiB``, ``W``, ``MHz``) are stripped from values. Lines with fewer cells than fields are
    ignored (truncated output).

    Each dict has: ``index`` (int), ``name`` (str), ``pci_bus_id`` (sysfs form ``0000:17:00.0``),
    ``pci_bus_id_smi`` (as printed), ``driver_version`` (str), ``compute_capability`` (str, "12.0"),
    ``architecture`` (see :func:`architecture_from_cc`), ``memory_total_mib`` (int, MiB),
    ``uuid`` (str); any extra header field is added with dots replaced by underscores.
    Source: nvidia-smi R580 (580.95.05, 580.159.04) CSV output.
    """
    lines = clean_output(text)
    if not lines:
        return []
    names = list(fields)
    first = [c.strip() for c in lines[0].split(",")]
    if first and first[0] in ("index", "name", "pci.bus_id", "uuid") and not first[0].isdigit():
        names = [_header_name(c) for c in first]
        lines = lines[1:]
    gpus = []
    for line in lines:
        cells = [c.strip() for c in line.split(", ")]
        if len(cells) != len(names):
            # a name containing ", " is not produced by nvidia-smi; tolerate a bare "," split
            cells = [c.strip() for c in line.split(",")]
        if len(cells) < len(names):
            continue
        raw = dict(zip(names, cells))
        gpu = {}
        if "index" in raw:
            gpu["index"] = _to_int(raw["index"])
        if "name" in raw:
            gpu["name"] = raw["name"]
        if "pci.bus_id" in raw:
            gpu["pci_bus_id_smi"] = raw["pci.bus_id"]
            gpu["pci_bus_id"] = normalise_pci_bus_id(raw["pci.bus_id"])
        if "driver_version" in raw:
            gpu["driver_version"] = raw["driver_version"]
        if "compute_cap" in raw:
            gpu["compute_capability"] = raw["compute_cap"]
            gpu["architecture"] = architecture_from_cc(raw["compute_cap"])
        if "memory.total" in raw:
            gpu["memory_total_mib"] = _to_int(_strip_unit(raw["memory.total"]))
        if "uuid" in raw:
            gpu["uuid"] = raw["uuid"]
        for key, value in raw.items():
            if key not in QUERY_FIELDS:
                gpu[key.replace(".", "_")] = _strip_unit(value)
        if gpu.get("index") is None and "index" in raw:
            continue
        gpus.append(gpu)
    return gpus


def classify_smi_output(rc, stdout, stderr=""):
    """Map an nvidia-smi run to ``(state, message)``.

    ``state`` is one of :data:`SMI_STATES` except ``missing`` (the caller decides that when the
    binary is not found). Recognised texts (nvidia-smi R580):

    - ``NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver`` -> ``no_driver``
    - ``No devices were found`` -> ``no_devices``
    - ``Failed to initialize NVML: Driver/library version mismatch`` -> ``version_mismatch``
    - ``Field "x" is not a valid field to query`` and any other non-zero exit -> ``error``
    - rc 0 with output -> ``ok``

    ``message`` is the first meaningful line of the output (for the facts and error messages).
    """
    lines = clean_output(stdout) + clean_output(stderr)
    joined = "\n".join(lines)
    first = lines[0].strip() if lines else ""
    if "couldn't communicate with the NVIDIA driver" in joined or "could not communicate with the NVIDIA driver" in joined:
        return "no_driver", first
    if re.search(r"Driver/library version mismatch", joined):
        return "version_mismatch", "; ".join(line.strip() for line in lines[:2])
    if re.search(r"^\s*No devices were found", joined, re.M):
        return "no_devices", first
    if rc != 0:
        return "error", first or ("nvidia-smi exited with rc %s and no output" % rc)
    if not lines:
        return "error", "nvidia-smi exited 0 but printed nothing"
    return "ok", ""


def parse_nvml_library_version(text):
    """Return the NVML library version from a version-mismatch output (``NVML library version:
    580.95`` -> ``"580.95"``) or ``None``."""
    for line in clean_output(text):
        m = re.match(r"^\s*NVML library version:\s*(\S+)", line)
        if m:
            return m.group(1)
    return None


def parse_topo_p2p(text):
    """Parse ``nvidia-smi topo -p2p <r|w|n|a|p>`` into a matrix.

    Returns ``{"gpus": [0, 1, ...], "matrix": [[token, ...], ...], "ok_directed": [[i, j], ...]}``
    where ``matrix[i][j]`` is the whole-word token (``X OK CNS GNS TNS NS U``) for GPU i -> GPU j
    in the order of the header row, and ``ok_directed`` lists every ordered pair with ``OK``
    (i != j). Unknown tokens are kept as printed. Rows are found with ``^\\s*GPU<n>\\s`` and cells
    by splitting on whitespace, so ``NS`` never matches inside ``CNS`` and trailing tabs, a
    ``P2P Connectivity Matrix`` title and the legend are ignored. Returns ``None`` when no
    matrix row is found. Source: nvidia-smi R580 ``topo -p2p r`` on 4x RTX PRO 6000.
    """
    lines = clean_output(text)
    header = None
    rows = {}
    for line in lines:
        cells = line.split()
        if header is None and cells and all(re.match(r"^GPU\d+$", c) for c in cells):
            header = [int(c[3:]) for c in cells]
            continue
        m = _P2P_ROW_RE.match(line)
        if m and header is not None:
            rows[int(m.group(1))] = cells[1:1 + len(header)]
    if header is None or not rows:
        return None
    matrix = []
    ok_directed = []
    for i in header:
        row = rows.get(i, [])
        row = row + ["U"] * (len(header) - len(row))
        matrix.append(row)
        for col, j in enumerate(header):
            if i != j and row[col] == "OK":
                ok_directed.append([i, j])
    return {"gpus": header, "matrix": matrix, "ok_directed": ok_directed}


def p2p_ok_pairs(matrices, gpus=None):
    """Return the unordered GPU pairs ``[[i, j], ...]`` (i < j) whose P2P is ``OK`` in both
    directions in every given matrix (the results of :func:`parse_topo_p2p` for ``r``, ``w``...).

    ``gpus`` restricts the pairs to those GPU indices (e.g. the GPUs a tp group uses).
    Returns ``[]`` when no matrix is given.
    """
    matrices = [m for m in (matrices or []) if m]
    if not matrices:
        return []
    sets = [set(tuple(p) for p in m["ok_directed"]) for m in matrices]
    ok = set.intersection(*sets)
    wanted = set(gpus) if gpus is not None else None
    pairs = []
    for i, j in sorted(ok):
        if i < j and (j, i) in ok and (wanted is None or (i in wanted and j in wanted)):
            pairs.append([i, j])
    return pairs


def parse_topo_m(text):
    """Parse ``nvidia-smi topo -m`` (TAB separated) into the GPU link matrix and NVLink facts.

    Returns ``{"gpus": [0, ...], "matrix": [[token, ...]], "nvlink": bool, "nvlink_pairs":
    [[i, j, links], ...], "cpu_affinity": {"0": "24-47,72-95"}, "numa_affinity": {"0": "1"},
    "nics": ["NIC0", ...]}``. ``matrix[i][j]`` is ``X``, ``SYS``, ``NODE``, ``PHB``, ``PXB``,
    ``PIX`` or ``NV<n>`` (n bonded NVLinks) between GPUs; NIC columns are left out of the matrix.
    ``nvlink`` is true when any GPU pair is ``NV<n>``. Returns ``None`` when no header is found.
    Source: nvidia-smi R580 ``topo -m`` (header labels contain spaces, so cells split on TAB).
    """
    lines = clean_output(text)
    header = None
    result = {"gpus": [], "matrix": [], "nvlink": False, "nvlink_pairs": [], "cpu_affinity": {}, "numa_affinity": {}, "nics": []}
    rows = {}
    for line in lines:
        if line.strip().startswith("Legend") or line.strip().startswith("NIC Legend"):
            break
        cells = [c.strip() for c in line.split("\t")]
        if header is None:
            if "GPU0" in cells:
                header = cells[1:] if cells and cells[0] == "" else cells
            continue
        m = re.match(r"^(GPU\d+|NIC\d+)$", cells[0]) if cells else None
        if m:
            rows[cells[0]] = cells[1:]
    if header is None:
        return None
    gpu_cols = [(col, int(h[3:])) for col, h in enumerate(header) if re.match(r"^GPU\d+$", h)]
    result["nics"] = [h for h in header if re.match(r"^NIC\d+$", h)]
    col_of = dict((h, col) for col, h in enumerate(header))
    for _col, gi in gpu_cols:
        row = rows.get("GPU%d" % gi, [])
        result["gpus"].append(gi)
        result["matrix"].append([(row[c] if c < len(row) else "U") or "U" for c, _g in gpu_cols])
        if "CPU Affinity" in col_of and col_of["CPU Affinity"] < len(row):
            result["cpu_affinity"][str(gi)] = row[col_of["CPU Affinity"]]
        if "NUMA Affinity" in col_of and col_of["NUMA Affinity"] < len(row):
            result["numa_affinity"][str(gi)] = row[col_of["NUMA Affinity"]]
    for a, gi in enumerate(result["gpus"]):
        for b, gj in enumerate(result["gpus"]):
            m = _NV_RE.match(result["matrix"][a][b])
            if m and gi < gj:
                result["nvlink_pairs"].append([gi, gj, int(m.group(1))])
    result["nvlink"] = bool(result["nvlink_pairs"])
    return result


def parse_smi_report(text):
    """Parse ``nvidia-smi -q`` (``Key : value`` report) into the fields gpu_facts uses.

    Returns ``{"driver_version", "cuda_version", "attached_gpus" (int), "gpus": [{"pci_bus_id"
    (sysfs form), "product_name", "architecture", "uuid", "virtualization_mode", "fabric_state",
    "fabric_status"}]}``; missing keys are ``None``. Source: nvidia-smi 580.159.04 ``-q`` (H200).
    Only top-level ``Key : value`` lines and the ``GPU <bus id>`` sections are read; nested
    sections are matched by their key names (``Virtualization Mode`` inside ``GPU Virtualization
    Mode``, ``State``/``Status`` inside ``Fabric``).
    """
    out = {"driver_version": None, "cuda_version": None, "attached_gpus": None, "gpus": []}
    gpu = None
    section = None
    for line in clean_output(text):
        m = re.match(r"^GPU ([0-9A-Fa-f:.]+)$", line.strip()) if not line.startswith(" ") else None
        if m:
            gpu = {"pci_bus_id": normalise_pci_bus_id(m.group(1)), "product_name": None, "architecture": None, "uuid": None,
                   "virtualization_mode": None, "fabric_state": None, "fabric_status": None}
            out["gpus"].append(gpu)
            continue
        if ":" not in line:
            section = line.strip()
            continue
        key, _sep, value = line.partition(" : ") if " : " in line else line.partition(":")
        key = key.strip()
        value = value.strip()
        if gpu is None:
            if key == "Driver Version":
                out["driver_version"] = value
            elif key == "CUDA Version":
                out["cuda_version"] = value
            elif key == "Attached GPUs":
                out["attached_gpus"] = _to_int(value)
            continue
        if key == "Product Name":
            gpu["product_name"] = value
        elif key == "Product Architecture":
            gpu["architecture"] = value
        elif key == "GPU UUID":
            gpu["uuid"] = value
        elif key == "Virtualization Mode":
            gpu["virtualization_mode"] = value
        elif section == "Fabric" and key == "State":
            gpu["fabric_state"] = value
        elif section == "Fabric" and key == "Status":
            gpu["fabric_status"] = value
    return out


def parse_smi_plain(text):
    """Parse the banner of plain ``nvidia-smi`` (no arguments).

    Returns ``{"smi_version", "driver_version", "cuda_version", "gpus": [{"index" (int), "name",
    "pci_bus_id" (sysfs form), "memory_used_mib" (int, MiB), "memory_total_mib" (int, MiB)}]}``.
    Source: nvidia-smi 580.159.04 (H200) table layout with ``|`` separated boxes.
    """
    out = {"smi_version": None, "driver_version": None, "cuda_version": None, "gpus": []}
    lines = clean_output(text)
    for idx, line in enumerate(lines):
        m = re.search(r"NVIDIA-SMI\s+(\S+)\s+Driver Version:\s+(\S+)\s+CUDA Version:\s+(\S+)", line)
        if m:
            out["smi_version"], out["driver_version"], out["cuda_version"] = m.group(1), m.group(2), m.group(3)
            continue
        m = re.match(r"^\|\s+(\d+)\s+(.+?)\s{2,}\S+\s+\|\s+([0-9A-Fa-f]+:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s", line)
        if m:
            gpu = {"index": int(m.group(1)), "name": m.group(2).strip(), "pci_bus_id": normalise_pci_bus_id(m.group(3)),
                   "memory_used_mib": None, "memory_total_mib": None}
            if idx + 1 < len(lines):
                mm = re.search(r"(\d+)MiB\s*/\s*(\d+)MiB", lines[idx + 1])
                if mm:
                    gpu["memory_used_mib"], gpu["memory_total_mib"] = int(mm.group(1)), int(mm.group(2))
            out["gpus"].append(gpu)
    return out


def parse_proc_driver_version(text):
    """Parse ``/proc/driver/nvidia/version`` (or a kernel-log ``NVRM: loading ...`` line).

    Returns ``{"driver_version": "580.159.04" | None, "kernel_module_flavour": "open" |
    "proprietary" | "unknown", "gcc_version": str | None}``. ``Open Kernel Module`` in the NVRM
    line means the open flavour; ``NVIDIA UNIX <arch> Kernel Module`` without ``Open`` means the
    proprietary one. Source: R580 open (580.159.04) and proprietary (580.95.05) files.
    """
    out = {"driver_version": None, "kernel_module_flavour": "unknown", "gcc_version": None}
    for line in clean_output(text):
        if "NVRM" in line and "Kernel Module" in line:
            m = re.search(r"Kernel Module(?: for \S+)?\s+(\d{3}\.\d{1,3}(?:\.\d{1,3})?)\b", line)
            if m:
                out["driver_version"] = m.group(1)
            out["kernel_module_flavour"] = "open" if "Open Kernel Module" in line else "proprietary"
        m = re.match(r"^GCC version:\s+(.*)$", line.strip())
        if m:
            out["gcc_version"] = m.group(1).strip()
    return out


def flavour_from_license(text):
    """Map ``modinfo -F license nvidia`` output to a flavour: ``Dual MIT/GPL`` -> ``open``,
    ``NVIDIA`` -> ``proprietary``, anything else (empty, module not found) -> ``unknown``."""
    lines = clean_output(text)
    value = lines[0].strip() if lines else ""
    if value == "Dual MIT/GPL":
        return "open"
    if value == "NVIDIA":
        return "proprietary"
    return "unknown"


def version_tuple(version):
    """``"580.65.06"`` -> ``(580, 65, 6)``; text without a driver version -> ``None``."""
    m = _VERSION_RE.search(str(version or ""))
    if not m:
        return None
    return tuple(int(p) for p in m.group(1).split("."))
