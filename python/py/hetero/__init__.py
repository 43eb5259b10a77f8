"""hetero: devices, zero-copy DLPack exchange, device-wide algorithms and
the conformance run, on CUDA, HIP, OpenCL or the host."""

from ._hetero import (
    Array,
    Device,
    HeteroError,
    conform,
    device,
    devices,
    from_dlpack,
    reduce,
    scan,
    segmented_reduce,
    sort,
)

__all__ = [
    "Array",
    "Device",
    "HeteroError",
    "conform",
    "device",
    "devices",
    "from_dlpack",
    "reduce",
    "scan",
    "segmented_reduce",
    "sort",
]
