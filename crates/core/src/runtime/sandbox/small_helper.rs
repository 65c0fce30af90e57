//! The small helper binary beside `keel`, and how a session picks its helper.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{SandboxSettings, SandboxSpec, profile};

/// The small helper binary installed next to `keel` (`crates/acp/src/bin/keel-sandbox.rs`, whose
/// `main` is [`keel_sandbox::standalone`]).
pub const HELPER_BINARY: &str = "keel-sandbox";

impl SandboxSpec {
    /// The spec for the `keel` binary at `keel`: its helper is the small [`HELPER_BINARY`] in
    /// the same directory when there is one (a command then starts without mapping and
    /// relocating all of Keel) and from this build, else `keel sandbox` itself. Both run the
    /// same [`keel_sandbox::main`]; a `keel-sandbox` from another build would also refuse the profile
    /// ([`profile::HELPER_BUILD`]).
    pub fn keel(settings: SandboxSettings, keel: Option<PathBuf>, home: Option<PathBuf>) -> Self {
        let mut spec = Self {
            settings,
            home,
            ..Self::default()
        };
        spec.set_keel(keel);
        spec
    }

    /// Makes the `keel` binary at `keel` the helper, as [`SandboxSpec::keel`] does.
    pub fn set_keel(&mut self, keel: Option<PathBuf>) {
        self.small_helper = keel
            .as_deref()
            .and_then(|keel| Some(keel.parent()?.join(HELPER_BINARY)))
            .filter(|helper| crate::runtime::probe::is_executable_file(helper))
            .map(|path| Arc::new(SmallHelper::new(path)));
        self.helper = keel;
        self.helper_prefix = vec!["sandbox".into()];
    }

    /// The program and the arguments before `run` that confine a command: the small helper when
    /// it is from this build (asked once), else [`SandboxSpec::helper`]. `None`: no helper.
    pub fn helper_command(&self) -> Option<(&Path, &[String])> {
        if let Some(small) = &self.small_helper
            && small.is_this_build()
        {
            return Some((&small.path, &[]));
        }
        Some((self.helper.as_deref()?, &self.helper_prefix))
    }
}

/// A `keel-sandbox` beside `keel`. A stale one (left from another build, or beside a `keel`
/// rebuilt alone by `cargo run --bin keel`) would refuse every profile; it is asked for its
/// build once, at the first command (`keel-sandbox build`, about 1 ms), and passed over when
/// it differs.
#[derive(Debug)]
pub struct SmallHelper {
    pub path: PathBuf,
    this_build: std::sync::OnceLock<bool>,
}

impl SmallHelper {
    pub fn new(path: PathBuf) -> Self {
        Self {
            path,
            this_build: std::sync::OnceLock::new(),
        }
    }

    /// Whether it prints this build's [`profile::HELPER_BUILD`] (asked once).
    #[expect(
        clippy::disallowed_methods,
        reason = "the runtime is where ambient authority lives"
    )]
    pub fn is_this_build(&self) -> bool {
        *self.this_build.get_or_init(|| {
            let answer = std::process::Command::new(&self.path)
                .arg("build")
                .stdin(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .output();
            let same = answer.as_ref().is_ok_and(|output| {
                output.status.success()
                    && String::from_utf8_lossy(&output.stdout).trim() == profile::HELPER_BUILD
            });
            if !same {
                tracing::warn!(
                    helper = %self.path.display(),
                    "keel-sandbox beside keel is from another build; commands run through `keel sandbox run`"
                );
            }
            same
        })
    }
}

impl PartialEq for SmallHelper {
    fn eq(&self, other: &Self) -> bool {
        self.path == other.path
    }
}

impl Eq for SmallHelper {}
