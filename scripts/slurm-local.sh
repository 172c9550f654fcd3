#!/usr/bin/env bash
# A single-node Slurm cluster on this machine, for tests/slurm.rs (and CI): Debian's slurm-wlm
# and munge, as root. Installs them if missing (apt), writes a munge key and a slurm.conf naming
# this host with its CPUs and memory, and starts munged, slurmctld and slurmd. Idempotent: a
# cluster already answering `sinfo` is left as it is. No cgroup confinement (proctrack/linuxproc,
# task/none; Slurm 22.05 has no `CgroupPlugin=disabled`, so cgroup.conf is left to its default).
#
#   sudo bash scripts/slurm-local.sh        # then: sinfo; the tests run against it
set -euo pipefail

if [ "$(id -u)" -ne 0 ]; then
  echo "slurm-local.sh: run as root (it installs packages and starts daemons)" >&2
  exit 1
fi

if ! command -v slurmctld >/dev/null 2>&1 || ! command -v munged >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null
fi

if sinfo -h >/dev/null 2>&1 && [ "$(sinfo -h -o %t | head -1)" = "idle" ]; then
  echo "slurm-local.sh: a Slurm cluster already answers:"
  sinfo
  exit 0
fi

host=$(hostname -s)
cpus=$(nproc)
# Slurm refuses a node that reports less memory than slurm.conf says: leave room.
mem_mb=$(( $(awk '/^MemTotal:/ {print $2}' /proc/meminfo) / 1024 * 9 / 10 ))

# munge: a key only root and munge read, and the daemon.
install -d -o munge -g munge -m 0700 /etc/munge /var/lib/munge /var/log/munge
install -d -o munge -g munge -m 0755 /run/munge
if [ ! -s /etc/munge/munge.key ]; then
  dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key status=none
fi
chown munge:munge /etc/munge/munge.key
chmod 0400 /etc/munge/munge.key
if ! pgrep -x munged >/dev/null; then
  runuser -u munge -- /usr/sbin/munged
fi

install -d /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm
cat > /etc/slurm/slurm.conf <<EOF
# Written by kbench's scripts/slurm-local.sh: one node, this host.
ClusterName=kbench-local
SlurmctldHost=${host}
SlurmUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
MinJobAge=300
KillWait=5
NodeName=${host} CPUs=${cpus} RealMemory=${mem_mb} State=UNKNOWN
PartitionName=debug Nodes=${host} Default=YES MaxTime=INFINITE State=UP
EOF

pgrep -x slurmctld >/dev/null || /usr/sbin/slurmctld -c
pgrep -x slurmd >/dev/null || /usr/sbin/slurmd -c

# Wait (up to a minute) for the node to come up idle.
for _ in $(seq 60); do
  if [ "$(sinfo -h -o %t 2>/dev/null | head -1)" = "idle" ]; then
    sinfo
    exit 0
  fi
  sleep 1
done
echo "slurm-local.sh: the node did not come up; see /var/log/slurm/" >&2
sinfo >&2 || true
exit 1
