"""The import check's child: imports each module named on its command line, one JSON line per step.

For each module it prints {"module", "started": true}, then {"module", "ok", "error"}, so the parent
knows which one it was on if the process dies. With PINWHEEL_IMPORT_RECORD set, it also writes there
what the imports read, as it was when first read, so that a passing result can be reused
(cache.import_inputs): every file opened and library loaded (by its stat), every directory listed (by
its names), every name no finder found, and what it could not see (another program run).
"""
from __future__ import annotations

import hashlib
import importlib
import json
import os
import sys
import traceback

RECORD_ENV = "PINWHEEL_IMPORT_RECORD"
_SPAWN = ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "pty.spawn")
_EVENTS = ("open", "os.listdir", "os.scandir", "ctypes.dlopen", *_SPAWN)


class Recorder:
    """What the imports read, through an audit hook and a last finder on sys.meta_path."""

    def __init__(self):
        self.read, self.listed, self.written, self.absent, self.opaque, self.inside = {}, {}, set(), set(), [], []
        # bound now: an import that replaces os.stat must not change what the record sees
        self._abspath, self._fsdecode, self._stat, self._listdir = os.path.abspath, os.fsdecode, os.stat, os.listdir

    def state(self, path):
        try:
            st = self._stat(path)
        except OSError:
            return None
        return [st.st_size, st.st_mtime_ns, st.st_ctime_ns]

    def names(self, path):
        try:
            return hashlib.sha256(json.dumps(sorted(self._listdir(path))).encode()).hexdigest()
        except OSError:
            return None

    def install(self) -> None:
        sys.addaudithook(self.audit)
        recorder = self

        class AbsentNames:  # last on sys.meta_path: asked only when no finder before it found the name
            @staticmethod
            def find_spec(name, path=None, target=None):
                recorder.absent.add((name, tuple(path) if path is not None and name.count(".") else None))
                return None

        sys.meta_path.append(AbsentNames)
        self.sys_path = list(sys.path)  # as site left it: what the imports searched from

    def audit(self, event, args):
        if self.inside or event not in _EVENTS:
            return
        self.inside.append(1)  # the hook's own listdir raises the event again
        try:
            self.note(event, args)
        except Exception as exc:  # never in the way of the import itself; the record is then not trusted
            self.opaque.append(f"{event}: {exc!r}")
        finally:
            self.inside.pop()

    def note(self, event, args):
        if event == "open":
            self.opened(*args)
        elif event == "subprocess.Popen":
            self.spawned(*args)
        elif event in _SPAWN:  # what another program reads is not seen here
            self.opaque.append(f"an import ran another program ({event} {str(args[0])[:200]})")
        elif event == "ctypes.dlopen":
            if isinstance(args[0], (str, bytes)) and os.sep in self._fsdecode(args[0]):
                path = self._abspath(self._fsdecode(args[0]))
                self.read.setdefault(path, self.state(path))
        elif isinstance(args[0], int):
            self.opaque.append(f"{event} of a file descriptor")
        else:
            path = self._abspath(self._fsdecode(args[0] if args[0] is not None else "."))
            if path not in self.listed:
                self.listed[path] = self.names(path)

    def opened(self, path, mode, flags):
        if isinstance(path, int):
            return
        path = self._abspath(self._fsdecode(path))
        if path in self.read or path in self.written:
            return
        if (mode is None and flags & os.O_TRUNC and flags & (os.O_WRONLY | os.O_RDWR)) or (
                isinstance(mode, str) and ("w" in mode or "x" in mode)):
            self.written.add(path)  # created or emptied: what is read from it later, this run wrote
        else:
            self.read[path] = self.state(path)

    def spawned(self, executable, argv, cwd, env):
        # what another program reads is not seen here: only a program that is not there (its absence is
        # what the import saw, by every path it was looked for on) or `ldconfig -p` (it prints
        # /etc/ld.so.cache, which is recorded) keeps the record whole
        argv = [argv] if isinstance(argv, (str, bytes)) else list(argv or [])
        prog = self._fsdecode(executable if executable is not None else (argv[0] if argv else ""))
        where = [prog] if os.sep in prog else [os.path.join(d or ".", prog) for d in
                                                (env or os.environ).get("PATH", os.defpath).split(os.pathsep)]
        found = [p for p in map(self._abspath, where) if os.path.isfile(p)]
        if not found:
            for p in map(self._abspath, where):
                self.read.setdefault(p, None)
        elif os.path.basename(found[0]) == "ldconfig" and [self._fsdecode(a) for a in argv[1:]] == ["-p"]:
            self.read.setdefault(found[0], self.state(found[0]))
            self.read.setdefault("/etc/ld.so.cache", self.state("/etc/ld.so.cache"))
        else:
            self.opaque.append(f"an import ran another program ({found[0]})")

    def loaded(self) -> None:
        """The files of every module now loaded, and the shared objects mapped into this process."""
        for m in list(sys.modules.values()):
            try:
                f = getattr(m, "__file__", None)
            except Exception:
                f = None
            if isinstance(f, str):
                f = self._abspath(f)
                if f not in self.written:
                    self.read.setdefault(f, self.state(f))
            for d in (getattr(m, "__path__", None) or ()) if not f else ():
                if isinstance(d, str):
                    self.listed.setdefault(self._abspath(d), self.names(self._abspath(d)))
        try:
            with open("/proc/self/maps") as fh:
                for line in fh:
                    part = line.split(None, 5)
                    if len(part) == 6 and part[5].startswith("/") and not part[5].rstrip().endswith("(deleted)"):
                        path = part[5].rstrip("\n")
                        if path not in self.written:
                            self.read.setdefault(path, self.state(path))
                            self.listed.setdefault(os.path.dirname(path), self.names(os.path.dirname(path)))
        except OSError:
            self.opaque.append("no /proc/self/maps: shared objects loaded by the imports are unknown")

    def loader_paths(self) -> None:
        """Where the dynamic loader looks for a library by its name: a library absent then may be there now."""
        self.read.setdefault("/etc/ld.so.cache", self.state("/etc/ld.so.cache"))
        arch = getattr(sys.implementation, "_multiarch", "")
        for d in [*os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep), "/lib", "/lib64", "/usr/lib",
                  "/usr/lib64", "/usr/local/lib", *([f"/lib/{arch}", f"/usr/lib/{arch}"] if arch else [])]:
            if d:
                self.listed.setdefault(self._abspath(d), self.names(self._abspath(d)))

    def write(self, path: str) -> None:
        self.inside.append(1)  # what follows is the record's own reading
        self.loaded()
        self.loader_paths()
        for name in ("sitecustomize", "usercustomize"):  # site looked for them before this ran
            if name not in sys.modules:
                self.absent.add((name, None))
        tmp = path + ".tmp"
        with open(tmp, "w") as fh:
            json.dump({"read": self.read, "listed": self.listed, "absent": sorted(self.absent, key=repr),
                       "sys_path": self.sys_path, "opaque": self.opaque}, fh)
        os.replace(tmp, path)


def import_each(modules) -> None:
    for mod in modules:
        print(json.dumps({"module": mod, "started": True}), flush=True)
        try:
            importlib.import_module(mod)
            rec = {"module": mod, "ok": True}
        except BaseException as exc:
            lines = traceback.format_exception_only(type(exc), exc)
            rec = {"module": mod, "ok": False, "error": (lines[-1] if lines else repr(exc)).strip()}
        print(json.dumps(rec), flush=True)


def main(modules) -> int:
    record = os.environ.get(RECORD_ENV)
    recorder = Recorder() if record else None
    if recorder is not None:
        recorder.install()
    import_each(modules)
    if recorder is not None:
        recorder.write(record)
    return 0
