"""STAND-IN for tests: nvidia-smi of the llmops.sglang sandbox hosts (no GPU, no driver).

Prints the recorded real outputs of a 4x NVIDIA RTX PRO 6000 Blackwell Server Edition host
(driver 580.95.05), copied at build time from tests/fixtures/nvidia/rtxpro6000-x4-* into
/usr/share/nvidia-standin/ by tests/sandbox/build.sh (package nvidia-open / its driver deps).

Supported command lines (anything else: the real "Invalid combination of input arguments" text, rc 2):
  nvidia-smi                                   summary table built from the recorded CSV
  nvidia-smi -L                                "GPU n: NAME (UUID: ...)" lines
  nvidia-smi --version                         NVIDIA-SMI / NVML / DRIVER / CUDA version lines
  nvidia-smi --query-gpu=F1,F2 --format=csv[,noheader][,nounits] [-i 0,1]
       fields: index, name (gpu_name), pci.bus_id (gpu_bus_id), driver_version, compute_cap,
       memory.total, uuid (gpu_uuid), count, persistence_mode; unknown field ->
       'Field "X" is not a valid field to query.' rc 2 (recorded text smi-bad-field.txt)
  nvidia-smi topo -m                           PCIe matrix (NODE within a socket, SYS across), no NVLink
  nvidia-smi topo -p2p r|w|a|p|n               recorded rtxpro6000-x4-topo-p2p-r.txt for r/w/a/p, NS for n
  nvidia-smi -q [-i ID]                        a reduced report in the real "Key : value" layout (the keys of the
                                               recorded H200 h200-smi-q.txt: product, architecture, UUID,
                                               virtualization mode None, PCI, FB memory, fabric N/A on PCIe)
  nvidia-smi -pm 0|1                           persistence mode messages (state kept in /run/nvidia-standin,
                                               NVIDIA_STANDIN_RUN overrides the directory for tests)
Failure states for tests: NVIDIA_STANDIN_STATE (env) or /etc/nvidia-standin/state (file) set to
no_driver (rc 9), no_devices (rc 6) or version_mismatch (rc 18) prints the recorded real texts.
"""
import os
import sys
import time

DATA = os.environ.get("NVIDIA_STANDIN_DATA", "/usr/share/nvidia-standin")
STATE_FILE = "/etc/nvidia-standin/state"
PM_FILE = os.path.join(os.environ.get("NVIDIA_STANDIN_RUN", "/run/nvidia-standin"), "persistence_mode")
CUDA_VERSION = "13.0"
USAGE_ERROR = "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n"

# field name accepted on the command line -> (column of the recorded CSV or a computed key, unit)
FIELDS = {
    "index": ("index", None),
    "name": ("name", None), "gpu_name": ("name", None),
    "pci.bus_id": ("pci.bus_id", None), "gpu_bus_id": ("pci.bus_id", None),
    "driver_version": ("driver_version", None),
    "compute_cap": ("compute_cap", None),
    "memory.total": ("memory.total", "MiB"),
    "uuid": ("uuid", None), "gpu_uuid": ("uuid", None),
    "count": ("count", None),
    "persistence_mode": ("persistence_mode", None),
}
CSV_COLUMNS = ["index", "name", "pci.bus_id", "driver_version", "compute_cap", "memory.total", "uuid"]


def read(name):
    with open(os.path.join(DATA, name)) as handle:
        return handle.read()


def out(text, rc=0):
    sys.stdout.write(text)
    sys.stdout.flush()
    sys.exit(rc)


def persistence_enabled():
    try:
        with open(PM_FILE) as handle:
            return handle.read().strip() == "1"
    except OSError:
        return os.path.exists("/run/nvidia-persistenced/nvidia-persistenced.pid")


def gpus():
    rows = []
    for line in read("query-gpu-noheader.csv").splitlines():
        if line.strip():
            rows.append(dict(zip(CSV_COLUMNS, [v.strip() for v in line.split(", ")])))
    return rows


def check_state():
    state = os.environ.get("NVIDIA_STANDIN_STATE", "")
    if not state and os.path.exists(STATE_FILE):
        with open(STATE_FILE) as handle:
            state = handle.read().strip()
    if state in ("", "ok"):
        return
    texts = {"no_driver": ("smi-no-driver.txt", 9), "no_devices": ("smi-no-devices.txt", 6),
             "version_mismatch": ("smi-version-mismatch.txt", 18)}
    if state not in texts:
        out("nvidia-smi STAND-IN: unknown NVIDIA_STANDIN_STATE %r (ok|no_driver|no_devices|version_mismatch)\n" % state, 255)
    name, rc = texts[state]
    out(read(name), rc)


