import json
out = {}
def err(e):
    return "%s: %s" % (type(e).__name__, e)
try:
    import ctypes
    lib = ctypes.CDLL("libcuda.so.1")
    v = ctypes.c_int(0)
    if lib.cuDriverGetVersion(ctypes.byref(v)) == 0:
        out["libcuda_cuda"] = "%d.%d" % (v.value // 1000, v.value % 1000 // 10)
    with open("/proc/self/maps") as f:
        for line in f:
            p = line.split()[-1]
            if "/libcuda.so" in p:
                out["libcuda"] = p
                break
except Exception as e:
    out["libcuda_error"] = err(e)
def fatbin_archs(path):
    import mmap
    found = set()
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        i = m.find(b"\x50\xed\x55\xba")
        while i >= 0:
            hs = int.from_bytes(m[i + 6:i + 8], "little")
            size = int.from_bytes(m[i + 8:i + 16], "little")
            if m[i + 4:i + 6] == b"\x01\x00" and hs == 16 and 0 < size < len(m):
                j, end = i + hs, i + hs + size
                while j + 32 <= end:
                    kind = int.from_bytes(m[j:j + 2], "little")
                    ehs = int.from_bytes(m[j + 4:j + 8], "little")
                    esz = int.from_bytes(m[j + 8:j + 16], "little")
                    arch = int.from_bytes(m[j + 28:j + 32], "little")
                    if kind not in (1, 2) or ehs < 32:
                        break
                    found.add(("compute_%d" if kind == 1 else "sm_%d") % arch)
                    j += ehs + esz
                i = m.find(b"\x50\xed\x55\xba", max(end, i + 4))
            else:
                i = m.find(b"\x50\xed\x55\xba", i + 4)
    return sorted(found)
try:
    import torch
    out["torch"] = torch.__version__
    out["torch_cuda"] = torch.version.cuda or ""
    flags = torch._C._cuda_getArchFlags() if hasattr(torch._C, "_cuda_getArchFlags") else None
    out["torch_archs"] = flags.split() if flags else []
except Exception as e:
    out["torch_error"] = err(e)
try:
    import importlib.util
    spec = importlib.util.find_spec("vllm._C")
    if spec and spec.origin:
        out["vllm_archs"] = fatbin_archs(spec.origin)
except Exception as e:
    out["vllm_archs_error"] = err(e)
print("RAYFORM_CUDA " + json.dumps(out), flush=True)
