//! The Python client package (`clients/python`), installed as a user would, for the tests that
//! drive it.

use std::path::PathBuf;

use tokio::process::Command;

use crate::daemon::output;
use crate::root;

/// The package's source tree.
pub fn package() -> PathBuf {
    root().join("clients/python")
}

/// Installs the package with pip, offline, into a fresh temporary directory, for PYTHONPATH.
/// `--no-deps`: a `--target` install ignores what is installed, and grpcio, grpcio-status and
/// protobuf are there already (.ci/setup).
pub async fn install() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let (code, stdout, stderr) = output(
        Command::new("python3")
            .args(["-m", "pip", "install", "--quiet", "--no-index", "--no-build-isolation", "--no-deps"])
            .arg("--target")
            .arg(dir.path())
            .arg(package())
            .env("PIP_DISABLE_PIP_VERSION_CHECK", "1")
            .current_dir(root()),
    )
    .await;
    assert_eq!(code, 0, "pip install of clients/python failed:\n{stdout}\n{stderr}");
    assert!(dir.path().join("wazoo/_proto/wazoo_pb2_grpc.py").exists(), "the stubs were installed");
    dir
}
