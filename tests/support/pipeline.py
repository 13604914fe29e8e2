"""Helpers for the pipeline tests: a TLS package index the build container can reach, and a small project.

Why TLS on the Docker bridge address (and not the host network, and not plain HTTP):

* The engine's BuildKit (v0.8, inside dockerd 20.10) runs each ``RUN`` in its own
  network namespace attached to the default bridge. 127.0.0.1 in there is the
  container itself, so an index on the host's loopback is out of reach. Host
  networking for a build (``--network host`` with the ``network.host``
  entitlement) is a build option that pinwheel's Engine.build does not expose,
  and the rendered Dockerfile must not need it. The host's address on the
  bridge (docker0, e.g. 172.17.0.1) IS reachable from a build step, so the
  index listens there.
* pip only talks plain HTTP to localhost/127.0.0.0/8 or to a ``trusted-host``.
  A bridge address is neither, and the ``pipconf`` secret pinwheel writes holds
  only ``index-url``; pip would ignore the index ("not a trusted or secure
  host"). So the index speaks HTTPS with a certificate from a CA made for the
  test session. That CA reaches pip exactly the way a corporate proxy's CA does:
  ``PIP_CERT`` on the host -> ``ca_bundle()`` -> the ``ca`` BuildKit secret ->
  ``PIP_CERT=/run/secrets/ca`` inside the step. The build can only succeed if
  the secret was mounted, and the CA's bytes are unique to the session, so a
  scan of ``docker save`` for them is meaningful.
"""
from __future__ import annotations

import contextlib
import fcntl
import gzip
import hashlib
import ipaddress
import json
import os
import re
import shutil
import socket
import ssl
import struct
import subprocess
import sys
import tarfile
import threading
import uuid
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from pinwheel.image.inventory import ZSTD_MAGIC

from tests.support.engine import engine_unavailable
from tests.support.local_index import LocalIndex, _IndexHandler, build_wheel

REPO_ROOT = Path(__file__).resolve().parents[2]


# ----------------------------------------------------------------- addresses


