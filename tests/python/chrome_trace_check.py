"""An independent reader of Chrome Trace Event Format files, written from the format's
specification (Trace Event Format, Google, the document Chrome's trace viewer and Perfetto
implement) and from how Perfetto's trace processor turns JSON events into its tables, for the
tests: it shares no code with trainprof.

`check(doc)` validates every event against the specification and returns what a viewer builds
from it:

- slices: complete events (ph X), matched B/E pairs, and instants (ph i/I), which Perfetto
  imports as slices of zero duration;
- flows: v1 flow events (ph s/t/f) joined by (cat, name, id): a flow is an "s" with a later
  "f" of the same key; each end must bind to a slice of its own thread the way Perfetto binds
  them (the "s" to the slice that encloses its ts, the "f" with "bp": "e" to the enclosing slice,
  an "f" without it to the next slice that starts at or after its ts); "f"s whose "s" is not in
  the file are counted as unmatched, as Perfetto drops them;
- counters (ph C) per track, process and thread names from the M events.

A violation raises TraceFormatError naming the event's index and what is wrong.

The Perfetto trace processor (`perfetto` on PyPI) itself cannot run here: the package ships no
trace_processor_shell and downloads one from the internet on first use, which this machine
cannot reach.
"""

from __future__ import annotations

import bisect
from collections import Counter, defaultdict
from dataclasses import dataclass, field

PHASES = set("BEXiICbnestfSTFpPNODMVvRc()")
METADATA_NAMES = {"process_name": "name", "process_labels": "labels",
                  "process_sort_index": "sort_index", "thread_name": "name",
                  "thread_sort_index": "sort_index", "process_uptime_seconds": "uptime"}


class TraceFormatError(ValueError):
    pass


@dataclass
class TraceStats:
    slices: int = 0            # X + matched B/E + i/I
    complete: int = 0          # X
    instants: int = 0          # i/I
    flows: int = 0             # s -> f pairs that bind at both ends
    unmatched_flow_ends: int = 0
    unbound_flow_ends: int = 0  # an s or f with no slice to bind to on its thread
    counters: int = 0          # C samples (one per numeric arg)
    metadata: int = 0
    slice_names: Counter = field(default_factory=Counter)
    process_names: dict = field(default_factory=dict)  # pid -> name
    process_labels: dict = field(default_factory=dict)
    thread_names: dict = field(default_factory=dict)   # (pid, tid) -> name


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _track_id(v) -> bool:
    # pid/tid: integers in every trace we write; the format also allows strings.
    return (isinstance(v, int) and not isinstance(v, bool)) or isinstance(v, str)


