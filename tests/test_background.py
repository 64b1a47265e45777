"""Background workers (``ipusim.background``): a command's first run hands work to a second
process and prints exactly what it prints in one process; a worker that dies changes nothing
but the time; a compile-ahead worker compiles the signature the command then uses, no other."""

import os
import pickle
import subprocess
import sys

import pytest

from ipusim import background, cli, tile_params

needs_two_cpus = pytest.mark.skipif(
    not background.allowed(), reason="needs two CPUs and a writable Numba cache"
)
ONE = {background.ENV: "1"}
TAKES_10_AND_DIES = (
    "import os, pickle, sys; module, name, args, params = pickle.loads(sys.stdin.buffer.read()); "
    "open(os.path.join(args[2], '10'), 'w').close(); os._exit(3)"
)


HOWS = ("fork", "fresh interpreter")


def _how(monkeypatch, how):
    """Make workers forks of this process or fresh interpreters (skip where forks cannot be)."""
    if how == "fork" and not background.can_fork():
        pytest.skip("no fork here (not Linux, or other threads running)")
    if how != "fork":
        monkeypatch.setattr(background, "_FORK", False)


def _die(monkeypatch, how, takes_10=False):
    """Make the next workers die (exit status 3) without a reply; with ``takes_10``, after
    taking claim 10 (the claims' shared marks folder is the call's third argument)."""
    if how == "fork":  # the fork runs this process's code: replace its reply

        def die(module, name, args):
            if takes_10:
                open(os.path.join(args[2], "10"), "w").close()
            os._exit(3)

        monkeypatch.setattr(background, "_answer", die)
    else:
        monkeypatch.setattr(
            background, "_CHILD", TAKES_10_AND_DIES if takes_10 else "import os; os._exit(3)"
        )


@pytest.mark.parametrize("how", HOWS)
def test_a_worker_returns_the_functions_value_and_one_that_dies_is_replaced(
    how, monkeypatch, capsys
):
    _how(monkeypatch, how)
    # the worker runs with this process's tile parameters (they change every tile result)
    monkeypatch.setattr(tile_params, "EXCHANGE_EFFICIENCY", 0.5)
    want = tile_params.current()
    with background.start("ipusim.tile_params:current") as w:
        if background.allowed():
            assert isinstance(w.proc, background._Forked) is (how == "fork")
        assert w.result(lambda: None) == want
    with background.start("ipusim.hardware:chip", "gc200") as w:  # a value that cannot pickle
        assert w.result(lambda: "here") == "here"
    _die(monkeypatch, how)
    with background.start("ipusim.tile_params:current") as w:
        assert w.result(lambda: "here") == "here"
    if background.allowed():
        err = capsys.readouterr().err
        assert err.count("worker for ipusim.hardware:chip failed (TypeError") == 1
        assert err.count("worker for ipusim.tile_params:current failed (exit status 3") == 1


@pytest.mark.skipif(not background.can_fork(), reason="no fork here")
def test_a_forked_worker_prints_nothing_on_stdout_and_is_stopped_when_not_asked(monkeypatch, capfd):
    import time

    answer = background._answer

    def slow(module, name, args):  # the fork runs this process's code: a worker that takes long
        time.sleep(60)
        return answer(module, name, args)

    monkeypatch.setattr(background, "_answer", slow)
    print("before", end="\n", flush=False)  # pending in this process's buffer at the fork
    t = time.perf_counter()
    with background.start("ipusim.tile_params:current") as w:
        assert isinstance(w.proc, background._Forked)
    assert w.proc is None  # its value never asked for: killed and reaped at the block's end
    assert time.perf_counter() - t < 30
    print("after")
    assert capfd.readouterr().out == "before\nafter\n"  # printed once, not again by the fork

    def chatty(module, name, args):
        print("from the worker")
        return answer(module, name, args)

    monkeypatch.setattr(background, "_answer", chatty)
    with background.start("ipusim.tile_params:current") as w:
        assert w.result(lambda: None) == tile_params.current()
    got = capfd.readouterr()
    assert got.out == "" and "from the worker" in got.err


