"""scripts/slurm-local.sh never touches a Slurm it did not make, against the real
daemons: a system's /etc/slurm left byte-identical and a stale state folder of another
cluster name in the system's StateSaveLocation not in the way; a start that fails half-way
(an occupied port; a SIGTERM) stops every daemon it began and says why; a slurmctld the
script did not start gives exit 3, naming it. The daemons listen on loopback only
unless `start --listen-all`, and a start that cannot keep them there refuses (exit 2).

The private folder is the script's default (/var/lib/slurm-local), the one CI and the other
`slurm` tests use: these tests stop the cluster; the next `cluster()` starts it again.
"""

from __future__ import annotations

import ipaddress
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from slurm_cluster import (
    SCRIPT,
    node,
    skip_or_fail,
    slurm,
    slurm_conf,
    wait_until,
    why_no_cluster,
)

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

SYSTEM_FILES = {  # what a machine with its own (stopped) Slurm holds; made where missing
    Path("/etc/slurm/slurm.conf"): "# a system cluster's config\nClusterName=trial\n"
                                   "SlurmctldHost=elsewhere\nStateSaveLocation=/var/spool/slurmctld\n",
    Path("/etc/slurm/slurmdbd.conf"): "# a system cluster's slurmdbd config\nDbdHost=elsewhere\n",
    Path("/var/spool/slurmctld/clustername"): "trial\n",
}
DAEMONS = ("munged", "mariadbd", "slurmdbd", "slurmctld", "slurmd")
# and what they start: slurmctld's script helper, a job's step daemon
CHILDREN = ("slurmscriptd", "slurmstepd")