def _interface_ipv4(name: str) -> str | None:
    """The IPv4 address of a network interface (SIOCGIFADDR), or None."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            packed = fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", name.encode()[:15]))
        return socket.inet_ntoa(packed[20:24])
    except OSError:
        return None


def bridge_address(engine) -> str:
    """The host's address on the engine's default bridge: what a build step can reach."""
    net = engine.docker.network.inspect("bridge")
    for cfg in net.ipam.config or []:
        gateway = cfg.get("Gateway") if isinstance(cfg, dict) else getattr(cfg, "gateway", None)
        if gateway:
            return str(gateway).split("/")[0]
    name = (net.options or {}).get("com.docker.network.bridge.name", "docker0")
    found = _interface_ipv4(name)
    if found:
        return found
    for cfg in net.ipam.config or []:
        subnet = cfg.get("Subnet") if isinstance(cfg, dict) else getattr(cfg, "subnet", None)
        if subnet:
            return str(next(ipaddress.ip_network(subnet).hosts()))
    raise RuntimeError("cannot find the Docker bridge address")


# ----------------------------------------------------------------------- TLS


@dataclass(frozen=True)
class TestCA:
    ca_pem: Path
    cert: Path
    key: Path

    def pem_bytes(self) -> bytes:
        return self.ca_pem.read_bytes()

    def der_bytes(self) -> bytes:
        return ssl.PEM_cert_to_DER_cert(self.ca_pem.read_text())

    def needles(self) -> list[bytes]:
        """Byte strings no layer may contain: the PEM, its DER, and every base64 body line of it."""
        pem = self.pem_bytes()
        lines = [l for l in pem.splitlines() if l and not l.startswith(b"-----")]
        return [pem, self.der_bytes()] + [l for l in lines if len(l) >= 32]


def make_ca(directory: Path, ip: str) -> TestCA:
    """A throwaway CA and a server certificate for ``ip`` (and 127.0.0.1), made with the openssl CLI."""
    directory.mkdir(parents=True, exist_ok=True)
    openssl = shutil.which("openssl")
    if not openssl:
        raise RuntimeError("openssl is needed to make the test index's certificate")
    tag = uuid.uuid4().hex
    ca_key, ca_pem = directory / "ca.key", directory / "ca.pem"
    key, csr, cert = directory / "server.key", directory / "server.csr", directory / "server.pem"
    ext = directory / "server.ext"
    ext.write_text(
        f"subjectAltName=IP:{ip},IP:127.0.0.1\n"
        "basicConstraints=critical,CA:FALSE\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth\n"
        "subjectKeyIdentifier=hash\n"
        "authorityKeyIdentifier=keyid\n"
    )
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    steps = [
        [openssl, "req", "-x509", *ec, "-keyout", str(ca_key), "-out", str(ca_pem), "-days", "2",
         "-subj", f"/CN=pinwheel pipeline test CA {tag}",
         "-addext", "basicConstraints=critical,CA:TRUE",
         "-addext", "keyUsage=critical,keyCertSign,cRLSign"],
        [openssl, "req", *ec, "-keyout", str(key), "-out", str(csr), "-subj", f"/CN={ip}"],
        [openssl, "x509", "-req", "-in", str(csr), "-CA", str(ca_pem), "-CAkey", str(ca_key),
         "-CAcreateserial", "-out", str(cert), "-days", "2", "-extfile", str(ext)],
    ]
    for cmd in steps:
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd[:3])} failed: {proc.stderr.strip()}")
    return TestCA(ca_pem, cert, key)


class _TLSServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address, handler, context: ssl.SSLContext):
        self.context = context
        super().__init__(address, handler)

    def finish_request(self, request, client_address):  # in the connection's own thread
        try:
            conn = self.context.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError):
            return
        try:
            self.RequestHandlerClass(conn, client_address, self)
        finally:
            try:
                conn.close()
            except OSError:
                pass


class TLSIndex(LocalIndex):
    """LocalIndex served twice from the same files: plain HTTP on 127.0.0.1 for the
    host (``url``), HTTPS on the bridge address for build steps (``build_url``).

    Two addresses because the host and a build step see the host at different
    addresses. The host side speaks plain HTTP on loopback because pip >= 24.2
    verifies through truststore, which fails for an HTTPS index addressed by IP
    ("check_hostname requires server_hostname"), and pip trusts plain HTTP on
    loopback; the bridge address is not loopback, so the build side needs TLS.
    """

    def __init__(self, root: Path, host: str, ca: TestCA):
        super().__init__(root)
        self.host = host
        self.ca = ca
        self._tls_server: _TLSServer | None = None
        self._tls_thread: threading.Thread | None = None

    @property
    def build_url(self) -> str:
        if self._tls_server is None:
            raise RuntimeError("TLSIndex is not serving; call serve()")
        host, port = self._tls_server.server_address[:2]
        return f"https://{host}:{port}/simple/"

    def serve(self) -> str:
        url = super().serve()
        if self._tls_server is None:
            index = self

            class Handler(_IndexHandler):
                local_index = index

            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(str(self.ca.cert), str(self.ca.key))
            self._tls_server = _TLSServer((self.host, 0), Handler, context)
            self._tls_thread = threading.Thread(
                target=self._tls_server.serve_forever, kwargs={"poll_interval": 0.05}, name="tls-index", daemon=True
            )
            self._tls_thread.start()
        return url

    def close(self) -> None:
        if self._tls_server is not None:
            self._tls_server.shutdown()
            self._tls_server.server_close()
            self._tls_server = None
        if self._tls_thread is not None:
            self._tls_thread.join(timeout=5)
            self._tls_thread = None
        super().close()


# -------------------------------------------------------------------- project

# Everything in the image comes from the test index (tiny generated wheels) or
# from wheels/. The shape follows the real manifest: a shared pin, a --no-deps
# install whose requirement would move it, a gate, and one local wheel under
# each policy (fail / skip / fallback, the fallback --no-deps).
MANIFEST = """\
manifest_version: 1

image:
  name: tiny
  repository: {repository}
  title: "pinwheel pipeline test image"
  venv: /opt/venv

shared_pins:
  - requirement: "pw-core==1.0.0"
    needed_by: [pw-top, pw-nodeps]
    why: "pw-top and pw-nodeps share one pw-core"

gates:
  ENABLE_CUDA_13:
    when: "cuda >= 13"
    why: "the fallback kernel exists for CUDA 13 only"