def select(rows, ids):
    if ids is None:
        return rows
    chosen = []
    for item in ids.split(","):
        item = item.strip()
        match = [r for r in rows if item in (r["index"], r["uuid"], r["pci.bus_id"])]
        if not match:
            out("No devices were found\n", 6)
        chosen.extend(match)
    return chosen


def query(spec, fmt, ids):
    fmt_opts = [f.strip() for f in fmt.split(",")]
    if not fmt_opts or fmt_opts[0] != "csv" or any(f not in ("csv", "noheader", "nounits") for f in fmt_opts):
        out(USAGE_ERROR, 2)
    fields = [f.strip() for f in spec.split(",") if f.strip()]
    for field in fields:
        if field not in FIELDS:
            out('Field "%s" is not a valid field to query.\n\n' % field, 2)
    rows = select(gpus(), ids)
    lines = []
    if "noheader" not in fmt_opts:
        lines.append(", ".join(f + (" [%s]" % FIELDS[f][1] if FIELDS[f][1] and "nounits" not in fmt_opts else "") for f in fields))
    pm = "Enabled" if persistence_enabled() else "Disabled"
    for row in rows:
        values = []
        for field in fields:
            key, unit = FIELDS[field]
            value = {"count": str(len(rows)), "persistence_mode": pm}.get(key, row.get(key))
            if unit and "nounits" not in fmt_opts:
                value = "%s %s" % (value, unit)
            values.append(value)
        lines.append(", ".join(values))
    out("\n".join(lines) + "\n")


def summary():
    rows = gpus()
    driver = rows[0]["driver_version"]
    pm = "On" if persistence_enabled() else "Off"
    rule = "+-----------------------------------------+------------------------+----------------------+\n"
    text = time.strftime("%a %b %d %H:%M:%S %Y") + "       \n"
    text += "+-----------------------------------------------------------------------------------------+\n"
    text += "| NVIDIA-SMI %-22s Driver Version: %-14s CUDA Version: %-9s|\n" % (driver, driver, CUDA_VERSION)
    text += rule
    text += "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |\n"
    text += "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |\n"
    text += "|                                         |                        |               MIG M. |\n"
    text += "|=========================================+========================+======================|\n"
    for row in rows:
        name = row["name"]
        if len(name) > 25:
            name = name[:22] + "..."
        text += "| %3s  %-25s %7s  |   %s Off |                    0 |\n" % (row["index"], name, pm, row["pci.bus_id"])
        mem = "%7sMiB / %6sMiB" % ("0", row["memory.total"])
        text += "| N/A   30C    P8             30W /  600W | %22s |      0%%      Default |\n" % mem
        text += "|                                         |                        |             Disabled |\n"
        text += rule
    text += "\n"
    text += "+-----------------------------------------------------------------------------------------+\n"
    text += "| Processes:                                                                              |\n"
    text += "|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |\n"
    text += "|        ID   ID                                                               Usage      |\n"
    text += "|=========================================================================================|\n"
    text += "|  No running processes found                                                             |\n"
    text += "+-----------------------------------------------------------------------------------------+\n"
    out(text)


def q_line(indent, key, value=None):
    """One line of the -q report: the colon sits at column 55 like in the recorded report."""
    text = " " * indent + key
    return text if value is None else "%s: %s" % (text.ljust(55), value)


