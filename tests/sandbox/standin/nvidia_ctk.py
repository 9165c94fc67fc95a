"""STAND-IN for tests: nvidia-ctk (NVIDIA Container Toolkit CLI 1.18.0) of the llmops.sglang sandbox.

No GPU exists on sandbox hosts, so the CDI spec it writes only sets environment variables (no device
nodes, no hooks, no mounts): `podman run --device nvidia.com/gpu=all IMAGE` then really works there and
the container sees NVIDIA_VISIBLE_DEVICES like on a real host. The GPU list is read from the stand-in
nvidia-smi data (/usr/share/nvidia-standin/query-gpu-noheader.csv, package nvidia-smi).

Supported:
  nvidia-ctk --version
  nvidia-ctk cdi generate [--output=FILE] [--format=yaml|json] [--device-name-strategy=index|uuid|type-index]
  nvidia-ctk cdi list                       devices of the specs in /etc/cdi and /var/run/cdi
                                            (NVIDIA_STANDIN_CDI_DIRS, colon-separated, overrides them for tests)
  nvidia-ctk runtime configure --runtime=docker [--config=FILE] [--set-as-default] [--cdi.enabled] [--dry-run]
  nvidia-ctk config [--in-place] [--config=FILE] --set KEY=VALUE ...
Log lines go to stderr in logrus' format (INFO[0000] ...), like the real tool.
"""
import json
import os
import sys

VERSION = "1.18.0"
DATA = os.environ.get("NVIDIA_STANDIN_DATA", "/usr/share/nvidia-standin")
CDI_DIRS = os.environ.get("NVIDIA_STANDIN_CDI_DIRS", "/etc/cdi:/var/run/cdi").split(":")


def log(level, msg):
    sys.stderr.write("%s[0000] %s\n" % (level, msg))


def fail(msg, rc=1):
    log("ERRO", msg)
    sys.exit(rc)


def options(args):
    opts, rest = {}, []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("--"):
            if "=" in arg:
                key, value = arg[2:].split("=", 1)
            elif i + 1 < len(args) and not args[i + 1].startswith("--") and arg[2:] in (
                    "output", "format", "device-name-strategy", "runtime", "config", "set", "mode", "vendor", "class"):
                key, value = arg[2:], args[i + 1]
                i += 1
            else:
                key, value = arg[2:], "true"
            if key == "set":
                opts.setdefault("set", []).append(value)
            else:
                opts[key] = value
        else:
            rest.append(arg)
        i += 1
    return opts, rest


def gpus():
    path = os.path.join(DATA, "query-gpu-noheader.csv")
    if not os.path.exists(path):
        fail("failed to generate CDI spec: failed to create device CDI specs: failed to initialize NVML: ERROR_LIBRARY_NOT_FOUND")
    rows = []
    with open(path) as handle:
        for line in handle:
            if line.strip():
                cells = [c.strip() for c in line.split(", ")]
                rows.append({"index": cells[0], "uuid": cells[6]})
    return rows


def spec(strategy):
    devices = []
    for gpu in gpus():
        name = {"index": gpu["index"], "uuid": gpu["uuid"], "type-index": "gpu" + gpu["index"]}.get(strategy)
        if name is None:
            fail("invalid device name strategy: %s" % strategy)
        devices.append({"name": name, "containerEdits": {"env": ["NVIDIA_VISIBLE_DEVICES=%s" % gpu["index"]]}})
    devices.append({"name": "all", "containerEdits": {"env": ["NVIDIA_VISIBLE_DEVICES=all"]}})
    return {"cdiVersion": "0.5.0", "kind": "nvidia.com/gpu", "devices": devices,
            "containerEdits": {"env": ["NVIDIA_CTK_LIBCUDA_DIR=/usr/lib/x86_64-linux-gnu", "LLMOPS_NVIDIA_STANDIN=1"]}}


def to_yaml(doc):
    lines = ["---", "# STAND-IN for tests: written by the llmops sandbox nvidia-ctk (no device nodes on this host)",
             "cdiVersion: %s" % doc["cdiVersion"], "kind: %s" % doc["kind"], "devices:"]
    for dev in doc["devices"]:
        lines += ["- name: %s" % json.dumps(dev["name"]), "  containerEdits:", "    env:"]
        lines += ["    - %s" % env for env in dev["containerEdits"]["env"]]
    lines += ["containerEdits:", "  env:"] + ["  - %s" % env for env in doc["containerEdits"]["env"]]
    return "\n".join(lines) + "\n"