variants:
  cu130:
    cuda: "13.0"
    torch: "2.13.0"
    python: "3.11"
    platform: manylinux_2_36_x86_64
    base: {base}
    tag: "cu130-pipe-{{date}}"

wheel_sets:
  - name: core
    why: "the base everything below needs"
    packages:
      - requirement: "pw-core==1.0.0"
        why: "the shared pin"
        verify:  # the smoke's import level: on a host without a driver (even with the payload's hook) it fails
          python: "import ctypes; ctypes.CDLL('libcuda.so.1')"
          needs: driver

  - name: top
    why: "a package with a transitive dependency"
    packages:
      - requirement: "pw-top==2.0.0"

  - name: nodeps
    why: "installed without its declared requirements"
    gate: ENABLE_CUDA_13
    packages:
      - requirement: "pw-nodeps==1.0.0"
        no_deps: true
        why: "it declares pw-core==0.9.0, which would downgrade the shared 1.0.0"
        allow_missing:
          - {{name: pw-core, why: "it runs on the shared 1.0.0; its ==0.9.0 is stale metadata"}}
          - {{name: pw-util, why: "it declares pw-util<0.6, and 0.6.0 keeps the API it uses"}}

  - name: local
    why: "in-house wheels; a missing wheel follows its policy"
    packages:
      - requirement: "pw-kern-fail==1.0.0+inhouse"
        why: "required kernel"
        local:
          glob: "pw_kern_fail-*.whl"
          if_missing: fail
          how_to_provide: "run `make wheel` in pw-kern-fail and copy the wheel into wheels/"
      - requirement: "pw-kern-skip==1.0.0+inhouse"
        why: "optional kernel"
        local:
          glob: "pw_kern_skip-*.whl"
          if_missing: skip
          how_to_provide: "build pw-kern-skip and copy its wheel into wheels/"
      - requirement: "pw-kern-fb==1.0.0+inhouse"
        gate: ENABLE_CUDA_13
        why: "kernel with an index stand-in"
        local:
          glob: "pw_kern_fb-*.whl"
          if_missing: fallback
          how_to_provide: "build pw-kern-fb and copy its wheel into wheels/"
        fallback:
          requirement: "pw-kern-fb-stable==1.0.0"
          no_deps: true
          why: "stable build; its declared pw-core>=2.0 would replace the shared pin"
          allow_missing:
            - {{name: pw-core, why: "a stable-ABI build: the shared 1.0.0 loads it"}}
"""

@contextlib.contextmanager
def base_with_debian_packages(engine, base_image: str, context: Path, name: str, *packages: str) -> Iterator[str]:
    """The ref of an image made from `base_image` with these Debian packages from its apt sources (the bootstrap
    base has no git and no patch), tagged pinwheel-test/<name>-<random>:1 and removed afterwards."""
    ref = f"pinwheel-test/{name}-{uuid.uuid4().hex[:8]}:1"
    (context / "Dockerfile").write_text(
        f"FROM {base_image}\n"
        "RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "
        f"{' '.join(packages)} && rm -rf /var/lib/apt/lists/*\n")
    proc = subprocess.run(["docker", "build", "-q", "-t", ref, str(context)], capture_output=True, text=True)
    if proc.returncode != 0:
        engine_unavailable(f"cannot install {' '.join(packages)} into {base_image} from its apt sources: "
                           f"{proc.stderr.strip()[-300:]}")
    try:
        yield ref
    finally:
        engine.remove(ref, force=True)


def without_nodeps(manifest: str) -> str:
    """The project's manifest less its --no-deps wheel set, whose dropped requirements have tests of their own."""
    manifest, dropped = re.subn(r"^  - name: nodeps\n.*?(?=^  - name: )", "", manifest, flags=re.M | re.S)
    assert dropped == 1
    return manifest


LOCAL_WHEELS = ("pw-kern-fail", "pw-kern-skip", "pw-kern-fb")
LOCAL_VERSION = "1.0.0+inhouse"


