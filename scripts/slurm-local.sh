#!/usr/bin/env bash
# A real single-node Slurm cluster on localhost, for the `slurm`-marked tests and for
# trying `harness run --backend slurm` by hand. Needs root (it starts daemons and writes
# /etc/slurm); installs Debian's slurm-wlm and munge (plus slurmdbd and MariaDB with
# --accounting) when they are missing. No systemd: the daemons are started directly and
# stopped by the PIDs this script recorded.
#
#   scripts/slurm-local.sh start [--accounting] [--cpus N]   bring it up (idempotent);
#       --accounting: also slurmdbd + MariaDB, so that `sacct` works. --cpus N: declare N
#       CPUs (and 2000 MB each) instead of this machine's, to run more jobs at once than it
#       has cores (tests whose jobs mostly sleep). Starting in another mode than the one
#       running restarts slurmctld and slurmd (and starts or leaves the database).
#   scripts/slurm-local.sh stop                   stop every daemon it started
#   scripts/slurm-local.sh status                 print mode and node state; exit 0 if up
#
# Exit codes: 0 ok, 1 could not start, 3 cannot run here (not root, no apt-get).
set -euo pipefail

STATE=/run/slurm-local          # PID files of what this script started, and the mode
CONF=/etc/slurm/slurm.conf
DBD_CONF=/etc/slurm/slurmdbd.conf
HOST=$(hostname)
LOG=/var/log/slurm

die() { echo "slurm-local: $*" >&2; exit "${2:-1}"; }
say() { echo "slurm-local: $*" >&2; }

alive() { [ -f "$STATE/$1.pid" ] && kill -0 "$(cat "$STATE/$1.pid")" 2>/dev/null; }

# Wait up to $2 seconds for the command $1 to succeed.
wait_for() {
  local cmd=$1 limit=$2 t=0
  while ! eval "$cmd" >/dev/null 2>&1; do
    sleep 0.2; t=$((t + 1))
    if [ "$t" -ge $((limit * 5)) ]; then return 1; fi
  done
  return 0
}

stop_pid() {  # stop_pid NAME: TERM the recorded PID, wait up to 20 s, then KILL it
  local name=$1 pid
  [ -f "$STATE/$name.pid" ] || return 0
  pid=$(cat "$STATE/$name.pid")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    wait_for "! kill -0 $pid" 20 || kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$STATE/$name.pid"
}

install_packages() {
  local want=(slurm-wlm munge)
  [ "$1" = yes ] && want+=(slurmdbd mariadb-server)
  local missing=()
  command -v slurmctld >/dev/null || missing+=(slurm-wlm)
  command -v munged >/dev/null || missing+=(munge)
  if [ "$1" = yes ]; then
    command -v slurmdbd >/dev/null || missing+=(slurmdbd)
    command -v mariadbd >/dev/null || missing+=(mariadb-server)
  fi
  [ ${#missing[@]} -eq 0 ] && return 0
  command -v apt-get >/dev/null || die "missing ${missing[*]} and no apt-get to install them" 3
  say "installing ${missing[*]}"
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null
}

write_slurm_conf() {
  local accounting=$1 cpus=$2 mem
  mem=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 512 ))
  if [ "$cpus" != "$(nproc)" ]; then
    mem=$((cpus * 2000))
    echo "SlurmdParameters=config_overrides" > /etc/slurm/slurm-local-overrides.conf
  else
    echo "# slurmd takes CPUs and memory from the machine" > /etc/slurm/slurm-local-overrides.conf
  fi
  mkdir -p /etc/slurm
  cat > "$CONF" <<EOF
# Written by scripts/slurm-local.sh: a one-node cluster on this machine.
ClusterName=local
SlurmctldHost=$HOST
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$LOG/slurmctld.log
SlurmdLogFile=$LOG/slurmd.log
# No systemd or cgroup manager on these machines: track job processes by parent PID.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# Without it a job that gives no --mem takes the node's whole memory, one job at a time.
DefMemPerCPU=2000
JobAcctGatherType=jobacct_gather/none
ReturnToService=2
SchedulerType=sched/backfill
# Seconds between a job's SIGTERM (scancel, time limit, requeue) and its SIGKILL.
KillWait=30
MinJobAge=300
# --cpus N declares more than the machine has: slurmd then takes the figures from here.
Include /etc/slurm/slurm-local-overrides.conf
NodeName=$HOST CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
  if [ "$accounting" = yes ]; then
    cat >> "$CONF" <<EOF
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
EOF
  fi
}

