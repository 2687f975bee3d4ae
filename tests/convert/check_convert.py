#!/usr/bin/python3
"""
check_convert.py - end-to-end tests of `rhea convert` (run by run.sh, which
builds the scenario programs tests/scenarios/convert_*.c and fetches
Perfetto's trace_processor).

What is checked, per recording (scenario programs recorded with ./rhea):

  Perfetto (.pftrace)
    - protoc decodes it with perfetto_trace.proto (the shared schema) and the
      decoded text has no bare field numbers (no field unknown to the
      schema);
    - a decoder of our own (below) checks the structure: each sequence
      starts by clearing its incremental state and is in time order, every
      interned id (event names, annotation names, callstacks, frames,
      function names, mappings, build-ids, paths) is defined in the packet
      that first uses it or before, every track event names a described
      track, slices balance and nest per track;
    - trace_processor (Perfetto v55.3, WebAssembly, when available): the
      trace loads, no slice is left open (dur = -1), the stats table has no
      error or data-loss entry, it sees the same number of slices with the
      arguments of both their begin and end events, the thread names, the
      samples (perf_sample) with their callstacks resolved, and the counter
      tracks.
  pprof (.pb.gz): `go tool pprof -top` reads it; `go tool pprof -raw`
    totals equal the recording's: wall = the sum of all functions' self
    time in `rhea report --json`, cpu = the sum of their self CPU time,
    allocation count and bytes = the sums of the report's per-thread
    allocation counts (exactly).
  Chrome JSON: parses with Python's json, B/E balance per thread, the
    slices are exactly the Perfetto ones, timestamps have their fractional
    (nanosecond) part; thread names as metadata; trace_processor imports it
    with the same slices, to the nanosecond.
  Folded: totals per --weight equal the pprof totals.
  Nanoscope: every line "ns:+name" or "ns:POP", balanced, in time order, the
    same enter/exit sequence as the main thread's slices.

Ground truth (the scenarios state it at their top):
  convert_known: phase_alloc / phase_sleep / phase_spin / alloc_burst last
    as long as the program measured (within one capture interval + 10%);
    phase_alloc has AllocatedObjects = 4000, AllocatedBytes = 256000,
    alloc_burst 10000 and 320000, phase_spin 0 (exactly); phase_sleep holds
    a "nanosleep" wait slice with its BlockTime.
  convert_loop: three handle_msg slices, each as long as measured, with
    AllocatedObjects = 200 exactly and three different MessageIds (two of them back to back with identical
    stacks), and a "poll" wait slice between the second and the third.
Filters: --thread (name and tid), --from/--to, --min-dur (exactly the
  unfiltered slices that are long enough, still nested), --end last.
Bad input: unknown format, unwritable output, a recording cut inside a
  chunk, a missing file, an unknown thread: one "rhea: " line, status 2,
  nothing on stdout; a recording cut short by SIGKILL converts with one
  warning line.

Output: "ok NAME" / "FAIL NAME: WHY" per test, then
"convert: N passed, M failed"; exit status 1 on failure.
Standard library only (Debian's /usr/bin/python3).
"""
import argparse
import gzip
import json
import math
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import traceback

MS = 1000000
SCHEMAS = None  # set in main


class Fail(Exception):
    pass


# ---------------------------------------------------------------------------
# protobuf wire format


def varint(buf, i):
    v = 0
    shift = 0
    while True:
        if i >= len(buf):
            raise Fail("protobuf: varint runs past the end")
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << shift
        if b < 0x80:
            return v, i
        shift += 7
        if shift > 63:
            raise Fail("protobuf: varint longer than 10 bytes")


def fields(buf):
    """Yield (field, wiretype, value): int for varint/fixed, bytes for LEN."""
    i = 0
    n = len(buf)
    while i < n:
        key, i = varint(buf, i)
        f, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(buf, i)
        elif wt == 1:
            if i + 8 > n:
                raise Fail("protobuf: fixed64 past the end")
            v = struct.unpack_from("<Q", buf, i)[0]
            i += 8
        elif wt == 2:
            ln, i = varint(buf, i)
            if i + ln > n:
                raise Fail("protobuf: length-delimited field past the end")
            v = bytes(buf[i:i + ln])
            i += ln
        elif wt == 5:
            v = struct.unpack_from("<I", buf, i)[0]
            i += 4
        else:
            raise Fail("protobuf: wire type %d" % wt)
        yield f, wt, v


def msg(buf):
    """field -> list of values."""
    d = {}
    for f, _, v in fields(buf):
        d.setdefault(f, []).append(v)
    return d


def one(d, f, default=None):
    v = d.get(f)
    return v[-1] if v else default


def packed_or_not(d, f):
    out = []
    for v in d.get(f, []):
        if isinstance(v, bytes):
            i = 0
            while i < len(v):
                x, i = varint(v, i)
                out.append(x)
        else:
            out.append(v)
    return out


# ---------------------------------------------------------------------------
# Perfetto: our own structural decoder


class Trace:
    def __init__(self):
        self.threads = {}     # track uuid -> (tid, name)
        self.thread_pid = {}  # track uuid -> pid its descriptor names
        self.process = None   # (pid, name): the first process described
        self.processes = {}   # uuid -> (pid, name): every process (one per recording)
        self.counters = {}    # uuid -> name
        self.counter_values = {}  # uuid -> [(ts, value)]
        self.slices = []      # dicts: tid, thread, name, begin, end, depth, args
        self.children = {}    # uuid -> (parent uuid, name): tracks under a thread's
        self.stalls = []      # slices on a thread's "stalls" track, as slices are
        self.instants = []    # flow ends: track, name, ts, flow, end
        self.samples = 0
        self.callstack_depths = []
        self.packets = 0


ANN_VALUE_FIELDS = {2: "bool", 3: "uint", 4: "int", 5: "double", 6: "string", 7: "pointer"}


