"""The Numba kernels of generation serving (``serving.generation``): continuous batching
(``continuous_loop``), continuous batching with chunked prefill (``chunked_loop``), static
batching (``static_loop``), and one iteration's seconds from the tables (``iteration_s``).
Their inputs are made and checked by ``serving.generation.simulate_generation``; their plain
references are in ``tests/serving_reference.py``."""

from __future__ import annotations

import numpy as np
from numba import njit

from .service import lookup_s


@njit(cache=True, error_model="numpy", inline="always")
def _step_s(nnew, old, pre_s, dec_s, dec_first_s, mixed_s, mixed_fits):
    """Seconds of an iteration prefilling ``nnew`` prompts beside ``old`` decoding sequences,
    from its table entries: ``pre_s`` the prefill step of the prompts, ``dec_s`` the decode
    step at the decodes' context column (``dec_first_s`` at the first column) and, when
    ``mixed_fits``, ``mixed_s`` the mixed step, to which the decodes' attention beyond the
    first column is added (see ``GenerationModel.mixed_s``). ``mixed_fits`` is false beyond
    the mixed table and where its cell is ``inf`` (next to a grid point whose one step does not
    fit): then the iteration runs as the prefill step plus the decode step. Scalars only: inlined into the
    kernels, a helper taking arrays would cost reference counting on every iteration."""
    dt = 0.0
    if nnew == 0:
        if old > 0:
            dt = dec_s
    elif old == 0:
        dt = pre_s
    elif mixed_fits:
        dt = mixed_s + (dec_s - dec_first_s)
    else:
        dt = pre_s + dec_s
    return dt


