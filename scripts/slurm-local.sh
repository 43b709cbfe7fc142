#!/usr/bin/env bash
# Sets up and runs a one-node Slurm cluster on this Debian 12 machine, for the Slurm executor's
# tests (issue 22): Debian's slurm-wlm and munge, a partition "gpu" on this host with FAKE GPUs
# (GRES gpu:4 backed by character devices made with mknod, c 1 3 as /dev/null: slurmd refuses
# plain files; no GPU is needed), select/cons_tres, and finished jobs'
# states kept in a jobcomp file that `sacct -c` reads (no slurmdbd, no database).
# Must run as root. docs/slurm-notes.md says what was tried and why this config.
#   slurm-local.sh start    install what is missing, write the config, start the daemons and
#                           wait until the node is idle (idempotent)
#   slurm-local.sh stop     cancel every job, stop slurmctld, slurmd and munged
#   slurm-local.sh status   one line: running or not, and sinfo's view of the node
#   CKPROF_SLURM_DIR   where the config, state, logs and fake devices go
#                      (default: /var/lib/ckprof-slurm-local)
#   CKPROF_SLURM_GPUS  how many fake GPUs the node has (default: 4)
set -euo pipefail

dir=${CKPROF_SLURM_DIR:-/var/lib/ckprof-slurm-local}
gpus=${CKPROF_SLURM_GPUS:-4}
conf=$dir/etc/slurm.conf
# Clients (sbatch, squeue, sacct) of every user look for /etc/slurm/slurm.conf unless SLURM_CONF
# is set; a link there lets ckprofd and the tests call them without it. An existing real file
# there is someone else's cluster: leave it alone and let them set SLURM_CONF.
etc_conf=/etc/slurm/slurm.conf
munge_pid=/run/munge/munged.pid
ctld_pid=$dir/run/slurmctld.pid
slurmd_pid=$dir/run/slurmd.pid

die() { echo "slurm-local: $*" >&2; exit 1; }

# True when the pid file names a live process.
alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

# Waits up to $2 tenths of a second for the command "$1" (a function name) to succeed.
wait_for() {
  local i
  for ((i = 0; i < $2; i++)); do
    "$1" && return 0
    sleep 0.1
  done
  return 1
}

node_idle() { sinfo -h -N -o '%T' 2>/dev/null | grep -qx idle; }
ctld_up() { scontrol ping 2>/dev/null | grep -q 'is UP'; }

install_packages() {
  local missing=() p
  for p in slurm-wlm slurm-client munge; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null 2>&1 || true   # a failing mirror may still leave usable lists
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1 ||
    die "apt-get install ${missing[*]} failed"
  installed="installed ${missing[*]}; "
}