def decode_perfetto(data):
    """Decode and check a trace; returns a Trace.  Raises Fail on any
    structural problem."""
    tr = Trace()
    seqs = {}  # seq id -> state
    track_refs = []
    open_slices = {}  # track uuid -> stack of slice dicts
    for f, wt, pkt in fields(data):
        if f != 1 or wt != 2:
            raise Fail("trace: field %d at top level" % f)
        tr.packets += 1
        p = msg(pkt)
        seq = one(p, 10)
        if seq is None:
            raise Fail("packet %d without trusted_packet_sequence_id" % tr.packets)
        flags = one(p, 13, 0)
        st = seqs.get(seq)
        if st is None:
            if not flags & 1:
                raise Fail("sequence %d: first packet does not clear the incremental state" % seq)
            st = seqs[seq] = {"ts": 0, "iid": {}}
        elif flags & 1:
            st["iid"] = {}
        ts = one(p, 8)
        if ts is not None:
            if ts < st["ts"]:
                raise Fail("sequence %d: timestamp %d after %d (not in time order)" % (seq, ts, st["ts"]))
            st["ts"] = ts
        iid = st["iid"]
        # Interned data first: ids defined in this packet may be used in it.
        for idata in p.get(12, []):
            d = msg(idata)
            for field, kind in ((2, "event_name"), (3, "debug_name"), (5, "function_name"),
                                (16, "build_id"), (17, "mapping_path"), (18, "source_path")):
                for e in d.get(field, []):
                    m = msg(e)
                    k = one(m, 1)
                    if not k:
                        raise Fail("interned %s without iid" % kind)
                    iid.setdefault(kind, {})[k] = one(m, 2, b"")
            for e in d.get(19, []):
                m = msg(e)
                bid = one(m, 2, 0)
                if bid and bid not in iid.get("build_id", {}):
                    raise Fail("mapping %s uses undefined build_id %d" % (one(m, 1), bid))
                for pid_ in packed_or_not(m, 7):
                    if pid_ not in iid.get("mapping_path", {}):
                        raise Fail("mapping uses undefined path %d" % pid_)
                iid.setdefault("mapping", {})[one(m, 1)] = m
            for e in d.get(6, []):
                m = msg(e)
                fn = one(m, 2, 0)
                if fn and fn not in iid.get("function_name", {}):
                    raise Fail("frame %s uses undefined function name %d" % (one(m, 1), fn))
                mp = one(m, 3, 0)
                if mp and mp not in iid.get("mapping", {}):
                    raise Fail("frame %s uses undefined mapping %d" % (one(m, 1), mp))
                if mp and one(m, 4) is None:
                    raise Fail("frame %s has a mapping but no rel_pc" % one(m, 1))
                sp = one(m, 5, 0)
                if sp and sp not in iid.get("source_path", {}):
                    raise Fail("frame %s uses undefined source path %d" % (one(m, 1), sp))
                iid.setdefault("frame", {})[one(m, 1)] = m
            for e in d.get(7, []):
                m = msg(e)
                frames = packed_or_not(m, 2)
                for fr in frames:
                    if fr not in iid.get("frame", {}):
                        raise Fail("callstack %s uses undefined frame %d" % (one(m, 1), fr))
                iid.setdefault("callstack", {})[one(m, 1)] = frames
        if 60 in p:
            d = msg(one(p, 60))
            uuid = one(d, 1)
            if 3 in d:
                pd = msg(one(d, 3))
                if uuid in tr.processes:
                    raise Fail("process track %d described twice" % uuid)
                tr.processes[uuid] = (one(pd, 1), one(pd, 6, b"").decode())
                tr.process = tr.process or tr.processes[uuid]
            elif 4 in d:
                td = msg(one(d, 4))
                if uuid in tr.threads:
                    raise Fail("thread track %d described twice" % uuid)
                tr.threads[uuid] = (one(td, 2), one(td, 5, b"").decode())
                tr.thread_pid[uuid] = one(td, 1)
            elif 8 in d:
                tr.counters[uuid] = one(d, 2, b"").decode()
            elif 5 in d and 2 in d:
                tr.children[uuid] = (one(d, 5), one(d, 2).decode())
            else:
                raise Fail("track descriptor %d of unknown kind" % uuid)
        if 11 in p:
            ev = msg(one(p, 11))
            typ = one(ev, 9)
            track = one(ev, 11)
            track_refs.append(track)
            name_iid = one(ev, 10)
            if name_iid is not None and name_iid not in iid.get("event_name", {}):
                raise Fail("sequence %d: event uses undefined name iid %d" % (seq, name_iid))
            if typ == 1 and name_iid is None and 23 not in ev:
                raise Fail("sequence %d: slice without a name" % seq)
            args = {}
            for a in ev.get(4, []):
                am = msg(a)
                n = one(am, 1)
                if n not in iid.get("debug_name", {}):
                    raise Fail("debug annotation uses undefined name iid %s" % n)
                key = iid["debug_name"][n].decode()
                for vf, vk in ANN_VALUE_FIELDS.items():
                    if vf in am:
                        v = one(am, vf)
                        args[key] = v.decode() if vk == "string" else v
            if typ == 1:
                stack = open_slices.setdefault(track, [])
                name = iid["event_name"][name_iid] if name_iid is not None else one(ev, 23)
                stack.append({"track": track, "name": name.decode(),
                              "begin": ts, "end": None, "depth": len(stack), "args": dict(args)})
            elif typ == 2:
                stack = open_slices.get(track)
                if not stack:
                    raise Fail("slice end on track %d with no open slice (ts %d)" % (track, ts))
                s = stack.pop()
                if ts < s["begin"]:
                    raise Fail("slice %s ends before it begins" % s["name"])
                s["end"] = ts
                s["args"].update(args)
                (tr.stalls if track in tr.children else tr.slices).append(s)
            elif typ == 4:
                v = struct.unpack("<d", struct.pack("<Q", one(ev, 44)))[0] if 44 in ev else one(ev, 30)
                if v is None or (isinstance(v, float) and (math.isnan(v) or math.isinf(v) or v < 0)):
                    raise Fail("counter value %r" % v)
                tr.counter_values.setdefault(track, []).append((ts, v))
            elif typ == 3:
                # Instants: the two ends of a wakeup flow (release, woken),
                # named inline and carrying exactly one flow id.
                name = one(ev, 23)
                ids = ev.get(47, []) + ev.get(48, [])
                if name not in (b"release", b"woken") or len(ids) != 1:
                    raise Fail("instant %r with flow ids %r" % (name, ids))
                tr.instants.append({"track": track, "name": name.decode(), "ts": ts,
                                    "flow": ids[0], "end": 48 in ev})
            else:
                raise Fail("track event of type %s" % typ)
        if 66 in p:
            ps = msg(one(p, 66))
            cs = one(ps, 4)
            if cs not in iid.get("callstack", {}):
                raise Fail("sequence %d: perf sample uses undefined callstack %s" % (seq, cs))
            tr.samples += 1
            tr.callstack_depths.append(len(iid["callstack"][cs]))
    for track, stack in open_slices.items():
        if stack:
            raise Fail("track %d: %d slices never end (%s)" % (track, len(stack), stack[-1]["name"]))
    for t in track_refs:
        if t not in tr.threads and t not in tr.counters and t not in tr.children:
            raise Fail("track event on undescribed track %s" % t)
    for uuid, (parent, name) in tr.children.items():
        if parent not in tr.threads or name != "stalls":
            raise Fail("track %d %r under %d, want \"stalls\" under a thread's" % (uuid, name, parent))
    for s in tr.stalls:
        s["tid"], s["thread"] = tr.threads[tr.children[s["track"]][0]]
        if s["depth"] != 0 or not s["name"].startswith("stall: "):
            raise Fail("stall slice %r at depth %d" % (s["name"], s["depth"]))
    for s in tr.slices:
        tid, name = tr.threads.get(s["track"], (None, None))
        if tid is None:
            raise Fail("slice on a track that is not a thread's")
        s["tid"], s["thread"] = tid, name
    return tr


