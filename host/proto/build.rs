//! Compiles the gRPC contract (wazoo.proto) with protox, so no `protoc` is needed. The two
//! messages of the standard rich error model its error statuses carry (google/rpc) go into the
//! descriptor set for reflection; their code is tonic-types'. The services and clients encode
//! with `codec::LeanCodec` (prost's, with smaller buffers).

fn main() {
    println!("cargo:rerun-if-changed=wazoo.proto");
    println!("cargo:rerun-if-changed=google/rpc/status.proto");
    println!("cargo:rerun-if-changed=google/rpc/error_details.proto");
    let files =
        protox::compile(["wazoo.proto", "google/rpc/status.proto", "google/rpc/error_details.proto"], ["."])
            .expect("wazoo.proto does not compile");
    // The descriptors themselves, for the daemon's reflection service.
    let out = std::env::var("OUT_DIR").expect("OUT_DIR");
    std::fs::write(format!("{out}/wazoo_descriptor.bin"), prost::Message::encode_to_vec(&files))
        .expect("writing the descriptor set");
    // Code for wazoo.proto alone: the google.rpc messages are tonic-types' (read and written
    // with it), here only so that reflection can describe the error details.
    let mut ours = files;
    ours.file.retain(|f| f.name() == "wazoo.proto");
    tonic_prost_build::configure()
        .codec_path("crate::codec::LeanCodec")
        .compile_fds(ours)
        .expect("generating the gRPC code");
}
