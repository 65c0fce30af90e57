//! Lays out the `keel` binary's code so that what a session runs sits together
//! (docs/decisions/0019-hot-code-layout.md).
//!
//! `link/hot-text.ld` names the functions one ACP session runs (start, `initialize`,
//! `session/new`, read/edit/bash turns), as `scripts/link-order.sh` records them with callgrind,
//! and collects them in one output section before `.text`. A page of code is resident once any
//! byte of it ran, and the kernel maps up to 64 KiB around each fault: packed, they take few
//! pages. Only the layout changes, never the code; a function the script does not name is laid
//! out as before, so a stale script costs memory, not correctness.
//!
//! Applied to release builds (profiles `release` and `bench`) for x86_64 Linux, where Rust links
//! with LLD; other targets, profiles and hand-chosen linkers link as before.

#![expect(
    clippy::disallowed_methods,
    reason = "a build script looks for its crate's own linker script"
)]

fn main() {
    println!("cargo:rerun-if-changed=link/hot-text.ld");
    println!("cargo:rerun-if-env-changed=CARGO_ENCODED_RUSTFLAGS");
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");
    let release = std::env::var("PROFILE").is_ok_and(|profile| profile == "release");
    let lld_by_default =
        std::env::var("TARGET").is_ok_and(|target| target == "x86_64-unknown-linux-gnu");
    // A linker or linker flavour chosen by hand may not take the script: one set for this
    // target in Cargo's configuration or environment (Cargo passes it as `RUSTC_LINKER`), or
    // in the flags.
    let own_linker = std::env::var_os("RUSTC_LINKER").is_some()
        || std::env::var("CARGO_ENCODED_RUSTFLAGS").is_ok_and(|flags| flags.contains("linker"));
    if !(release && lld_by_default) || own_linker {
        return;
    }
    // The relative relocations packed (DT_RELR, glibc 2.36 and later): the dynamic loader
    // reads a few KiB at start instead of 40,000 entries of 24 bytes (about 1 MB, all of it
    // resident once read). Decision 0036.
    println!("cargo:rustc-link-arg-bin=keel=-Wl,-z,pack-relative-relocs");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("link/hot-text.ld");
    if script.is_file() {
        println!("cargo:rustc-link-arg-bin=keel=-Wl,-T,{}", script.display());
    }
}