def protoc_check(path):
    if not SCHEMAS:
        return  # no schema here (run.sh said so): the other checks still run
    proto = os.path.join(SCHEMAS, "perfetto_trace.proto")
    with open(path, "rb") as f:
        r = subprocess.run(["protoc", "--decode=perfetto.protos.Trace", "-I" + SCHEMAS, proto],
                           stdin=f, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    if r.returncode != 0:
        raise Fail("protoc cannot decode %s: %s" % (path, r.stderr.decode()[:300]))
    bare = re.search(rb"^\s*[0-9]+(:| \{)", r.stdout, re.M)
    if bare:
        raise Fail("protoc found a field the schema does not know: %r" % bare.group(0))
    if r.stderr.strip():
        raise Fail("protoc complained: %s" % r.stderr.decode()[:300])


# ---------------------------------------------------------------------------
# trace_processor


def tp_query(ctx, path, queries):
    if not ctx.tp_dir:
        return None
    r = subprocess.run(["node", os.path.join(ctx.here, "tp_query.mjs"), ctx.tp_dir, path],
                       input=json.dumps(queries).encode(), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=300)
    try:
        out = json.loads(r.stdout.decode())
    except ValueError:
        raise Fail("trace_processor runner printed no JSON (status %d): %s"
                   % (r.returncode, r.stderr.decode()[-300:]))
    if "error" in out:
        raise Fail("trace_processor: %s" % out["error"][:500])
    return out["results"]


def tp_check(ctx, path, tr):
    res = tp_query(ctx, path, [
        "select count(*) as n from slice",
        "select count(*) as n from slice where dur = -1",
        "select name, idx, severity, source, value from stats "
        "where value > 0 and severity in ('error', 'data_loss')",
        "select count(*) as n from perf_sample",
        "select tid, name from thread where tid != 0",
        "select count(distinct counter_track.id) as n from counter_track join counter "
        "on counter.track_id = counter_track.id where counter_track.name like '%/s' "
        "or counter_track.name like 'CPU use%'",
        "select count(*) as n from perf_sample where callsite_id is not null",
        "select count(*) as n from slice join args using (arg_set_id) "
        "where args.key in ('debug.MessageId', 'debug.AllocatedObjects')",
    ])
    if res is None:
        return "skipped"
    n, open_, errors, samples, threads, counters, stacks, args = res
    if stacks[0]["n"] != tr.samples:
        raise Fail("trace_processor resolved the callstacks of %d of %d perf samples"
                   % (stacks[0]["n"], tr.samples))
    if args[0]["n"] != 2 * len(tr.slices) + len(tr.stalls):
        raise Fail("trace_processor: %d begin/end arguments for %d slices and %d stalls, want both on "
                   "every slice, a MessageId on every stall" % (args[0]["n"], len(tr.slices), len(tr.stalls)))
    if open_[0]["n"]:
        raise Fail("trace_processor: %d slices never end" % open_[0]["n"])
    if errors:
        raise Fail("trace_processor stats report errors: %s" % errors[:5])
    if n[0]["n"] != len(tr.slices) + len(tr.stalls) + len(tr.instants):
        raise Fail("trace_processor sees %d slices, the trace has %d, %d stalls and %d flow instants"
                   % (n[0]["n"], len(tr.slices), len(tr.stalls), len(tr.instants)))
    if samples[0]["n"] != tr.samples:
        raise Fail("trace_processor sees %d perf samples, the trace has %d" % (samples[0]["n"], tr.samples))
    names = {}  # a thread of a process that exec'ed has a name per image
    for r in threads:
        names.setdefault(r["tid"], set()).add(r["name"])
    for tid, name in tr.threads.values():
        if name and name not in names.get(tid, ()):
            raise Fail("trace_processor names thread %d %s, want %r" % (tid, sorted(names.get(tid, ())), name))
    if tr.counters and counters[0]["n"] != len(tr.counters):
        raise Fail("trace_processor sees %d counter tracks with values, want %d"
                   % (counters[0]["n"], len(tr.counters)))
    return "ok"


# ---------------------------------------------------------------------------
# pprof


def decode_pprof(path):
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] != b"\x1f\x8b":
        raise Fail("%s is not gzip" % path)
    p = msg(gzip.decompress(raw))
    strings = [s.decode() for s in p.get(6, [])]
    if not strings or strings[0] != "":
        raise Fail("pprof string table must start with an empty string")
    types = [(strings[one(msg(v), 1, 0)], strings[one(msg(v), 2, 0)]) for v in p.get(1, [])]
    locs = {one(msg(v), 1): msg(v) for v in p.get(4, [])}
    funcs = {one(msg(v), 1): msg(v) for v in p.get(5, [])}
    maps = {one(msg(v), 1): msg(v) for v in p.get(3, [])}
    totals = [0] * len(types)
    for s in p.get(2, []):
        m = msg(s)
        for lid in packed_or_not(m, 1):
            if lid not in locs:
                raise Fail("pprof sample uses undefined location %d" % lid)
        vals = packed_or_not(m, 2)
        if len(vals) != len(types):
            raise Fail("pprof sample has %d values for %d types" % (len(vals), len(types)))
        for i, v in enumerate(vals):
            totals[i] += v
    for lid, l in locs.items():
        mid = one(l, 2, 0)
        if mid and mid not in maps:
            raise Fail("pprof location %d uses undefined mapping %d" % (lid, mid))
        for ln in l.get(4, []):
            if one(msg(ln), 1) not in funcs:
                raise Fail("pprof location %d uses an undefined function" % lid)
    for mid, m in maps.items():
        bid = strings[one(m, 6, 0)]
        if bid and not re.fullmatch(r"[0-9a-f]+", bid):
            raise Fail("pprof mapping %d build id %r is not hex" % (mid, bid))
    return {"types": types, "totals": dict(zip([t for t, _ in types], totals)), "strings": strings}


def go_pprof_totals(path):
    r = subprocess.run(["go", "tool", "pprof", "-top", path], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=300)
    if r.returncode != 0 or b"Showing nodes" not in r.stdout:
        raise Fail("go tool pprof -top failed (%d): %s" % (r.returncode, r.stderr.decode()[:300]))
    r = subprocess.run(["go", "tool", "pprof", "-raw", path], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=300)
    if r.returncode != 0:
        raise Fail("go tool pprof -raw failed: %s" % r.stderr.decode()[:300])
    lines = r.stdout.decode().splitlines()
    try:
        start = lines.index("Samples:")
    except ValueError:
        raise Fail("go tool pprof -raw printed no samples")
    header = lines[start + 1].split()
    names = [h.split("/")[0] for h in header]
    totals = [0] * len(names)
    for ln in lines[start + 2:]:
        m = re.match(r"^\s*((?:-?\d+\s+)*-?\d+):", ln)
        if not m:
            if ln and not ln.startswith(" "):
                break
            continue
        vals = [int(x) for x in m.group(1).split()]
        for i, v in enumerate(vals):
            totals[i] += v
    return dict(zip(names, totals))


# ---------------------------------------------------------------------------
# Chrome JSON, folded, nanoscope


def decode_chrome(path):
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    evs = doc["traceEvents"]
    thread_names = {}
    stacks = {}
    slices = []
    stalls, async_open = [], {}
    fractional = False
    for e in evs:
        ph = e["ph"]
        if ph == "M":
            if e["name"] == "thread_name":
                thread_names[e["tid"]] = e["args"]["name"]
            continue
        if ph == "C":
            continue
        ts = e["ts"]
        if isinstance(ts, float) and ts != int(ts):
            fractional = True
        ns = int(round(ts * 1000))
        if ph == "B":
            st = stacks.setdefault(e["tid"], [])
            st.append({"tid": e["tid"], "name": e["name"], "begin": ns, "depth": len(st),
                       "args": dict(e.get("args", {}))})
        elif ph == "E":
            st = stacks.get(e["tid"])
            if not st:
                raise Fail("chrome: E without B on thread %d" % e["tid"])
            s = st.pop()
            if e.get("name") not in (None, s["name"]):
                raise Fail("chrome: E %r closes B %r" % (e.get("name"), s["name"]))
            if ns < s["begin"]:
                raise Fail("chrome: %s ends before it begins" % s["name"])
            s["end"] = ns
            s["args"].update(e.get("args", {}))
            slices.append(s)
        elif ph in ("b", "e") and e.get("cat") == "stall":
            # a stall: an async event pair (same id and name)
            if ph == "b":
                if e["id"] in async_open:
                    raise Fail("chrome: stall id %r begins twice" % e["id"])
                async_open[e["id"]] = {"tid": e["tid"], "name": e["name"], "begin": ns,
                                       "args": dict(e.get("args", {}))}
            else:
                s = async_open.pop(e["id"], None)
                if not s or s["name"] != e["name"] or ns < s["begin"]:
                    raise Fail("chrome: stall end %r without its begin" % e["id"])
                s["end"] = ns
                s["args"].update(e.get("args", {}))
                stalls.append(s)
        else:
            raise Fail("chrome: unexpected phase %r" % ph)
    for tid, st in stacks.items():
        if st:
            raise Fail("chrome: thread %d has %d unclosed slices" % (tid, len(st)))
    if async_open:
        raise Fail("chrome: %d stalls never end" % len(async_open))
    return {"slices": slices, "threads": thread_names, "fractional": fractional, "doc": doc, "stalls": stalls}


