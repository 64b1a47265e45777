import os

import pytest

os.environ.setdefault("MPLBACKEND", "Agg")


@pytest.fixture(scope="session")
def dask_client():
    """One local Dask cluster of 2 worker processes for the whole session, started on first use
    by the code ``sweep.run`` starts its own with (``runner._dask_client`` with no client and no
    address); every test that needs it shares it, so the suite pays for one cluster start.
    A test that kills a worker leaves its nanny to restart it; the next user waits for both
    (``dask_client.wait_for_workers(2)``)."""
    from ipusim.sweep import runner

    with runner._dask_client(None, None, 2, 3.0) as cl:
        yield cl
