"""Plain-Python references of the serving kernels and a simpy model (tests and benchmarks).

Written from the policy definitions, not from the kernels: an event-driven model of the
batching policies (``simulate_reference``), continuous and static generation
(``continuous_reference``, ``static_reference``) and the dynamic batcher in simpy
(``simpy_dynamic``). The tests compare each with its kernel on the same inputs; the
benchmarks time them side by side.
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np

from ipusim import policies as P
from ipusim.serving.plan import ADAPTIVE, DYNAMIC, STATIC, TOKEN, as_devices, make_plan


def _first_fit_rows(lengths, row_len):
    """Rows that first-fit decreasing packs ``lengths`` into (rows of ``row_len`` tokens)."""
    room = []
    for ln in sorted(lengths, reverse=True):
        r = next((r for r, free in enumerate(room) if free >= ln), None)
        if r is None:
            room.append(row_len - ln)
        else:
            room[r] -= ln
    return len(room)


def _lookup(tab, r, j):
    """Seconds for ``r`` rows at column ``j``; beyond the table, whole tables in series."""
    rmax = tab.shape[0] - 1
    if r <= rmax:
        return float(tab[r, j])
    full, rest = divmod(r, rmax)
    return float(full * tab[rmax, j] + (tab[rest, j] if rest else 0.0))


def service_s(plan, mi, rows, mx, tok, batch_lens=None):
    """(seconds, computed tokens) of a batch; ``batch_lens`` (the requests' lengths) for a packed device."""
    step = int(plan.m_len_step[mi])
    if step == 0:
        r, j, comp = rows, 1, tok
    elif plan.m_packed[mi]:
        pl = int(plan.m_pack_len[mi])
        r = _first_fit_rows(batch_lens, pl)
        j, comp = 1, r * pl
    else:
        j = (mx + step - 1) // step
        r, comp = rows, rows * j * step
    tab = plan.tables[mi][: int(plan.m_rows[mi]) + 1]
    return _lookup(tab, r, j), comp


def simulate_reference(plan):
    """Event-driven reference: arrivals, timers and device completions in time order.

    Returns (start, finish, device, batch_id, dev_busy, dev_real, dev_computed, info) like
    the kernel. Written from the policy definitions, not from the kernel.
    """
    arr, lens = plan.arrival.tolist(), plan.lengths.tolist()
    n, (nd, nq) = len(arr), plan.serves.shape
    if plan.qidx.size:
        members = [plan.qidx[plan.qoff[k] : plan.qoff[k + 1]].tolist() for k in range(nq)]
    else:
        members = [list(range(n))]
    queue_of = [0] * n
    for k, mem in enumerate(members):
        for i in mem:
            queue_of[i] = k
    pos_in_queue = [0] * n
    for mem in members:
        for p, i in enumerate(mem):
            pos_in_queue[i] = p
    queues = [deque() for _ in range(nq)]
    free = [0.0] * nd
    start, finish = [math.nan] * n, [math.nan] * n
    device, batch_id = [-1] * n, [-1] * n
    busy, real, comp = [0.0] * nd, [0] * nd, [0] * nd
    serving_count = [sum(bool(plan.serves[d, k]) for d in range(nd)) for k in range(nq)]
    first_dev = [next(d for d in range(nd) if plan.serves[d, k]) for k in range(nq)]
    kind = plan.kind
    nxt, done, nb, stopped = 0, 0, 0, 0

    def adaptive_plan(k):
        mem, h = members[k], pos_in_queue[queues[k][0]]
        w = min(h, plan.ad_window)
        rate = 0.0
        if w >= 1:
            span = arr[mem[h]] - arr[mem[h - w]]
            if span > 0.0:
                rate = w / span
        L = lens[mem[h]]
        mi = int(plan.dev_model[first_dev[k]])
        need = rate / (plan.ad_util * serving_count[k])
        B = int(plan.q_batch[k])
        b = B
        for c in range(1, B + 1):
            if c / service_s(plan, mi, c, L, c * L, [L] * c)[0] >= need:
                b = c
                break
        return b, max(0.0, plan.ad_target - service_s(plan, mi, b, L, b * L, [L] * b)[0])

    def delay(k):
        return adaptive_plan(k)[1] if kind == ADAPTIVE else float(plan.q_delay[k])

    def ready_now(k, t):
        """Can queue k send a batch at time t (it holds only arrivals <= t)?"""
        q = queues[k]
        if not q:
            return False
        B = int(plan.q_batch[k])
        if t >= arr[q[0]] + delay(k):
            return True
        if kind == TOKEN:
            tok = 0
            for c, i in enumerate(q, 1):
                tok += lens[i]
                if tok >= plan.budget or c >= B:
                    return True
            return False
        if kind == ADAPTIVE:
            return len(q) >= adaptive_plan(k)[0]
        if len(q) >= B:
            return True
        return kind == DYNAMIC and plan.pref_min > 0 and len(q) >= plan.pref_min

    def take(k, t):
        q, B = queues[k], int(plan.q_batch[k])
        out, tok = [], 0
        for i in q:
            if len(out) >= B or (kind == TOKEN and out and tok + lens[i] > plan.budget):
                break
            out.append(i)
            tok += lens[i]
        if kind == DYNAMIC and plan.pref_min > 0 and len(out) < B and t < arr[q[0]] + delay(k):
            p = max(x for x in plan.pref.tolist() if x <= len(out))
            out = out[:p]
        for _ in out:
            q.popleft()
        return out

    now = -math.inf
    while done < n:
        # next event: an arrival, a device becoming free, or a queue's delay expiring
        cands = [arr[nxt]] if nxt < n else []
        cands += [f for f in free if f > now]
        cands += [
            e for e in (arr[queues[k][0]] + delay(k) for k in range(nq) if queues[k]) if e > now
        ]
        if not cands:
            raise RuntimeError("reference simulation stalled (no next event)")
        t = now = min(cands)
        while nxt < n and arr[nxt] <= t:
            queues[queue_of[nxt]].append(nxt)
            nxt += 1
        # send every batch that can go at t
        sent = True
        while sent and not stopped:
            sent = False
            best = None
            for d in range(nd):
                if free[d] > t:
                    continue
                for k in range(nq):
                    if plan.serves[d, k] and ready_now(k, t):
                        key = (free[d], arr[queues[k][0]], k, d)
                        if best is None or key < best:
                            best = key
            if best is None:
                break
            _, _, k, d = best
            B = int(plan.q_batch[k])
            batch = take(k, t)
            mi = int(plan.dev_model[d])
            mx, tok = max(lens[i] for i in batch), sum(lens[i] for i in batch)
            rows = B if (kind == STATIC and plan.pad_full) else len(batch)
            s, c = service_s(plan, mi, rows, mx, tok, [lens[i] for i in batch])
            if plan.m_rand[mi]:
                s = s * float(plan.mult[batch[0]])
            fin = t + s
            for i in batch:
                start[i], finish[i], device[i], batch_id[i] = t, fin, d, nb
            free[d] = fin
            busy[d] += s
            real[d] += tok
            comp[d] += c if plan.m_len_step[mi] > 0 else tok
            done += len(batch)
            nb += 1
            sent = True
            if nxt - done > plan.max_waiting:
                stopped = 1
        if stopped:
            break
    return (
        np.array(start),
        np.array(finish),
        np.array(device),
        np.array(batch_id),
        np.array(busy),
        np.array(real, dtype=np.int64),
        np.array(comp, dtype=np.int64),
        np.array([nb, stopped, done], dtype=np.int64),
    )


def simpy_dynamic(arrival_s, lengths, policy: P.Dynamic, devices, *, seed: int = 0):
    """The dynamic batcher as a simpy model (a benchmark baseline).

    One queue, devices taking batches in the order they become free. Returns
    (start, finish, device, batch_id) arrays; times are kept as the exact sums the
    kernel forms (simpy's clock only orders the events).
    """
    import simpy

    if not isinstance(policy, P.Dynamic):
        raise ValueError("simpy_dynamic models the Dynamic policy only")
    devs = as_devices(devices)
    plan = make_plan(arrival_s, lengths, policy, devs, None, seed, None)
    arr, lens = plan.arrival.tolist(), plan.lengths.tolist()
    n, B, D = len(arr), policy.max_batch, policy.max_delay_s
    pref = list(policy.preferred)
    start, finish = np.full(n, np.nan), np.full(n, np.nan)
    device, batch_id = np.full(n, -1, dtype=np.int16), np.full(n, -1, dtype=np.int32)
    env = simpy.Environment()
    queue = deque()
    idle = simpy.Store(env)
    for d in range(len(devs)):
        idle.put((0.0, d))
    state = {"arrived": env.event(), "nb": 0}

    def source():
        for i, a in enumerate(arr):
            yield env.timeout(a - env.now)
            queue.append(i)
            ev, state["arrived"] = state["arrived"], env.event()
            ev.succeed()

    def run_batch(d, t, batch):
        mi = int(plan.dev_model[d])
        s, _ = service_s(
            plan,
            mi,
            len(batch),
            max(lens[i] for i in batch),
            sum(lens[i] for i in batch),
            [lens[i] for i in batch],
        )
        if plan.m_rand[mi]:
            s = s * float(plan.mult[batch[0]])
        fin = t + s
        for i in batch:
            start[i], finish[i], device[i], batch_id[i] = t, fin, d, state["nb"]
        state["nb"] += 1
        yield env.timeout(fin - env.now)
        yield idle.put((fin, d))

    def batcher():
        t = 0.0  # logical time: exact sums, as in the kernel
        while True:
            f, d = yield idle.get()
            t = max(t, f)
            while not queue:
                yield state["arrived"]
                t = arr[queue[-1]]
            expiry = arr[queue[0]] + D
            while len(queue) < B and not (pref and len(queue) >= pref[0]) and t < expiry:
                arrived = state["arrived"]
                got = yield arrived | env.timeout(expiry - env.now)
                t = arr[queue[-1]] if arrived in got else expiry
            take = min(len(queue), B)
            if t < expiry and take < B and pref:
                take = max(p for p in pref if p <= take)
            batch = [queue.popleft() for _ in range(take)]
            env.process(run_batch(d, t, batch))

    env.process(source())
    env.process(batcher())
    env.run()
    return start, finish, device, batch_id


def continuous_reference(arrival, prompt, output, gen, max_batch, kv_cap, steps=None):
    """Plain-Python continuous batching (lists of running requests), for tests and benchmarks:
    (start, first, finish, iterations, gaps), ``gaps`` every gap between two consecutive
    tokens of a request (s), one entry per token after the first. A list ``steps`` gets
    (iteration time, sequences decoding in it) for every iteration."""
    arr, pr, out = arrival.tolist(), prompt.tolist(), output.tolist()
    n = len(arr)
    start, first, finish = [math.nan] * n, [math.nan] * n, [math.nan] * n
    running = []  # [id, ctx, left]
    nxt, done, kv, t, iters = 0, 0, 0, 0.0, 0
    last, gaps = [math.nan] * n, []  # time of each request's latest token
    pre, dec = gen.prefill.table, gen.decode
    while done < n:
        if not running and arr[nxt] > t:
            t = arr[nxt]
        old = list(running)
        new = []
        while (
            nxt < n
            and arr[nxt] <= t
            and len(old) + len(new) < max_batch
            and kv + pr[nxt] + out[nxt] <= kv_cap
        ):
            new.append([nxt, pr[nxt], out[nxt]])
            kv += pr[nxt] + out[nxt]
            start[nxt] = t
            nxt += 1
        dt = 0.0
        if (
            new
            and old
            and len(new) + len(old)
            <= gen.mixed.shape[0]  # one mixed step, where the table prices it
            and np.isfinite(
                gen.mixed[len(old), len(new), -(-max(x[1] for x in new) // gen.mixed_step)]
            )
        ):
            mean_ctx = -(-sum(x[1] for x in old) // len(old)) + 1
            col = -(-mean_ctx // gen.ctx_step)
            dt = gen.mixed[len(old), len(new), -(-max(x[1] for x in new) // gen.mixed_step)] + (
                dec[len(old), col] - dec[len(old), 1]
            )
        else:
            if new:
                j = -(-max(x[1] for x in new) // gen.prefill.len_step)
                dt += _lookup(pre, len(new), j)
            if old:
                mean_ctx = -(-sum(x[1] for x in old) // len(old)) + 1
                dt += _lookup(dec, len(old), -(-mean_ctx // gen.ctx_step))
        t = t + dt
        iters += 1
        if steps is not None:
            steps.append((dt, len(old)))
        for x in new:
            first[x[0]] = t
        for x in old + new:
            if not math.isnan(last[x[0]]):
                gaps.append(t - last[x[0]])
            last[x[0]] = t
        running = []
        for x in old + new:
            x[1] += 1
            x[2] -= 1
            if x[2] <= 0:
                finish[x[0]] = t
                kv -= pr[x[0]] + out[x[0]]
                done += 1
            else:
                running.append(x)
    return np.array(start), np.array(first), np.array(finish), iters, np.array(gaps)


def static_reference(arrival, prompt, output, gen, batch, timeout_s):
    """Plain-Python run-to-completion batches: (start, first, finish, batches, gaps).

    Decode steps at the same context column cost the same, so a batch's decode time is summed
    per column as (steps in the column) x (the column's time), as the kernel does. ``gaps``:
    request i's tokens 2..output_i each follow one decode step of its batch (s)."""
    arr, pr, out = arrival.tolist(), prompt.tolist(), output.tolist()
    n = len(arr)
    start, first, finish = [math.nan] * n, [math.nan] * n, [math.nan] * n
    free, h, batches, gaps = 0.0, 0, 0, []
    while h < n:
        waiting = arr[h : h + batch]
        go = min(arr[h] + timeout_s, waiting[-1] if len(waiting) == batch else math.inf)
        t = max(go, free)
        ids = [i for i in range(h, min(n, h + batch)) if arr[i] <= t]
        ctx0 = -(-sum(pr[i] for i in ids) // len(ids))  # mean prompt, rounded up
        s = _lookup(
            gen.prefill.table, len(ids), -(-max(pr[i] for i in ids) // gen.prefill.len_step)
        )
        t_first = t + s
        per_col = {}
        for k in range(1, max(out[i] for i in ids)):
            c = -(-(ctx0 + k) // gen.ctx_step)
            per_col[c] = per_col.get(c, 0) + 1
        for c in sorted(per_col):
            s += per_col[c] * _lookup(gen.decode, len(ids), c)
        for i in ids:
            gaps += [
                _lookup(gen.decode, len(ids), -(-(ctx0 + k) // gen.ctx_step))
                for k in range(1, out[i])
            ]
        for i in ids:
            start[i], first[i], finish[i] = t, t_first, t + s
        free = t + s
        h += len(ids)
        batches += 1
    return np.array(start), np.array(first), np.array(finish), batches, np.array(gaps)


def chunked_reference(arrival, prompt, output, gen, max_batch, kv_cap, chunk, steps=None):
    """Plain-Python continuous batching with chunked prefill: (start, first, finish, iterations,
    gaps; ``steps`` as in ``continuous_reference``). Each iteration: the decoding sequences decode one token each; the rest of ``chunk``
    tokens goes to the prompts being prefilled, oldest first, then to newly admitted requests;
    the iteration is one step of the pieces (padded to the longest) beside the decodes."""
    arr, pr, out = arrival.tolist(), prompt.tolist(), output.tolist()
    n = len(arr)
    start, first, finish = [math.nan] * n, [math.nan] * n, [math.nan] * n
    running = []  # dicts: id, rem (prompt tokens left), ctx, left (tokens left)
    nxt, done, kv, t, iters = 0, 0, 0, 0.0, 0
    last, gaps = [math.nan] * n, []
    while done < n:
        if not running and arr[nxt] > t:
            t = arr[nxt]
        dec = [x for x in running if x["rem"] == 0]
        budget = chunk - len(dec)
        pieces = {}
        for x in running:
            if x["rem"] > 0 and budget > 0:
                pieces[x["id"]] = min(x["rem"], budget)
                budget -= pieces[x["id"]]
        while (
            budget > 0
            and nxt < n
            and arr[nxt] <= t
            and len(running) < max_batch
            and kv + pr[nxt] + out[nxt] <= kv_cap
        ):
            x = {"id": nxt, "rem": pr[nxt], "ctx": 0, "left": out[nxt]}
            running.append(x)
            kv += pr[nxt] + out[nxt]
            start[nxt] = t
            pieces[nxt] = min(pr[nxt], budget)
            budget -= pieces[nxt]
            nxt += 1
        if (
            pieces
            and dec
            and len(pieces) + len(dec) <= gen.mixed.shape[0]
            and np.isfinite(
                gen.mixed[len(dec), len(pieces), -(-max(pieces.values()) // gen.mixed_step)]
            )
        ):
            mean_ctx = -(-sum(x["ctx"] for x in dec) // len(dec)) + 1
            col = -(-mean_ctx // gen.ctx_step)
            dt = gen.mixed[len(dec), len(pieces), -(-max(pieces.values()) // gen.mixed_step)] + (
                gen.decode[len(dec), col] - gen.decode[len(dec), 1]
            )
        else:
            dt = 0.0
            if pieces:
                dt += _lookup(
                    gen.prefill.table, len(pieces), -(-max(pieces.values()) // gen.prefill.len_step)
                )
            if dec:
                mean_ctx = -(-sum(x["ctx"] for x in dec) // len(dec)) + 1
                dt += _lookup(gen.decode, len(dec), -(-mean_ctx // gen.ctx_step))
        t = t + dt
        iters += 1
        if steps is not None:
            steps.append((dt, len(dec)))
        keep = []
        for x in running:
            i = x["id"]
            if x["rem"] == 0:
                x["ctx"] += 1
                x["left"] -= 1
                gaps.append(t - last[i])
                last[i] = t
            elif i in pieces:
                x["rem"] -= pieces[i]
                if x["rem"] == 0:
                    first[i] = last[i] = t
                    x["ctx"] = pr[i] + 1
                    x["left"] -= 1
            if x["rem"] == 0 and x["left"] == 0:
                finish[i] = t
                kv -= pr[i] + out[i]
                done += 1
            else:
                keep.append(x)
        running = keep
    return np.array(start), np.array(first), np.array(finish), iters, np.array(gaps)


def decode_device_reference(
    ready, prompt, out, dec_tab, ctx_step, max_batch, kv_cap, first, finish, gaps
):
    """Plain reference of ``ipusim.serving.disaggregated._decode_device`` (the former Python loop):
    writes ``finish``, appends each gap to the list ``gaps``, returns (busy s, iterations)."""
    order = np.argsort(ready, kind="stable")
    t, busy, nxt, iters = 0.0, 0.0, 0, 0
    run: list[list] = []  # [request, tokens made, time of its last token]
    kv = 0
    while nxt < order.size or run:
        if not run and ready[order[nxt]] > t:
            t = float(ready[order[nxt]])
        while nxt < order.size and ready[order[nxt]] <= t and len(run) < max_batch:
            i = int(order[nxt])
            need = int(prompt[i] + out[i])
            if run and kv + need > kv_cap:
                break
            run.append([i, 1, float(first[i])])
            kv += need
            nxt += 1
        rows = len(run)
        ctx = sum(int(prompt[r[0]]) + r[1] for r in run)
        mean = -(-ctx // rows)
        dt = float(_lookup(dec_tab, rows, -(-mean // ctx_step)))
        if not math.isfinite(dt):
            raise ValueError(
                f"a decode step of {rows} sequences (mean context {mean}) does not fit the decode "
                "chip: lower max_batch"
            )
        t += dt
        busy += dt
        iters += 1
        keep = []
        for r in run:
            gaps.append(t - r[2])
            r[1] += 1
            r[2] = t
            if r[1] >= out[r[0]]:
                finish[r[0]] = t
                kv -= int(prompt[r[0]] + out[r[0]])
            else:
                keep.append(r)
        run = keep
    return busy, iters


def counted_gaps_reference(gap_s, gap_w, cells, dec_tab, mixed):
    """Plain loops of ``ipusim.serving.generation._counted_gaps``: the listed gaps, then each
    non-empty cell in loop order (decodes, prompts, prompt column, column) at its time."""
    out_s, out_w = list(gap_s), list(gap_w)
    D, R, J, C = cells.shape
    for d in range(D):
        for r in range(R):
            for j in range(J):
                for c in range(C):
                    if cells[d, r, j, c]:
                        t = (
                            dec_tab[d, c]
                            if r == 0
                            else mixed[d, r, j] + (dec_tab[d, c] - dec_tab[d, 1])
                        )
                        out_s.append(t)
                        out_w.append(int(cells[d, r, j, c]))
    return np.array(out_s, dtype=np.float64), np.array(out_w, dtype=np.int64)
