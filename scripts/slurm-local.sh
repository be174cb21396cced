#!/usr/bin/env bash
# A real single-node Slurm cluster on localhost, for the `slurm`-marked tests and for
# trying `harness run --backend slurm` by hand. Needs root (it starts daemons); installs
# Debian's slurm-wlm and munge (plus slurmdbd and MariaDB with --accounting) when they are
# missing. No systemd: the daemons are started directly and stopped by the PIDs this
# script recorded.
#
# It never touches a Slurm it did not make. Everything it makes lives in ONE private
# folder, $SLURM_LOCAL_DIR (default /var/lib/slurm-local): the config (etc/; the daemons
# read it through -f and SLURM_CONF, never /etc/slurm), the state and spool folders
# (state/), the logs (log/), the PID files (run/), its own munged's socket (munge/; the
# system's key /etc/munge/munge.key is only read, and a private key is made there only
# when the system has none) and MariaDB's data directory and socket (db/). Its ports are
# free ones (never Slurm's defaults 6817-6819). It refuses (exit 3) to start beside a
# slurmctld, slurmd or slurmdbd that it did not start.
#
#   scripts/slurm-local.sh start [--accounting] [--cpus N] [--port-base P] [--listen-all]
#       bring it up (idempotent), listening on 127.0.0.1 only; --listen-all: on every
#       interface (0.0.0.0), for when other machines should reach it. --accounting: also
#       slurmdbd + MariaDB, so that `sacct` works. --cpus N: declare N CPUs (and 2000 MB
#       each) instead of this machine's, to run more jobs at once than it has cores (tests
#       whose jobs mostly sleep). Starting in another mode than the one running restarts
#       slurmctld and slurmd (and starts or leaves the database; restarts it where
#       --listen-all changed). --port-base P: slurmctld P, slurmd P+1, slurmdbd P+2,
#       MariaDB P+3 exactly (default: free ones from 16817 up). A start that fails stops
#       what it began and prints the log lines that say why.
#   scripts/slurm-local.sh status    prints `export SLURM_CONF=...` (eval it: sbatch,
#       squeue, scancel, sacct and `harness run --backend slurm` then use this cluster)
#       and, as comments, the node's state and the addresses its daemons listen on;
#       exit 0 if up, 1 if down
#   scripts/slurm-local.sh stop      stop every daemon it started
#   scripts/slurm-local.sh remove    stop, then delete the private folder
#
# Exit codes: 0 ok, 1 could not start, 2 bad arguments or cannot keep the cluster on
# loopback (without --listen-all), 3 cannot run here (not root, no apt-get for missing
# packages, another Slurm's daemon running).
set -euo pipefail

DIR=${SLURM_LOCAL_DIR:-/var/lib/slurm-local}
ETC=$DIR/etc RUN=$DIR/run LOG=$DIR/log STATE=$DIR/state MUNGE=$DIR/munge DB=$DIR/db
CONF=$ETC/slurm.conf
export SLURM_CONF=$CONF         # every Slurm command below talks to this cluster only
HOST=$(hostname)
MARK=$DIR/.slurm-local          # says the folder is this script's (remove checks it)
SYSTEM_PORTS="6817 6818 6819"   # a system cluster's defaults: never ours
DEFAULT_PORTS="16817 16818 16819 16820"
ROLES=(slurmctld slurmd slurmdbd mariadbd)
LISTEN=loopback                 # where the daemons listen: loopback, or all (--listen-all)

exec 8>&2  # the caller's stderr: a trap may run while a command's stderr is elsewhere
say() { echo "slurm-local: $*" >&8; }
die() { say "$1"; exit "${2:-1}"; }

pid_of() { cat "$RUN/$1.pid" 2>/dev/null || true; }
# alive NAME: the PID recorded for NAME runs, and is NAME (not a later process given the
# same PID)
alive() {
  local pid; pid=$(pid_of "$1")
  [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$1" ] && running "$pid"
}
running() {  # running PID: exists and is not a zombie (an exited child not yet reaped)
  local st; [ -n "$1" ] || return 1; st=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) && [ -n "$st" ] && [ "$st" != Z ]
}

