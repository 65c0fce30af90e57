//! Which helper confines commands: the small `keel-sandbox` beside `keel` when it is there and
//! from this build. (That a helper from another build refuses the profile is the helper's own
//! test: crates/sandbox/tests/helper.rs.)

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use keel_core::runtime::sandbox::profile::HELPER_BUILD;
use keel_core::runtime::sandbox::{HELPER_BINARY, SandboxSettings, SandboxSpec};

fn executable(path: &Path, text: &str, mode: u32) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// The program and arguments a command would be confined with.
fn chosen(keel: &Path) -> (PathBuf, Vec<String>) {
    let spec = SandboxSpec::keel(SandboxSettings::default(), Some(keel.into()), None);
    let (helper, prefix) = spec.helper_command().unwrap();
    (helper.to_path_buf(), prefix.to_vec())
}

#[test]
fn keel_uses_the_small_helper_beside_it_when_it_is_this_build() {
    let dir = tempfile::tempdir().unwrap();
    let keel = dir.path().join("keel");
    executable(&keel, "#!/bin/sh\n", 0o755);
    let itself = (keel.clone(), vec!["sandbox".to_owned()]);
    assert_eq!(chosen(&keel), itself);

    // A `keel-sandbox` that cannot be executed is not used.
    let small = dir.path().join(HELPER_BINARY);
    let answering = |build: &str| format!("#!/bin/sh\n[ \"$1\" = build ] && echo {build}\n");
    executable(&small, &answering(HELPER_BUILD), 0o644);
    assert_eq!(chosen(&keel), itself);

    // One from another build (left over, or beside a `keel` rebuilt alone) is passed over.
    executable(&small, &answering("0123456789abcdef"), 0o755);
    assert_eq!(chosen(&keel), itself);
    executable(&small, "#!/bin/sh\nexit 1\n", 0o755);
    assert_eq!(chosen(&keel), itself);

    executable(&small, &answering(HELPER_BUILD), 0o755);
    assert_eq!(chosen(&keel), (small, Vec::new()));

    // Without `keel`'s path there is no helper at all (commands are refused or unconfined, as
    // the mode says).
    let none = SandboxSpec::keel(SandboxSettings::default(), None, None);
    assert_eq!(none.helper_command(), None);
}
