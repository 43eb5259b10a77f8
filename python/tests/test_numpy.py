"""The Python package on the host backend, with NumPy: devices, DLPack both
ways without a copy, the algorithms, refusals, and the conformance run."""

import numpy as np
import pytest

import hetero


def test_devices_include_the_host():
    found = hetero.devices()
    assert any(d.backend == "host" for d in found)
    host = hetero.device("host", 0)
    assert host.backend == "host" and host.ordinal == 0 and host.total_memory > 0
    assert host.stream is None  # the host backend has no native streams
    with pytest.raises(ValueError):
        hetero.device("nonsense", 0)


def test_numpy_round_trip_shares_memory():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    a = hetero.from_dlpack(x)
    assert a.shape == [3, 4] and a.dtype == "float32"
    assert a.__dlpack_device__() == (1, 0)
    back = np.from_dlpack(a)
    assert back.shape == (3, 4)
    # The same memory: a write through NumPy shows on the other side.
    assert np.shares_memory(back, x) or back.ctypes.data == x.ctypes.data
    x[0, 0] = 42.0
    assert back[0, 0] == 42.0


def test_exported_arrays_outlive_their_python_object():
    y = hetero.scan(np.ones(1000, dtype=np.int64))
    view = np.from_dlpack(y)
    del y  # the capsule's tensor keeps the memory alive
    assert view[-1] == 1000 and view[0] == 1


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int64, np.uint64, np.float32, np.float64])
def test_algorithms_match_numpy(dtype):
    rng = np.random.default_rng(7)
    x = rng.integers(0, 100, size=10_000).astype(dtype)
    assert hetero.reduce(x) == x.sum()
    assert hetero.reduce(x, op="min") == x.min()
    assert hetero.reduce(x, op="max") == x.max()
    on_device = hetero.reduce(x, as_array=True)
    assert on_device.shape == [1] and np.from_dlpack(on_device)[0] == x.sum()
    np.testing.assert_array_equal(np.from_dlpack(hetero.scan(x)), np.cumsum(x, dtype=dtype))
    exclusive = np.from_dlpack(hetero.scan(x, exclusive=True))
    np.testing.assert_array_equal(exclusive[1:], np.cumsum(x, dtype=dtype)[:-1])
    assert exclusive[0] == 0
    offsets = [0, 10, 10, 5000, 10_000]
    sums = np.from_dlpack(hetero.segmented_reduce(x, offsets))
    np.testing.assert_array_equal(sums, [x[a:b].sum() for a, b in zip(offsets, offsets[1:])])
    before = x.copy()
    np.testing.assert_array_equal(np.from_dlpack(hetero.sort(x)), np.sort(x, kind="stable"))
    np.testing.assert_array_equal(np.from_dlpack(hetero.sort(x, descending=True)), np.sort(x)[::-1])
    np.testing.assert_array_equal(x, before)  # sort leaves its input alone


def test_results_chain_without_leaving_the_device():
    x = np.arange(100, dtype=np.float64)
    prefix = hetero.scan(x)
    assert hetero.reduce(prefix, op="max") == x.sum()


def test_what_cannot_be_represented_is_refused():
    with pytest.raises(hetero.HeteroError, match="type"):
        hetero.from_dlpack(np.zeros(4, dtype=np.int8))
    with pytest.raises((hetero.HeteroError, BufferError), match="strid|contiguous"):
        hetero.from_dlpack(np.arange(20, dtype=np.float32)[::2])
    readonly = np.arange(4, dtype=np.float32)
    readonly.flags.writeable = False
    with pytest.raises((hetero.HeteroError, BufferError)):
        hetero.from_dlpack(readonly)
    a = hetero.from_dlpack(np.ones(4, dtype=np.float32))
    with pytest.raises(BufferError, match="stream=None"):
        a.__dlpack__(stream=1, max_version=(1, 0))
    with pytest.raises(BufferError, match="1.x"):
        a.__dlpack__()
    with pytest.raises(ValueError, match="op"):
        hetero.reduce(np.ones(3, dtype=np.float32), op="mean")
    with pytest.raises(ValueError):
        hetero.segmented_reduce(np.ones(3, dtype=np.float32), [])


def test_conform_returns_the_report():
    report = hetero.conform(backend="host", workloads="reduce,scan", size="small")
    assert report["schema_version"] >= 1
    results = [r for run in report["runs"] for r in run["results"]]
    assert results and all(r["passed"] for r in results)
    assert {r["workload"] for r in results} == {"reduce", "scan"}
    with pytest.raises(ValueError):
        hetero.conform(size="enormous")


def test_threads_sharing_arrays_do_not_deadlock():
    """Guards against a lock of an array held with the interpreter: a
    thread waiting for it (holding the interpreter) and the holder running
    a NumPy deleter (which needs the interpreter) would wait for each
    other."""
    import threading

    shared = hetero.from_dlpack(np.arange(50_000, dtype=np.float64))
    errors = []

    def work():
        try:
            for _ in range(40):
                fresh = hetero.from_dlpack(np.ones(1000, dtype=np.float64))  # its deleter is NumPy's
                assert hetero.reduce(fresh) == 1000.0
                del fresh
                assert np.from_dlpack(hetero.scan(shared))[-1] == 50_000 * 49_999 / 2
                assert shared.dtype == "float64"
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, daemon=True) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "threads sharing arrays hung"
    assert not errors, errors