def report(ids):
    rows = select(gpus(), ids)
    driver = rows[0]["driver_version"]
    lines = ["", "==============NVSMI LOG==============", "",
             q_line(0, "Timestamp", time.strftime("%a %b %d %H:%M:%S %Y")),
             q_line(0, "Driver Version", driver), q_line(0, "CUDA Version", CUDA_VERSION), "",
             q_line(0, "Attached GPUs", str(len(gpus())))]
    pm = "Enabled" if persistence_enabled() else "Disabled"
    for row in rows:
        bus = row["pci.bus_id"]
        lines += [
            "GPU " + bus,
            q_line(4, "Product Name", row["name"]),
            q_line(4, "Product Brand", "NVIDIA RTX"),
            q_line(4, "Product Architecture", "Blackwell"),
            q_line(4, "Persistence Mode", pm),
            q_line(4, "MIG Mode"), q_line(8, "Current", "N/A"), q_line(8, "Pending", "N/A"),
            q_line(4, "GPU UUID", row["uuid"]),
            q_line(4, "Minor Number", row["index"]),
            q_line(4, "GPU Virtualization Mode"), q_line(8, "Virtualization Mode", "None"),
            q_line(8, "Host VGPU Mode", "N/A"),
            q_line(4, "GSP Firmware Version", driver),
            q_line(4, "PCI"),
            q_line(8, "Bus", "0x" + bus.split(":")[1]), q_line(8, "Device", "0x" + bus.split(":")[2].split(".")[0]),
            q_line(8, "Domain", "0x" + bus.split(":")[0][-4:]), q_line(8, "Device Id", "0x2BB510DE"),
            q_line(8, "Bus Id", bus),
            q_line(4, "FB Memory Usage"), q_line(8, "Total", "%s MiB" % row["memory.total"]), q_line(8, "Used", "0 MiB"),
            q_line(4, "Compute Mode", "Default"),
            q_line(4, "Fabric"), q_line(8, "State", "N/A"), q_line(8, "Status", "N/A"),
            ""]
    out("\n".join(lines) + "\n")


def topo(args):
    if args == ["-m"]:
        out(read("topo-m.txt"))
    if len(args) == 2 and args[0] == "-p2p" and args[1] in ("r", "w", "a", "p"):
        out(read("topo-p2p-r.txt"))
    if len(args) == 2 and args[0] == "-p2p" and args[1] == "n":
        # no NVLink on these PCIe cards: every pair "NS" (Not supported), same layout as the recorded matrix
        lines = []
        for line in read("topo-p2p-r.txt").split("\n"):
            if line.startswith(" GPU"):
                cells = line.split("\t")
                line = "\t".join([cells[0]] + [c if c in ("X", "") else "NS" for c in cells[1:]])
            lines.append(line)
        out("\n".join(lines))
    out(USAGE_ERROR, 2)


def persistence(value, ids):
    if value not in ("0", "1", "ENABLED", "DISABLED"):
        out(USAGE_ERROR, 2)
    enable = value in ("1", "ENABLED")
    try:
        os.makedirs(os.path.dirname(PM_FILE), exist_ok=True)
        with open(PM_FILE, "w") as handle:
            handle.write("1\n" if enable else "0\n")
    except OSError:
        out("Insufficient Permissions\n", 4)
    lines = ["%s persistence mode for GPU %s." % ("Enabled" if enable else "Disabled", r["pci.bus_id"]) for r in select(gpus(), ids)]
    out("\n".join(lines) + "\nAll done.\n")


def main(argv):
    check_state()
    if not argv:
        summary()
    if argv[0] == "topo":
        topo(argv[1:])
    if argv == ["--version"]:
        driver = gpus()[0]["driver_version"]
        out("NVIDIA-SMI version  : %s\nNVML version        : %s\nDRIVER version      : %s\nCUDA Version        : %s\n"
            % (driver, driver.rsplit(".", 1)[0], driver, CUDA_VERSION))
    if argv in (["-L"], ["--list-gpus"]):
        out("".join("GPU %s: %s (UUID: %s)\n" % (r["index"], r["name"], r["uuid"]) for r in gpus()))
    spec = fmt = ids = pm = None
    full = False
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("-q", "--query"):
            full = True
            i += 1
            continue
        if "=" in arg and arg.startswith("--"):
            key, value = arg.split("=", 1)
        elif arg in ("-i", "--id", "-pm", "--persistence-mode", "--format", "--query-gpu") and i + 1 < len(argv):
            key, value = arg, argv[i + 1]
            i += 1
        else:
            out(USAGE_ERROR, 2)
        if key == "--query-gpu":
            spec = value
        elif key == "--format":
            fmt = value
        elif key in ("-i", "--id"):
            ids = value
        elif key in ("-pm", "--persistence-mode"):
            pm = value
        else:
            out(USAGE_ERROR, 2)
        i += 1
    if full and spec is None and pm is None:
        report(ids)
    if pm is not None and spec is None:
        persistence(pm, ids)
    if spec is not None and fmt is not None:
        query(spec, fmt, ids)
    out(USAGE_ERROR, 2)


if __name__ == "__main__":
    main(sys.argv[1:])