@needs_two_cpus
@pytest.mark.parametrize("how", HOWS)
def test_claims_print_the_same_with_a_worker_without_one_and_with_one_that_dies(
    how, monkeypatch, capsys
):
    _how(monkeypatch, how)
    argv = ["claims", "--claim", "7", "--claim", "10", "--json"]
    # as on a first run (the worker runs only when Numba's cache lacks the event kernel)
    monkeypatch.setattr(background, "cached", lambda *kernels: False)
    monkeypatch.setenv(background.ENV, "1")
    assert cli.main(argv) == 0
    alone = capsys.readouterr().out
    monkeypatch.delenv(background.ENV)
    assert cli.main(argv) == 0
    got = capsys.readouterr()
    assert got.out == alone and "background worker" not in got.err
    _die(monkeypatch, how)
    assert cli.main(argv) == 0
    got = capsys.readouterr()
    assert got.out == alone and got.err.count("background worker") == 1
    # a worker that takes claim 10 (its first) and dies: this process judges it after all
    _die(monkeypatch, how, takes_10=True)
    assert cli.main(argv) == 0
    got = capsys.readouterr()
    assert got.out == alone and got.err.count("background worker") == 1


def _signatures(cache_dir) -> dict:
    """Numba cache index file name -> the signatures it holds."""
    out = {}
    for index in sorted(cache_dir.rglob("*.nbi")):
        with open(index, "rb") as f:
            pickle.load(f)  # Numba's version
            _, overloads = pickle.loads(f.read())
        out[index.name] = len(overloads)
    return out


def _cold(argv, tmp_path, name, env=()):
    """Run ``ipusim ARGV`` from an empty Numba cache and table cache; (stdout, signatures)."""
    caches = tmp_path / name
    e = {k: v for k, v in os.environ.items() if k != background.ENV}
    e.update(
        NUMBA_CACHE_DIR=str(caches / "numba"),
        IPUSIM_CACHE_DIR=str(caches / "tables"),
        IPUSIM_PROGRESS="0",
        **dict(env),
    )
    r = subprocess.run(
        [sys.executable, "-m", "ipusim", *argv], capture_output=True, text=True, env=e
    )
    assert r.returncode == 0, r.stderr
    assert "background worker" not in r.stderr, r.stderr
    return r.stdout, _signatures(caches / "numba")


@needs_two_cpus
@pytest.mark.parametrize(
    "argv",
    [
        ["serve", "--rate", "1000", "--requests", "20000", "--json"],
        ["checklist", "--format", "json"],
    ],
    ids=["serve", "checklist"],
)
def test_a_first_run_with_its_compile_ahead_worker_prints_the_same_and_compiles_the_same_signatures(
    argv, tmp_path
):
    out, sigs = _cold(argv, tmp_path, "worker")
    alone, sigs_alone = _cold(argv, tmp_path, "alone", ONE)
    assert out == alone
    # the worker's tiny calls compiled exactly the signatures the command uses: one event kernel
    # of one signature, and no kernel with a signature more than in one process
    events = [n for n in sigs if "_event_kernel" in n]
    assert len(events) == 1 and sigs[events[0]] == 1, sigs
    assert sigs == sigs_alone


def test_claims_starts_its_worker_while_either_kernel_it_compiles_most_is_missing(monkeypatch):
    """The claims worker is for a first run: Numba's cache lacking the event kernel (claim 6)
    or the continuous-batching kernel (claim 10). After serve and checklist (which compile the
    event kernel, not claim 10's) claims still gets its worker; with both cached it does not."""
    from ipusim import background, serving
    from ipusim.commands import claims as claims_cmd

    event = serving.batching.event_kernel(False)
    gen = serving.generation.continuous_kernel()
    monkeypatch.setattr(background, "allowed", lambda: True)
    for have, expect in (
        (set(), True),
        ({event}, True),
        ({gen}, True),
        ({event, gen}, False),
    ):
        monkeypatch.setattr(background, "cached", lambda *ds, have=have: all(d in have for d in ds))
        assert claims_cmd._first_run() is expect, (have, expect)
    monkeypatch.setattr(background, "allowed", lambda: False)
    monkeypatch.setattr(background, "cached", lambda *ds: False)
    assert claims_cmd._first_run() is False


