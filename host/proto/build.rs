//! Compiles the gRPC contract (wazoo.proto) with protox, so no `protoc` is needed.

fn main() {
    println!("cargo:rerun-if-changed=wazoo.proto");
    let files = protox::compile(["wazoo.proto"], ["."]).expect("wazoo.proto does not compile");
    tonic_prost_build::configure().compile_fds(files).expect("generating the gRPC code");
}