def folded_total(path):
    total = 0
    with open(path, encoding="utf-8") as f:
        for ln in f:
            stack, _, v = ln.rstrip("\n").rpartition(" ")
            if not stack or not v.isdigit():
                raise Fail("folded: bad line %r" % ln[:100])
            total += int(v)
    return total


def decode_nanoscope(path):
    events = []
    last = -1
    depth = 0
    with open(path, encoding="utf-8") as f:
        for ln in f:
            m = re.fullmatch(r"(\d+):(\+(.+)|POP)\n?", ln)
            if not m:
                raise Fail("nanoscope: bad line %r" % ln[:100])
            t = int(m.group(1))
            if t < last:
                raise Fail("nanoscope: time goes back at %r" % ln)
            last = t
            if m.group(3) is not None:
                depth += 1
                events.append(("+", m.group(3), t))
            else:
                depth -= 1
                if depth < 0:
                    raise Fail("nanoscope: POP without entry")
                events.append(("POP", None, t))
    if depth:
        raise Fail("nanoscope: %d entries never popped" % depth)
    return events


# ---------------------------------------------------------------------------
# the harness


class Ctx:
    def __init__(self, args):
        self.rhea = os.path.join(args.root, "rhea")
        self.bin = args.bin
        self.work = args.work
        self.here = os.path.dirname(os.path.abspath(__file__))
        self.tp_dir = args.tp_dir
        self.results = []
        self.recs = {}

    def run(self, argv, timeout=300):
        r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
        return r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")

    def path(self, name):
        return os.path.join(self.work, name)

    def convert(self, rec, fmt, out, extra=(), expect=0):
        argv = [self.rhea, "convert", "-q", "-f", fmt, "-o", out] + list(extra) + [rec]
        rc, so, se = self.run(argv)
        if rc != expect:
            raise Fail("%s: status %d, want %d: %s" % (" ".join(argv[1:]), rc, expect, se.strip()[:400]))
        return so, se

    def report(self, rec):
        rc, so, se = self.run([self.rhea, "report", "--json", rec])
        if rc != 0:
            raise Fail("rhea report --json %s: %s" % (rec, se.strip()))
        return json.loads(so)


def record(ctx, name, opts=(), expect=0):
    out = ctx.path(name + ".rhea")
    for p in (out, out + ".old"):
        if os.path.exists(p):
            os.unlink(p)
    argv = [ctx.rhea, "record", "-q", "-o", out] + list(opts) + ["--", os.path.join(ctx.bin, name)]
    rc, so, se = ctx.run(argv)
    if rc != expect:
        raise Fail("record %s: status %d: %s" % (name, rc, se.strip()[:300]))
    return out, so


def measured(stdout):
    got = {}
    for ln in stdout.splitlines():
        name, _, v = ln.partition(" ")
        got.setdefault(name, []).append(int(v))
    return got


def near(got, want, interval):
    return abs(got - want) <= interval + 0.10 * want


def convert_all(ctx, rec, stem):
    """All formats of rec, checked generically; returns what the checks need."""
    out = {}
    pf = ctx.path(stem + ".pftrace")
    ctx.convert(rec, "perfetto", pf)
    protoc_check(pf)
    with open(pf, "rb") as f:
        tr = decode_perfetto(f.read())
    if not tr.slices:
        raise Fail("%s: no slices" % pf)
    if not tr.samples:
        raise Fail("%s: no perf samples" % pf)
    out["tp"] = tp_check(ctx, pf, tr)
    out["trace"] = tr
    # --samples cpu: the sampler's captures alone, once per period of CPU
    pc = ctx.path(stem + ".cpu.pftrace")
    ctx.convert(rec, "perfetto", pc, ["--samples", "cpu"])
    protoc_check(pc)
    with open(pc, "rb") as f:
        tc = decode_perfetto(f.read())
    periods = ctx.report(rec)["cpu_profile"]["samples"]
    if tc.samples != periods:
        raise Fail("--samples cpu: %d perf samples, want the CPU profile's %d periods" % (tc.samples, periods))
    if periods:
        tp_check(ctx, pc, tc)

    ch = ctx.path(stem + ".json")
    ctx.convert(rec, "chrome", ch)
    cj = decode_chrome(ch)
    if not cj["fractional"]:
        raise Fail("chrome: no timestamp has a fractional part (precision lost?)")
    # The same slices as the Perfetto trace, up to the time origin.
    a = sorted((s["tid"], s["begin"], -s["end"], s["name"]) for s in tr.slices)
    b = sorted((s["tid"], s["begin"], -s["end"], s["name"]) for s in cj["slices"])
    if len(a) != len(b):
        raise Fail("chrome has %d slices, perfetto %d" % (len(b), len(a)))
    shift = a[0][1] - b[0][1]
    for x, y in zip(a, b):
        if x[0] != y[0] or x[3] != y[3] or x[1] - y[1] != shift or x[2] - y[2] != -shift:
            raise Fail("chrome slice %r differs from perfetto's %r" % (y, x))
    for tid, name in tr.threads.values():
        if name and cj["threads"].get(tid) != name:
            raise Fail("chrome names thread %d %r, want %r" % (tid, cj["threads"].get(tid), name))
    res = tp_query(ctx, ch, [
        "select count(*) as n from slice",
        "select count(*) as n from slice where dur = -1",
        "select name, value from stats where value > 0 and severity in ('error', 'data_loss')",
        "select sum(dur) as d from slice",
    ])
    if res is not None:
        if res[0][0]["n"] != len(cj["slices"]) or res[1][0]["n"] or res[2]:
            raise Fail("trace_processor on the Chrome JSON: %d slices (want %d), %d open, errors %s"
                       % (res[0][0]["n"], len(cj["slices"]), res[1][0]["n"], res[2][:3]))
        if res[3][0]["d"] != sum(s["end"] - s["begin"] for s in tr.slices):
            raise Fail("trace_processor on the Chrome JSON: slice durations differ from the "
                       "Perfetto trace's (nanoseconds lost?)")
    out["chrome"] = cj
    out["shift"] = shift

    pb = ctx.path(stem + ".pb.gz")
    ctx.convert(rec, "pprof", pb)
    pp = decode_pprof(pb)
    got = go_pprof_totals(pb)
    if got != pp["totals"]:
        raise Fail("go tool pprof totals %r differ from the file's %r" % (got, pp["totals"]))
    rep = ctx.report(rec)
    want = {
        "wall": sum(f["self_ns"] for f in rep["functions"]),
        "cpu": sum(f["self_cpu_ns"] for f in rep["functions"]),
        "alloc_objects": sum(t["alloc_count"] for t in rep["threads"]),
        "alloc_space": sum(t["alloc_bytes"] for t in rep["threads"]),
        "cpu_samples": rep["cpu_profile"]["samples"],
    }
    if got != want:
        raise Fail("pprof totals %r, the recording's (rhea report) are %r" % (got, want))
    out["pprof"] = got

    for weight, key in (("wall", "wall"), ("cpu", "cpu"), ("alloc-count", "alloc_objects"),
                        ("alloc-bytes", "alloc_space"), ("cpu-samples", "cpu_samples")):
        fo = ctx.path("%s.%s.folded" % (stem, weight))
        ctx.convert(rec, "folded", fo, ["--weight", weight])
        t = folded_total(fo)
        if t != want[key]:
            raise Fail("folded --weight %s totals %d, want %d" % (weight, t, want[key]))

    ns = ctx.path(stem + ".nanoscope.txt")
    ctx.convert(rec, "nanoscope", ns)
    ev = decode_nanoscope(ns)
    pid = tr.process[0]
    main = sorted((s for s in cj["slices"] if s["tid"] == pid), key=lambda s: (s["begin"], s["depth"]))
    entries = [e for e in ev if e[0] == "+"]
    if [e[1] for e in entries] != [s["name"] for s in main]:
        raise Fail("nanoscope entries differ from the main thread's slices")
    if [e[2] for e in entries] != [s["begin"] for s in main]:
        raise Fail("nanoscope entry times differ from the main thread's slices")
    return out


