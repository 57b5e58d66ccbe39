"""A real single-node Slurm cluster (Debian's slurm-wlm) on localhost for the tests: installs the
packages if absent, keeps every state/log/socket file in one temp dir, and stops without leaving
daemons or jobs behind."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

from pipeline.core.processes import running

PACKAGES = ["slurmctld", "slurmd", "slurm-client", "munge"]


def ensure_installed() -> None:
    if all(shutil.which(b) for b in ("slurmctld", "slurmd", "sbatch", "munged")):
        return
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    cmd = [
        *sudo,
        "apt-get",
        "install",
        "-y",
        "-qq",
        "--no-install-recommends",
        "-o",
        "DPkg::Lock::Timeout=600",
        *PACKAGES,
    ]
    if subprocess.run(cmd, env=env, capture_output=True).returncode != 0:
        subprocess.run([*sudo, "apt-get", "update", "-qq"], env=env, check=True, capture_output=True)
        subprocess.run(cmd, env=env, check=True, capture_output=True)


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


class SlurmCluster:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.conf = root / "slurm.conf"
        self.jobcomp = root / "jobcomp.txt"
        self.env = {"SLURM_CONF": str(self.conf)}

    def start(self) -> SlurmCluster:
        ensure_installed()
        for port in (6817, 6818):
            if not _port_free(port):
                raise RuntimeError(f"port {port} is busy: another Slurm is running")
        r = self.root
        r.mkdir(parents=True, exist_ok=True)
        os.chmod(r, 0o755)  # munged wants every directory on its socket path searchable by all
        for d in ("state", "spool", "log", "munge"):
            (r / d).mkdir(parents=True, exist_ok=True)
        os.chmod(r / "munge", 0o755)
        key = r / "munge.key"
        key.write_bytes(os.urandom(1024))
        os.chmod(key, 0o400)
        cpus = os.cpu_count() or 1
        mem = max(1024, int(open("/proc/meminfo").read().split()[1]) // 1024 - 1024)
        # Waits cut for the tests (Slurm's defaults in brackets): a requeued job may start again cred_expire + 1 s
        # after the requeue [121 s], and the main scheduler then picks it up within sched_interval [60 s].
        self.conf.write_text(f"""ClusterName=envsim
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={r}/munge/munge.socket.2,cred_expire=10
StateSaveLocation={r}/state
SlurmdSpoolDir={r}/spool
SlurmctldPidFile={r}/slurmctld.pid
SlurmdPidFile={r}/slurmd.pid
SlurmctldLogFile={r}/log/slurmctld.log
SlurmdLogFile={r}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
MailProg=/bin/true
MinJobAge=600
SchedulerParameters=batch_sched_delay=0,sched_interval=1
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/filetxt
JobCompLoc={self.jobcomp}
NodeName=envsim-node NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={mem} State=UNKNOWN
PartitionName=cpu Nodes=envsim-node Default=YES MaxTime=INFINITE State=UP
PartitionName=closed Nodes=envsim-node MaxTime=INFINITE State=DOWN
""")
        subprocess.run(
            [
                "munged",
                "--socket",
                f"{r}/munge/munge.socket.2",
                "--key-file",
                str(key),
                "--pid-file",
                f"{r}/munged.pid",
                "--log-file",
                f"{r}/log/munged.log",
                "--seed-file",
                f"{r}/munge.seed",
            ],
            check=True,
            capture_output=True,
        )
        env = {**os.environ, **self.env}
        subprocess.run(["slurmctld", "-f", str(self.conf)], check=True, env=env, capture_output=True)
        subprocess.run(["slurmd", "-f", str(self.conf), "-N", "envsim-node"], check=True, env=env, capture_output=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            out = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, env=env).stdout.strip()
            if out == "idle":
                return self
            time.sleep(0.5)
        raise RuntimeError(
            f"the Slurm node did not become idle: {out!r}\n{(r / 'log/slurmctld.log').read_text()[-2000:]}"
        )

    def stop(self) -> None:
        env = {**os.environ, **self.env}
        subprocess.run(["scancel", "--full", "--user", "root"], env=env, capture_output=True)
        deadline = time.monotonic() + 5  # until no job is left running or completing
        while time.monotonic() < deadline:
            jobs = subprocess.run(["squeue", "-h"], env=env, capture_output=True, text=True)
            if jobs.returncode != 0 or not jobs.stdout.strip():
                break
            time.sleep(0.1)
        stopping = []  # the daemons stopped together (one after the other took seconds each)
        for name, comm in (("slurmd.pid", "slurmd"), ("slurmctld.pid", "slurmctld"), ("munged.pid", "munged")):
            pid_file = self.root / name
            if not pid_file.exists():
                continue
            pid = int(pid_file.read_text().strip() or 0)
            try:
                if Path(f"/proc/{pid}/comm").read_text().strip() == comm:
                    os.kill(pid, 15)
                    stopping.append(pid)
            except (FileNotFoundError, ProcessLookupError):
                pass
        deadline = time.monotonic() + 15
        while any(running(pid) for pid in stopping) and time.monotonic() < deadline:
            time.sleep(0.1)
        subprocess.run(["pkill", "-f", f"slurmstepd.*{self.root}"], capture_output=True)

    def daemons_left(self) -> list[str]:
        out = subprocess.run(["ps", "-eo", "pid,stat,args"], capture_output=True, text=True).stdout
        return [l for l in out.splitlines() if str(self.root) in l and not l.split()[1].startswith("Z")]
