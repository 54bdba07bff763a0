"""The package's build, offline: the vendored flit_core is the released one, unmodified (every
file hashed in its RECORD, none added); the wheel pip builds carries the metadata of
pyproject.toml (URLs, classifiers, extras, ranges of its dependencies, license) and the typed
package (py.typed, wazoo.aio); the sdist holds what builds the wheel again; and pip installs the
package from its directory into a fresh virtual environment with build isolation and no index.

    build.py WORKDIR

Prints one line per finding for tests/tests/python_client.rs, then `build ok`.
"""
import base64
import csv
import email
import hashlib
import os
import subprocess
import sys
import tarfile
import zipfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENDOR = os.path.join(HERE, "_vendor")
FLIT = "flit_core-3.12.0.dist-info"


def say(*words):
    print(*words, flush=True)


def pip(*args, python=sys.executable):
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INDEX="1")
    done = subprocess.run([python, "-m", "pip", *args], env=env, capture_output=True, text=True)
    assert done.returncode == 0, f"pip {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    return done


def vendored():
    """Every file of flit_core and its dist-info is in RECORD with its hash, and nothing else
    is there but _vendor/README.md."""
    listed = {}
    with open(os.path.join(VENDOR, FLIT, "RECORD"), newline="") as f:
        for path, digest, _size in csv.reader(f):
            listed[path] = digest
    found = set()
    for top, dirs, files in os.walk(VENDOR):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in files:
            found.add(os.path.relpath(os.path.join(top, name), VENDOR).replace(os.sep, "/"))
    extra = found - set(listed) - {"README.md"}
    assert not extra, f"files in _vendor that the released flit_core does not have: {sorted(extra)}"
    missing = set(listed) - found
    assert not missing, f"files of the released flit_core missing from _vendor: {sorted(missing)}"
    for path, digest in listed.items():
        if not digest:
            continue  # RECORD itself
        algorithm, expected = digest.split("=", 1)
        with open(os.path.join(VENDOR, path), "rb") as f:
            actual = base64.urlsafe_b64encode(hashlib.new(algorithm, f.read()).digest()).rstrip(b"=").decode()
        assert actual == expected, f"_vendor/{path} differs from the released flit_core"
    say("vendored", len(listed), "files as released")


def wheel_metadata(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        info = next(n for n in names if n.endswith(".dist-info/METADATA"))
        return names, email.message_from_bytes(z.read(info))


def main():
    work = sys.argv[1]
    vendored()

    out = os.path.join(work, "wheel")
    pip("wheel", "--no-deps", "--wheel-dir", out, HERE)
    [wheel] = os.listdir(out)
    say("wheel", wheel)
    names, meta = wheel_metadata(os.path.join(out, wheel))
    say("metadata-version", meta["Metadata-Version"])
    say("license", meta["License-Expression"])
    say("requires-python", meta["Requires-Python"])
    for dep in meta.get_all("Requires-Dist"):
        say("requires", dep.replace(" ", ""))
    for extra in meta.get_all("Provides-Extra"):
        say("extra", extra)
    for url in meta.get_all("Project-URL"):
        say("url", url.split(",")[0])
    for classifier in meta.get_all("Classifier"):
        say("classifier", classifier.replace(" ", "_"))
    say("readme", meta["Description-Content-Type"], "## Install" in meta.get_payload())
    for module in ("wazoo/py.typed", "wazoo/aio.py", "wazoo/recipes.py", "wazoo/_proto/wazoo_pb2_grpc.py"):
        say("has", module, module in names)
    say("vendor-in-wheel", any(n.startswith("flit_core") for n in names))

    # The sdist, built by the same backend, holds what builds the wheel again.
    sys.path.insert(0, VENDOR)
    from flit_core import buildapi

    here = os.getcwd()
    os.chdir(HERE)
    try:
        sdist = buildapi.build_sdist(os.path.join(work, "sdist"))
    finally:
        os.chdir(here)
    with tarfile.open(os.path.join(work, "sdist", sdist)) as t:
        members = {m.name.split("/", 1)[1] for m in t.getmembers() if "/" in m.name}
        t.extractall(os.path.join(work, "unpacked"))
    for needed in ("pyproject.toml", "README.md", "gen_stubs.sh", "_vendor/flit_core/buildapi.py",
                   "wazoo/aio.py", "tests/unit.py"):
        say("sdist-has", needed, needed in members)
    unpacked = os.path.join(work, "unpacked", sdist[: -len(".tar.gz")])
    pip("wheel", "--no-deps", "--wheel-dir", os.path.join(work, "again"), unpacked)
    say("sdist-builds", os.listdir(os.path.join(work, "again")) == [wheel])

    # A fresh virtual environment (seeing this machine's packages, as a system's do), pip with
    # its build isolation and no index: the backend needs nothing from outside this directory,
    # and what it asks for (grpcio, grpcio-status, protobuf) is installed by .ci/setup.
    venv = os.path.join(work, "venv")
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv], check=True)
    python = os.path.join(venv, "bin", "python")
    done = pip("install", HERE, python=python)
    say("venv-install", "Successfully installed wazoo-client-0.1.0" in done.stdout)
    check = ("import wazoo, wazoo.aio, grpc_status; print(wazoo.__file__.startswith(sys.prefix),"
             " wazoo.aio.Client.__name__)")
    found = subprocess.run([python, "-c", "import sys; " + check], capture_output=True, text=True)
    assert found.returncode == 0, found.stderr
    say("venv-import", found.stdout.strip())
    say("build ok")


if __name__ == "__main__":
    main()
