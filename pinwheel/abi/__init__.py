"""How compiled wheels are tied to torch, read from their ELF files.

- ``elf``: classify a wheel (unstable C++ ABI, LibTorch stable ABI, or none).
- ``provenance``: local version labels, and a manifest's ``built_against`` against the wheel.
- ``cache``: classifications by wheel sha256, and the wheel behind an installed package.
"""