def only(slices, thread, name):
    got = [s for s in slices if s["thread"] == thread and s["name"] == name]
    return got


def t_known(ctx):
    rec, so = record(ctx, "convert_known")
    ctx.recs["known"] = rec
    truth = measured(so)
    out = convert_all(ctx, rec, "known")
    tr = out["trace"]
    interval = 1 * MS
    for thread, name, allocs, nbytes in (("known", "phase_alloc", 4000, 256000),
                                         ("known", "phase_sleep", 0, 0),
                                         ("known", "phase_spin", 0, 0),
                                         ("allocator", "alloc_burst", 10000, 320000)):
        ss = only(tr.slices, thread, name)
        if len(ss) != 1:
            raise Fail("%s/%s: %d slices, want 1" % (thread, name, len(ss)))
        s = ss[0]
        dur = s["end"] - s["begin"]
        want = truth[name][0]
        if not near(dur, want, interval):
            raise Fail("%s lasts %.2f ms in the trace, %.2f ms by the program's clock"
                       % (name, dur / MS, want / MS))
        if s["args"].get("WallTime") != dur:
            raise Fail("%s: WallTime %s, slice duration %d" % (name, s["args"].get("WallTime"), dur))
        if s["args"].get("AllocatedObjects") != allocs or s["args"].get("AllocatedBytes") != nbytes:
            raise Fail("%s: AllocatedObjects %s AllocatedBytes %s, want exactly %d and %d"
                       % (name, s["args"].get("AllocatedObjects"), s["args"].get("AllocatedBytes"),
                          allocs, nbytes))
        for k in ("CPUTime", "SelfTime", "SelfCpuTime", "MessageId", "Trigger", "MinFlt", "MajFlt",
                  "NvCsw", "NivCsw"):
            if k not in s["args"]:
                raise Fail("%s has no %s argument" % (name, k))
    sleep = only(tr.slices, "known", "phase_sleep")[0]
    waits = [s for s in tr.slices if s["thread"] == "known" and s["name"] == "nanosleep"
             and s["begin"] >= sleep["begin"] and s["end"] <= sleep["end"] and s["depth"] == sleep["depth"] + 1]
    if len(waits) != 1:
        raise Fail("phase_sleep holds %d nanosleep wait slices, want 1" % len(waits))
    # At least the 60 ms asked for, at most what the program measured around
    # the call (a loaded machine wakes the sleeper late: that is block time).
    bt = waits[0]["args"].get("BlockTime", 0)
    if bt < 60 * MS or bt > truth["phase_sleep"][0] + interval:
        raise Fail("nanosleep BlockTime %.2f ms, want 60 ms .. %.2f ms (phase_sleep by the program's clock)"
                   % (bt / MS, truth["phase_sleep"][0] / MS))
    return "tp %s; phase_alloc %.1f ms / %d allocs" % (
        out["tp"], (only(tr.slices, "known", "phase_alloc")[0]["end"] - only(tr.slices, "known", "phase_alloc")[0]["begin"]) / MS,
        only(tr.slices, "known", "phase_alloc")[0]["args"]["AllocatedObjects"])


def t_loop(ctx):
    rec, so = record(ctx, "convert_loop")
    ctx.recs["loop"] = rec
    truth = measured(so)["handle_msg"]
    out = convert_all(ctx, rec, "loop")
    tr = out["trace"]
    hs = sorted(only(tr.slices, "loop", "handle_msg"), key=lambda s: s["begin"])
    if len(hs) != 3:
        raise Fail("%d handle_msg slices, want 3 (two executions with identical stacks must not merge)"
                   % len(hs))
    for i, (s, want) in enumerate(zip(hs, truth)):
        dur = s["end"] - s["begin"]
        if not near(dur, want, 1 * MS):
            raise Fail("handle_msg #%d lasts %.2f ms, %.2f ms by the program's clock" % (i + 1, dur / MS, want / MS))
        a = s["args"].get("AllocatedObjects", -1)
        if a != 200 or s["args"].get("AllocatedBytes") != 200 * 48:
            raise Fail("handle_msg #%d: AllocatedObjects %d AllocatedBytes %s, want exactly 200 and 9600"
                       % (i + 1, a, s["args"].get("AllocatedBytes")))
    ids = [s["args"].get("MessageId") for s in hs]
    if len(set(ids)) != 3:
        raise Fail("handle_msg MessageIds %r, want three different ones" % ids)
    polls = [s for s in tr.slices if s["thread"] == "loop" and s["name"] == "poll"
             and s["begin"] >= hs[1]["end"] and s["end"] <= hs[2]["begin"]]
    if not polls or max(p["args"].get("BlockTime", 0) for p in polls) < 30 * MS:
        raise Fail("no poll wait slice of >= 30 ms between the 2nd and the 3rd message")
    # The same recording with iterations of 10 ms or more as stalls: the
    # three handlers' (each about 23 ms), on a "stalls" track under "loop".
    pf = ctx.path("loop-stalls.pftrace")
    ctx.convert(rec, "perfetto", pf, ["--stall", "10ms"])
    protoc_check(pf)
    with open(pf, "rb") as f:
        st = decode_perfetto(f.read())
    tp_check(ctx, pf, st)
    stalls = sorted(st.stalls, key=lambda s: s["begin"])
    ch = ctx.path("loop-stalls.json")
    ctx.convert(rec, "chrome", ch, ["--stall", "10ms"])
    cs = sorted(decode_chrome(ch)["stalls"], key=lambda s: s["begin"])
    shift = out["shift"]
    if [(s["name"], s["begin"] + shift, s["end"] + shift, s["args"]) for s in cs] != \
            [(s["name"], s["begin"], s["end"], s["args"]) for s in stalls]:
        raise Fail("chrome's stalls %r differ from perfetto's %r"
                   % ([(s["name"], s["begin"], s["end"]) for s in cs][:3], [(s["name"], s["begin"], s["end"]) for s in stalls][:3]))
    if len(stalls) != 3 or any(s["thread"] != "loop" for s in stalls):
        raise Fail("--stall 10ms: %d stalls on %s, want 3 on loop"
                   % (len(stalls), sorted(set(s["thread"] for s in stalls))))
    for i, (s, h) in enumerate(zip(stalls, hs)):
        # the first two iterations are back to back: no recorded wait bounds
        # the first one's end, its last capture does (a few ms early at most)
        if not (s["begin"] <= h["begin"] and s["end"] >= h["end"] - 5 * MS) or "handle_msg" not in s["name"]:
            raise Fail("stall #%d %r %.2f..%.2f ms does not hold handle_msg #%d %.2f..%.2f ms"
                       % (i + 1, s["name"], s["begin"] / MS, s["end"] / MS, i + 1, h["begin"] / MS, h["end"] / MS))
        if s["args"].get("MessageId") != h["args"].get("MessageId") or s["args"].get("Fatal") != 0:
            raise Fail("stall #%d args %r, want MessageId %r, Fatal 0" % (i + 1, s["args"], h["args"].get("MessageId")))
    gap = hs[1]["begin"] - hs[0]["end"]
    # Informational: whether only the message id separated the first two.
    between = [s for s in tr.slices if s["thread"] == "loop" and s["begin"] >= hs[0]["end"]
               and s["end"] <= hs[1]["begin"] and s["depth"] <= hs[0]["depth"]]
    return "tp %s; 3 slices, MessageIds %s; first two %s" % (
        out["tp"], ids, "back to back, split by message id alone" if not between and gap == 0
        else "separated by another sample")


