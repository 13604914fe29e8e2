"""Whether this host has a usable NVIDIA driver: ctypes only, no third-party import."""
from __future__ import annotations

import ctypes
import os

from .records import exc_text

ASSUME_DRIVER_ENV = "PINWHEEL_SMOKE_ASSUME_DRIVER"  # "1": a test hook, see the cli module's docstring


def probe_driver() -> dict:
    if os.environ.get(ASSUME_DRIVER_ENV) == "1":
        return {"present": True, "assumed": True, "reason": f"{ASSUME_DRIVER_ENV}=1 (test hook)"}
    for lib in ("libcuda.so.1", "libcuda.so"):
        try:
            cuda = ctypes.CDLL(lib)
        except OSError:
            continue
        info = {"library": lib}
        try:
            rc = cuda.cuInit(0)
            ver = ctypes.c_int(0)
            cuda.cuDriverGetVersion(ctypes.byref(ver))
            info["cuda_driver_api"] = f"{ver.value // 1000}.{(ver.value % 1000) // 10}"
            count = ctypes.c_int(0)
            if rc == 0:
                cuda.cuDeviceGetCount(ctypes.byref(count))
            info.update(cu_init=rc, device_count=count.value, present=(rc == 0))
            if rc != 0:
                info["reason"] = f"cuInit returned {rc} (driver present but unusable)"
        except Exception as exc:  # pragma: no cover - broken driver installs
            info.update(present=False, reason=f"driver API call failed: {exc_text(exc)}")
        return info
    return {"present": False, "reason": "libcuda.so.1 cannot be loaded: no NVIDIA driver on this host"}


