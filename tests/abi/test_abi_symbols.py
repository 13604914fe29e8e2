"""Symbol and label rules, on names alone (no compiler needed)."""

from __future__ import annotations

import pytest

from pinwheel.abi.elf import classify_symbol
from pinwheel.abi.provenance import LocalLabel, parse_local_label


@pytest.mark.parametrize(
    "sym",
    [
        "_ZN3c1010TensorImpl17release_resourcesEv",  # member of c10::
        "_ZNK2at10TensorBase5numelEv",  # const member of at::
        "_ZNKR3c106SymInt6expectEv",  # const & ref-qualified member
        "_ZNVK2at3FooEv",  # volatile const member
        "_ZN5torch8autograd13check_inplaceEv",  # torch::autograd::
        "_ZN6caffe28TypeMeta21_typeMetaDataInstanceIfEEPKNS_6detail12TypeMetaDataEv",
        "_ZN2at4_ops10select_int4callERKNS_6TensorElN3c106SymIntE",
        "_ZN3c1019UndefinedTensorImpl10_singletonE",  # static data member
        "_ZN2atplERKNS_6TensorES2_",  # at::operator+
        "_ZTVN3c1010TensorImplE",  # vtable
        "_ZTIN3c105ErrorE",  # typeinfo
        "_ZTSN3c105ErrorE",  # typeinfo name
        "_ZThn16_N3c1010TensorImplD0Ev",  # non-virtual thunk
        "_ZTv0_n24_N2at6TensorD1Ev",  # virtual thunk
        "_ZGVZN2at6native3fooEvE1x",  # guard variable of a local static
        "_ZZN5torch3jit4loadEvE5cache",  # local entity
        "_ZTHN3c103tlsE",  # TLS init function
        "_Z10frobnicateRN2at6TensorE",  # global function with an at:: parameter
        "_Z16THPVariable_WrapRKN2at10TensorBaseE",
        "_ZNSt6vectorIN2at6TensorESaIS1_EE17_M_realloc_insertIJRKS1_EEEvN9__gnu_cxx17__normal_iteratorIPS1_S3_EEDpOT_",
        "THPVariableClass",  # libtorch_python global, unmangled
    ],
)
def test_unstable_symbols(sym: str) -> None:
    assert classify_symbol(sym) == "unstable"


@pytest.mark.parametrize(
    "sym",
    [
        "aoti_torch_get_data_ptr",
        "aoti_torch_dtype_bfloat16",
        "aoti_torch_library_init_impl",
        "torch_call_dispatcher",
        "torch_new_list_reserve_size",
    ],
)
def test_stable_symbols(sym: str) -> None:
    assert classify_symbol(sym) == "stable"


@pytest.mark.parametrize(
    "sym",
    [
        "",
        "malloc",
        "cudaLaunchKernelExC",
        "__cxa_throw",
        "_ZNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEE9_M_createERmm",
        "_ZNKRSt7__cxx1115basic_stringbufIcSt11char_traitsIcESaIcEE3strEv",
        "_ZTVN10__cxxabiv117__class_type_infoE",
        "_ZdlPvm",
        "_ZN5atlas5scaleEd",  # namespace atlas
        "_ZN4c10x1fEv",  # namespace c10x
        "_ZN12c10likeThing3fooEv",  # "3c10" inside a longer source name
        "_ZN11torchvision3ops3nmsEv",  # torchvision::, not torch::
        "_ZN13torch_tensorrt4initEv",
        "_Z3fooN4atom1XE",
        "_ZN2ab3fooEv",
        "torchvision_version",  # not a torch_ stable shim prefix
        "THCudaMalloc",
    ],
)
def test_symbols_without_torch_tie(sym: str) -> None:
    assert classify_symbol(sym) is None


@pytest.mark.parametrize(
    "label, cuda, torch",
    [
        (None, None, None),
        ("cu130", "13.0", None),
        ("cu130torch2.13", "13.0", "2.13"),
        ("cu128torch2.9", "12.8", "2.9"),
        ("cu12torch2.3cxx11abitrue", "12", "2.3"),
        ("cu118", "11.8", None),
        ("cuda13.0", "13.0", None),
        ("pt213cu130", "13.0", "2.13"),
        ("cu130.torch2.13.0", "13.0", "2.13.0"),
        ("cpu", None, None),
    ],
)
def test_parse_local_label(label, cuda, torch) -> None:
    assert parse_local_label(label) == LocalLabel(cuda, torch)
