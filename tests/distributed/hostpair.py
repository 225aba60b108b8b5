"""Two "hosts" on one machine for test_two_hosts: two Linux network namespaces joined by a veth
pair, each end with a private address that exists only inside its namespace, and an Open MPI
remote-shell agent (a small script in ssh's place) that runs a command inside the other one.

    with HostPair.create(directory) as hosts:     # root, iproute2 and util-linux's unshare
        hosts.mpiexec_prefix()                    # run mpiexec inside host A, under A's hostname
        hosts.mpiexec_options()                   # --host A:1,B:1, the agent, TCP over the veth
        hosts.veth_bytes()                        # {"tx": ..., "rx": ...} of A's end of the veth
                                                  # leaving: both namespaces (with their veth), the agent gone

What a rank on "host B" sees: its own network (lo and the veth, nothing else: it cannot reach
anything but host A), its own hostname, a fresh environment (the agent clears it, as an ssh
login would, so only what mpiexec's -x forwards reaches the ranks), and the same file system.
Every command has a timeout."""
import json
import os
import shutil
import signal
import subprocess
import tempfile

SUBNET = "10.231.7.0/24"                 # private, and assigned only inside the two namespaces
ADDRESSES = ("10.231.7.1", "10.231.7.2")
HOSTNAMES = ("npbert-host-a", "npbert-host-b")     # distinct: with equal ones Open MPI's han crashes
VETH = ("veth-a", "veth-b")              # created inside the namespaces: no name clash with the machine's
COMMAND_TIMEOUT = 20                     # seconds for one `ip` command

# ssh's place: called as `agent HOST COMMAND...`, runs COMMAND (a shell command line, as ssh's
# remote shell would) in HOST's namespace, under HOST's hostname (a UTS namespace of its own),
# in a fresh environment.  Anything but the two addresses is refused.
AGENT = """#!/bin/sh
# Open MPI's remote shell for two network namespaces standing in for two hosts (tests/distributed/hostpair.py)
host=$1; shift
case "$host" in
{cases}
  *) echo "agent: $host is not one of this test's two hosts" >&2; exit 255 ;;
esac
exec ip netns exec "$ns" unshare --uts env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \\
    sh -c 'printf %s "$1" > /proc/sys/kernel/hostname && eval "$2"' agent "$name" "$*"
"""


def why_not():
    """Why two hosts cannot be made here (a reason to skip), or None."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "needs root (network namespaces and a veth pair)"
    for tool, package in (("ip", "iproute2"), ("unshare", "util-linux")):
        if shutil.which(tool) is None:
            return f"needs `{tool}` ({package})"
    with tempfile.TemporaryDirectory() as directory:          # a pair made and removed: the kernel allows it
        try:
            HostPair.create(directory, tag=f"npbert-probe-{os.getpid()}").remove()
        except RuntimeError as e:
            return f"network namespaces and a veth pair cannot be made here: {e}"
    return None


def ip(*args, check=True):
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=COMMAND_TIMEOUT)
    if check and proc.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {proc.stderr.strip()}")
    return proc


class HostPair:
    """Two namespaces "<tag>-a" and "<tag>-b" (the tag holds this process's pid, so two test runs
    on one machine do not meet), the veth between them, and the agent script in `directory`."""

    def __init__(self, directory, tag=None):
        tag = tag or f"npbert-{os.getpid()}"
        self.namespaces = (f"{tag}-a", f"{tag}-b")
        self.agent = os.path.join(str(directory), "agent.sh")

    @classmethod
    def create(cls, directory, tag=None):
        hosts = cls(directory, tag)
        try:
            hosts._build()
        except BaseException:
            hosts.remove()
            raise
        return hosts

    def _build(self):
        a, b = self.namespaces
        for ns in (a, b):
            ip("netns", "add", ns)
        ip("link", "add", VETH[0], "netns", a, "type", "veth", "peer", "name", VETH[1], "netns", b)
        for ns, dev, address in zip(self.namespaces, VETH, ADDRESSES):
            ip("-n", ns, "addr", "add", f"{address}/24", "dev", dev)
            ip("-n", ns, "link", "set", "lo", "up")
            ip("-n", ns, "link", "set", dev, "up")
        cases = "\n".join(f"  {address}) ns={ns}; name={name} ;;"
                          for address, ns, name in zip(ADDRESSES, self.namespaces, HOSTNAMES))
        with open(self.agent, "w") as f:
            f.write(AGENT.format(cases=cases))
        os.chmod(self.agent, 0o755)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()

    def remove(self):
        """End what still runs inside the namespaces (a run that timed out: a prted on host B),
        delete them (their veth ends go with them) and the agent.  Safe to call twice."""
        for ns in self.namespaces:
            listed = ip("netns", "pids", ns, check=False)
            for pid in listed.stdout.split() if listed.returncode == 0 else []:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except ProcessLookupError:
                    pass
            ip("netns", "delete", ns, check=False)
        if os.path.exists(self.agent):
            os.remove(self.agent)

    def exists(self):
        listed = ip("netns", "list").stdout.split()
        return any(ns in listed for ns in self.namespaces)

    # -- what mpiexec needs ----------------------------------------------------------------------
    def mpiexec_prefix(self):
        """Run mpiexec on host A: in its namespace, under its hostname."""
        return ["ip", "netns", "exec", self.namespaces[0], "unshare", "--uts", "sh", "-c",
                'printf %s "$1" > /proc/sys/kernel/hostname && shift && exec "$@"', "sh", HOSTNAMES[0]]

    def mpiexec_options(self, ranks_per_host=1):
        """One rank on each host, started on B through the agent, not bound to a core (a rank alone
        on its host takes every core of it: docs/data_parallel.md); MPI's messages over TCP on the
        veth's subnet (Open MPI's btl), and so is the launcher's own traffic (PRTE's oob)."""
        return ["--host", ",".join(f"{address}:{ranks_per_host}" for address in ADDRESSES), "--bind-to", "none",
                "--prtemca", "plm_ssh_agent", self.agent, "--prtemca", "oob_tcp_if_include", SUBNET,
                "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", SUBNET, "-x", "PYTHONPATH"]

    def veth_bytes(self):
        """{"tx": bytes sent, "rx": bytes received} by host A's end of the veth, from the kernel's
        counters (`ip -s -j link`, as /sys/class/net/<dev>/statistics inside the namespace)."""
        shown = json.loads(ip("-n", self.namespaces[0], "-s", "-j", "link", "show", "dev", VETH[0]).stdout)
        stats = shown[0]["stats64"]
        return {"tx": stats["tx"]["bytes"], "rx": stats["rx"]["bytes"]}