def _argument_types(monkeypatch, module, name) -> list:
    """Replace the kernel ``module.name`` by a spy that calls it; the list it fills with the
    Numba types of each call's arguments (the signature each call compiles or loads)."""
    import numba

    kernel, seen = getattr(module, name), []

    def spy(*args):
        seen.append(tuple(numba.typeof(a) for a in args))
        return kernel(*args)

    monkeypatch.setattr(module, name, spy)
    return seen


def test_the_claims_workers_warm_run_gives_the_continuous_kernel_a_real_tables_signature(
    monkeypatch,
):
    # claim 10 runs the kernel on a generation model's (read-only) tables, dealt to two or more
    # replicas; the worker's tiny run, on writable tables of a fixed step and one replica, must
    # type its arguments the same way, or it compiles a second signature (seconds of a first
    # run) that claim 10 never uses
    import numpy as np

    from ipusim import policies, serving
    from ipusim.commands import claims as claims_cmd
    from ipusim.serving import generation_kernels

    seen = _argument_types(monkeypatch, generation_kernels, "continuous_loop")
    claims_cmd.warm_kernels()
    assert len(seen) == 1  # one replica
    real = serving.generation_model("a100-80gb", "gpt2", max_batch=2, max_prompt=32, max_ctx=64)
    serving.simulate_generation(
        np.zeros(4),
        [16, 20, 24, 28],
        [2, 3, 2, 3],
        policies.Continuous(max_batch=2),
        real,
        replicas=2,
    )
    assert len(seen) == 3 and seen[0] == seen[1] == seen[2]


def test_the_claims_workers_warm_run_gives_the_wave_kernel_claim_2s_signature(monkeypatch):
    # the worker compiles the GPU model's wave kernel first, for the parent's claim 2 to load:
    # a warm call typed otherwise would compile a signature no claim uses
    from ipusim.claims.common import GPU, bert_short, clear_cache
    from ipusim.commands import claims as claims_cmd
    from ipusim.gpu import waves

    seen = _argument_types(monkeypatch, waves, "_waves")
    claims_cmd.warm_kernels()
    assert len(seen) >= 1
    warm = set(seen)
    clear_cache()
    bert_short(GPU)  # claim 2's GPU step (and claim 10's)
    clear_cache()
    assert len(seen) > len(warm) and set(seen) == warm, seen


def test_a_progress_bar_leaves_no_thread_that_would_keep_a_worker_from_being_a_fork():
    import threading

    from ipusim import config

    before = threading.active_count()
    for _ in config.progress(range(3), desc="a bar", disable=False):
        pass
    assert threading.active_count() == before


def test_the_claims_workers_warm_run_gives_the_decode_kernel_the_signature_claim_10_uses(
    monkeypatch,
):
    # claim 10's disaggregated deployments run the decode kernel on a cached (read-only) decode
    # table; the worker's tiny call must type its arguments the same way, or it compiles a
    # second signature that claim 10 never uses
    import numpy as np

    from ipusim import serving
    from ipusim.commands import claims as claims_cmd
    from ipusim.serving import disaggregated

    seen = _argument_types(monkeypatch, disaggregated, "_decode_device")
    claims_cmd.warm_kernels()
    assert len(seen) == 1
    real = serving.generation_model("a100-80gb", "gpt2", max_batch=2, max_prompt=32, max_ctx=64)
    disaggregated.simulate_disaggregated(
        np.zeros(4),
        np.array([16, 20, 24, 28]),
        np.array([2, 3, 2, 3]),
        prefill=real,
        decode=real,
        kv_bytes_per_token=1e3,
        max_batch=2,
    )
    assert len(seen) == 2 and seen[0] == seen[1], seen


def test_the_claims_shared_order_is_every_claim_once_longest_first():
    from ipusim import claims
    from ipusim.commands import claims as claims_cmd

    order = claims_cmd.LONGEST_FIRST
    assert len(set(order)) == len(order) and order[0] == claims_cmd.FIRST_HANDED
    assert sorted(claims_cmd.shared_order(sorted(claims.CLAIMS))) == sorted(claims.CLAIMS)
    # a subset keeps the listed order; a claim the list lacks goes last
    assert claims_cmd.shared_order([1, 15, 99, 2, 16]) == [2, 15, 1, 16, 99]
