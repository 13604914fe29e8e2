"""Sources and byte layouts for the abi tests (imported by conftest and tests).

Nothing is linked against torch: a shared object may keep undefined symbols,
so declaring a torch function and calling it is enough to make it an import.
"""

from __future__ import annotations

import struct

# --------------------------------------------------------------------------- #
# Sources
# --------------------------------------------------------------------------- #
# Unstable C++ ABI: members and types of c10::, at::, torch::.
UNSTABLE_CPP = r"""
namespace c10 {
struct TensorImpl { void release_resources(); };
struct Error { virtual ~Error(); };          // key function not defined here: typeinfo is imported
}
namespace at {
class TensorBase { public: long numel() const; };
class Tensor;
}
namespace torch { namespace autograd { void check_inplace(); } }
void frobnicate(at::Tensor &);               // global function, torch type in its signature

extern "C" int aoti_torch_get_data_ptr(void *, void **);

extern "C" long touch(c10::TensorImpl *impl, const at::TensorBase *t, at::Tensor *x) {
    long n = 0;
    try {
        impl->release_resources();           // _ZN3c1010TensorImpl17release_resourcesEv
        n = t->numel();                      // _ZNK2at10TensorBase5numelEv
        torch::autograd::check_inplace();    // _ZN5torch8autograd13check_inplaceEv
        frobnicate(*x);                      // _Z10frobnicateRN2at6TensorE
    } catch (const c10::Error &) {           // _ZTIN3c105ErrorE
        n = -1;
    }
    void *p;
    aoti_torch_get_data_ptr(0, &p);          // a stable import does not make it stable
    return n;
}
"""

UNSTABLE_SYMBOLS = {
    "_ZN3c1010TensorImpl17release_resourcesEv",
    "_ZNK2at10TensorBase5numelEv",
    "_ZN5torch8autograd13check_inplaceEv",
    "_Z10frobnicateRN2at6TensorE",
    "_ZTIN3c105ErrorE",
}

# Stable ABI only, in C++ so that libstdc++ (std::) imports are present too.
STABLE_CPP = r"""
#include <string>
typedef struct AtenTensorOpaque *AtenTensorHandle;
extern "C" {
int aoti_torch_get_data_ptr(AtenTensorHandle tensor, void **ret);
int aoti_torch_get_dim(AtenTensorHandle tensor, long *ret);
int torch_call_dispatcher(const char *op, const char *overload, void *stack, unsigned long long version);
}
std::string describe(const char *s);        // std:: in the signature, global scope: not torch

extern "C" int entry(AtenTensorHandle t, const char *op) {
    void *p;
    long d;
    aoti_torch_get_data_ptr(t, &p);
    aoti_torch_get_dim(t, &d);
    std::string name(op);
    name += describe(op);
    return torch_call_dispatcher(name.c_str(), "", p, (unsigned long long)d);
}
"""

# No torch at all; C++ names that only look close to torch's namespaces.
NONE_CPP = r"""
#include <math.h>
namespace atlas { double scale(double); }    // _ZN5atlas5scaleEd
namespace c10x { void f(); }                 // _ZN4c10x1fEv
namespace torchvision_like { void g(); }
extern "C" double compute(double x) {
    c10x::f();
    torchvision_like::g();
    return atlas::scale(cos(x));
}
"""

NONE_C = r"""
#include <math.h>
double compute_c(double x) { return sin(x) * 2.0; }
"""

EMPTY_C = "int pinwheel_stub_marker;\n"


def fatbin_bytes(entries: list[tuple[int, int]], containers: int = 1) -> bytes:
    """A fatbin section body: ``containers`` copies of a container holding
    ``entries`` = [(kind, sm)], kind 1 = PTX, 2 = cubin, with 16-byte dummy payloads."""
    payload = b"\0" * 16
    body = b""
    for kind, sm in entries:
        head = struct.pack("<HHIQIIHHI", kind, 0x0101, 64, len(payload), 0, 0, 8, 1, sm)
        head += b"\0" * (64 - len(head))
        body += head + payload
    container = struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body)) + body
    return container * containers


def fatbin_c(entries: list[tuple[int, int]], containers: int = 2) -> str:
    data = fatbin_bytes(entries, containers)
    items = ",".join(str(b) for b in data)
    return (
        '__attribute__((section(".nv_fatbin"), aligned(8), used))\n'
        f"static const unsigned char pinwheel_fatbin[{len(data)}] = {{{items}}};\n"
        "int kernel_host_stub(void) { return 0; }\n"
    )
