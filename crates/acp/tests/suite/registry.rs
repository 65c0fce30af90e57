//! Ready for the ACP Registry: `crates/acp/registry/keel/agent.json` validates against the registry's
//! published schema (vendored in fixtures/registry with its source and date), and the archive
//! `scripts/registry-archive.sh` packs starts `keel acp` when unpacked in a clean directory.
//! The release build of `just registry-archive` is too slow for the suite: here the script packs
//! the test build's binaries, the same packing and check the recipe runs.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn validator() -> jsonschema::Validator {
    let schema = read_json(&repo().join("fixtures/registry/agent.schema.json"));
    jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .unwrap()
}

fn errors(validator: &jsonschema::Validator, manifest: &Value) -> Vec<String> {
    validator
        .iter_errors(manifest)
        .map(|error| format!("{}: {error}", error.instance_path()))
        .collect()
}

/// The checks of one manifest: the schema, and what Keel's entry must say.
fn check_manifest(manifest: &Value) {
    let validator = validator();
    let found = errors(&validator, manifest);
    assert!(found.is_empty(), "{found:?}");
    assert_eq!(manifest["id"], "keel");
    assert_eq!(manifest["version"], env!("CARGO_PKG_VERSION"));
    let linux = &manifest["distribution"]["binary"]["linux-x86_64"];
    assert_eq!(linux["cmd"], "./keel");
    assert_eq!(linux["args"], json!(["acp"]));
    let archive = linux["archive"].as_str().unwrap();
    assert!(
        archive.ends_with(&format!(
            "/v{0}/keel-{0}-linux-x86_64.tar.gz",
            env!("CARGO_PKG_VERSION")
        )),
        "{archive}"
    );
    assert_eq!(linux["sha256"].as_str().map(str::len), Some(64), "{linux}");
}

#[test]
fn the_manifest_validates_against_the_registrys_published_schema() {
    let manifest = read_json(&repo().join("crates/acp/registry/keel/agent.json"));
    check_manifest(&manifest);
    // The schema is strict where the registry is: a field it does not know, or a platform it
    // does not list, is refused.
    let validator = validator();
    let mut extra = manifest.clone();
    extra["distribution"]["binary"]["linux-x86_64"]["checksum"] = json!("x");
    assert!(!errors(&validator, &extra).is_empty());
    let mut platform = manifest.clone();
    platform["distribution"]["binary"]["linux-amd64"] =
        manifest["distribution"]["binary"]["linux-x86_64"].clone();
    assert!(!errors(&validator, &platform).is_empty());
    // The registry's icon rules: a 16x16 SVG in `currentColor`, no fixed colours.
    let icon = std::fs::read_to_string(repo().join("crates/acp/registry/keel/icon.svg")).unwrap();
    assert!(icon.contains("width=\"16\"") && icon.contains("height=\"16\""));
    assert!(icon.contains("currentColor"));
    assert!(
        !icon.contains("fill=\"#") && !icon.contains("stroke=\"#"),
        "{icon}"
    );
}

#[test]
fn the_packed_archive_starts_keel_acp_in_a_clean_directory() {
    let binaries = Path::new(env!("CARGO_BIN_EXE_keel")).parent().unwrap();
    assert!(binaries.join("keel-sandbox").exists());
    let out = tempfile::tempdir().unwrap();
    let manifest = out.path().join("agent.json");
    let output = std::process::Command::new(repo().join("scripts/registry-archive.sh"))
        .arg("--binaries")
        .arg(binaries)
        .arg("--out")
        .arg(out.path())
        .arg("--manifest")
        .arg(&manifest)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&output.stderr).into_owned()
        + &String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{said}");
    assert!(
        said.contains("starts keel acp in a clean directory and answers initialize"),
        "{said}"
    );
    // The manifest it filled is valid and names the archive it built, by its checksum.
    let filled = read_json(&manifest);
    check_manifest(&filled);
    let name = format!("keel-{}-linux-x86_64.tar.gz", env!("CARGO_PKG_VERSION"));
    let sum = std::process::Command::new("sha256sum")
        .arg(out.path().join(&name))
        .output()
        .unwrap();
    let sum = String::from_utf8(sum.stdout).unwrap();
    assert_eq!(
        filled["distribution"]["binary"]["linux-x86_64"]["sha256"].as_str(),
        sum.split_whitespace().next()
    );
    // The check refuses an archive that does not start Keel.
    let broken = out.path().join("broken.tar.gz");
    let status = std::process::Command::new("tar")
        .arg("-czf")
        .arg(&broken)
        .arg("-C")
        .arg(out.path())
        .arg("agent.json")
        .status()
        .unwrap();
    assert!(status.success());
    let refused = std::process::Command::new(repo().join("scripts/registry-check.sh"))
        .arg(&broken)
        .output()
        .unwrap();
    assert!(!refused.status.success());
}