write_config() {
  local host cpus mem i
  host=$(hostname -s)
  cpus=$(nproc)
  # Leave some memory to the machine; slurmd refuses to register a node with more than it has.
  mem=$(($(awk '/^MemTotal:/ {print int($2 / 1024)}' /proc/meminfo) * 9 / 10))
  mkdir -p "$dir"/etc "$dir"/state "$dir"/spool "$dir"/log "$dir"/run "$dir"/dev
  # The fake GPUs: gres/gpu needs File= for each to give jobs CUDA_VISIBLE_DEVICES & co, and
  # slurmd rejects a File= that is not a device node ("not a valid character or block device").
  # So each is a node of /dev/null's device (1:3): harmless if opened, and the device numbers only
  # matter to cgroup device limits, which are off here.
  for ((i = 0; i < gpus; i++)); do
    [ -c "$dir/dev/gpu$i" ] || { rm -f "$dir/dev/gpu$i"; mknod -m 666 "$dir/dev/gpu$i" c 1 3; }
  done
  cat >"$conf.new" <<EOF
# Written by scripts/slurm-local.sh: a one-node test cluster with fake GPUs. Do not edit.
ClusterName=ckprof-local
SlurmctldHost=$host(127.0.0.1)
# root, so the daemons need no chown of the state dirs and can run jobs of any user.
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$ctld_pid
SlurmdPidFile=$slurmd_pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# No systemd or cgroup delegation in containers and CI: track job processes by /proc.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
# No mail on this host; the default (/usr/bin/mail) is missing and logs an error.
MailProg=/bin/true
SchedulerType=sched/backfill
SelectType=select/cons_tres
# Cores only, not memory: with memory counted, a job without --mem gets the whole node's memory
# and the jobs run one at a time.
SelectTypeParameters=CR_Core
GresTypes=gpu
# (AccountingStorageTRES=gres/gpu would add the GPUs to the TRES lists, but needs slurmdbd.)
# Finished jobs: no slurmdbd; the jobcomp file is what 'sacct -c' reads, and 'scontrol show
# job' still knows a job for MinJobAge seconds after its end.
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/filetxt
JobCompLoc=$dir/log/jobcomp.txt
MinJobAge=600
# Quick kills: SIGTERM to SIGKILL after 2 s (default 30) on timeout and scancel.
KillWait=2
# The node stays usable after a job step fails to die or the daemons restart.
ReturnToService=2
SlurmdTimeout=60
InactiveLimit=0
MaxArraySize=10001
MaxJobCount=100000
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem Gres=gpu:$gpus State=UNKNOWN
# OverSubscribe lets more jobs than cores share the node: tests submit many short tasks.
PartitionName=gpu Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:8
EOF
  {
    echo "# Written by scripts/slurm-local.sh: fake GPUs, plain files. Do not edit."
    echo "AutoDetect=off"
    echo "Name=gpu File=$dir/dev/gpu[0-$((gpus - 1))]"
  } >"$dir/etc/gres.conf.new"
  local f changed=0
  for f in slurm.conf gres.conf; do
    if cmp -s "$dir/etc/$f.new" "$dir/etc/$f"; then
      rm -f "$dir/etc/$f.new"
    else
      mv "$dir/etc/$f.new" "$dir/etc/$f"
      changed=1
    fi
  done
  # Users' clients read slurm.conf; everything else stays root's. (sacct -c opens the jobcomp
  # file for writing, so only root can run it: ckprofd is root.)
  chmod 755 "$dir" "$dir/etc"
  chmod 644 "$dir"/etc/*.conf
  if [ -L "$etc_conf" ] || [ ! -e "$etc_conf" ]; then
    mkdir -p /etc/slurm
    ln -sfn "$conf" "$etc_conf"
    ln -sfn "$dir/etc/gres.conf" /etc/slurm/gres.conf
  fi
  return $((1 - changed))   # 0 (true) when something changed
}

start() {
  # munged (as user munge) opens /dev/null; a /dev/null that some program replaced by a regular
  # file (root's `cmd -o /dev/null` writing a temp file and renaming it) stops it cold.
  [ -c /dev/null ] || die "/dev/null is not a character device ($(stat -c %F /dev/null)); restore it: rm /dev/null && mknod -m 666 /dev/null c 1 3"
  install_packages
  local changed=0
  write_config && changed=1
  if ! alive "$munge_pid"; then
    mkdir -p /run/munge
    chown munge:munge /run/munge
    [ -s /etc/munge/munge.key ] || runuser -u munge -- mungekey --create >/dev/null
    runuser -u munge -- munged || die "munged did not start"
    did+=("munged")
  fi
  # A running cluster with a changed config gets it re-read; one that is down gets started.
  if alive "$ctld_pid" && ((changed)); then
    scontrol reconfigure >/dev/null || die "scontrol reconfigure failed"
    did+=("reconfigured")
  fi
  if ! alive "$ctld_pid"; then
    SLURM_CONF=$conf slurmctld -f "$conf" || die "slurmctld did not start (see $dir/log/slurmctld.log)"
    did+=("slurmctld")
  fi
  export SLURM_CONF=$conf
  wait_for ctld_up 100 || die "slurmctld is not answering (see $dir/log/slurmctld.log)"
  if ! alive "$slurmd_pid"; then
    slurmd -f "$conf" || die "slurmd did not start (see $dir/log/slurmd.log)"
    did+=("slurmd")
  fi
  # A node left down or drained by an earlier run (e.g. a killed slurmd) is made usable again.
  if sinfo -h -N -o '%T' | grep -qE 'down|drain'; then
    scontrol update NodeName="$(hostname -s)" State=RESUME >/dev/null 2>&1 || true
  fi
  wait_for node_idle 300 || die "node is not idle after 30 s: $(sinfo -h -N -o '%N %T %E')"
  if ((${#did[@]})); then
    echo "slurm-local: ${installed}started ${did[*]}; config in $dir/etc, logs in $dir/log"
  else
    echo "slurm-local: already running; config in $dir/etc"
  fi
}

stop() {
  local pid_file pid stopped=()
  if alive "$ctld_pid"; then
    export SLURM_CONF=$conf
    # Jobs' slurmstepd outlive slurmd: cancel them first, and wait for them to be gone.
    local jobs i
    mapfile -t jobs < <(squeue -h -o '%i' 2>/dev/null | sort -u)
    ((${#jobs[@]} == 0)) || scancel --full "${jobs[@]}" >/dev/null 2>&1 || true
    for ((i = 0; i < 150; i++)); do
      [ -z "$(squeue -h -o '%i' 2>/dev/null)" ] && break
      sleep 0.2
    done
    stopped+=("${#jobs[@]} jobs,")
  fi
  for pid_file in "$slurmd_pid" "$ctld_pid" "$munge_pid"; do
    alive "$pid_file" || continue
    pid=$(cat "$pid_file")
    kill "$pid"
    for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then kill -9 "$pid"; fi
    stopped+=("$(basename "$pid_file" .pid)")
  done
  if pgrep -x slurmstepd >/dev/null; then
    die "stopped ${stopped[*]:-nothing}, but slurmstepd is still running: $(pgrep -x -d, slurmstepd)"
  fi
  echo "slurm-local: stopped ${stopped[*]:-nothing (was not running)}"
}

status() {
  local d
  for d in munged:"$munge_pid" slurmctld:"$ctld_pid" slurmd:"$slurmd_pid"; do
    if ! alive "${d#*:}"; then
      echo "slurm-local: not running (${d%%:*} is down)"
      return 1
    fi
  done
  echo "slurm-local: running; $(SLURM_CONF=$conf sinfo -h -N -o 'node %N %T, gres %G, partition %P')"
}

[ "$(id -u)" -eq 0 ] || die "must run as root"
did=()
installed=
case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) die "usage: $0 start|stop|status" ;;
esac
