"""Trace files in the Chrome Trace Event Format (JSON), which Perfetto and chrome://tracing open.

``step_trace(c, s)`` is one step's BSP run on a tile chip: a ``chip`` lane whose supersteps
(sync, then the slowest tile's exchange, then the slowest tile's compute, as ``tiles`` times
them) and streaming add up to the step's ``time_s``, an ``ops`` lane (one event per op, all its
instances), and one lane per tile group with that group's slowest tile's exchange and compute
in each superstep (the wait to the lane above is the group waiting at the sync). Identical
supersteps an op repeats (its layers and serial passes) are one event with ``args.repeats``.
On a GPU the ``ops`` lane carries each op's compute, memory and launch split; a step placed on
several chips has a ``placement`` lane (its split: compute, link, bubble, ...) and one lane per
pipeline stage with the stage's time.

``serving_trace(result)`` is a serving run: one process per device with its batches (a batched
run), and request spans (queue, then prefill to the first token and decode for generation;
queue then service otherwise) of at most ``max_requests`` requests, evenly spread over the run.

Times are microseconds (``ts``, ``dur``), as the format defines; events are complete events
(``ph: "X"``) and metadata naming processes and threads (``ph: "M"``).
"""

from __future__ import annotations

import json

import numpy as np

US = 1e6  # microseconds per second: the format's time unit
MAX_BATCH_EVENTS = 20_000  # a serving trace's batches: the first this many (a viewer stays quick)
MAX_REQUEST_SPANS = 200  # requests whose spans a serving trace draws


def _meta(pid: int, name: str, tid: int | None = None) -> dict:
    if tid is None:
        return {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}}
    return {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}}


def _x(name: str, cat: str, ts_s: float, dur_s: float, pid: int, tid: int, **args) -> dict:
    ev = {
        "name": name,
        "cat": cat,
        "ph": "X",
        "ts": ts_s * US,
        "dur": dur_s * US,
        "pid": pid,
        "tid": tid,
    }
    if args:
        ev["args"] = args
    return ev


def _doc(events: list, **other) -> dict:
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {"generator": "ipusim", **other},
    }


def step_trace(c, s, *, chips: int = 1, groups: int = 16) -> dict:
    """The trace of step ``s`` on chip ``c`` (see the module docstring)."""
    from . import hardware, machine, tiles

    c = hardware.chip(c)
    if chips > 1:
        return _placed_trace(machine.simulate(c, s, chips=chips))
    if c.kind != "tile":
        return _gpu_trace(machine.simulate(c, s))
    prof = tiles.profile(c, s)
    r, prog, hz = prof.result, prof.program, c.clock_hz
    T = prog.comp.shape[1]
    edges = np.linspace(0, T, groups + 1).astype(int)
    ev = [
        _meta(0, f"{c.name}: {r.model} {r.phase}, batch {r.batch}"),
        _meta(0, "chip (supersteps)", 0),
        _meta(0, "ops", 1),
    ]
    ev += [_meta(0, f"tiles {edges[g]}-{edges[g + 1] - 1}", 2 + g) for g in range(groups)]
    t = 0.0
    streaming = r.op_split.get("streaming")
    for i, name in enumerate(r.op_names):
        op_start = t
        for k in np.flatnonzero(prog.op_index == i):
            n = float(prog.count[k])
            sync, xs, cs = (
                prog.sync_cycles / hz * n,
                prog.slowest[k, 1] / hz * n,
                prog.slowest[k, 0] / hz * n,
            )
            label = prog.phases[k].label or name
            ev.append(_x("sync", "sync", t, sync, 0, 0, op=name, repeats=n))
            ev.append(_x("exchange", "exchange", t + sync, xs, 0, 0, op=name, repeats=n))
            ev.append(
                _x(
                    f"compute {name}",
                    "compute",
                    t + sync + xs,
                    cs,
                    0,
                    0,
                    op=name,
                    phase=label,
                    repeats=n,
                )
            )
            for g in range(groups):
                lo, hi = edges[g], edges[g + 1]
                gx, gc = prog.exch[k, lo:hi].max() / hz * n, prog.comp[k, lo:hi].max() / hz * n
                if gx > 0:
                    ev.append(_x("exchange", "exchange", t + sync, gx, 0, 2 + g, op=name))
                if gc > 0:
                    ev.append(
                        _x(f"compute {name}", "compute", t + sync + xs, gc, 0, 2 + g, op=name)
                    )
            t += sync + xs + cs
        if streaming is not None and streaming[i] > 0:
            ev.append(_x("streaming", "streaming", t, float(streaming[i]), 0, 0, op=name))
            t += float(streaming[i])
        ev.append(_x(name, "op", op_start, t - op_start, 0, 1, time_s=float(r.op_time_s[i])))
    return _doc(
        ev,
        chip=c.name,
        model=r.model,
        phase=r.phase,
        time_s=r.time_s,
        fit=r.fit,
        note="identical supersteps an op repeats are one event (args.repeats)",
    )


