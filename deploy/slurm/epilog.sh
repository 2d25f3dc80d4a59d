#!/bin/bash
# SLURM Epilog (slurm.conf: Epilog=/etc/slurm/trainprof-epilog.sh): stops the `trainprof agent`
# that deploy/slurm/prolog.sh started for this job on this node. SIGTERM makes the agent close
# its store and extend run.json's end_ns; it is waited for up to 30 s, then killed. The node's
# Prometheus target file is removed. Always exits 0 (an epilog failure would drain the node).
# Checked by tests/python/test_deploy.py (bash -n).
TRAINPROF_SD_DIR=${TRAINPROF_SD_DIR:-/shared/prometheus/trainprof-slurm}
STATE=${TRAINPROF_STATE:-/run/trainprof}
[[ -n ${SLURM_JOB_ID:-} ]] || exit 0
node=${SLURMD_NODENAME:-$(hostname -s)}
pidfile=$STATE/agent-$SLURM_JOB_ID.pid
if [[ -f $pidfile ]]; then
  pid=$(<"$pidfile")
  # only our agent: the pid must still be a trainprof agent process
  if [[ $pid =~ ^[0-9]+$ ]] && grep -qa "agent" "/proc/$pid/cmdline" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 1 60); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.5
    done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
  fi
  rm -f "$pidfile"
fi
rm -f "$TRAINPROF_SD_DIR/$node.json"
exit 0