def check(doc) -> TraceStats:
    if isinstance(doc, dict):
        if "traceEvents" not in doc or not isinstance(doc["traceEvents"], list):
            raise TraceFormatError("object form without a traceEvents array")
        if doc.get("displayTimeUnit", "ms") not in ("ms", "ns"):
            raise TraceFormatError(f"displayTimeUnit {doc['displayTimeUnit']!r} is not ms or ns")
        events = doc["traceEvents"]
    elif isinstance(doc, list):
        events = doc
    else:
        raise TraceFormatError("neither a JSON object nor an array")

    st = TraceStats()
    spans = defaultdict(list)      # (pid, tid) -> [(start, end)]
    open_b = defaultdict(list)     # (pid, tid) -> [start]
    flow_events = []               # (index, ph, key, pid, tid, ts, bp)
    for i, e in enumerate(events):
        def bad(what):
            raise TraceFormatError(f"traceEvents[{i}]: {what}: {e!r:.200}")

        if not isinstance(e, dict):
            bad("not an object")
        ph = e.get("ph")
        if not isinstance(ph, str) or len(ph) != 1 or ph not in PHASES:
            bad(f"ph {ph!r} is not a phase of the format")
        if "name" in e and not isinstance(e["name"], str):
            bad("name is not a string")
        if "cat" in e and not isinstance(e["cat"], str):
            bad("cat is not a string")
        if "args" in e and not isinstance(e["args"], dict):
            bad("args is not an object")
        for k in ("pid", "tid"):
            if k in e and not _track_id(e[k]):
                bad(f"{k} is not an integer or string")
        if ph == "M":
            st.metadata += 1
            name = e.get("name")
            if name not in METADATA_NAMES:
                bad(f"metadata event named {name!r}")
            key = METADATA_NAMES[name]
            if key not in e.get("args", {}):
                bad(f"{name} without args.{key}")
            if name == "process_name":
                st.process_names[e["pid"]] = e["args"]["name"]
            elif name == "process_labels":
                st.process_labels[e["pid"]] = e["args"]["labels"]
            elif name == "thread_name":
                st.thread_names[(e["pid"], e["tid"])] = e["args"]["name"]
            continue
        if not _number(e.get("ts")):
            bad("ts missing or not a number")
        if "pid" not in e or "tid" not in e:
            bad("pid or tid missing")
        ts = float(e["ts"])
        track = (e["pid"], e["tid"])
        if ph == "X":
            if not isinstance(e.get("name"), str):
                bad("complete event without a name")
            if not _number(e.get("dur")) or e["dur"] < 0:
                bad("complete event without a duration >= 0")
            spans[track].append((ts, ts + float(e["dur"])))
            st.complete += 1
            st.slice_names[e["name"]] += 1
        elif ph in "iI":
            if e.get("s", "t") not in ("g", "p", "t"):
                bad(f"instant scope {e['s']!r}")
            spans[track].append((ts, ts))
            st.instants += 1
            st.slice_names[e.get("name", "")] += 1
        elif ph == "B":
            open_b[track].append(ts)
        elif ph == "E":
            if not open_b[track]:
                bad("E without a B on its thread")
            start = open_b[track].pop()
            if ts < start:
                bad("E before its B")
            spans[track].append((start, ts))
            st.slices += 1
        elif ph == "C":
            args = e.get("args")
            if not isinstance(args, dict) or not args:
                bad("counter without args")
            for k, v in args.items():
                if not _number(v):
                    bad(f"counter value {k}={v!r} is not a number")
            st.counters += len(args)
        elif ph in "stf":
            if "id" not in e or not (_number(e["id"]) or isinstance(e["id"], str)):
                bad("flow event without an id")
            if "bp" in e and e["bp"] != "e":
                bad(f"flow binding point {e['bp']!r} (only \"e\" is defined)")
            flow_events.append((i, ph, (e.get("cat", ""), e.get("name", ""), e["id"]),
                                track, ts, e.get("bp")))
    for track, stack in open_b.items():
        if stack:
            raise TraceFormatError(f"{len(stack)} B events without an E on thread {track}")
    st.slices += st.complete + st.instants

    # Slices per thread by start, with the running maximum of their ends: a slice encloses ts
    # when one that starts at or before ts ends at or after it.
    index = {}
    for track, ss in spans.items():
        ss.sort()
        starts = [s for s, _ in ss]
        max_end, m = [], float("-inf")
        for _, end in ss:
            m = max(m, end)
            max_end.append(m)
        index[track] = (starts, max_end)

    def encloses(track, ts):
        if track not in index:
            return False
        starts, max_end = index[track]
        k = bisect.bisect_right(starts, ts)
        return k > 0 and max_end[k - 1] >= ts

    def next_starts(track, ts):
        return track in index and bisect.bisect_left(index[track][0], ts) < len(index[track][0])

    open_flows = {}
    for i, ph, key, track, ts, bp in sorted(flow_events, key=lambda f: (f[4], f[0])):
        bound = encloses(track, ts) if (ph != "f" or bp == "e") else next_starts(track, ts)
        if ph == "s":
            if not bound:
                st.unbound_flow_ends += 1
                continue
            open_flows[key] = True
        elif ph == "t":
            continue
        else:
            if key not in open_flows:
                st.unmatched_flow_ends += 1
                continue
            del open_flows[key]
            if not bound:
                st.unbound_flow_ends += 1
                continue
            st.flows += 1
    return st