def t_filters(ctx):
    rec = ctx.recs.get("known")
    if not rec:
        raise Fail("needs the convert_known recording")
    base = decode_chrome(ctx.path("known.json"))
    tids = {name: tid for tid, name in base["threads"].items()}
    # --thread by name and by tid
    for sel in ("allocator", str(tids["allocator"])):
        p = ctx.path("f-thread.json")
        ctx.convert(rec, "chrome", p, ["--thread", sel])
        cj = decode_chrome(p)
        if {s["tid"] for s in cj["slices"]} != {tids["allocator"]} or set(cj["threads"]) != {tids["allocator"]}:
            raise Fail("--thread %s kept threads %r" % (sel, sorted({s["tid"] for s in cj["slices"]})))
    # --min-dur: exactly the long-enough slices, still nested (decode checks balance)
    p = ctx.path("f-mindur.json")
    ctx.convert(rec, "chrome", p, ["--min-dur", "10ms"])
    cj = decode_chrome(p)
    want = sorted((s["tid"], s["begin"], s["end"], s["name"], s["depth"]) for s in base["slices"]
                  if s["end"] - s["begin"] >= 10 * MS)
    got = sorted((s["tid"], s["begin"], s["end"], s["name"], s["depth"]) for s in cj["slices"])
    if got != want or not got:
        raise Fail("--min-dur 10ms kept %d slices, want the %d unfiltered ones >= 10 ms" % (len(got), len(want)))
    pf = ctx.path("f-mindur.pftrace")
    ctx.convert(rec, "perfetto", pf, ["--min-dur", "10ms"])
    protoc_check(pf)
    with open(pf, "rb") as f:
        tr = decode_perfetto(f.read())
    if len(tr.slices) != len(want):
        raise Fail("perfetto --min-dur 10ms has %d slices, want %d" % (len(tr.slices), len(want)))
    tp = tp_check(ctx, pf, tr)
    # --from/--to: slices begin inside the window
    p = ctx.path("f-window.json")
    ctx.convert(rec, "chrome", p, ["--from", "0.1s", "--to", "0.2s"])
    cj = decode_chrome(p)
    if not cj["slices"] or len(cj["slices"]) >= len(base["slices"]):
        raise Fail("--from 0.1s --to 0.2s kept %d of %d slices" % (len(cj["slices"]), len(base["slices"])))
    bad = [s for s in cj["slices"] if not 100 * MS <= s["begin"] < 200 * MS]
    if bad:
        raise Fail("--from 0.1s --to 0.2s: slice %s begins at %.3f ms" % (bad[0]["name"], bad[0]["begin"] / MS))
    # --end last: valid, and no phase longer than with --end next
    p = ctx.path("f-last.json")
    ctx.convert(rec, "chrome", p, ["--end", "last"])
    cj = decode_chrome(p)
    for name in ("phase_alloc", "phase_spin"):
        a = [s for s in cj["slices"] if s["name"] == name]
        b = [s for s in base["slices"] if s["name"] == name]
        if len(a) != 1 or a[0]["end"] - a[0]["begin"] > b[0]["end"] - b[0]["begin"]:
            raise Fail("--end last: %s not a single slice no longer than with --end next" % name)
    pb = ctx.path("f-last.pb.gz")
    ctx.convert(rec, "pprof", pb, ["--end", "last"])
    go_pprof_totals(pb)
    return "tp %s" % tp


def expect_bad(ctx, argv, what, status=2):
    rc, so, se = ctx.run(argv, timeout=120)
    lines = se.splitlines()
    if rc != status or so or len(lines) != 1 or not lines[0].startswith("rhea: "):
        raise Fail("%s: status %d, stdout %r, stderr %r: want status %d and one 'rhea: ' line"
                   % (what, rc, so[:100], se[:300], status))
    return lines[0]


def last_chunk_cut(path, dst):
    with open(path, "rb") as f:
        data = f.read()
    off = struct.unpack_from("<I", data, 12)[0]
    last = None
    while off + 32 <= len(data):
        stored = struct.unpack_from("<I", data, off + 12)[0]
        last = (off, stored)
        off += 32 + stored
    if not last:
        raise Fail("no chunk in %s" % path)
    cut = last[0] + 32 + last[1] // 2
    with open(dst, "wb") as f:
        f.write(data[:cut])


def t_bad(ctx):
    rec = ctx.recs.get("known") or record(ctx, "convert_known")[0]
    expect_bad(ctx, [ctx.rhea, "convert", "-f", "bogus", rec], "unknown format")
    # (the output's status, 1, as a full disk's: README)
    expect_bad(ctx, [ctx.rhea, "convert", "-o", "/nonexistent-dir/x.pftrace", rec], "unwritable output", status=1)
    expect_bad(ctx, [ctx.rhea, "convert", ctx.path("missing.rhea")], "missing recording")
    expect_bad(ctx, [ctx.rhea, "convert", "--thread", "no-such-thread", "-o", ctx.path("x.pftrace"), rec],
               "unknown thread")
    expect_bad(ctx, [ctx.rhea, "convert", "--weight", "cpu", "-f", "pprof", rec], "--weight with pprof")
    expect_bad(ctx, [ctx.rhea, "convert", "--min-dur", "soon", rec], "bad duration")
    cut = ctx.path("cut.rhea")
    last_chunk_cut(rec, cut)
    line = expect_bad(ctx, [ctx.rhea, "convert", "-o", ctx.path("cut.pftrace"), cut], "recording cut inside a chunk")
    if os.path.exists(ctx.path("cut.pftrace")):
        raise Fail("a failed conversion left its output behind")
    # What precedes the damage converts with --salvage, with a warning.
    rc, so, se = ctx.run([ctx.rhea, "convert", "-q", "--salvage", "-o", ctx.path("cut.pftrace"), cut])
    if rc != 0 or "warning" not in se:
        raise Fail("convert --salvage of a cut recording: status %d: %s" % (rc, se.strip()[:300]))
    with open(ctx.path("cut.pftrace"), "rb") as f:
        decode_perfetto(f.read())
    # several recordings: formats that hold one process, a thread in none of
    # them, one bad recording among good ones (nothing is written)
    # (a copy: one file named twice is read once)
    other = ctx.path("other.rhea")
    shutil.copy(rec, other)
    expect_bad(ctx, [ctx.rhea, "convert", "-f", "nanoscope", rec, other], "nanoscope of two recordings")
    two = ctx.path("two.pftrace")
    expect_bad(ctx, [ctx.rhea, "convert", "--thread", "no-such-thread", "-o", two, rec, other],
               "unknown thread in two")
    expect_bad(ctx, [ctx.rhea, "convert", "-o", two, rec, cut], "a cut recording among two")
    if os.path.exists(two):
        raise Fail("a failed conversion of two recordings left its output behind")
    return line