def cdi_generate(opts):
    doc = spec(opts.get("device-name-strategy", "index"))
    output = opts.get("output")
    fmt = opts.get("format") or ("json" if output and output.endswith(".json") else "yaml")
    text = json.dumps(doc, indent=2) + "\n" if fmt == "json" else to_yaml(doc)
    log("INFO", "Auto-detected mode as 'nvml' (STAND-IN: devices from %s)" % DATA)
    if not output:
        sys.stdout.write(text)
    else:
        directory = os.path.dirname(os.path.abspath(output))
        if not os.path.isdir(directory):
            os.makedirs(directory, 0o755)
        tmp = output + ".tmp"
        with open(tmp, "w") as handle:
            handle.write(text)
        os.chmod(tmp, 0o644)
        os.rename(tmp, output)
    log("INFO", "Generated CDI spec with version %s" % doc["cdiVersion"])


def spec_devices(path):
    """Device names of one CDI spec file (JSON, or the YAML subset this tool and NVIDIA's write)."""
    with open(path) as handle:
        text = handle.read()
    if path.endswith(".json"):
        doc = json.loads(text)
        return doc.get("kind", ""), [d["name"] for d in doc.get("devices", [])]
    kind, names = "", []
    for line in text.splitlines():
        if line.startswith("kind:"):
            kind = line.split(":", 1)[1].strip().strip('"')
        elif line.startswith("- name:") or line.startswith("  - name:"):
            names.append(line.split(":", 1)[1].strip().strip('"'))
    return kind, names


def cdi_list():
    found = []
    for directory in CDI_DIRS:
        if not os.path.isdir(directory):
            continue
        for name in sorted(os.listdir(directory)):
            if name.endswith((".yaml", ".yml", ".json")):
                kind, names = spec_devices(os.path.join(directory, name))
                found += ["%s=%s" % (kind, n) for n in names]
    log("INFO", "Found %d CDI devices" % len(found))
    for item in found:
        sys.stdout.write(item + "\n")


def runtime_configure(opts):
    runtime = opts.get("runtime", "docker")
    if runtime != "docker":
        fail("STAND-IN supports --runtime=docker only (got %s); podman uses CDI and needs no runtime configuration" % runtime)
    path = opts.get("config", "/etc/docker/daemon.json")
    config = {}
    if os.path.exists(path):
        with open(path) as handle:
            text = handle.read()
        if text.strip():
            try:
                config = json.loads(text)
            except ValueError as exc:
                fail("unable to load config: unable to parse %s: %s" % (path, exc))
    config.setdefault("runtimes", {})["nvidia"] = {"args": [], "path": "nvidia-container-runtime"}
    if opts.get("set-as-default") == "true":
        config["default-runtime"] = "nvidia"
    if opts.get("cdi.enabled") == "true":
        config.setdefault("features", {})["cdi"] = True
    text = json.dumps(config, indent=4, sort_keys=True) + "\n"
    if opts.get("dry-run") == "true":
        sys.stdout.write(text)
        return
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
    with open(path, "w") as handle:
        handle.write(text)
    log("INFO", "Wrote updated config to %s" % path)
    log("INFO", "It is recommended that docker daemon be restarted.")


def config_set(opts):
    path = opts.get("config", "/etc/nvidia-container-runtime/config.toml")
    lines = []
    if os.path.exists(path):
        with open(path) as handle:
            lines = handle.read().splitlines()
    for item in opts.get("set", []):
        if "=" not in item:
            fail("invalid --set value %r: expected KEY=VALUE" % item)
        key, value = item.split("=", 1)
        section, _dot, leaf = key.rpartition(".")
        rendered = "%s = %s" % (leaf, value if value in ("true", "false") or value.isdigit() else json.dumps(value))
        header = "[%s]" % section if section else None
        if header and header not in lines:
            lines += ["", header]
        start = lines.index(header) + 1 if header else 0
        end = start
        while end < len(lines) and not lines[end].startswith("["):
            end += 1
        for i in range(start, end):
            if lines[i].split("=", 1)[0].strip() == leaf:
                lines[i] = rendered
                break
        else:
            lines.insert(end if end > start and lines[end - 1] != "" else end, rendered)
    text = "\n".join(lines).strip("\n") + "\n"
    if opts.get("in-place") == "true":
        directory = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(directory):
            os.makedirs(directory, 0o755)
        with open(path, "w") as handle:
            handle.write(text)
    else:
        sys.stdout.write(text)


def main(argv):
    opts, rest = options(argv)
    if opts.get("version") == "true" and not rest:
        sys.stdout.write("NVIDIA Container Toolkit CLI version %s\ncommit: STAND-IN\n" % VERSION)
    elif rest[:2] == ["cdi", "generate"]:
        cdi_generate(opts)
    elif rest[:2] == ["cdi", "list"]:
        cdi_list()
    elif rest[:2] == ["runtime", "configure"]:
        runtime_configure(opts)
    elif rest[:1] == ["config"] and "set" in opts:
        config_set(opts)
    else:
        sys.stderr.write("nvidia-ctk STAND-IN: unsupported command line: %s\n" % " ".join(argv))
        sys.exit(1)


if __name__ == "__main__":
    main(sys.argv[1:])