def _gpu_trace(r) -> dict:
    ev = [_meta(0, f"{r.chip}: {r.model} {r.phase}, batch {r.batch}"), _meta(0, "ops", 1)]
    t = 0.0
    for i, name in enumerate(r.op_names):
        d = float(r.op_time_s[i])
        ev.append(_x(name, "op", t, d, 0, 1, **{k: float(v[i]) for k, v in r.op_split.items()}))
        t += d
    return _doc(ev, chip=r.chip, model=r.model, phase=r.phase, time_s=r.time_s, fit=r.fit)


def _placed_trace(r) -> dict:
    pl = r.placement
    ev = [
        _meta(0, f"{r.chip} x {pl.chips_used}: {r.model} {r.phase}, {pl.label()}"),
        _meta(0, "placement", 0),
    ]
    t = 0.0
    for k, v in r.split.items():
        ev.append(_x(k, k, t, float(v), 0, 0))
        t += float(v)
    for sidx, (layers, st) in enumerate(zip(pl.stage_layers, pl.stage_time_s, strict=True)):
        pid = 1 + sidx
        ev += [
            _meta(pid, f"stage {sidx}: {pl.tensor} chip(s), {layers} layers"),
            _meta(pid, "stage", 0),
        ]
        ev.append(_x(f"stage {sidx}", "stage", 0.0, float(st), pid, 0, layers=int(layers)))
    return _doc(
        ev,
        chip=r.chip,
        model=r.model,
        phase=r.phase,
        time_s=r.time_s,
        fit=r.fit,
        note="stage lanes show each stage's time, not the micro-batch schedule",
    )


def serving_trace(
    result, *, max_requests: int = MAX_REQUEST_SPANS, max_batches: int = MAX_BATCH_EVENTS
) -> dict:
    """The trace of a serving run (see the module docstring)."""
    ev = []
    nd = len(result.devices)
    for d, name in enumerate(result.devices):
        ev += [_meta(d, f"device {d}: {name}"), _meta(d, "batches", 0)]
    gen = result.first_token_s is not None
    if result.by_batch:
        start, finish, dev = (np.asarray(x) for x in result.times)
        nb = min(int(np.sum(dev >= 0)), max_batches)
        order = np.argsort(start[:nb], kind="stable")
        sizes = np.bincount(result.batch_id[result.batch_id >= 0], minlength=start.size)
        for b in order:
            if dev[b] >= 0 and np.isfinite(start[b]):
                ev.append(
                    _x(
                        "batch",
                        "batch",
                        float(start[b]),
                        float(finish[b] - start[b]),
                        int(dev[b]),
                        0,
                        requests=int(sizes[b]),
                    )
                )
    n = result.n
    pick = np.unique(np.linspace(0, n - 1, min(max_requests, n)).astype(int))
    arr, st, fin, dv = result.arrival_s, result.start_s, result.finish_s, result.device
    for j, i in enumerate(pick):
        if not np.isfinite(fin[i]):
            continue
        pid, tid = (int(dv[i]) if 0 <= dv[i] < nd else 0), 1 + j
        ev.append(_meta(pid, f"request {i}", tid))
        ev.append(
            _x("queue", "queue", float(arr[i]), float(st[i] - arr[i]), pid, tid, request=int(i))
        )
        if gen:
            f = float(result.first_token_s[i])
            ev.append(
                _x(
                    "prefill",
                    "prefill",
                    float(st[i]),
                    f - float(st[i]),
                    pid,
                    tid,
                    input_tokens=int(result.lengths[i]),
                )
            )
            ev.append(
                _x(
                    "decode",
                    "decode",
                    f,
                    float(fin[i]) - f,
                    pid,
                    tid,
                    output_tokens=int(result.output_tokens[i]),
                )
            )
        else:
            ev.append(
                _x(
                    "service",
                    "service",
                    float(st[i]),
                    float(fin[i] - st[i]),
                    pid,
                    tid,
                    tokens=int(result.lengths[i]),
                )
            )
    return _doc(ev, policy=result.policy, requests=n, requests_drawn=int(pick.size))


def write(path, doc: dict) -> None:
    """Write a trace document as JSON (NaN-free: the format has no NaN)."""
    from ._files import atomic_write
    from ._json import json_safe

    with atomic_write(path) as fh:
        json.dump(json_safe(doc), fh, allow_nan=False)
