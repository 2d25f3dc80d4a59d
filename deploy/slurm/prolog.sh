#!/bin/bash
# SLURM Prolog (slurm.conf: Prolog=/etc/slurm/trainprof-prolog.sh, PrologFlags=Alloc): starts a
# `trainprof agent` on every node of the job when the node is allocated. The agents of a job
# share one run directory on shared storage ($TRAINPROF_RUNS/<job id>), each writing its own
# nodes/<node>/ store; the job's cgroup is watched (utilisation against its limits). Each node
# also registers its /metrics endpoint for Prometheus's file_sd job (deploy/prometheus).
# The epilog (trainprof-epilog.sh) stops it. A failure here never fails the job: it exits 0.
# Checked by tests/python/test_deploy.py (bash -n; the agent flags are real).
TRAINPROF=${TRAINPROF:-/opt/trainprof/bin/trainprof}
TRAINPROF_RUNS=${TRAINPROF_RUNS:-/shared/trainprof-runs}
TRAINPROF_PORT=${TRAINPROF_PORT:-9400}
TRAINPROF_SD_DIR=${TRAINPROF_SD_DIR:-/shared/prometheus/trainprof-slurm}
STATE=${TRAINPROF_STATE:-/run/trainprof}
[[ -n ${SLURM_JOB_ID:-} && -x $TRAINPROF ]] || exit 0
node=${SLURMD_NODENAME:-$(hostname -s)}
run_dir=$TRAINPROF_RUNS/$SLURM_JOB_ID
mkdir -p "$STATE" "$run_dir" 2>/dev/null || exit 0
# the job's cgroup v2 directory (cgroup/v2 plugin); absent: the whole node is recorded
cgroup=/sys/fs/cgroup/system.slice/slurmstepd.scope/job_$SLURM_JOB_ID
cgroup_args=()
[[ -d $cgroup ]] && cgroup_args=(--cgroup "$cgroup")
# the node's address on the cluster network (the first one `hostname -I` lists)
addr=$(hostname -I 2>/dev/null | awk '{print $1}')
addr=${addr:-127.0.0.1}
setsid "$TRAINPROF" agent --out "$run_dir" --node "$node" --name "${SLURM_JOB_NAME:-slurm-job}" \
  --tag "slurm_job_id=$SLURM_JOB_ID" --tag "user=${SLURM_JOB_USER:-unknown}" \
  "${cgroup_args[@]}" --interval 500ms \
  --prometheus "$addr:$TRAINPROF_PORT" --prometheus-allow-remote \
  </dev/null >>"$STATE/agent-$SLURM_JOB_ID.log" 2>&1 &
echo $! >"$STATE/agent-$SLURM_JOB_ID.pid"
if mkdir -p "$TRAINPROF_SD_DIR" 2>/dev/null; then
  printf '[{"targets":["%s:%s"],"labels":{"slurm_job_id":"%s"}}]\n' "$addr" "$TRAINPROF_PORT" \
    "$SLURM_JOB_ID" >"$TRAINPROF_SD_DIR/.$node.json.tmp" &&
    mv -f "$TRAINPROF_SD_DIR/.$node.json.tmp" "$TRAINPROF_SD_DIR/$node.json"
fi
exit 0