def t_sigkill(ctx):
    rec, _ = record(ctx, "convert_kill", expect=128 + 9)
    pf = ctx.path("kill.pftrace")
    rc, so, se = ctx.run([ctx.rhea, "convert", "-q", "-o", pf, rec])
    salvage = rc == 2 and "truncated" in se
    if salvage:  # SIGKILL in the middle of the writer's write(): doc/format.md
        rc, so, se = ctx.run([ctx.rhea, "convert", "-q", "--salvage", "-o", pf, rec])
    # rhea record recovered what the agent had not written and ended the
    # recording: it converts as a whole one, without a warning
    lines = se.splitlines()
    if rc != 0 or lines:
        raise Fail("convert of a SIGKILLed recording: status %d, stderr %r: want 0 and no warning"
                   % (rc, se[:300]))
    protoc_check(pf)
    with open(pf, "rb") as f:
        tr = decode_perfetto(f.read())
    busy = [s for s in tr.slices if s["name"] == "busy_before_kill"]
    if not busy or sum(s["end"] - s["begin"] for s in busy) < 200 * MS:
        raise Fail("busy_before_kill has %d slices, %.1f ms; want >= 200 ms of its 250 ms"
                   % (len(busy), sum(s["end"] - s["begin"] for s in busy) / MS))
    tp = tp_check(ctx, pf, tr)
    return "%s%.0f ms of busy_before_kill; tp %s" % ("(salvaged) " if salvage else "",
                                                   sum(s["end"] - s["begin"] for s in busy) / MS, tp)