def populate_index(index: LocalIndex) -> None:
    """The index side of MANIFEST. A random payload makes every wheel (so every
    lock hash, so every build step) unique to the session: no cache hit from an
    earlier run can stand in for a step that must run."""
    nonce = 16
    index.add("pw-core", "1.0.0", payload_size=nonce)
    index.add("pw-core", "1.1.0", payload_size=nonce)  # newer: the shared pin must hold it back
    index.add("pw-util", "0.5.0", payload_size=nonce)
    index.add("pw-util", "0.6.0", payload_size=nonce)
    index.add("pw-top", "2.0.0", requires=["pw-core>=1.0", "pw-util>=0.5"], payload_size=nonce)
    index.add("pw-nodeps", "1.0.0", requires=["pw-core==0.9.0", "pw-util<0.6"], payload_size=nonce)
    index.add("pw-kern-fb-stable", "1.0.0", requires=["pw-core>=2.0"], payload_size=nonce)


def build_local_wheels(directory: Path) -> dict[str, Path]:
    return {name: build_wheel(directory, name, LOCAL_VERSION, payload_size=16) for name in LOCAL_WHEELS}


def replace_local_wheel(project_root: Path, name: str, first: dict[str, Path], directory: Path) -> Path:
    """Put a new build of local wheel `name` into the project's wheels/: the same file name, other bytes."""
    rebuilt = build_local_wheels(directory)[name]
    assert rebuilt.name == first[name].name
    assert rebuilt.read_bytes() != first[name].read_bytes()
    (project_root / "wheels" / rebuilt.name).write_bytes(rebuilt.read_bytes())
    return rebuilt


@dataclass
class CLIResult:
    returncode: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


@dataclass
class Project:
    """A manifest in its own directory, rendered and locked against the test index."""

    root: Path
    repository: str
    local_wheels: dict[str, Path]
    env: dict[str, str] = field(default_factory=dict)  # build, smoke, publish: the index at its bridge address
    host_env: dict[str, str] = field(default_factory=dict)  # lock: the index on the host's loopback

    @property
    def manifest(self) -> Path:
        return self.root / "wheels_manifest.yaml"

    @property
    def lock_dir(self) -> Path:
        return self.root / "images" / "tiny" / "lock" / "cu130"

    def cli(self, *args: str, check: bool = False) -> CLIResult:
        """`python build.py --manifest <this> ARGS`, as a user runs it."""
        env = {**os.environ, **self.env, **(self.host_env if args[:1] == ("lock",) else {}), "COLUMNS": "400"}
        proc = subprocess.run(
            [sys.executable, str(REPO_ROOT / "build.py"), "--manifest", str(self.manifest), *args],
            cwd=self.root, env=env, capture_output=True, text=True,
        )
        result = CLIResult(proc.returncode, proc.stdout, proc.stderr)
        if check and proc.returncode != 0:
            raise AssertionError(f"build.py {' '.join(args)} exited {proc.returncode}:\n{result.output[-4000:]}")
        return result

    def set_wheels(self, *names: str) -> None:
        """Make wheels/ hold exactly the local wheels of these packages."""
        wheels = self.root / "wheels"
        shutil.rmtree(wheels, ignore_errors=True)
        wheels.mkdir()
        for name in names:
            shutil.copy2(self.local_wheels[name], wheels / self.local_wheels[name].name)

    def load(self):
        from pinwheel import manifest
        from pinwheel.plan import plan_variant

        m = manifest.load(self.manifest)
        return m, [plan_variant(m, v) for v in m.variants], plan_variant(m, "cu130")

    def copy(self, dest: Path) -> "Project":
        shutil.copytree(self.root, dest, ignore=shutil.ignore_patterns(".pinwheel", ".cache"))
        return Project(dest, self.repository, self.local_wheels, dict(self.env), dict(self.host_env))


def make_project(root: Path, repository: str, base: str, local_wheels: dict[str, Path], env: dict[str, str],
                 host_env: dict[str, str]) -> Project:
    root.mkdir(parents=True)
    project = Project(root, repository, local_wheels, env, host_env)
    project.manifest.write_text(MANIFEST.format(repository=repository, base=base))
    project.cli("render", check=True)
    project.cli("lock", "--variant", "cu130", check=True)
    project.set_wheels(*LOCAL_WHEELS)
    return project


def require_qemu() -> None:
    """Skip unless linux/arm64 builds can run here: qemu-aarch64 registered with binfmt_misc (flag F), through
    scripts/qemu-up where it is not yet."""
    import pytest

    entry = Path("/proc/sys/fs/binfmt_misc/qemu-aarch64")
    if not (entry.exists() and "F" in entry.read_text()):
        proc = subprocess.run([str(REPO_ROOT / "scripts" / "qemu-up")], capture_output=True, text=True)
        if proc.returncode != 0:
            pytest.skip(f"no QEMU for arm64 here: {proc.stderr.strip()[-300:]}")


