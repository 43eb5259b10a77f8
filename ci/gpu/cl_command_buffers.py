#!/usr/bin/env python3
"""Prints, for every OpenCL device the ICD loader finds, the version of
cl_khr_command_buffer it reports (and of its mutable-dispatch companion)
and its command-buffer capabilities: which path hetero's OpenCL graphs can
take there. Standard library only (ctypes), so it runs on the GPU machine.

    python3 ci/gpu/cl_command_buffers.py
"""
import ctypes
import ctypes.util
import sys

CL_DEVICE_NAME = 0x102B
CL_DEVICE_EXTENSIONS_WITH_VERSION = 0x1060
CL_DEVICE_COMMAND_BUFFER_CAPABILITIES_KHR = 0x12A9
CL_DEVICE_COMMAND_BUFFER_REQUIRED_QUEUE_PROPERTIES_KHR = 0x12AA
CL_DEVICE_TYPE_ALL = 0xFFFFFFFF
CAPABILITIES = {1: "kernel-printf", 2: "device-side-enqueue", 4: "simultaneous-use", 8: "out-of-order"}


class NameVersion(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("name", ctypes.c_char * 64)]


def version(v):
    return f"{v >> 22}.{(v >> 12) & 0x3FF}.{v & 0xFFF}"


def info(cl, device, param):
    size = ctypes.c_size_t()
    if cl.clGetDeviceInfo(device, param, 0, None, ctypes.byref(size)) != 0:
        return None
    buf = ctypes.create_string_buffer(size.value)
    if cl.clGetDeviceInfo(device, param, size, buf, None) != 0:
        return None
    return buf.raw


def main():
    name = ctypes.util.find_library("OpenCL") or "libOpenCL.so.1"
    try:
        cl = ctypes.CDLL(name)
    except OSError as e:
        print(f"no OpenCL ICD loader: {e}")
        return 0
    count = ctypes.c_uint32()
    if cl.clGetPlatformIDs(0, None, ctypes.byref(count)) != 0 or count.value == 0:
        print("no OpenCL platform")
        return 0
    platforms = (ctypes.c_void_p * count.value)()
    cl.clGetPlatformIDs(count, platforms, None)
    for platform in platforms:
        n = ctypes.c_uint32()
        if cl.clGetDeviceIDs(ctypes.c_void_p(platform), CL_DEVICE_TYPE_ALL, 0, None, ctypes.byref(n)) != 0:
            continue
        devices = (ctypes.c_void_p * n.value)()
        cl.clGetDeviceIDs(ctypes.c_void_p(platform), CL_DEVICE_TYPE_ALL, n, devices, None)
        for device in devices:
            device = ctypes.c_void_p(device)
            label = (info(cl, device, CL_DEVICE_NAME) or b"?").rstrip(b"\0").decode(errors="replace")
            raw = info(cl, device, CL_DEVICE_EXTENSIONS_WITH_VERSION) or b""
            entries = (NameVersion * (len(raw) // ctypes.sizeof(NameVersion))).from_buffer_copy(raw)
            found = {e.name.decode(errors="replace"): version(e.version) for e in entries}
            buffers = {k: v for k, v in found.items() if "command_buffer" in k}
            caps = info(cl, device, CL_DEVICE_COMMAND_BUFFER_CAPABILITIES_KHR)
            names = []
            if caps:
                bits = int.from_bytes(caps[:8], "little")
                names = [label for bit, label in CAPABILITIES.items() if bits & bit]
            print(f"{label}: {buffers or 'no cl_khr_command_buffer'}; capabilities: {names or '-'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