start_munge() {
  [ -s /etc/munge/munge.key ] || {
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
    chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key
  }
  mkdir -p /run/munge; chown munge:munge /run/munge
  alive munged && return 0
  runuser -u munge -- /usr/sbin/munged --pid-file=/run/munge/munged.pid \
    || die "munged did not start"
  wait_for "[ -s /run/munge/munged.pid ]" 10 || die "munged wrote no PID file"
  cp /run/munge/munged.pid "$STATE/munged.pid"
}

start_database() {
  if ! alive mariadbd; then
    mkdir -p /run/mysqld; chown mysql:mysql /run/mysqld
    [ -d /var/lib/mysql/mysql ] || mariadb-install-db --user=mysql >/dev/null 2>&1
    /usr/sbin/mariadbd --user=mysql --bind-address=127.0.0.1 \
      --pid-file=/run/mysqld/slurm-local.pid >"$LOG/mariadb.log" 2>&1 &
    echo $! > "$STATE/mariadbd.pid"
    wait_for "mysqladmin ping" 30 || die "MariaDB did not answer (see $LOG/mariadb.log)"
  fi
  mysql -e "CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'slurm-local';
              GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost'; FLUSH PRIVILEGES;"
  if ! alive slurmdbd; then
    cat > "$DBD_CONF" <<EOF
AuthType=auth/munge
DbdHost=localhost
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=slurm-local
StorageLoc=slurm_acct_db
PidFile=$STATE/slurmdbd.pid
LogFile=$LOG/slurmdbd.log
EOF
    chmod 600 "$DBD_CONF"
    /usr/sbin/slurmdbd || die "slurmdbd did not start (see $LOG/slurmdbd.log)"
    wait_for "sacctmgr -n list cluster" 90 || die "slurmdbd did not answer"
    sacctmgr -i add cluster local >/dev/null 2>&1 || true
  fi
}

node_state() { sinfo -h -n "$HOST" -o %t 2>/dev/null | head -1; }

start() {
  local accounting=no cpus
  cpus=$(nproc)
  while [ $# -gt 0 ]; do
    case "$1" in
      --accounting) accounting=yes; shift ;;
      --cpus) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || die "--cpus wants a positive integer, got '${2:-}'" 2
              cpus=$2; shift 2 ;;
      *) die "unknown option '$1'; valid: --accounting, --cpus N" 2 ;;
    esac
  done
  local mode="accounting=$accounting cpus=$cpus"
  [ "$(id -u)" = 0 ] || die "needs root (starts daemons, writes /etc/slurm)" 3
  mkdir -p "$STATE" /var/spool/slurmctld /var/spool/slurmd "$LOG"
  if alive slurmctld && alive slurmd && [ "$(cat "$STATE/mode" 2>/dev/null)" = "$mode" ]; then
    resume_node; say "already up ($mode)"; return 0
  fi
  install_packages "$accounting"
  start_munge
  # slurmctld reads AccountingStorageType only at start: a mode change restarts it. The
  # conf is written before slurmdbd starts: sacctmgr, which tells when slurmdbd answers,
  # finds slurmdbd through it (with a conf of the other mode, or none on a fresh machine,
  # it never answers).
  stop_pid slurmd; stop_pid slurmctld
  write_slurm_conf "$accounting" "$cpus"
  [ "$accounting" = yes ] && start_database
  /usr/sbin/slurmctld || die "slurmctld did not start (see $LOG/slurmctld.log)"
  /usr/sbin/slurmd || die "slurmd did not start (see $LOG/slurmd.log)"
  echo "$mode" > "$STATE/mode"
  wait_for "scontrol ping | grep -q UP" 20 || die "slurmctld does not answer"
  resume_node
  wait_for '[ "$(node_state)" = idle ] || [ "$(node_state)" = mix ]' 30 \
    || die "node $HOST is $(node_state), not idle (see $LOG/slurmd.log)"
  say "up: node $HOST idle, $mode"
}

resume_node() {  # a node a test drained (or that came back DOWN) takes jobs again
  case "$(node_state)" in
    drain*|drng|down*) scontrol update nodename="$HOST" state=resume >/dev/null 2>&1 || true ;;
  esac
}

stop() {
  [ "$(id -u)" = 0 ] || die "needs root" 3
  stop_pid slurmd; stop_pid slurmctld; stop_pid slurmdbd; stop_pid mariadbd; stop_pid munged
  rm -f "$STATE/mode"
  say "stopped"
}

status() {
  if alive slurmctld && alive slurmd; then
    echo "up: node $HOST $(node_state), $(cat "$STATE/mode" 2>/dev/null)"
    return 0
  fi
  echo "down"; return 1
}

case "${1:-}" in
  start) shift; start "$@" ;;
  stop) stop ;;
  status) status ;;
  *) echo "usage: $0 start [--accounting] [--cpus N] | stop | status" >&2; exit 2 ;;
esac
