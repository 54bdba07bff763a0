"""The build backend of wazoo-client (PEP 517, with PEP 660 editable installs), on the standard
library alone: the package is pure Python, so its wheel is the files of `wazoo/` (the PEP 561
marker `wazoo/py.typed` among them: the package ships its type hints) and the metadata of pyproject.toml's [project] table (name, version, description, readme, license,
requires-python, dependencies; nothing else is read)."""
import base64
import hashlib
import io
import os
import tarfile
import zipfile

try:
    import tomllib
except ImportError:  # Python before 3.11
    import tomli as tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "wazoo"
#: What an sdist holds besides the package: the files to build it again.
SDIST_EXTRA = ["pyproject.toml", "README.md", "gen_stubs.sh", "_backend/wazoo_backend.py", "tests"]
#: Zip entries' time: fixed, so that a build is the same bytes every time.
EPOCH = (1980, 1, 1, 0, 0, 0)


def _project():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["project"]


def _names():
    project = _project()
    dist = project["name"].replace("-", "_")
    return project, dist, f"{dist}-{project['version']}"


def _metadata(project):
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {project['name']}",
        f"Version: {project['version']}",
        f"Summary: {project.get('description', '')}",
    ]
    if "license" in project:
        lines.append(f"License: {project['license']['text']}")
    if "requires-python" in project:
        lines.append(f"Requires-Python: {project['requires-python']}")
    lines += [f"Requires-Dist: {dep}" for dep in project.get("dependencies", [])]
    body = ""
    if "readme" in project:
        lines.append("Description-Content-Type: text/markdown")
        with open(os.path.join(ROOT, project["readme"]), encoding="utf-8") as f:
            body = "\n" + f.read()
    return "\n".join(lines) + "\n" + body


def _wheel_file():
    return "Wheel-Version: 1.0\nGenerator: wazoo_backend\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


def _tree(top):
    """The files under `top` (relative to ROOT, sorted), without bytecode."""
    found = []
    for directory, subdirs, files in os.walk(os.path.join(ROOT, top)):
        subdirs[:] = sorted(d for d in subdirs if d != "__pycache__")
        for name in sorted(files):
            if not name.endswith((".pyc", ".pyo")):
                found.append(os.path.relpath(os.path.join(directory, name), ROOT))
    return found


def _write_wheel(wheel_directory, contents):
    """Writes a wheel of `contents` (archive name -> bytes) and its dist-info; returns its name."""
    project, dist, base = _names()
    info = f"{base}.dist-info"
    contents = dict(contents)
    contents[f"{info}/METADATA"] = _metadata(project).encode()
    contents[f"{info}/WHEEL"] = _wheel_file().encode()
    contents[f"{info}/top_level.txt"] = f"{PACKAGE}\n".encode()
    record = []
    for name, data in contents.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append(f"{info}/RECORD,,")
    contents[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    wheel = f"{base}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel), "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in contents.items():
            entry = zipfile.ZipInfo(name, EPOCH)
            entry.external_attr = 0o644 << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(entry, data)
    return wheel


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    project, _, base = _names()
    info = os.path.join(metadata_directory, f"{base}.dist-info")
    os.makedirs(info, exist_ok=True)
    with open(os.path.join(info, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata(project))
    with open(os.path.join(info, "WHEEL"), "w", encoding="utf-8") as f:
        f.write(_wheel_file())
    return f"{base}.dist-info"


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    contents = {}
    for path in _tree(PACKAGE):
        with open(os.path.join(ROOT, path), "rb") as f:
            contents[path.replace(os.sep, "/")] = f.read()
    return _write_wheel(wheel_directory, contents)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """A wheel whose .pth file puts this source tree on sys.path."""
    _, dist, _ = _names()
    return _write_wheel(wheel_directory, {f"{dist}.pth": (ROOT + "\n").encode()})


def build_sdist(sdist_directory, config_settings=None):
    project, _, base = _names()
    sdist = f"{base}.tar.gz"
    files = []
    for extra in SDIST_EXTRA:
        files += _tree(extra) if os.path.isdir(os.path.join(ROOT, extra)) else [extra]
    files += _tree(PACKAGE)
    with tarfile.open(os.path.join(sdist_directory, sdist), "w:gz", format=tarfile.PAX_FORMAT) as tar:
        pkg_info = _metadata(project).encode()
        entry = tarfile.TarInfo(f"{base}/PKG-INFO")
        entry.size, entry.mode = len(pkg_info), 0o644
        tar.addfile(entry, io.BytesIO(pkg_info))
        for path in files:
            tar.add(os.path.join(ROOT, path), arcname=f"{base}/{path.replace(os.sep, '/')}", recursive=False)
    return sdist
