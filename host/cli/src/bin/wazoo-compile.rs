//! The registry's compile worker: `wazoo-compile IN OUT [--memory-bytes N] [--stack-bytes N]`.
//!
//! Compiles the component IN (`-`: read from stdin, as the registry hands it the bytes it
//! hashed) with the host's code generation settings and writes the compiled code to OUT
//! (whole, or not at all). The registry runs it as a child process under a memory
//! limit (`RLIMIT_AS`) and a time limit, so a component built to exhaust the compiler costs a
//! refused file, never the host.

use std::process::ExitCode;

use wazoo_runtime::SandboxLimits;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("wazoo-compile: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let (Some(input), Some(output)) = (args.next(), args.next()) else {
        anyhow::bail!("usage: wazoo-compile IN OUT [--memory-bytes N] [--stack-bytes N]");
    };
    let mut limits = SandboxLimits::default();
    while let Some(flag) = args.next() {
        let value: usize = args.next().ok_or_else(|| anyhow::anyhow!("{flag} needs a value"))?.parse()?;
        match flag.as_str() {
            "--memory-bytes" => limits.memory_bytes = value,
            "--stack-bytes" => limits.wasm_stack_bytes = value,
            other => anyhow::bail!("unknown option {other}"),
        }
    }
    let engine = wazoo_runtime::sandbox::compile_engine(&limits)?;
    let bytes = match input.as_str() {
        "-" => {
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut std::io::stdin().lock(), &mut bytes)?;
            bytes
        }
        file => std::fs::read(file)?,
    };
    let code = engine.precompile_component(&bytes).map_err(|e| anyhow::anyhow!("{e:#}"))?;
    let tmp = format!("{output}.tmp{}", std::process::id());
    std::fs::write(&tmp, code)?;
    std::fs::rename(&tmp, &output)?;
    Ok(())
}
