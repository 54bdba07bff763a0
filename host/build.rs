//! Compiles the gRPC contract (proto/wazoo.proto) with protox, so no `protoc` is needed.

fn main() {
    println!("cargo:rerun-if-changed=proto/wazoo.proto");
    let files =
        protox::compile(["proto/wazoo.proto"], ["proto"]).expect("proto/wazoo.proto does not compile");
    tonic_prost_build::configure().compile_fds(files).expect("generating the gRPC code");
}
