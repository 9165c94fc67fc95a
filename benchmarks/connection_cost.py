"""What one Ansible task costs on a sandbox host, over the podman connection and over SSH.

Starts one private sandbox host (localhost/llmops-sandbox:<suite>, privileged systemd container named
llmops-conncost-<pid>; not one of the shared sglang-sbx-* hosts), installs openssh-server in it (apt, from the Debian
archive the sandbox build uses) with a key generated for this run, and times the same playbook of --tasks
`ansible.builtin.stat` tasks (a module that changes nothing, like most tasks of a no-change converge):

  podman  containers.podman.podman (the sandbox inventory's connection): several `podman exec` per task (temporary
          directory, module, clean-up) and a `podman mount`; the plugin cannot pipeline (it says so);
  ssh     ansible.builtin.ssh as root to the container's bridge address, with ansible.cfg's pipelining = true and
          Ansible's default ControlMaster/ControlPersist: one multiplexed SSH session per task, which is how a
          production fleet is reached.

Per connection it prints the wall time and the CPU seconds per task: the client (ansible-playbook, its workers, the
podman/ssh processes: getrusage(RUSAGE_CHILDREN)), the container's cgroup (what the task costs inside the host) and
podman's conmon cgroup (exec monitors; shared with any other podman user at the time). CPU seconds do not depend on
the machine's load; wall time does, so the load average is printed too. Each connection runs --repeat times.

Run it under the sandbox lock (it uses podman):
    flock /tmp/llmops-sandbox.lock .venv/bin/python benchmarks/connection_cost.py --tasks 20 --repeat 2
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fleet_converge as fc  # noqa: E402  (same directory: env(), playbook(), enable_ssh(), cgroup helpers)


def start_host(name, suite):
    image = "localhost/llmops-sandbox:%s" % suite
    subprocess.run(["podman", "run", "-d", "--name", name, "--hostname", name, "--privileged", "--systemd=always",
                    image, "/sbin/init"], env=fc.env(), check=True, stdout=subprocess.DEVNULL)
    for dummy in range(60):
        state = subprocess.run(["podman", "exec", name, "systemctl", "is-system-running"], env=fc.env(),
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, check=False).stdout.strip()
        if state in ("running", "degraded"):
            return
        time.sleep(2)
    sys.exit("%s: systemd did not come up in 120 s (last state %r)" % (name, state))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    ap.add_argument("--tasks", type=int, default=20, help="stat tasks per playbook (default 20)")
    ap.add_argument("--repeat", type=int, default=2, help="runs per connection (default 2)")
    ap.add_argument("--suite", default="bookworm", choices=["bookworm", "trixie"])
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="connection-cost-")
    name = "llmops-conncost-%d" % os.getpid()
    pb = os.path.join(work, "stat.yml")
    with open(pb, "w") as fh:
        fh.write("- hosts: all\n  gather_facts: false\n  tasks:\n")
        for i in range(args.tasks):
            fh.write("    - name: stat %d\n      ansible.builtin.stat:\n        path: /etc/hostname\n" % i)
    try:
        start_host(name, args.suite)
        ssh = fc.enable_ssh([name], work)
        inventories = {}
        for conn, line in (("podman", "ansible_connection=containers.podman.podman"),
                           ("ssh", "ansible_connection=ansible.builtin.ssh ansible_user=root ansible_host=%s "
                                   "ansible_ssh_private_key_file=%s ansible_ssh_common_args='-o StrictHostKeyChecking=no "
                                   "-o UserKnownHostsFile=/dev/null -o LogLevel=ERROR' ansible_control_path_dir=%s"
                                   % (ssh["addresses"][name], ssh["key"], ssh["control_dir"]))):
            inventories[conn] = os.path.join(work, "%s.ini" % conn)
            with open(inventories[conn], "w") as fh:
                fh.write("%s %s ansible_python_interpreter=/usr/bin/python3\n" % (name, line))
        cgroups = fc.container_cgroups([name])
        print("| connection | run | tasks | wall s | wall s/task | CPU s/task: client | container | conmon | total | load (1 min) |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for rep in range(args.repeat):
            for conn in ("podman", "ssh"):
                load = fc.loadavg()[0]
                rc, dt, out, recap, cpu = fc.playbook(["-i", inventories[conn], pb], cgroups=cgroups,
                                                      control_dir=ssh["control_dir"] if conn == "ssh" else None)
                ok = sum(r["ok"] for r in recap.values())
                if rc != 0 or ok != args.tasks:
                    sys.exit("%s run failed (rc %d, %d ok):\n%s" % (conn, rc, ok, out[-3000:]))
                n = float(args.tasks)
                total = cpu["client_s"] + (cpu["containers_s"] or 0) + (cpu["conmon_s"] or 0)
                print("| %s | %d | %d | %.1f | %.2f | %.2f | %s | %s | %.2f | %.2f |" % (
                    conn, rep + 1, args.tasks, dt, dt / n, cpu["client_s"] / n,
                    "%.2f" % (cpu["containers_s"] / n) if cpu["containers_s"] is not None else "-",
                    "%.2f" % (cpu["conmon_s"] / n) if cpu["conmon_s"] is not None else "-", total / n, load), flush=True)
    finally:
        subprocess.run(["podman", "rm", "--force", "--time", "5", name], env=fc.env(), stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=False)


if __name__ == "__main__":
    main()