def script(*argv: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([str(SCRIPT), *argv], capture_output=True, text=True,
                          timeout=timeout)


def wait_for_job(job: str) -> None:
    """The job completed and sacct (slurmdbd, MariaDB) has it: the cluster works."""
    wait_until(lambda: "COMPLETED" in slurm("sacct", "-n", "-X", "-j", job, "-o", "State"),
               60, f"job {job} COMPLETED in sacct")


def private_folder() -> Path:
    return Path(os.environ.get("SLURM_LOCAL_DIR", "/var/lib/slurm-local"))


def daemons_of(folder: Path) -> dict[int, str]:
    """{pid: command line} of the Slurm, munge and MariaDB processes running on the folder:
    started with its config in their environment (SLURM_CONF) or on their command line."""
    found = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if (proc / "comm").read_text().strip() not in DAEMONS + CHILDREN:
                continue
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            env = (proc / "environ").read_bytes().split(b"\0")
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        conf = f"SLURM_CONF={folder}/etc/slurm.conf".encode()
        if state != "Z" and (str(folder) in cmd or conf in env):
            found[int(proc.name)] = cmd
    return found


def root_and_packages() -> None:
    """Skip (fail in CI) where the script cannot start daemons here."""
    skip_or_fail(why_no_cluster())


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file below the folder: its bytes and mtime (ns)."""
    return {str(p): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


def free_ports(count: int) -> int:
    """A base port P with P .. P+count-1 all free (none listening)."""
    for base in range(21000, 30000, 10):
        socks = []
        try:
            for port in range(base, base + count):
                s = socket.socket()
                socks.append(s)
                s.bind(("0.0.0.0", port))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise AssertionError("no block of free ports from 21000 to 30000")


@pytest.fixture
def system_slurm_files() -> Iterator[dict[Path, tuple[bytes, int]]]:
    """The system's Slurm files (made where missing, removed again after)."""
    made: list[Path] = []  # files and folders, in the order made
    for path, text in SYSTEM_FILES.items():
        if not path.exists():
            missing = [d for d in reversed(path.parents) if not d.exists()]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            made += [*missing, path]
    try:
        yield {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in SYSTEM_FILES}
    finally:
        for p in reversed(made):
            p.rmdir() if p.is_dir() else p.unlink()


def test_start_leaves_the_system_slurm_alone(system_slurm_files):
    """The start wrote /etc/slurm/slurm.conf and slurmdbd.conf, and
    slurmctld refused the system's StateSaveLocation of cluster `trial`."""
    root_and_packages()
    assert script("stop").returncode == 0
    etc_before = snapshot(Path("/etc/slurm"))
    spool_before = snapshot(Path("/var/spool/slurmctld"))
    p = script("start", "--accounting")
    assert p.returncode == 0, p.stderr
    conf = slurm_conf()
    folder = private_folder()
    assert conf == str(folder / "etc" / "slurm.conf"), conf
    assert f"export SLURM_CONF={conf}" in p.stdout, p.stdout
    os.environ["SLURM_CONF"] = conf
    # the daemons run on the private config, and the cluster is ours: its name, its state
    cmds = daemons_of(folder)
    for name in DAEMONS:
        assert any(name in c for c in cmds.values()), (name, cmds)
    assert all(f"-f {conf}" in c for c in cmds.values() if "slurmctld -D" in c or "slurmd -D" in c)
    assert (folder / "state" / "slurmctld" / "clustername").read_text().strip() == "local"
    assert "ClusterName             = local" in slurm("scontrol", "show", "config")
    assert slurm("sinfo", "-h", "-n", node(), "-o", "%t").strip() in ("idle", "mix")
    job = slurm("sbatch", "--parsable", "--wait", "-o", "/dev/null", "--wrap", "true").strip()
    wait_until(lambda: job in slurm("sacct", "-n", "-X", "-o", "JobID"), 30,
               f"job {job} in sacct")
    for path, (data, mtime) in system_slurm_files.items():
        assert path.read_bytes() == data and path.stat().st_mtime_ns == mtime, path
    assert snapshot(Path("/etc/slurm")) == etc_before
    assert snapshot(Path("/var/spool/slurmctld")) == spool_before


def test_a_failed_start_stops_what_it_began():
    """A start that failed at slurmctld left slurmdbd, munged and MariaDB
    running. Here slurmd's port is taken (the last daemon), then a SIGTERM arrives while
    MariaDB starts: each time nothing of ours is left, and the first says why."""
    root_and_packages()
    assert script("stop").returncode == 0
    folder = private_folder()
    assert daemons_of(folder) == {}
    base = free_ports(4)
    taker = socket.socket()
    taker.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    taker.bind(("0.0.0.0", base + 1))
    taker.listen()
    try:
        p = script("start", "--accounting", "--port-base", str(base))
    finally:
        taker.close()
    assert p.returncode == 1, p.stderr
    assert f"start failed: node {node()} is" in p.stderr, p.stderr
    assert f"port {base + 1} is held by" in p.stderr, p.stderr
    assert "Address already in use" in p.stderr, p.stderr  # slurmd's own log line
    assert "stopped what this start began: slurmd slurmctld slurmdbd mariadbd munged" \
        in p.stderr, p.stderr
    assert daemons_of(folder) == {}
    assert script("status").returncode == 1

    start = subprocess.Popen([str(SCRIPT), "start", "--accounting"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: (folder / "run" / "mariadbd.pid").exists(), 60, "MariaDB starting")
        start.send_signal(signal.SIGTERM)
        _, err = start.communicate(timeout=120)
    finally:
        if start.poll() is None:
            start.kill()
    assert start.returncode == 143, err
    assert "stopped what this start began: " in err and "mariadbd munged" in err, err
    assert daemons_of(folder) == {}


def test_refuses_to_start_beside_a_slurmctld_it_did_not_start(tmp_path):
    """A system's slurmctld (here: a real one on a config and state of its own) is running:
    exit 3, naming its PID; it keeps running; nothing of ours was started."""
    root_and_packages()
    assert script("stop").returncode == 0
    base = free_ports(2)
    conf = tmp_path / "slurm.conf"
    conf.write_text(f"""\
ClusterName=trial
SlurmctldHost={node()}
SlurmctldPort={base}
SlurmdPort={base + 1}
SlurmUser=root
AuthType=auth/munge
StateSaveLocation={tmp_path / 'state'}
SlurmdSpoolDir={tmp_path / 'spool'}
SlurmctldPidFile={tmp_path / 'slurmctld.pid'}
SlurmctldLogFile={tmp_path / 'slurmctld.log'}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MailProg=/bin/true
NodeName={node()} CPUs=1 State=UNKNOWN
PartitionName=p Nodes={node()} Default=YES State=UP
""")
    (tmp_path / "state").mkdir()
    env = {k: v for k, v in os.environ.items() if k != "SLURM_CONF"}  # not ours
    system = subprocess.Popen(["/usr/sbin/slurmctld", "-D", "-f", str(conf)], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: Path(f"/proc/{system.pid}/comm").read_text().strip()
                   == "slurmctld", 30, "the system's slurmctld")
        time.sleep(0.5)
        assert system.poll() is None, (tmp_path / "slurmctld.log").read_text()
        p = script("start")
        assert p.returncode == 3, p.stderr
        assert f"slurmctld PID {system.pid} " in p.stderr, p.stderr
        assert "was not started by this script" in p.stderr, p.stderr
        assert system.poll() is None  # left alone
        assert daemons_of(private_folder()) == {}
    finally:
        system.terminate()
        system.wait(timeout=60)


# ------------------------------------------------------------------ loopback only

def _address(hex_addr: str) -> str:
    """/proc/net/tcp{,6}'s local address (host-order hex) as an IP address."""
    raw = bytes.fromhex(hex_addr)
    if len(raw) == 4:
        return socket.inet_ntop(socket.AF_INET, raw[::-1])
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
    return socket.inet_ntop(socket.AF_INET6, words)


def listening(folder: Path) -> dict[str, set[str]]:
    """{daemon name: {"ADDRESS:PORT", ...}}: the TCP sockets each of the folder's daemons
    (and their children) listens on, read from /proc, not from the script."""
    inodes: dict[str, str] = {}  # socket inode: daemon name
    for pid in daemons_of(folder):
        try:
            name = Path(f"/proc/{pid}/comm").read_text().strip()
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes[target[8:-1]] = name
        except OSError:
            continue
    found: dict[str, set[str]] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            f = line.split()
            if f[3] == "0A" and f[9] in inodes:  # LISTEN
                addr, port = f[1].split(":")
                found.setdefault(inodes[f[9]], set()).add(f"{_address(addr)}:{int(port, 16)}")
    return found


def beyond_loopback(sockets: dict[str, set[str]]) -> dict[str, set[str]]:
    """Those of the sockets whose address is not a loopback one, by daemon."""
    def loopback(a: str) -> bool:
        ip = ipaddress.ip_address(a.rpartition(":")[0])
        mapped = getattr(ip, "ipv4_mapped", None)
        return (mapped or ip).is_loopback
    return {n: wide for n, s in sockets.items() if (wide := {a for a in s if not loopback(a)})}


def status_lines() -> tuple[str, str]:
    """`status`'s "listening on" comment, and SLURM_CONF after a shell evals its output."""
    p = script("status")
    assert p.returncode == 0, p.stdout
    said = next(x for x in p.stdout.splitlines() if x.startswith("# slurm-local: listening on "))
    shell = subprocess.run(["bash", "-c", f'eval "$({SCRIPT} status)" && echo "$SLURM_CONF"'],
                           capture_output=True, text=True, timeout=60)
    assert shell.returncode == 0 and shell.stderr == "", shell
    return said, shell.stdout.strip()


@pytest.fixture
def stop_after() -> Iterator[None]:
    """No daemon of the cluster left running after the test (the next cluster() starts it)."""
    try:
        yield
    finally:
        assert script("stop").returncode == 0


def test_listens_on_loopback_only(stop_after, tmp_path):
    """slurmctld and slurmd listened on 0.0.0.0. Without and with accounting every
    daemon's socket is on 127.0.0.1 and status says so, also where this machine's name
    resolves to another address (Slurm binds to what the name resolves to: here a hosts file
    maps it to a TEST-NET address no interface has) and a job still runs."""
    root_and_packages()
    assert script("stop").returncode == 0
    folder = private_folder()
    hosts = tmp_path / "hosts"
    hosts.write_text(f"127.0.0.1 localhost\n203.0.113.7 {node()}\n")
    p = subprocess.run(["unshare", "--mount", "sh", "-c",
                        'mount --bind "$0" /etc/hosts && exec "$@"', str(hosts),
                        str(SCRIPT), "start"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    ports = (folder / "etc" / "ports").read_text().split()
    got = listening(folder)
    assert got == {"slurmctld": {f"127.0.0.1:{ports[0]}"},
                   "slurmd": {f"127.0.0.1:{ports[1]}"}}, got
    said, conf = status_lines()
    assert said == (f"# slurm-local: listening on 127.0.0.1:{ports[0]} (slurmctld), "
                    f"127.0.0.1:{ports[1]} (slurmd)"), said
    assert conf == str(folder / "etc" / "slurm.conf")

    p = script("start", "--accounting")
    assert p.returncode == 0, p.stderr
    os.environ["SLURM_CONF"] = slurm_conf()
    got = listening(folder)
    assert set(got) == {"slurmctld", "slurmd", "slurmdbd", "mariadbd"}, got
    assert beyond_loopback(got) == {}, got
    assert "0.0.0.0" not in status_lines()[0]
    wait_for_job(slurm("sbatch", "--parsable", "-o", "/dev/null", "--wrap", "true").strip())


def test_listen_all_listens_on_every_interface(stop_after):
    """`start --listen-all` is the way to let other machines in: every daemon, MariaDB too,
    listens on 0.0.0.0, and status says so. A start without it then restarts them all,
    the database included, on loopback."""
    root_and_packages()
    p = script("start", "--accounting", "--listen-all")
    assert p.returncode == 0, p.stderr
    os.environ["SLURM_CONF"] = slurm_conf()
    got = listening(private_folder())
    assert set(beyond_loopback(got)) == {"slurmctld", "slurmd", "slurmdbd", "mariadbd"}, got
    assert all(a.startswith("0.0.0.0:") for s in got.values() for a in s), got
    assert status_lines()[0].count("0.0.0.0:") == 4
    wait_for_job(slurm("sbatch", "--parsable", "-o", "/dev/null", "--wrap", "true").strip())

    p = script("start", "--accounting")
    assert p.returncode == 0, p.stderr
    got = listening(private_folder())
    assert set(got) == {"slurmctld", "slurmd", "slurmdbd", "mariadbd"}, got
    assert beyond_loopback(got) == {}, got


def test_refuses_where_it_cannot_keep_to_loopback(stop_after, tmp_path):
    """Exit 2 and why, nothing left running: where no private /etc/hosts can be had for the
    daemons (unshare refused), and where a daemon listens beyond loopback all the same
    (SLURM_LOCAL_NO_BIND=1 leaves the binding out of the config, as a Slurm that ignored
    it would run)."""
    root_and_packages()
    assert script("stop").returncode == 0
    folder = private_folder()
    fake = tmp_path / "unshare"
    fake.write_text("#!/bin/sh\necho 'unshare: Operation not permitted' >&2\nexit 1\n")
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"}
    p = subprocess.run([str(SCRIPT), "start"], capture_output=True, text=True, env=env,
                       timeout=300)
    assert p.returncode == 2, p.stderr
    assert "cannot keep the cluster on loopback" in p.stderr, p.stderr
    assert "unshare: Operation not permitted" in p.stderr and "--listen-all" in p.stderr
    assert daemons_of(folder) == {}

    env = {**os.environ, "SLURM_LOCAL_NO_BIND": "1"}
    p = subprocess.run([str(SCRIPT), "start"], capture_output=True, text=True, env=env,
                       timeout=300)
    assert p.returncode == 2, p.stderr
    assert "slurmctld listens on 0.0.0.0:" in p.stderr, p.stderr
    assert "stopped what this start began: slurmctld munged" in p.stderr, p.stderr
    assert daemons_of(folder) == {}
    assert script("status").returncode == 1