@njit(cache=True, error_model="numpy")
def iteration_s(pre_tab, pre_step, dec_tab, ctx_step, mixed, mixed_step, nnew, pmax, old, mean_ctx):
    """Seconds of an iteration prefilling ``nnew`` prompts (longest ``pmax``) and decoding
    ``old`` sequences of mean context ``mean_ctx`` (see ``GenerationModel.mixed_s``)."""
    mc = (pmax + mixed_step - 1) // mixed_step
    fits = nnew > 0 and old > 0 and old + nnew <= mixed.shape[0] and mixed[old, nnew, mc] < np.inf
    return _step_s(
        nnew,
        old,
        lookup_s(pre_tab, nnew, (pmax + pre_step - 1) // pre_step),
        lookup_s(dec_tab, old, (mean_ctx + ctx_step - 1) // ctx_step),
        dec_tab[old, 1] if fits else 0.0,
        mixed[old, nnew, mc] if fits else 0.0,
        fits,
    )


@njit(cache=True, inline="always")
def _admits(arrived_s, tokens, t, nrun, max_batch, kv, kv_cap):
    """A request that arrived at ``arrived_s`` needing ``tokens`` KV tokens (prompt + output)
    joins the running batch at ``t``: it has arrived, and a batch slot and its whole KV
    reservation are free (first come, first served). Scalars only (see ``_step_s``)."""
    return arrived_s <= t and nrun < max_batch and kv + tokens <= kv_cap


@njit(cache=True, inline="always")
def _end_of_run(info, busy_out, iters, busy, m):
    """Write a generation kernel's totals: ``info[0]`` iterations, ``busy_out[0]`` busy seconds,
    ``info[2]`` the ``m`` gaps listed one by one (in ``gap_s``, ``gap_w``). Inlined (Numba IR):
    not a kernel of its own to compile on a first run."""
    info[0] = iters
    busy_out[0] = busy
    info[2] = m


@njit(cache=True, error_model="numpy")
def continuous_loop(
    arrival,
    prompt,
    output,
    pre_tab,
    pre_step,
    dec_tab,
    ctx_step,
    mixed,
    mixed_step,
    max_batch,
    kv_cap,
    start,
    first,
    finish,
    info,
    busy_out,
    gap_cells,
    gap_s,
    gap_w,
):
    """Iteration-level batching on one device (Orca-style: prefills join an iteration).

    Preconditions: ``arrival`` sorted; every ``prompt + output <= kv_cap`` and every
    context fits the tables; ``pre_tab`` and ``dec_tab`` hold rows up to ``max_batch``
    (``generation._rows_up_to``); outputs of size n (every entry is written); ``gap_cells`` [max_batch
    + 1, max(mixed rows, 1), max(mixed columns, 1), decode columns] zeroed, or [max_batch + 1,
    1, 1, decode columns] to list every mixed step too (``generation._gap_cells``); ``gap_s``,
    ``gap_w`` of size n.
    Admission: ``_admits``. Work per iteration is O(1) plus O(log max_batch) per request:
    the running sequences' context sum is kept as a total and their last iterations in a
    binary heap, and no helper taking arrays is called in the loop. Gaps between tokens:
    every sequence that decodes in an iteration waits that iteration's time for its token;
    a decode-only iteration or one mixed step adds its sequences to ``gap_cells[decodes,
    prompts, prompt column, column]`` (decode-only: [decodes, 0, 0, column]); any other
    iteration with prefills writes (seconds, sequences) to ``gap_s``, ``gap_w``
    (``generation._counted_gaps`` lists them all). ``info`` gets [iterations, 0, entries written], ``busy_out[0]`` the
    busy seconds.
    """
    n = arrival.shape[0]
    hkey = np.empty(max_batch, dtype=np.int64)  # heap: last iteration of each running sequence
    hid = np.empty(max_batch, dtype=np.int64)
    ctx_sum = 0  # context tokens of the running sequences
    # running sequences, next request, requests done, KV tokens held, iterations, gap entries
    nrun = nxt = done = kv = iters = nmix = 0
    t = busy = 0.0  # s
    while done < n:
        if nrun == 0 and arrival[nxt] > t:
            t = arrival[nxt]
        old = nrun
        old_ctx = ctx_sum
        first_new = nxt
        pmax = 0
        while nxt < n and _admits(
            arrival[nxt], prompt[nxt] + output[nxt], t, nrun, max_batch, kv, kv_cap
        ):
            kv += prompt[nxt] + output[nxt]
            ctx_sum += prompt[nxt]
            start[nxt] = t
            if prompt[nxt] > pmax:
                pmax = prompt[nxt]
            # push (last iteration, id): sift up from the new leaf
            key = iters + output[nxt] - 1
            c = nrun
            nrun += 1
            while c > 0 and hkey[(c - 1) // 2] > key:
                hkey[c], hid[c] = hkey[(c - 1) // 2], hid[(c - 1) // 2]
                c = (c - 1) // 2
            hkey[c], hid[c] = key, nxt
            nxt += 1
        nnew = nxt - first_new
        col = 0
        mean_ctx = 0
        if old > 0:
            mean_ctx = (old_ctx + old - 1) // old + 1  # context including the new token
            col = (mean_ctx + ctx_step - 1) // ctx_step
        mc = (pmax + mixed_step - 1) // mixed_step
        fits = (
            nnew > 0 and old > 0 and old + nnew <= mixed.shape[0] and mixed[old, nnew, mc] < np.inf
        )
        dt = _step_s(
            nnew,
            old,
            pre_tab[nnew, (pmax + pre_step - 1) // pre_step],
            dec_tab[old, col],
            dec_tab[old, 1],
            mixed[old, nnew, mc] if fits else 0.0,
            fits,
        )
        if nnew == 0 and old > 0:
            # A run of decode-only iterations of the same time: no sequence ends before the
            # last of them, the mean context (one more each time) stays in this column, and
            # no request is admitted (the batch or KV cache is full until a sequence ends,
            # or the next request arrives after the iteration's start).
            K = min(hkey[0] - iters, col * ctx_step - mean_ctx + 1)
            if K >= 1:
                a_next = np.inf  # the next request's arrival, if it would be admitted then
                if nxt < n and _admits(
                    arrival[nxt], prompt[nxt] + output[nxt], np.inf, nrun, max_batch, kv, kv_cap
                ):
                    a_next = arrival[nxt]
                j = 0
                while True:
                    t += dt
                    j += 1
                    if j >= K or a_next <= t:
                        break
                busy += j * dt
                iters += j
                ctx_sum += nrun * j
                gap_cells[old, 0, 0, col] += old * j
                if j < K or hkey[0] - iters + j >= col * ctx_step - mean_ctx + 1 or a_next <= t:
                    continue
                # else the next iteration, in which the first sequence ends, is one more of the
                # same (same decodes and column, nobody admitted): run it here, not from the top
        t = t + dt
        busy += dt
        for i in range(first_new, nxt):  # prefilled this iteration: first token out
            first[i] = t
        if old > 0 and (
            nnew == 0 or (fits and gap_cells.shape[1] > 1)
        ):  # a table cell (mc = 0 without prompts)
            gap_cells[old, nnew, mc, col] += old
        elif old > 0:  # prefills not in one mixed step: listed (at most one per request)
            gap_s[nmix] = dt
            gap_w[nmix] = old
            nmix += 1
        ctx_sum += nrun  # every running sequence holds one more token
        while nrun > 0 and hkey[0] == iters:  # pop the sequences whose last token this was
            i = hid[0]
            finish[i] = t
            kv -= prompt[i] + output[i]
            ctx_sum -= prompt[i] + output[i]
            done += 1
            nrun -= 1  # the last leaf sifts down from the root
            key, j = hkey[nrun], hid[nrun]
            c = 0
            while 2 * c + 1 < nrun:
                ch = 2 * c + 1
                if ch + 1 < nrun and hkey[ch + 1] < hkey[ch]:
                    ch += 1
                if hkey[ch] >= key:
                    break
                hkey[c], hid[c] = hkey[ch], hid[ch]
                c = ch
            hkey[c], hid[c] = key, j
        iters += 1
    _end_of_run(info, busy_out, iters, busy, nmix)


@njit(cache=True, error_model="numpy")
def chunked_loop(
    arrival,
    prompt,
    output,
    pre_tab,
    pre_step,
    dec_tab,
    ctx_step,
    mixed,
    mixed_step,
    max_batch,
    kv_cap,
    chunk,
    start,
    first,
    finish,
    info,
    busy_out,
    gap_cells,
    gap_s,
    gap_w,
):
    """Continuous batching with chunked prefill on one device (SARATHI, facts §7).

    Preconditions: as ``continuous_loop``; ``chunk`` >= 1 tokens. Gaps as there; when
    ``gap_s``, ``gap_w`` are full the kernel stops with ``info[1] = -1`` (the caller retries
    with larger ones). Each iteration:
    every decoding sequence decodes one token; the tokens left of ``chunk`` go to the
    sequences still prefilling, oldest first, then to newly admitted requests (``_admits``),
    one piece each. The iteration is priced as one step: the pieces as prompts padded to
    the longest piece beside the decodes (``_step_s``). ASSUMPTION: a piece's attention over the earlier pieces
    of its prompt is left out (the step runs the piece as a prompt of its own). A sequence's
    first token is out at the end of the iteration that prefills its last piece. Work is
    O(max_batch) per iteration.
    """
    n = arrival.shape[0]
    rid = np.empty(max_batch, dtype=np.int64)
    rem = np.empty(max_batch, dtype=np.int64)  # prompt tokens not prefilled yet
    ctx = np.empty(max_batch, dtype=np.int64)
    left = np.empty(max_batch, dtype=np.int64)
    piece = np.empty(max_batch, dtype=np.int64)
    nrun = nxt = done = kv = iters = nmix = 0  # as in continuous_loop
    t = busy = 0.0
    while done < n:
        if nrun == 0 and arrival[nxt] > t:
            t = arrival[nxt]
        d = 0
        ctx_sum = 0
        for r in range(nrun):
            piece[r] = 0
            if rem[r] == 0:
                d += 1
                ctx_sum += ctx[r]
        budget = chunk - d
        npc = 0
        lmax = 0
        for r in range(nrun):
            if budget <= 0:
                break
            if rem[r] > 0:
                p = min(rem[r], budget)
                piece[r] = p
                budget -= p
                npc += 1
                lmax = max(lmax, p)
        while (
            budget > 0
            and nxt < n
            and _admits(arrival[nxt], prompt[nxt] + output[nxt], t, nrun, max_batch, kv, kv_cap)
        ):
            kv += prompt[nxt] + output[nxt]
            start[nxt] = t
            rid[nrun] = nxt
            rem[nrun] = prompt[nxt]
            ctx[nrun] = 0
            left[nrun] = output[nxt]
            p = min(prompt[nxt], budget)
            piece[nrun] = p
            budget -= p
            npc += 1
            lmax = max(lmax, p)
            nrun += 1
            nxt += 1
        mean_ctx = (ctx_sum + d - 1) // d + 1 if d > 0 else 0
        col = (mean_ctx + ctx_step - 1) // ctx_step
        mc = (lmax + mixed_step - 1) // mixed_step
        fits = npc > 0 and d > 0 and d + npc <= mixed.shape[0] and mixed[d, npc, mc] < np.inf
        dt = _step_s(
            npc,
            d,
            pre_tab[npc, (lmax + pre_step - 1) // pre_step],
            dec_tab[d, col],
            dec_tab[d, 1],
            mixed[d, npc, mc] if fits else 0.0,
            fits,
        )
        t = t + dt
        busy += dt
        iters += 1
        if d > 0 and (npc == 0 or (fits and gap_cells.shape[1] > 1)):
            gap_cells[d, npc, mc, col] += d
        elif d > 0:
            if nmix == gap_s.shape[0]:  # no room: the caller retries with more
                info[1] = -1
                return
            gap_s[nmix] = dt
            gap_w[nmix] = d
            nmix += 1
        w = 0
        for r in range(nrun):
            i = rid[r]
            keep = True
            if rem[r] == 0:  # decoded one token
                ctx[r] += 1
                left[r] -= 1
            elif piece[r] > 0:
                rem[r] -= piece[r]
                if rem[r] == 0:  # prompt done: first token out
                    first[i] = t
                    ctx[r] = prompt[i] + 1
                    left[r] -= 1
            if rem[r] == 0 and left[r] == 0:
                finish[i] = t
                kv -= prompt[i] + output[i]
                done += 1
                keep = False
            if keep:
                rid[w] = i
                rem[w] = rem[r]
                ctx[w] = ctx[r]
                left[w] = left[r]
                w += 1
        nrun = w
    _end_of_run(info, busy_out, iters, busy, nmix)


@njit(cache=True, error_model="numpy")
def static_loop(
    arrival,
    prompt,
    output,
    pre_tab,
    pre_step,
    dec_tab,
    ctx_step,
    batch,
    timeout,
    start,
    first,
    finish,
    info,
    busy_out,
    gap_cells,
):
    """Run-to-completion batches on one device (FasterTransformer-style static batching).

    Preconditions: ``arrival`` sorted; contexts fit the tables, which hold rows up to
    ``batch`` (``generation._rows_up_to``); outputs of size n (every entry is written); ``gap_cells``
    [batch + 1, 1, 1, decode columns] zeroed. A batch of up to
    ``batch`` requests leaves when the device is free and ``batch`` requests have arrived,
    or the oldest has waited ``timeout``; it runs the prefill of all its prompts (padded to
    the longest; first tokens out), then decode steps of all its rows (context at the mean
    prompt plus the step) until its longest reply is done; every request is returned at the
    end. Decode steps in one context column cost the same, so the batch's decode time is
    a sum over columns of (steps in the column) x (the column's step time). Gaps between
    tokens: request i's tokens 2..output_i each wait one decode step; ``gap_cells[rows, 0,
    0, column]`` counts them (listed by ``generation._counted_gaps``). ``info[0]``
    gets the iterations (prefill and decode steps), ``info[1]`` the token slots run (rows x
    longest reply), ``busy_out[0]`` the busy seconds.
    """
    n = arrival.shape[0]
    free = 0.0
    h = 0
    iters = 0
    slots = 0
    busy = 0.0
    while h < n:
        ready = arrival[h] + timeout
        if h + batch - 1 < n and arrival[h + batch - 1] < ready:
            ready = arrival[h + batch - 1]
        t = ready if ready > free else free
        size = 0
        pmax = 0
        psum = 0
        omax = 0
        while h + size < n and size < batch and arrival[h + size] <= t:
            i = h + size
            if prompt[i] > pmax:
                pmax = prompt[i]
            psum += prompt[i]
            if output[i] > omax:
                omax = output[i]
            size += 1
        dt = pre_tab[size, (pmax + pre_step - 1) // pre_step]
        t_first = t + dt
        pmean = (psum + size - 1) // size
        # decode steps k = 1 .. omax - 1 at context pmean + k, grouped by column
        lo = pmean + 1
        hi = pmean + omax - 1
        while lo <= hi:
            c = (lo + ctx_step - 1) // ctx_step
            top = min(hi, c * ctx_step)
            dt += (top - lo + 1) * dec_tab[size, c]
            lo = top + 1
        for i in range(h, h + size):
            lo = pmean + 1
            hi = pmean + output[i] - 1
            while lo <= hi:
                c = (lo + ctx_step - 1) // ctx_step
                top = min(hi, c * ctx_step)
                gap_cells[size, 0, 0, c] += top - lo + 1
                lo = top + 1
        fin = t + dt
        for i in range(h, h + size):
            start[i] = t
            first[i] = t_first
            finish[i] = fin
        free = fin
        busy += dt
        iters += omax
        slots += size * omax
        h += size
    info[1] = slots
    _end_of_run(info, busy_out, iters, busy, 0)
