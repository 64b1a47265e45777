"""LLM request traces: arrival time, input (prompt) tokens and output (generated) tokens per request.

``load(path)`` reads the layouts public LLM-inference traces use:

* CSV with a header, as Azure's LLM inference traces (``TIMESTAMP,ContextTokens,GeneratedTokens``;
  timestamps as dates ``2023-11-16 18:15:46.680590`` or as seconds), BurstGPT-style names
  (``Timestamp``, ``Request tokens``, ``Response tokens``) and ipusim's own
  ``arrival_s,input_tokens,output_tokens``;
* JSON Lines, one object per request, with arrival, input and output length keys
  (``timestamp``/``arrival_s``, ``input_length``/``prompt_len``, ``output_length``/``output_len``...).

Columns are found by name (case-insensitive, spaces and underscores ignored) or named with
``columns={"time": ..., "input": ..., "output": ...}``. Arrival times are returned in seconds
from the first request (dates) or as given (numbers, times ``time_unit`` in seconds). A row that
cannot be read is refused with its line number. ``synthetic(n, seed)`` generates a trace in the
Azure CSV layout (the shipped ``examples/traces/sample_llm.csv``).
"""

from __future__ import annotations

import csv
import io
import json
from datetime import datetime

import numpy as np

from . import limits
from ._validate import read_text_file

# accepted names of each column, normalised (lower case, no spaces, underscores or hyphens)
TIME_NAMES = ("timestamp", "arrivals", "arrival", "arrivaltime", "time", "times", "ts")
INPUT_NAMES = (
    "contexttokens",
    "inputtokens",
    "inputlength",
    "inputlen",
    "prompttokens",
    "promptlength",
    "promptlen",
    "requesttokens",
    "length",
    "tokens",
    "seqlen",
)
OUTPUT_NAMES = (
    "generatedtokens",
    "outputtokens",
    "outputlength",
    "outputlen",
    "completiontokens",
    "responsetokens",
    "generatedlength",
)
TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6}


def _norm(name: str) -> str:
    return "".join(ch for ch in str(name).strip().lower() if ch not in " _-")


def parse_columns(text: str | None) -> dict:
    """``time=TIMESTAMP,input=ContextTokens,output=GeneratedTokens`` -> a dict (any subset)."""
    out = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        key, eq, col = part.partition("=")
        key = key.strip().lower()
        if not eq or key not in ("time", "input", "output") or not col.strip():
            raise ValueError(
                f"trace columns {part!r}: use time=NAME, input=NAME, output=NAME (comma-separated)"
            )
        out[key] = col.strip()
    return out


def _find(
    names: list[str], given: str | None, accepted: tuple, what: str, where: str, *, required=True
):
    """Index of the column ``given`` (or the first accepted name) in ``names``; None if optional and absent."""
    normed = [_norm(n) for n in names]
    if given is not None:
        if _norm(given) not in normed:
            raise ValueError(
                f"{where}: no column {given!r} (the {what} column); found {', '.join(names)}"
            )
        return normed.index(_norm(given))
    for a in accepted:
        if a in normed:
            return normed.index(a)
    if required:
        raise ValueError(
            f"{where} needs columns for time and input (output optional): no {what} column among "
            f"{', '.join(names)}; name it with --trace-columns "
            f"{what}=NAME (accepted names: {', '.join(accepted[:4])}, ...)"
        )
    return None


def _time(v, line: int, where: str) -> float:
    """A timestamp as seconds: a number, or an ISO date (seconds since the epoch, UTC if no zone)."""
    if isinstance(v, bool):
        raise ValueError(f"{where} line {line}: arrival time {v!r} is not a number or a date")
    if isinstance(v, (int, float)):
        return float(v)
    s = str(v).strip()
    try:
        return float(s)
    except ValueError:
        pass
    try:
        d = datetime.fromisoformat(s.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"{where} line {line}: arrival time {s[:40]!r} is not a number or a date"
        ) from None
    return d.timestamp() if d.tzinfo else (d - datetime(1970, 1, 1)).total_seconds()


def _tokens(v, line: int, what: str, where: str) -> int:
    try:
        x = float(v) if not isinstance(v, bool) else float("nan")
    except (TypeError, ValueError):
        x = float("nan")
    if not (x >= 1 and x == int(x)):
        raise ValueError(
            f"{where} line {line}: {what} {str(v)[:40]!r} is not a whole number of tokens >= 1"
        )
    if x > limits.MAX_SEQUENCE_TOKENS:
        raise ValueError(
            f"{where} line {line}: {what} {int(x):,} is over the limit of "
            f"{limits.MAX_SEQUENCE_TOKENS:,} tokens per request"
        )
    return int(x)


