//! Compiles the wire contract with protox, so no system `protoc` is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // protox does not emit rerun-if-changed itself.
    println!("cargo:rerun-if-changed=baton");
    let files = protox::compile(["baton/coordinator/v1/coordinator.proto", "baton/worker/v1/worker.proto"], ["."])?;
    tonic_prost_build::configure().build_server(true).build_client(true).compile_fds(files)?;
    Ok(())
}
