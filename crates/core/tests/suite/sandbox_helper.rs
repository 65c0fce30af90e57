//! Which helper confines commands: the small `keel-sandbox` beside `keel` when it is there, and
//! a helper from another build refuses the profile instead of misreading it.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use keel_core::runtime::sandbox::profile::{HELPER_BUILD, Mechanism, Profile};
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

#[test]
fn the_real_small_helper_says_its_build() {
    let output = Command::new(env!("CARGO_BIN_EXE_keel-core-sandbox"))
        .arg("build")
        .output()
        .unwrap();
    assert!(output.status.success());
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), HELPER_BUILD);
}

#[test]
fn a_helper_from_another_build_refuses_the_profile() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let marker = root.join("ran");
    let mut profile = Profile {
        build: "0123456789abcdef".into(),
        nonce: "n".into(),
        status_file: root.join("status"),
        required: true,
        mechanism: Mechanism::Auto,
        cwd: root.clone(),
        writable: vec![root.clone()],
        readable: Vec::new(),
        protected: Vec::new(),
        pinned: Vec::new(),
        home: None,
        home_readable: Vec::new(),
        home_writable: Vec::new(),
        tmp_dir: root.join("tmp"),
        staging_dir: root.join("stage"),
        network: false,
        proxy: None,
        masked: Vec::new(),
        env_allow: vec!["PATH".into()],
        mask_ruleset: None,
    };
    let run = |profile: &Profile| {
        let file = root.join("profile.json");
        std::fs::write(&file, serde_json::to_string(profile).unwrap()).unwrap();
        Command::new(PathBuf::from(env!("CARGO_BIN_EXE_keel-core-sandbox")))
            .args(["run", "--profile"])
            .arg(&file)
            .args([
                "--",
                "/bin/sh",
                "-c",
                &format!("echo > {}", marker.display()),
            ])
            .output()
            .unwrap()
    };
    let refused = run(&profile);
    assert_eq!(refused.status.code(), Some(125));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("different builds"), "{stderr}");
    assert!(
        !marker.exists(),
        "the program ran under a profile it could not read"
    );

    // The same profile from this build is applied, and the program runs.
    profile.build = HELPER_BUILD.to_owned();
    std::fs::create_dir_all(root.join("tmp")).unwrap();
    std::fs::create_dir_all(root.join("stage")).unwrap();
    let ran = run(&profile);
    assert!(
        ran.status.success(),
        "{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    assert!(marker.exists());
}