# Wait up to $2 seconds (wall clock) for the command $1 to succeed; give up early once the
# daemon $3 (if given) has exited. A command that can hang has its own `timeout`.
wait_for() {
  local cmd=$1 limit=$2 daemon=${3:-} until=$((SECONDS + $2))
  while ! eval "$cmd" >/dev/null 2>&1; do
    # (its PID, not its name: a daemon just launched may not have exec'd itself yet)
    if [ -n "$daemon" ] && ! running "$(pid_of "$daemon")"; then return 1; fi
    [ "$SECONDS" -lt "$until" ] || return 1
    sleep 0.2
  done
}

stop_pid() {  # stop_pid NAME: TERM the recorded PID, wait up to 20 s, then KILL it
  local name=$1 pid
  pid=$(pid_of "$name")
  if alive "$name"; then
    kill -TERM "$pid" 2>/dev/null || true
    wait_for "! running $pid" 20 || kill -KILL "$pid" 2>/dev/null || true
    wait_for "! running $pid" 5 || true
  fi
  rm -f "$RUN/$name.pid"
}

# ------------------------------------------------------------------ another Slurm here?

refuse_foreign_daemons() {  # exit 3 naming any Slurm daemon whose PID we did not record
  local f pid name ours
  for f in /proc/[0-9]*/comm; do
    name=$(cat "$f" 2>/dev/null) || continue
    case "$name" in slurmctld|slurmd|slurmdbd) ;; *) continue ;; esac
    pid=${f#/proc/}; pid=${pid%/comm}
    ours=$(pid_of "$name")
    [ "$pid" = "$ours" ] && continue
    running "$pid" || continue  # a stopped daemon's zombie, not yet reaped by init
    die "$name PID $pid ($(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | cut -c1-120)) is \
running and was not started by this script (its PIDs are in $RUN): another Slurm runs on \
this machine. Not starting a second one beside it: use that cluster, or stop it first." 3
  done
}

# ------------------------------------------------------------------ ports

