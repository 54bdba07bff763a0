//! Component files for the registry and daemon tests: deployed the way a release is, relabelled
//! (same recipe, new hash), or made to fail a check (a trap while starting, a compile bomb).

use std::path::Path;

/// Replaces `dest` the way a deployment does: write beside it, then rename over it.
pub fn deploy(dest: &Path, bytes: &[u8]) {
    let tmp = dest.with_extension("tmp");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, dest).unwrap();
}

/// `component` with a custom section appended: the same recipe, a different file and hash.
pub fn relabelled(component: &[u8], label: &str) -> Vec<u8> {
    with_section(component, "wazoo-test-label", label.as_bytes())
}

/// `component` with a top-level custom section `name` holding `payload` appended: the same
/// recipe (world, imports, exports, declared protocol), another sha256.
pub fn with_section(component: &[u8], name: &str, payload: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    leb(name.len(), &mut body);
    body.extend_from_slice(name.as_bytes());
    body.extend_from_slice(payload);
    let mut out = component.to_vec();
    section(0, &body, &mut out);
    out
}

fn leb(mut n: usize, out: &mut Vec<u8>) {
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn section(id: u8, body: &[u8], out: &mut Vec<u8>) {
    out.push(id);
    leb(body.len(), out);
    out.extend_from_slice(body);
}

/// `component` (the lock recipe: its world, exports and types intact) plus one more core
/// instance, of a module whose start function is `unreachable`: instantiating it traps.
pub fn traps_at_start(component: &[u8]) -> Vec<u8> {
    // Count the top-level core modules: the new one takes the next index.
    let (mut at, mut modules) = (8, 0);
    while at < component.len() {
        let id = component[at];
        at += 1;
        let (mut size, mut shift) = (0usize, 0);
        loop {
            let byte = component[at];
            at += 1;
            size |= ((byte & 0x7f) as usize) << shift;
            shift += 7;
            if byte & 0x80 == 0 {
                break;
            }
        }
        modules += (id == 1) as usize;
        at += size;
    }
    let mut module = b"\0asm\x01\0\0\0".to_vec();
    section(1, &[1, 0x60, 0, 0], &mut module);
    section(3, &[1, 0], &mut module);
    section(8, &[0], &mut module);
    section(10, &[1, 3, 0, 0x00, 0x0b], &mut module);
    let mut out = component.to_vec();
    section(1, &module, &mut out);
    let mut instance = vec![1, 0x00];
    leb(modules, &mut instance);
    instance.push(0);
    section(2, &instance, &mut out);
    out
}

/// A component whose one function is `n` additions in a row: small on disk, costly to compile.
pub fn compile_bomb(n: usize) -> Vec<u8> {
    // One i32 local; local.get 0, i32.const 1, i32.add, local.set 0 — n times.
    let mut body = vec![1, 1, 0x7f];
    for _ in 0..n {
        body.extend_from_slice(&[0x20, 0x00, 0x41, 0x01, 0x6a, 0x21, 0x00]);
    }
    body.push(0x0b);
    let mut module = b"\0asm\x01\0\0\0".to_vec();
    section(1, &[1, 0x60, 0, 0], &mut module);
    section(3, &[1, 0], &mut module);
    let mut code = vec![1];
    leb(body.len(), &mut code);
    code.extend_from_slice(&body);
    section(10, &code, &mut module);
    let mut component = b"\0asm\x0d\0\x01\0".to_vec();
    section(1, &module, &mut component);
    component
}
