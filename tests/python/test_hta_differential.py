"""`trainprof analyze --hta-compat` against HolisticTraceAnalysis 0.5.0 itself (pip
`holistictraceanalysis==0.5.0`, scripts/requirements-dev.txt), run here on the same inputs.

Every figure of HTA's idle time breakdown, temporal breakdown, GPU kernel breakdown (kernel-type
shares and their overlaps) and communication-computation overlap must agree within 0.1
percentage point (times within 0.1 % of the span), on the traces under ../shared/data/traces
that HTA loads (the quick ones here; bench/hta_ratio.py runs every one) and on generated traces.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import hta_oracle  # noqa: E402
from conftest import SHARED_DATA, trainprof_command  # noqa: E402

HTA = "traces/HolisticTraceAnalysis/tests/data/"
# One entry per HTA load (several files = one job's ranks). Every format generation: 2021
# tb_plugin (Operator/Runtime/Kernel categories), integer-µs 2022-23 traces, ns-precision
# epoch timestamps (2024), relative timestamps with baseTimeNanoseconds (2024+), AMD, MTIA,
# NCCL, two ranks, CPU-only traces (HTA fails on those: nothing to compare but the others).
TRACE_SETS = [
    [HTA + "amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz"],
    [HTA + "call_stack/backward_thread.json"],
    [HTA + "cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"],
    [HTA + "critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz"],
    [HTA + "critical_path/cuda_event_sync/event_sync_trace.json.gz"],
    [HTA + "critical_path/cuda_event_sync_multi_stream/event_sync_trace.json.gz"],
    [HTA + "critical_path/end_to_end/simple_add/output/overlaid_critical_path_trace.json.gz"],
    [HTA + "critical_path/simple_add/benchmark_result_493459_1694039959_trace.json.gz"],
    [HTA + "cupti_profiler/benchmark_result_924719_1679055439_trace.json.gz"],
    [HTA + "df_index_resolver/df_index_resolver.json.gz"],
    [HTA + "execution_trace/benchmark_simple_add_trace.json.gz"],
    [HTA + "large_integer_trace/rank-70.Mar_25_20_48_12.2861.pt.trace.json.gz"],
    [HTA + "mtia_inference_trace/mtia_inference_rank_0.json.gz"],
    [HTA + "nccl_parser_config/nccl_data.json.gz"],
    [HTA + "negative_queue_length_values_check/rank0.json.gz"],
    [HTA + "ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"],
    [HTA + "trace_compare/base/base.json.gz"],
    [HTA + "trace_file_list/inference_rank_1.json.gz"],
    [HTA + "trace_filter/sampled_rank-0.json.gz", HTA + "trace_filter/sampled_rank-1.json.gz"],
    [HTA + "triton_example/triton_example.json.gz"],
    [HTA + "with_gpu_user_annotation/step_based_trace_2543932.json.gz"],
    ["traces/kineto/docs/traces/before_fix_trace.json"],
    ["traces/kineto/tb_plugin/test/gpu_metrics_input.json"],
    ["traces/kineto/tb_plugin/samples/resnet50_num_workers_4/worker0.1623213129365.pt.trace.json.gz"],
]


def trainprof_hta(files, tmp_path):
    """The analysis of `import kineto FILES` then `analyze RUN`; also checks that `analyze FILES`
    (one command, a scratch run) prints the same bytes and leaves nothing in $TMPDIR."""
    run = tmp_path / "run"
    cmd = trainprof_command()
    subprocess.run(cmd + ["import", "kineto", *map(str, files), "--out", str(run)], check=True,
                   capture_output=True, text=True)
    out = subprocess.run(cmd + ["analyze", str(run), "--hta-compat", "--json"], check=True,
                         capture_output=True, text=True).stdout
    scratch = tmp_path / "tmpdir"
    scratch.mkdir()
    one = subprocess.run(cmd + ["analyze", *map(str, files), "--hta-compat", "--json"], check=True,
                         capture_output=True, text=True,
                         env={**os.environ, "TMPDIR": str(scratch)}).stdout
    assert one == out, "analyze of the trace files differs from analyze of their imported run"
    assert list(scratch.iterdir()) == [], "the scratch run was left behind"
    return hta_oracle.trainprof_figures(json.loads(out))


@pytest.mark.parametrize("files", TRACE_SETS, ids=lambda fs: Path(fs[0]).parent.name + "/" + Path(fs[0]).name[:24])
def test_matches_hta_on_shared_traces(files, tmp_path):
    paths = [SHARED_DATA / f for f in files]
    for p in paths:
        assert p.exists(), f"shared trace missing: {p}"
    hta = hta_oracle.hta_figures(paths)
    tp = trainprof_hta(paths, tmp_path)
    # Not vacuous: HTA produced figures for every GPU trace here (CPU-only ones have none).
    gpu = any(r["temporal"] for r in hta["ranks"].values())
    assert gpu or "temporal" in hta["errors"], hta
    assert hta_oracle.compare(hta, tp) == []


# --- generated traces: HTA and trainprof on the same synthetic input ------------------------

B = 1_000_000_000  # µs: an absolute time


def X(cat, name, ts, dur, corr=None, stream=None, base=B):
    args = {}
    if corr is not None:
        args["correlation"] = corr
    if stream is not None:
        args["stream"] = stream
    return {"ph": "X", "cat": cat, "name": name, "pid": 0 if stream is not None else 1,
            "tid": stream if stream is not None else 1, "ts": base + ts, "dur": dur, "args": args}


def write(path, events, rank=0, **top):
    doc = {"distributedInfo": {"rank": rank}, "traceEvents": events}
    doc.update(top)
    path.write_text(json.dumps(doc, indent=1))  # HTA finds the rank by '"rank": N' with a space
    return path


def known_truth_events():
    # Same layout as hta_compat_test.cc: span 310, idle 50, compute 200, non-compute 60;
    # computation alone 100, communication alone 50, both 100, memory 10; stream 7 idle:
    # host_wait 50, other 50.
    return [X("cuda_runtime", "cudaLaunchKernel", 0, 5, 1), X("kernel", "gemm_k1", 0, 100, 1, 7),
            X("cuda_runtime", "cudaLaunchKernel", 40, 5, 2),
            X("kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 50, 150, 2, 20),
            X("cuda_runtime", "cudaLaunchKernel", 120, 5, 3), X("kernel", "gemm_k2", 150, 100, 3, 7),
            X("cuda_runtime", "cudaMemcpyAsync", 240, 5, 4),
            X("gpu_memcpy", "Memcpy DtoH (Device -> Pinned)", 300, 10, 4, 7)]


def test_known_truth_trace_exact(tmp_path):
    f = write(tmp_path / "known.json", known_truth_events())
    hta = hta_oracle.hta_figures([f])
    tp = trainprof_hta([f], tmp_path)
    assert hta_oracle.compare(hta, tp, tol_pp=0.0) == []
    t = tp["ranks"][0]["temporal"]
    assert (t["kernel_us"], t["idle_us"], t["compute_us"], t["non_compute_us"]) == (310, 50, 200, 60)
    assert tp["kernel_type_us"] == {"COMPUTATION": 100, "COMMUNICATION": 50,
                                    "COMPUTATION overlapping COMMUNICATION": 100, "MEMORY": 10}
    assert tp["ranks"][0]["overlap_pct"] == pytest.approx(100 * 100 / 150, abs=0.005)
    assert tp["ranks"][0]["idle"][(7, "host_wait")][0] == 50
    assert tp["ranks"][0]["idle"][(7, "other")][0] == 50


def test_hta_rules_on_generated_edge_cases(tmp_path):
    # The last ProfilerStep and what it launched dropped, a correlation id on two CPU rows,
    # a sync and a CPU op with a stream arg, sub-µs events, ns timestamps relative to a base
    # time, two ranks with different spans.
    r0 = [X("user_annotation", "ProfilerStep#1", 0, 200), X("user_annotation", "ProfilerStep#2", 200, 200),
          X("cuda_runtime", "cudaLaunchKernel", 10, 5, 1), X("cuda_driver", "cuLaunchKernel", 12, 2, 1),
          X("kernel", "k1", 20, 40, 1, 7), X("cuda_runtime", "cudaLaunchKernel", 30, 5, 2),
          X("kernel", "k3", 100, 10, 2, 7), X("cuda_runtime", "cudaStreamSynchronize", 111, 30, 5),
          X("cuda_sync", "Stream Sync", 112, 20, 5, 7), X("cpu_op", "triton_op", 140, 5, None, 7),
          X("cuda_runtime", "cudaLaunchKernel", 150, 2, 6),
          X("kernel", "ncclKernel_AllGather_RING_LL", 151, 30, 6, 20),
          X("cuda_runtime", "cudaLaunchKernel", 210, 5, 3), X("kernel", "k2", 220, 80, 3, 7)]
    r1 = [X("user_annotation", "ProfilerStep#1", 0, 300, base=1000.0),
          X("user_annotation", "ProfilerStep#2", 300, 200, base=1000.0)]
    for i in range(40):
        ts = round(10.123 + i * 7.25, 3)
        r1.append(X("cuda_runtime", "cudaLaunchKernel", round(ts - 3.5, 3), 1.75, 100 + i, base=1000.0))
        r1.append(X("kernel" if i % 5 else "gpu_memset", "Memset (Device)" if i % 5 == 0 else f"k{i}",
                    ts, round(0.4 + (i % 7) * 1.3, 3), 100 + i, 7 + i % 2, base=1000.0))
    a = write(tmp_path / "r0.json", r0, rank=0)
    b = write(tmp_path / "r1.json", r1, rank=1, baseTimeNanoseconds=1711964646000000000)
    hta = hta_oracle.hta_figures([a, b])
    tp = trainprof_hta([a, b], tmp_path)
    assert set(hta["ranks"]) == {0, 1} and all(r["temporal"] for r in hta["ranks"].values())
    assert hta_oracle.compare(hta, tp, tol_pp=0.0) == []


def test_sub_microsecond_trace_gets_no_impossible_hta_figures(tmp_path):
    # kineto's docs/traces/before_fix_trace.json: its GPU activity lasts 20 ns. In HTA's whole
    # microseconds it ends before it starts; HTA 0.5.0 fails on its temporal breakdown, and a
    # faithful copy of its arithmetic gave compute 200 % and idle -100 %.
    trace = SHARED_DATA / "traces/kineto/docs/traces/before_fix_trace.json"
    assert "temporal" in hta_oracle.hta_figures([trace])["errors"]
    cmd = trainprof_command()
    compat = json.loads(subprocess.run(cmd + ["analyze", str(trace), "--hta-compat", "--json"],
                                       check=True, capture_output=True, text=True).stdout)
    (rank,) = compat["ranks"]
    assert rank["temporal"] is None
    assert "undefined" in rank["temporal_note"]
    # Without --hta-compat, in nanoseconds: the span is the kernels' own (kernels, memcpy and
    # memset; the events read here, independently), and every part lies within it.
    events = json.loads(trace.read_text())["traceEvents"]
    gpu = [e for e in events
           if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    assert gpu
    start = min(Decimal(str(e["ts"])) for e in gpu)
    end = max(Decimal(str(e["ts"])) + Decimal(str(e["dur"])) for e in gpu)
    plain = json.loads(subprocess.run(cmd + ["analyze", str(trace), "--json"], check=True,
                                      capture_output=True, text=True).stdout)
    t = plain["ranks"][0]["temporal"]
    assert t["kernel_us"] == pytest.approx(float(end - start), abs=1e-3)
    for k in ("idle_pct", "compute_pct", "non_compute_pct"):
        assert 0 <= t[k] <= 100