def t_processes(ctx):
    """A program and its children (sh running convert_loop in the
    background and convert_known) converted together: one Perfetto trace
    and one Chrome JSON holding every recording's process and threads, each
    thread with exactly the slices its recording's own conversion has, on
    one time line; protoc, the structural decoder and trace_processor
    accept the trace and put every thread under its own process."""
    for f in os.listdir(ctx.work):
        if f.startswith("procs."):
            os.unlink(ctx.path(f))
    base = ctx.path("procs.rhea")
    script = "%s & %s; wait" % (os.path.join(ctx.bin, "convert_loop"), os.path.join(ctx.bin, "convert_known"))
    rc, so, se = ctx.run([ctx.rhea, "record", "-q", "-o", base, "--", "/bin/sh", "-c", script])
    if rc != 0:
        raise Fail("record: status %d: %s" % (rc, se.strip()[:300]))
    recs = [base] + sorted(ctx.path(f) for f in os.listdir(ctx.work)
                           if re.fullmatch(r"procs\.\d+(\.\d+)?\.rhea", f))
    pids = {r: ctx.report(r)["recording"]["pid"] for r in recs}
    if len(set(pids.values())) < 3:
        raise Fail("want recordings of sh and its two children, got %s" % pids)
    alone = {}
    for i, r in enumerate(recs):
        pf = ctx.path("procs-%d.pftrace" % i)
        # (each file alone: sh's forked child exec'ed convert_loop, and
        # its recording alone would be convert_loop's by default)
        ctx.convert(r, "perfetto", pf, extra=["--no-follow-exec"])
        with open(pf, "rb") as f:
            alone[r] = decode_perfetto(f.read())
    pf = ctx.path("procs.pftrace")
    rc, so, se = ctx.run([ctx.rhea, "convert", "-q", "-o", pf] + recs)
    if rc != 0:
        raise Fail("convert of %d recordings: status %d: %s" % (len(recs), rc, se.strip()[:300]))
    protoc_check(pf)
    with open(pf, "rb") as f:
        tr = decode_perfetto(f.read())
    got_pids = sorted(p for p, _ in tr.processes.values())
    if got_pids != sorted(pids.values()):
        raise Fail("the trace describes processes %s, the recordings are of %s" % (got_pids, sorted(pids.values())))

    def key(s):
        return (s["tid"], s["begin"], s["end"], s["depth"], s["name"])
    want = sorted(key(s) for a in alone.values() for s in a.slices)
    got = sorted(key(s) for s in tr.slices)
    if got != want:
        raise Fail("the trace has %d slices, the recordings' own conversions %d (or they differ)"
                   % (len(got), len(want)))
    # a track per thread per recording (a process that exec'ed has one
    # recording per image: its threads a track in each), under its pid
    for tid in {t for a in alone.values() for t, _ in a.threads.values()}:
        owners = sorted(pids[r] for r in recs for t, _ in alone[r].threads.values() if t == tid)
        mine = sorted(tr.thread_pid[u] for u, (t, _) in tr.threads.items() if t == tid)
        if mine != owners:
            raise Fail("thread %d: tracks under pids %s, want %s" % (tid, mine, owners))
    if tr.samples != sum(a.samples for a in alone.values()):
        raise Fail("%d perf samples, the recordings' own conversions have %d"
                   % (tr.samples, sum(a.samples for a in alone.values())))
    note = "%d processes, %d slices" % (len(tr.processes), len(tr.slices))
    tp = tp_check(ctx, pf, tr)
    if tp == "ok":
        res = tp_query(ctx, pf, ["select thread.tid as tid, process.pid as pid from thread "
                                 "join process using (upid) where thread.tid != 0"])
        under = {r["tid"]: r["pid"] for r in res[0]}
        for r in recs:
            for tid, _ in alone[r].threads.values():
                if under.get(tid) != pids[r]:
                    raise Fail("trace_processor puts thread %d under pid %s, want %d" % (tid, under.get(tid), pids[r]))
    note += "; tp %s" % tp
    js = ctx.path("procs.json")
    rc, so, se = ctx.run([ctx.rhea, "convert", "-q", "-f", "chrome", "-o", js] + recs)
    if rc != 0:
        raise Fail("chrome convert of %d recordings: status %d: %s" % (len(recs), rc, se.strip()[:300]))
    ch = decode_chrome(js)
    names = [e for e in ch["doc"]["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"]
    if sorted(e["pid"] for e in names) != sorted(pids.values()):
        raise Fail("chrome: process names for pids %s" % sorted(e["pid"] for e in names))
    # one time line: Chrome's relative times are Perfetto's absolute ones
    # minus one origin, the same for every process
    pfs = sorted(key(s) for s in tr.slices)
    chs = sorted((s["tid"], s["begin"], s["depth"], s["name"]) for s in ch["slices"])
    if len(pfs) != len(chs):
        raise Fail("chrome has %d slices, perfetto %d" % (len(chs), len(pfs)))
    shifts = {(a[0], a[1] - b[1]) for a, b in zip(pfs, sorted(chs, key=lambda c: (c[0], c[1])))}
    if len({d for _, d in shifts}) != 1:
        raise Fail("chrome's timestamps are not one shift of perfetto's: %s" % sorted(shifts)[:5])
    if ch["doc"]["otherData"].get("processes") != len(recs):
        raise Fail("chrome otherData %r" % ch["doc"]["otherData"])
    # folded: each recording's lines, behind its program's name
    fo = ctx.path("procs.folded")
    rc, so, se = ctx.run([ctx.rhea, "convert", "-q", "-f", "folded", "-o", fo] + recs)
    if rc != 0:
        raise Fail("folded convert of %d recordings: status %d: %s" % (len(recs), rc, se.strip()[:300]))
    want = 0
    for i, r in enumerate(recs):
        one = ctx.path("procs-%d.folded" % i)
        ctx.convert(r, "folded", one, extra=["--no-follow-exec"])
        want += folded_total(one)
    if folded_total(fo) != want:
        raise Fail("folded of all: total %d, the recordings' own %d" % (folded_total(fo), want))
    firsts = {ln.split(";", 1)[0] for ln in open(fo) if ln.strip()}
    if not firsts or not firsts <= {"dash", "convert_loop", "convert_known"}:
        raise Fail("folded of all: stacks start with %s, want the programs' names" % sorted(firsts))
    # pprof: one profile, every recording's values, labelled with its pid
    pp = ctx.path("procs.pb.gz")
    rc, so, se = ctx.run([ctx.rhea, "convert", "-q", "-f", "pprof", "-o", pp] + recs)
    if rc != 0:
        raise Fail("pprof convert of %d recordings: status %d: %s" % (len(recs), rc, se.strip()[:300]))
    want = {}
    for i, r in enumerate(recs):
        one = ctx.path("procs-%d.pb.gz" % i)
        ctx.convert(r, "pprof", one, extra=["--no-follow-exec"])
        for k, v in go_pprof_totals(one).items():
            want[k] = want.get(k, 0) + v
    got = go_pprof_totals(pp)
    if got != want:
        raise Fail("pprof of all: totals %s, the recordings' own add up to %s" % (got, want))
    r = subprocess.run(["go", "tool", "pprof", "-tags", pp], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=300)
    tagged = set(int(x) for x in re.findall(rb"^\s+\S+ \(\s*[\d.]+%\): (\d+)$", r.stdout, re.M))
    if not set(pids.values()) <= tagged:
        raise Fail("pprof of all: pid labels %s, want %s" % (sorted(tagged), sorted(set(pids.values()))))
    return note


def t_wakeup(ctx):
    """Thread B holds a mutex 50 ms; main waits for it.  The wait slice
    names B as WakeUpBy and LockOwner, and the trace has a flow arrow from
    a "release" instant on B's track to a "woken" instant on main's track
    at the end of the wait (checked in trace_processor when available)."""
    rec, so = record(ctx, "convert_wakeup")
    b_tid = int(so.split()[0])
    out = convert_all(ctx, rec, "wakeup")
    tr = out["trace"]
    waits = [s for s in tr.slices if s["name"] == "pthread_mutex_lock"
             and s["args"].get("BlockTime", 0) >= 40 * MS]
    if len(waits) != 1:
        raise Fail("want one ~50 ms mutex wait slice, got %d" % len(waits))
    w = waits[0]
    if w["args"].get("WakeUpBy") != b_tid or w["args"].get("LockOwner") != b_tid:
        raise Fail("WakeUpBy %s LockOwner %s, want B = %d" % (w["args"].get("WakeUpBy"),
                                                                w["args"].get("LockOwner"), b_tid))
    if not ctx.tp_dir:
        return "WakeUpBy = LockOwner = B; flows not checked (no trace_processor)"
    res = tp_query(ctx, ctx.path("wakeup.pftrace"), [
        "select t1.tid as src_tid, s1.name as src, t2.tid as dst_tid, s2.name as dst, "
        "s1.ts as src_ts, s2.ts as dst_ts from flow f "
        "join slice s1 on f.slice_out = s1.id join thread_track k1 on s1.track_id = k1.id "
        "join thread t1 using(utid) "
        "join slice s2 on f.slice_in = s2.id join thread_track k2 on s2.track_id = k2.id "
        "join thread t2 on k2.utid = t2.utid"])
    flows = res[0]
    if len(flows) != 1:
        raise Fail("want one flow, trace_processor has %r" % flows)
    f = flows[0]
    if (f["src"], f["dst"], f["src_tid"]) != ("release", "woken", b_tid):
        raise Fail("flow %r, want release on B (%d) -> woken" % (f, b_tid))
    if not (0 <= f["dst_ts"] - f["src_ts"] <= 10 * MS):
        raise Fail("release %d ns before the wait's end, want 0..10 ms" % (f["dst_ts"] - f["src_ts"]))
    return "WakeUpBy = LockOwner = B; trace_processor flow release(B) -> woken(main)"


def t_shared_wakeup(ctx):
    """pshared.c: the parent releases a process-shared mutex, semaphore and
    condition variable its child waits on (and a thread of the child posts
    a private semaphore).  The two recordings in one trace: protoc decodes
    it, and trace_processor finds three flows from "release" instants on
    the parent's thread to "woken" ones on the child's, each within 100 ms
    (the release is dated just before it happens), plus the child's own."""
    for f in os.listdir(ctx.work):
        if f.startswith("pshared."):
            os.unlink(ctx.path(f))
    base = ctx.path("pshared.rhea")
    rc, so, se = ctx.run([ctx.rhea, "record", "-q", "-o", base, "--", os.path.join(ctx.bin, "pshared")])
    if rc != 0:
        raise Fail("record: status %d: %s" % (rc, se.strip()[:300]))
    recs = [base] + sorted(ctx.path(f) for f in os.listdir(ctx.work) if re.fullmatch(r"pshared\.\d+\.rhea", f))
    if len(recs) != 2:
        raise Fail("want the parent's and the child's recordings, got %s" % recs)
    parent, child = (ctx.report(r)["recording"]["pid"] for r in recs)
    pf = ctx.path("pshared.pftrace")
    rc, so, se = ctx.run([ctx.rhea, "convert", "-q", "-o", pf] + recs)
    if rc != 0:
        raise Fail("convert of both: status %d: %s" % (rc, se.strip()[:300]))
    protoc_check(pf)
    if not ctx.tp_dir:
        return "protoc ok; flows not checked (no trace_processor)"
    res = tp_query(ctx, pf, [
        "select p1.pid as src_pid, s1.name as src, p2.pid as dst_pid, s2.name as dst, "
        "s1.ts as src_ts, s2.ts as dst_ts from flow f "
        "join slice s1 on f.slice_out = s1.id join thread_track k1 on s1.track_id = k1.id "
        "join thread t1 using(utid) join process p1 on t1.upid = p1.upid "
        "join slice s2 on f.slice_in = s2.id join thread_track k2 on s2.track_id = k2.id "
        "join thread t2 on k2.utid = t2.utid join process p2 on t2.upid = p2.upid"])
    flows = res[0]
    across = [f for f in flows if (f["src_pid"], f["dst_pid"]) == (parent, child)]
    inside = [f for f in flows if (f["src_pid"], f["dst_pid"]) == (child, child)]
    if len(across) != 3 or len(inside) != 1 or len(flows) != 4:
        raise Fail("flows %r: want 3 from the parent (%d) to the child (%d) and 1 inside the child"
                   % (flows, parent, child))
    for f in across:
        if (f["src"], f["dst"]) != ("release", "woken") or not (0 <= f["dst_ts"] - f["src_ts"] <= 100 * MS):
            raise Fail("flow %r: want release -> woken within 0..100 ms" % f)
    return "trace_processor: 3 flows parent -> child, 1 inside the child"


TESTS = [("known", t_known), ("loop", t_loop), ("filters", t_filters), ("bad_input", t_bad),
         ("sigkill", t_sigkill), ("wakeup", t_wakeup), ("processes", t_processes),
         ("shared_wakeup", t_shared_wakeup)]


def main():
    global SCHEMAS
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--bin", required=True, help="directory of the built convert_* scenarios")
    ap.add_argument("--work", required=True)
    ap.add_argument("--schemas", default="")
    ap.add_argument("--tp-dir", default="", help="trace_processor assets (empty: skip that check)")
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    SCHEMAS = args.schemas
    ctx = Ctx(args)
    passed = failed = 0
    for name, fn in TESTS:
        if args.only and args.only not in name:
            continue
        try:
            note = fn(ctx)
            print("ok %s%s" % (name, (": " + note) if note else ""), flush=True)
            passed += 1
        except Fail as e:
            print("FAIL %s: %s" % (name, e), flush=True)
            failed += 1
        except Exception:
            print("FAIL %s: %s" % (name, traceback.format_exc().strip().replace("\n", " | ")), flush=True)
            failed += 1
    print("convert: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