# ----------------------------------------------------------------- scanning


def _plain(fh):
    """A member's bytes as they are on disk in the image: a compressed layer blob (the containerd image
    store saves layers as pushed: gzip or zstd) decompressed, anything else as it is."""
    head = fh.peek(4)[:4]
    if head == ZSTD_MAGIC:
        import zstandard

        return zstandard.ZstdDecompressor().stream_reader(fh)
    if head[:2] == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=fh)
    return fh


def scan_saved_image(tarball: Path, needles: Sequence[bytes], chunk: int = 8 << 20) -> dict[bytes, list[str]]:
    """Which needles occur in which member of a `docker save` tarball (layers read in chunks, decompressed)."""
    found: dict[bytes, list[str]] = {n: [] for n in needles}
    overlap = max(len(n) for n in needles) - 1
    with tarfile.open(tarball) as outer:
        for member in outer:
            if not member.isfile():
                continue
            raw = outer.extractfile(member)
            assert raw is not None
            fh = _plain(raw)
            tail = b""
            while True:
                block = fh.read(chunk)
                if not block:
                    break
                window = tail + block
                for n in needles:
                    if member.name not in found[n] and n in window:
                        found[n].append(member.name)
                tail = window[-overlap:] if overlap > 0 else b""
    return found


def steps_in(log: str) -> dict[str, bool]:
    """Each build step's header ("[image 3/12] RUN ...") in a plain-progress log -> whether BuildKit took it
    from the cache."""
    headers: dict[str, str] = {}
    cached: set[str] = set()
    for number, rest in re.findall(r"^#(\d+) (.*)$", log, re.M):
        if rest.startswith("[") and number not in headers:
            headers[number] = rest
        elif rest == "CACHED":
            cached.add(number)
    return {header: number in cached for number, header in headers.items()}


def layer_members(tarball: Path) -> list[str]:
    """The layers a `docker save` tarball's manifest.json lists (`<id>/layer.tar`, or `blobs/sha256/<digest>`
    from the containerd image store)."""
    with tarfile.open(tarball) as outer:
        return [str(n) for n in json.load(outer.extractfile("manifest.json"))[0]["Layers"]]


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


IMAGE_MANIFEST_TYPES = ("application/vnd.docker.distribution.manifest.v2+json", "application/vnd.oci.image.manifest.v1+json",
                        "application/vnd.oci.image.index.v1+json")


def pushed_image(addr: str, repository: str, reference: str) -> tuple[str, dict, dict, set[str]]:
    """(the digest ``reference`` names, the image's manifest, its config, the ids an engine may know it by) as
    the registry serves them. The containerd image store pushes an image as an index (beside its
    attestations) and knows it by that digest; the classic store pushes the manifest and knows its config's."""
    status, headers, body = registry_get(addr, f"/v2/{repository}/manifests/{reference}", IMAGE_MANIFEST_TYPES)
    assert status == 200, body
    digest, manifest = headers["Docker-Content-Digest"], json.loads(body)
    ids = {digest}
    images = [m for m in manifest.get("manifests", []) if m.get("platform", {}).get("os") != "unknown"]
    if "manifests" in manifest:
        assert len(images) == 1, manifest  # one image beside its attestations
        status, _, body = registry_get(addr, f"/v2/{repository}/manifests/{images[0]['digest']}", IMAGE_MANIFEST_TYPES)
        assert status == 200, body
        manifest = json.loads(body)
        ids.add(images[0]["digest"])
    status, _, blob = registry_get(addr, f"/v2/{repository}/blobs/{manifest['config']['digest']}")
    assert status == 200, blob
    return digest, manifest, json.loads(blob), ids | {manifest["config"]["digest"]}


def registry_get(addr: str, path: str, accept: Iterable[str] = ()) -> tuple[int, dict, bytes]:
    import urllib.error
    import urllib.request

    req = urllib.request.Request(f"http://{addr}{path}", headers={"Accept": ", ".join(accept)} if accept else {})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()
