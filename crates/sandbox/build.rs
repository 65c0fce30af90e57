//! Stamps the build: `KEEL_SANDBOX_BUILD_ID` is a hash of this crate's sources (the profile's
//! type and the code that applies it), so the helper can refuse a profile written by a Keel
//! built against other sources (a `keel-sandbox` left over from an older build would otherwise
//! apply it with older code).
#![expect(
    clippy::disallowed_methods,
    clippy::unwrap_used,
    reason = "a build script reads its crate's sources; a failure to read them fails the build"
)]

use std::hash::{DefaultHasher, Hash as _, Hasher as _};
use std::path::{Path, PathBuf};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else {
            out.push(path);
        }
    }
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("Cargo.toml")];
    sources(&root.join("src"), &mut files);
    files.sort();
    let mut hasher = DefaultHasher::new();
    for file in &files {
        file.strip_prefix(root).unwrap().hash(&mut hasher);
        std::fs::read(file).unwrap().hash(&mut hasher);
    }
    println!(
        "cargo:rustc-env=KEEL_SANDBOX_BUILD_ID={:016x}",
        hasher.finish()
    );
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=Cargo.toml");
}