def load(path, *, columns: dict | None = None, time_unit: str = "s"):
    """``(arrival_s, input_tokens, output_tokens)`` of a trace, sorted by arrival; ``output_tokens`` is
    None when the trace has no output column. Arrival times start at 0 when they are dates."""
    cols = dict(columns or {})
    if time_unit not in TIME_UNITS:
        raise ValueError(f"trace time unit {time_unit!r}; valid: {', '.join(TIME_UNITS)}")
    where = f"trace file {str(path)!r}"
    text = read_text_file("trace file", path)
    first = text.lstrip()[:1]
    rows, dated = [], False
    if first == "{" or str(path).lower().endswith((".jsonl", ".ndjson")):
        names = None
        for line, raw in enumerate(text.splitlines(), 1):
            if not raw.strip():
                continue
            try:
                obj = json.loads(raw)
            except json.JSONDecodeError as err:
                raise ValueError(f"{where} line {line}: not a JSON object ({err.msg})") from None
            if not isinstance(obj, dict):
                raise ValueError(
                    f"{where} line {line}: expected a JSON object per line, got {type(obj).__name__}"
                )
            keys = list(obj)
            if names is None or keys != names:
                names = keys
                ti = _find(keys, cols.get("time"), TIME_NAMES, "time", f"{where} line {line}")
                ii = _find(keys, cols.get("input"), INPUT_NAMES, "input", f"{where} line {line}")
                oi = _find(
                    keys,
                    cols.get("output"),
                    OUTPUT_NAMES,
                    "output",
                    f"{where} line {line}",
                    required="output" in cols,
                )
            rows.append(
                _row(
                    obj[keys[ti]], obj[keys[ii]], None if oi is None else obj[keys[oi]], line, where
                )
            )
            dated |= isinstance(obj[keys[ti]], str) and not _is_number(obj[keys[ti]])
            _check_count(len(rows), where)
        has_out = oi is not None if names else False
    else:
        with io.StringIO(text, newline="") as fh:
            reader = csv.reader(fh)
            header = next(reader)
            ti = _find(header, cols.get("time"), TIME_NAMES, "time", where)
            ii = _find(header, cols.get("input"), INPUT_NAMES, "input", where)
            oi = _find(
                header, cols.get("output"), OUTPUT_NAMES, "output", where, required="output" in cols
            )
            need = max(i for i in (ti, ii, oi) if i is not None) + 1
            for r in reader:
                if not r or not any(x.strip() for x in r):
                    continue
                line = reader.line_num
                if len(r) < need:
                    raise ValueError(
                        f"{where} line {line}: {len(r)} field(s); expected {len(header)} "
                        f"({', '.join(header)})"
                    )
                rows.append(_row(r[ti], r[ii], None if oi is None else r[oi], line, where))
                dated |= not _is_number(r[ti])
                _check_count(len(rows), where)
        has_out = oi is not None
    if not rows:
        raise ValueError(f"{where} has no requests")
    t = np.array([r[0] for r in rows], dtype=np.float64)
    if dated:
        t = t - t.min()
    else:
        t = t * TIME_UNITS[time_unit]
    if np.any(t < 0):
        raise ValueError(
            f"{where}: arrival times must be >= 0 (a number is seconds from the start)"
        )
    inp = np.array([r[1] for r in rows], dtype=np.int64)
    out = np.array([r[2] for r in rows], dtype=np.int64) if has_out else None
    order = np.argsort(t, kind="stable")
    return t[order], inp[order], (out[order] if out is not None else None)


def _is_number(v) -> bool:
    try:
        float(v)
    except (TypeError, ValueError):
        return False
    return True


def _row(t, i, o, line, where):
    tt = _time(t, line, where)
    if not np.isfinite(tt):
        raise ValueError(f"{where} line {line}: arrival time {t!r} is not finite")
    return (
        tt,
        _tokens(i, line, "input length", where),
        None if o is None else _tokens(o, line, "output length", where),
    )


def _check_count(n: int, where: str) -> None:
    if n > limits.MAX_REQUESTS_IN_TRACE:
        raise ValueError(
            f"{where}: over {limits.MAX_REQUESTS_IN_TRACE:,} requests (the serving simulator's "
            "limit for one run); split the trace"
        )


def synthetic(n: int = 500, *, rate_per_s: float = 4.0, seed: int = 0) -> list[dict]:
    """A synthetic trace in the Azure CSV layout: Poisson arrivals at ``rate_per_s``, log-normal
    prompt (median 256, cut to 32..768 tokens) and output lengths (median 96, cut to 8..256).

    The shape of the distributions is an ASSUMPTION chosen to fit a 1,024-position model
    (GPT-2); it is not fitted to any published trace. Dates start at 2026-01-01 00:00:00."""
    from . import arrivals

    rng = np.random.default_rng([seed, 0x7A2E])
    t = arrivals.poisson(rate_per_s, n, seed=seed)
    t = t - t[0]
    prompt = np.clip(np.round(rng.lognormal(np.log(256), 0.6, n)), 32, 768).astype(int)
    output = np.clip(np.round(rng.lognormal(np.log(96), 0.7, n)), 8, 256).astype(int)
    t0 = datetime(2026, 1, 1)
    from datetime import timedelta

    return [
        {
            "TIMESTAMP": (t0 + timedelta(seconds=float(s))).isoformat(
                sep=" ", timespec="microseconds"
            ),
            "ContextTokens": int(p),
            "GeneratedTokens": int(o),
        }
        for s, p, o in zip(t, prompt, output, strict=True)
    ]


def write_csv(path, rows: list[dict]) -> None:
    """Write trace rows (dicts with the same keys) as a CSV with a header."""
    from ._files import atomic_write

    with atomic_write(path, newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":  # python -m ipusim.traffic OUT.csv: the shipped sample trace
    import sys

    write_csv(sys.argv[1] if len(sys.argv) > 1 else "sample_llm.csv", synthetic())