listening() {  # listening PORT: is a TCP socket of this machine listening on it?
  local hex
  hex=$(printf ':%04X' "$1")
  awk -v p="$hex" 'NR > 1 && $4 == "0A" && substr($2, length($2) - 4) == p {f = 1}
                   END {exit !f}' /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

holder() {  # holder PORT: who listens on it, in words (best effort)
  local who=""
  command -v ss >/dev/null && who=$(ss -Htlnp "sport = :$1" 2>/dev/null | grep -o 'users:.*' | head -1)
  echo "${who:-another process}"
}

# sockets_of PID: the TCP addresses PID listens on, one ADDR:PORT a line (IPv6 in
# brackets). From /proc, not ss: iproute2 may be missing, and the PID picks out our
# daemon's sockets from any other process's.
sockets_of() {
  local inodes
  [ -n "$1" ] || return 0
  inodes=$(find "/proc/$1/fd" -lname 'socket:*' -printf '%l ' 2>/dev/null | tr -dc '0-9 ')
  [ -n "$inodes" ] || return 0
  awk -v inodes=" $inodes " '
    function dec(h,  i, n) { n = 0; for (i = 1; i <= length(h); i++)
                               n = n * 16 + index("0123456789ABCDEF", substr(h, i, 1)) - 1
                             return n }
    function v4(h) { return dec(substr(h, 7, 2)) "." dec(substr(h, 5, 2)) "." \
                            dec(substr(h, 3, 2)) "." dec(substr(h, 1, 2)) }
    function v6(h,  i, w, n, out) {  # four host-order 32-bit words -> network order
      n = ""; for (i = 0; i < 4; i++) { w = substr(h, 8 * i + 1, 8)
        n = n substr(w, 7, 2) substr(w, 5, 2) substr(w, 3, 2) substr(w, 1, 2) }
      if (n ~ /^0+$/) return "[::]"
      if (n ~ /^0+1$/) return "[::1]"
      if (substr(n, 1, 24) == "00000000000000000000FFFF") return "[::ffff:" v4(substr(h, 25)) "]"
      out = substr(n, 1, 4); for (i = 5; i < 32; i += 4) out = out ":" substr(n, i, 4)
      return "[" out "]" }
    FNR > 1 && $4 == "0A" && index(inodes, " " $10 " ") {
      split($2, a, ":"); print (length(a[1]) == 8 ? v4(a[1]) : v6(a[1])) ":" dec(a[2]) }
  ' /proc/net/tcp /proc/net/tcp6 2>/dev/null | sort -u
}
LOOPBACK_RX='^(127\.|\[::1\]|\[::ffff:127\.)'

# bound_as NAME: "loopback" when every socket NAME listens on is a loopback address,
# "all" when one is not
bound_as() {
  if sockets_of "$(pid_of "$1")" | grep -qvE "$LOOPBACK_RX"; then echo all; else echo loopback; fi
}

# check_bound NAME: NAME listens where this start asked; a loopback-only start that got a
# wider socket stops what it began and exits 2 (binding is the only guard it has)
check_bound() {
  local wide
  [ "$LISTEN" = all ] && return 0
  wide=$(sockets_of "$(pid_of "$1")" | grep -vE "$LOOPBACK_RX" | tr '\n' ' ') || true
  [ -z "$wide" ] || fail "" "$1 listens on ${wide% }, beyond loopback: it did not bind to \
127.0.0.1 as $ETC asks, and this script has no other way to keep the cluster off other \
interfaces. Not running it; \`start --listen-all\` allows every interface." 2
}

# Slurm 22.05's daemons bind (NoInAddrAny) to what this machine's name resolves to, not
# to the address their config names (measured: slurmctld took eth0's 192.0.2.2 with
# SlurmctldHost=localhost once the name resolved there). So, loopback only, each runs in a
# mount namespace of its own whose /etc/hosts ($ETC/hosts) maps the name to 127.0.0.1;
# the system's /etc/hosts is not touched. Into BIND_NS: that command's prefix (none with
# --listen-all); exit 2 where no namespace can be had.
BIND_NS=()
private_hosts() {
  local probe
  [ "$LISTEN" = all ] && return 0
  { echo "127.0.0.1 localhost $HOST"
    # the system's lines, less those naming this host (they would compete with the first)
    awk -v h="$HOST" '{for (i = 2; i <= NF; i++) if ($i == h || index($i, h ".") == 1) next}
                      1' /etc/hosts
  } > "$ETC/hosts"
  BIND_NS=(unshare --mount --propagation private
           sh -c 'mount --bind "$0" /etc/hosts && exec "$@"' "$ETC/hosts")
  probe=$("${BIND_NS[@]}" getent ahostsv4 "$HOST" 2>&1 | head -1) || true
  [[ "$probe" == "127.0.0.1 "* ]] || die "cannot keep the cluster on loopback: Slurm binds to \
what $HOST resolves to, and a private /etc/hosts for its daemons (unshare --mount, as root) \
failed here: ${probe:-no answer}. \`start --listen-all\` runs it on every interface." 2
}

# bind_lines LISTEN COMMENT LINE: the config lines that bind a daemon to 127.0.0.1 (none
# with --listen-all). SLURM_LOCAL_NO_BIND=1 leaves them out without saying so, as a Slurm
# that ignored them would behave: the tests' way to reach check_bound's refusal.
bind_lines() {
  if [ "$1" = all ]; then echo "# --listen-all: every interface"
  elif [ "${SLURM_LOCAL_NO_BIND:-}" = 1 ]; then echo "# (SLURM_LOCAL_NO_BIND=1: no binding)"
  else printf '%s\n%s\n' "$2" "$3"; fi
}

# The four ports (slurmctld slurmd slurmdbd mariadbd) into PORTS: those recorded by the
# last start while still free or held by our own daemon, else the next free ones.
pick_ports() {
  local base=$1 recorded=() i p taken=" $SYSTEM_PORTS "
  if [ -n "$base" ]; then
    PORTS=("$base" $((base + 1)) $((base + 2)) $((base + 3))); return 0
  fi
  # shellcheck disable=SC2207
  recorded=($(cat "$ETC/ports" 2>/dev/null || echo "$DEFAULT_PORTS"))
  [ ${#recorded[@]} -eq 4 ] || recorded=($DEFAULT_PORTS)
  PORTS=()
  for i in 0 1 2 3; do
    p=${recorded[i]}
    if ! alive "${ROLES[i]}"; then
      while listening "$p" || [[ "$taken" == *" $p "* ]]; do
        p=$((p + 4))
        [ "$p" -lt 65000 ] || die "no free port for ${ROLES[i]} from ${recorded[i]} up" 1
      done
    fi
    PORTS+=("$p"); taken+="$p "
  done
}

# ------------------------------------------------------------------ packages and folder

install_packages() {
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

make_folder() {
  [ ${#DIR} -le 60 ] || die "SLURM_LOCAL_DIR is ${#DIR} characters; at most 60 (socket paths)" 2
  if [ -e "$DIR" ] && [ ! -f "$MARK" ] && [ -n "$(ls -A "$DIR" 2>/dev/null)" ]; then
    die "$DIR exists, is not empty and was not made by this script; set SLURM_LOCAL_DIR" 2
  fi
  mkdir -p "$ETC" "$RUN" "$LOG" "$STATE/slurmctld" "$STATE/slurmd" "$MUNGE"
  chmod 755 "$DIR"
  touch "$MARK"
}

# ------------------------------------------------------------------ config

write_slurm_conf() {
  local accounting=$1 cpus=$2 listen=$3 mem bind
  mem=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 512 ))
  if [ "$cpus" != "$(nproc)" ]; then
    mem=$((cpus * 2000))
    echo "SlurmdParameters=config_overrides" > "$ETC/overrides.conf"
  else
    echo "# slurmd takes CPUs and memory from the machine" > "$ETC/overrides.conf"
  fi
  echo "${PORTS[*]}" > "$ETC/ports"
  bind=$(bind_lines "$listen" \
"# Loopback only: slurmctld and slurmd bind to 127.0.0.1 (what $HOST resolves to in their
# private /etc/hosts, $ETC/hosts), not to every interface. Not with --listen-all." \
    "CommunicationParameters=NoCtldInAddrAny,NoInAddrAny")
  cat > "$CONF" <<EOF
# Written by scripts/slurm-local.sh: a one-node cluster on this machine, all of it in
# $DIR. Use it with: export SLURM_CONF=$CONF
ClusterName=local
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=${PORTS[0]}
SlurmdPort=${PORTS[1]}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$MUNGE/munge.socket
StateSaveLocation=$STATE/slurmctld
SlurmdSpoolDir=$STATE/slurmd
SlurmctldPidFile=$RUN/slurmctld.pid
SlurmdPidFile=$RUN/slurmd.pid
SlurmctldLogFile=$LOG/slurmctld.log
SlurmdLogFile=$LOG/slurmd.log
PlugStackConfig=$ETC/plugstack.conf
MailProg=/bin/true
$bind
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
Include $ETC/overrides.conf
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
  : > "$ETC/plugstack.conf"  # none of the system's SPANK plugins
  if [ "$accounting" = yes ]; then
    cat >> "$CONF" <<EOF
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=${PORTS[2]}
# With MUNGE, the munged socket for talking to slurmdbd (AuthInfo is for the rest).
AccountingStoragePass=$MUNGE/munge.socket
EOF
  fi
}

write_dbd_conf() {
  cat > "$ETC/slurmdbd.conf" <<EOF
AuthType=auth/munge
AuthInfo=socket=$MUNGE/munge.socket
DbdHost=localhost
DbdAddr=127.0.0.1
$(bind_lines "$1" "# Loopback only: bind to 127.0.0.1 (see slurm.conf), not to every interface." \
             "CommunicationParameters=NoInAddrAny")
DbdPort=${PORTS[2]}
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=${PORTS[3]}
StorageUser=slurm
StoragePass=slurm-local
StorageLoc=slurm_acct_db
PidFile=$RUN/slurmdbd.pid
LogFile=$LOG/slurmdbd.log
EOF
  chmod 600 "$ETC/slurmdbd.conf"
}

# ------------------------------------------------------------------ starting, undoing

STARTED=()   # the daemons this start began, in order: a failure stops them in reverse
FAILED=""    # the daemon whose start failed: its log lines are printed

# launch NAME CMD...: run a daemon in the foreground of its own session (a Ctrl-C to the
# caller's terminal does not reach it), its output in log/NAME.out, its PID recorded.
launch() {
  local name=$1; shift
  setsid "$@" </dev/null >"$LOG/$name.out" 2>&1 8>&- 9>&- &
  echo $! > "$RUN/$name.pid"
  STARTED+=("$name")
}

explain() {  # explain NAME: the lines of its output since this start that say what went wrong
  local name=$1 from lines
  from=$LOG/$name.out  # a daemon in the foreground copies its log there
  [ -s "$from" ] || from=$LOG/$name.log.new
  [ -s "$from" ] || { say "  ($name wrote nothing to $LOG)"; return 0; }
  # (the MPI plugins' complaints are about MPI, which these jobs do not use)
  lines=$(grep -iE 'error|fatal|denied|in use|failed|cannot|unable' "$from" \
          | grep -vE 'mpi/pmix|MPI: Cannot create context' | tail -12 || true)
  [ -n "$lines" ] || lines=$(tail -8 "$from")
  say "  from ${from%.new}:"
  while IFS= read -r l; do echo "    $l" >&8; done <<< "$lines"
}

# The part of each log written since this start, for explain (the logs themselves grow).
mark_logs() { local f; for f in "$LOG"/*.log; do [ -f "$f" ] && stat -c %s "$f" > "$f.at"; done; true; }
cut_logs() {
  local f at
  for f in "$LOG"/*.log; do
    [ -f "$f" ] || continue
    at=$(cat "$f.at" 2>/dev/null || echo 0)
    tail -c +$((at + 1)) "$f" > "$f.new"
  done
}

fail() {  # fail NAME MESSAGE [RC]: exit RC (1) saying why (NAME's log lines, if a NAME),
  FAILED=$1  # after undoing this start
  say "start failed: $2"
  exit "${3:-1}"
}

undo() {  # the EXIT trap of `start`: on any failure, stop what this start began
  local rc=$? i names=""
  trap - EXIT INT TERM
  [ "$rc" = 0 ] && return 0
  if [ -n "$FAILED" ]; then cut_logs; explain "$FAILED"; fi
  for ((i = ${#STARTED[@]} - 1; i >= 0; i--)); do
    stop_pid "${STARTED[i]}"; names+=" ${STARTED[i]}"
  done
  rm -f "$RUN/mode" "$LOG"/*.log.new "$LOG"/*.log.at
  [ -n "$names" ] && say "stopped what this start began:$names"
  exit "$rc"
}

start_munge() {
  local key=/etc/munge/munge.key
  alive munged && return 0
  if [ ! -s "$key" ]; then  # the system has none: a private one, the system left alone
    key=$MUNGE/munge.key
    [ -s "$key" ] || dd if=/dev/urandom of="$key" bs=1024 count=1 status=none
  fi
  chown -R munge:munge "$MUNGE"
  chmod 711 "$MUNGE"  # clients (any user's sbatch) reach the socket; nothing is listable
  [ "$key" = /etc/munge/munge.key ] || chmod 400 "$key"
  touch "$LOG/munged.log"; chown munge:munge "$LOG/munged.log"
  rm -f "$MUNGE/munge.socket" "$MUNGE/munge.socket.lock"
  launch munged setpriv --reuid=munge --regid=munge --init-groups /usr/sbin/munged -F \
    --socket="$MUNGE/munge.socket" --key-file="$key" --pid-file="$MUNGE/munged.pid" \
    --log-file="$LOG/munged.log" --seed-file="$MUNGE/munged.seed"
  wait_for "munge -n --socket=$MUNGE/munge.socket | unmunge --socket=$MUNGE/munge.socket" \
    10 munged || fail munged "munged did not answer on $MUNGE/munge.socket"
}

mysql_root() { mysql --no-defaults --socket="$DB/mysqld.sock" -u root "$@"; }

start_database() {
  # bound otherwise than this start asks (the last start's --listen-all differed): restart
  if { alive mariadbd && [ "$(bound_as mariadbd)" != "$LISTEN" ]; } \
     || { alive slurmdbd && [ "$(bound_as slurmdbd)" != "$LISTEN" ]; }; then
    stop_pid slurmdbd; stop_pid mariadbd
  fi
  local bind=127.0.0.1
  [ "$LISTEN" = loopback ] || bind=0.0.0.0
  if ! alive mariadbd; then
    mkdir -p "$DB"; chown mysql:mysql "$DB"; chmod 750 "$DB"
    if [ ! -d "$DB/data/mysql" ]; then
      mariadb-install-db --no-defaults --user=mysql --datadir="$DB/data" --skip-test-db \
        --auth-root-authentication-method=socket >"$LOG/mariadb-install.out" 2>&1 \
        || { rm -rf "$DB/data"; fail mariadb-install "mariadb-install-db failed"; }
    fi
    touch "$LOG/mariadbd.log"; chown mysql:mysql "$LOG/mariadbd.log"
    launch mariadbd /usr/sbin/mariadbd --no-defaults --user=mysql --datadir="$DB/data" \
      --socket="$DB/mysqld.sock" --pid-file="$DB/mariadbd.pid" --port="${PORTS[3]}" \
      --bind-address="$bind" --log-error="$LOG/mariadbd.log" --skip-name-resolve
    wait_for "timeout 10 mysqladmin --no-defaults --socket=$DB/mysqld.sock -u root ping" 60 mariadbd \
      || fail mariadbd "MariaDB did not answer on port ${PORTS[3]}"
    check_bound mariadbd
  fi
  mysql_root -e "CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurm-local';
                 GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1'; FLUSH PRIVILEGES;" \
    || fail mariadbd "could not create MariaDB's slurm user"
  if ! alive slurmdbd; then
    write_dbd_conf "$LISTEN"
    launch slurmdbd "${BIND_NS[@]}" /usr/sbin/slurmdbd -D
    wait_for "timeout 10 sacctmgr -n list cluster" 90 slurmdbd \
      || fail slurmdbd "slurmdbd did not answer on port ${PORTS[2]}"
    check_bound slurmdbd
    sacctmgr -i add cluster local >/dev/null 2>&1 || true
  fi
}

node_state() { sinfo -h -n "$HOST" -o %t 2>/dev/null | head -1; }

resume_node() {  # a node a test drained (or that came back DOWN) takes jobs again
  case "$(node_state)" in
    drain*|drng|down*) scontrol update nodename="$HOST" state=resume >/dev/null 2>&1 || true ;;
  esac
}

start() {
  local accounting=no cpus base=""
  cpus=$(nproc)
  while [ $# -gt 0 ]; do
    case "$1" in
      --accounting) accounting=yes; shift ;;
      --listen-all) LISTEN=all; shift ;;
      --cpus) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || die "--cpus wants a positive integer, got '${2:-}'" 2
              cpus=$2; shift 2 ;;
      --port-base)
        [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] && [ "$2" -ge 1024 ] && [ "$2" -le 65000 ] \
          || die "--port-base wants a port from 1024 to 65000, got '${2:-}'" 2
        [ "$2" -gt 6819 ] || [ $(($2 + 3)) -lt 6817 ] \
          || die "--port-base $2 would use Slurm's default ports 6817-6819 (a system cluster's)" 2
        base=$2; shift 2 ;;
      *) die "unknown option '$1'; valid: --accounting, --cpus N, --port-base P, --listen-all" 2 ;;
    esac
  done
  local mode="accounting=$accounting cpus=$cpus listen=$LISTEN"
  [ "$(id -u)" = 0 ] || die "needs root (starts daemons)" 3
  make_folder
  exec 9>"$RUN/lock"; flock 9   # one start or stop at a time
  refuse_foreign_daemons
  if [ -n "$base" ] && [ -f "$ETC/ports" ] && [ "$(cat "$ETC/ports")" != "$base $((base + 1)) $((base + 2)) $((base + 3))" ] \
     && { alive slurmctld || alive slurmd || alive slurmdbd || alive mariadbd; }; then
    die "running on ports $(cat "$ETC/ports"); stop it before --port-base $base" 2
  fi
  if alive slurmctld && alive slurmd && [ "$(cat "$RUN/mode" 2>/dev/null)" = "$mode" ] \
     && { [ -z "$base" ] || [ "$(cut -d' ' -f1 "$ETC/ports")" = "$base" ]; }; then
    resume_node; say "already up ($mode)"; echo "export SLURM_CONF=$CONF"; return 0
  fi
  install_packages "$accounting"
  private_hosts
  trap undo EXIT; trap 'exit 130' INT; trap 'exit 143' TERM
  mark_logs
  start_munge
  # slurmctld reads AccountingStorageType only at start: a mode change restarts it. The
  # conf is written before slurmdbd starts: sacctmgr, which tells when slurmdbd answers,
  # finds slurmdbd through it.
  stop_pid slurmd; stop_pid slurmctld
  pick_ports "$base"
  write_slurm_conf "$accounting" "$cpus" "$LISTEN"
  [ "$accounting" = yes ] && start_database
  launch slurmctld "${BIND_NS[@]}" /usr/sbin/slurmctld -D -f "$CONF"
  wait_for "timeout 10 scontrol ping | grep -q UP" 30 slurmctld \
    || fail slurmctld "slurmctld did not answer on port ${PORTS[0]}$(port_note 0)"
  check_bound slurmctld
  launch slurmd "${BIND_NS[@]}" /usr/sbin/slurmd -D -f "$CONF"
  echo "$mode" > "$RUN/mode"
  wait_for '[ "$(node_state)" = idle ] || [ "$(node_state)" = mix ]' \
    30 slurmd || fail slurmd "node $HOST is '$(node_state)', not idle$(port_note 1)"
  check_bound slurmd
  resume_node
  trap - EXIT INT TERM
  rm -f "$LOG"/*.log.at
  say "up: node $HOST idle, $mode, ports ${PORTS[*]}, all in $DIR"
  say "listening on $(listen_summary)"
  echo "export SLURM_CONF=$CONF"
}

port_note() {  # port_note I: " (port P is held by ...)" when the daemon died and another
  local p=${PORTS[$1]}  # process listens on its port
  if ! alive "${ROLES[$1]}" && listening "$p"; then echo " (port $p is held by $(holder "$p"))"; fi
}

stop() {
  [ "$(id -u)" = 0 ] || die "needs root" 3
  [ -d "$RUN" ] || { say "nothing to stop ($DIR has no run/)"; return 0; }
  exec 9>"$RUN/lock"; flock 9
  stop_pid slurmd; stop_pid slurmctld; stop_pid slurmdbd; stop_pid mariadbd; stop_pid munged
  rm -f "$RUN/mode"
  say "stopped"
}

status() {
  if alive slurmctld && alive slurmd; then
    echo "# slurm-local: up: node $HOST $(node_state), $(cat "$RUN/mode" 2>/dev/null), ports $(cat "$ETC/ports"), all in $DIR"
    echo "# slurm-local: listening on $(listen_summary)"
    echo "export SLURM_CONF=$CONF"
    return 0
  fi
  echo "# slurm-local: down (its folder: $DIR)"; return 1
}

listen_summary() {  # "ADDR:PORT (NAME), ..." for each running daemon of ours; one line
  local name out="" a
  [ "$(id -u)" = 0 ] || { echo "(unknown: reading the daemons' sockets needs root)"; return 0; }
  for name in "${ROLES[@]}"; do
    alive "$name" || continue
    for a in $(sockets_of "$(pid_of "$name")"); do out+="${out:+, }$a ($name)"; done
  done
  echo "${out:-nothing}"
}

remove() {
  [ -e "$DIR" ] || { say "$DIR does not exist"; return 0; }
  [ -f "$MARK" ] || die "$DIR was not made by this script (no $MARK): not removing it" 2
  stop
  rm -rf "$DIR"
  say "removed $DIR"
}

case "${1:-}" in
  start) shift; start "$@" ;;
  stop) stop ;;
  status) status ;;
  remove) remove ;;
  *) echo "usage: $0 start [--accounting] [--cpus N] [--port-base P] [--listen-all] | stop |" \
          "status | remove" >&2
     exit 2 ;;
esac
