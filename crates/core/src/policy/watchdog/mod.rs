//! The watchdog: a pre-execute check for what rules cannot express.
//!
//! [`Watchdog`] sees the tool's subject (a canonical path, or an analysed command line plus
//! its raw text) and returns a [`Verdict`]: pass, escalate to a prompt, or deny with a
//! [`WatchdogCategory`] and a reason for the model. It never permits anything: a pass only
//! means "nothing to add", and the engine applies it after the capability check and the rules.
//!
//! Commands are checked twice: structurally on the parsed simple commands (all of them, plain
//! or not, nested `sh -c` scripts included), and as raw text for whatever is opaque (a line
//! that is not plain, inline interpreter code), through a forgiving tokenizer that splits
//! inside quotes too (the `text` module).

mod checks;
mod keel_state;
mod network;
mod secret_paths;
mod text;

use std::fmt;
use std::path::{Path, PathBuf};

use super::commands::is_secret_name;
use super::pattern::{fold, nfc};
use super::shell::{
    ShellAnalysis, ShellContext, SimpleCommand, confusable_char, is_harmless_device,
};

pub(crate) use secret_paths::FilesIn;
pub use secret_paths::is_secret_path;

/// What kind of danger the watchdog saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WatchdogCategory {
    /// Deleting or clobbering outside the workspace (or the workspace itself).
    Destruction,
    /// Writing to a block device, formatting, repartitioning.
    DeviceWrite,
    ForkBomb,
    /// `sudo`, `su`, `doas`, `pkexec`, setuid bits.
    PrivilegeEscalation,
    /// Sending files, credentials or the environment to a network host.
    Exfiltration,
    /// Piping a download into an interpreter, or running what was just downloaded.
    DownloadExecute,
    /// Changing shell start-up and login files (`~/.bashrc`, `~/.profile`, ...).
    StartupFile,
    /// Changing Keel's own configuration (`~/.config/keel/`, `<workspace>/.keel/`).
    KeelConfig,
    /// Git configuration that runs programs (`core.pager`, `core.sshCommand`, hooks, aliases).
    GitConfigExecution,
    /// A workspace file another program runs or loads on its own (`.envrc`, `.vscode/`,
    /// `.github/workflows/`, `.cargo/config.toml`, an agent's configuration; escalates).
    AutoRunFile,
    /// Invisible or look-alike characters in a path or command.
    Confusable,
    /// Reading a credential file (escalates to a prompt).
    SecretRead,
    /// A command that discards work (`git push --force`, `git reset --hard`; escalates).
    RiskyCommand,
    /// A command too long or too deeply nested to analyse in full (escalates).
    Unanalysable,
}

impl WatchdogCategory {
    pub fn as_str(self) -> &'static str {
        match self {
            WatchdogCategory::Destruction => "destruction outside the workspace",
            WatchdogCategory::DeviceWrite => "device write",
            WatchdogCategory::ForkBomb => "fork bomb",
            WatchdogCategory::PrivilegeEscalation => "privilege escalation",
            WatchdogCategory::Exfiltration => "exfiltration",
            WatchdogCategory::DownloadExecute => "download and execute",
            WatchdogCategory::StartupFile => "start-up file tampering",
            WatchdogCategory::KeelConfig => "Keel configuration tampering",
            WatchdogCategory::GitConfigExecution => "git configuration that runs programs",
            WatchdogCategory::AutoRunFile => "a file other programs run on their own",
            WatchdogCategory::Confusable => "invisible or look-alike characters",
            WatchdogCategory::SecretRead => "credential read",
            WatchdogCategory::RiskyCommand => "command that discards work",
            WatchdogCategory::Unanalysable => "command too large or too deeply nested to check",
        }
    }
}

impl fmt::Display for WatchdogCategory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One thing the watchdog noticed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub category: WatchdogCategory,
    pub reason: String,
}

/// The watchdog's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing to add.
    Pass,
    /// Ask the user even where rules would allow (deny when no user is present).
    Escalate(Finding),
    /// Refuse.
    Deny(Finding),
}

impl Verdict {
    fn from_findings(findings: Vec<(bool, Finding)>) -> Verdict {
        let mut escalation = None;
        for (deny, finding) in findings {
            if deny {
                return Verdict::Deny(finding);
            }
            escalation.get_or_insert(finding);
        }
        escalation.map_or(Verdict::Pass, Verdict::Escalate)
    }
}

/// Shell start-up and login files, relative to the home directory (compared in lower case).
pub const STARTUP_FILES: &[&str] = &[
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".bash_aliases",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".zlogout",
    ".kshrc",
    ".mkshrc",
    ".cshrc",
    ".tcshrc",
    ".login",
    ".inputrc",
    ".xprofile",
    ".xinitrc",
    ".xsessionrc",
    ".config/fish",
    ".ssh/authorized_keys",
    ".ssh/config",
    ".ssh/rc",
    ".config/autostart",
    ".config/environment.d",
    ".pam_environment",
];

const SYSTEM_STARTUP: &[&str] = &[
    "/etc/profile",
    "/etc/profile.d",
    "/etc/bash.bashrc",
    "/etc/bashrc",
    "/etc/zsh",
    "/etc/zshrc",
    "/etc/zshenv",
    "/etc/environment",
];

/// Directories whose files other programs run, or load as configuration that names programs,
/// without asking (editors, CI, git hook managers, dev containers, other coding agents),
/// relative to any directory of the workspace; compared in lower case.
const AUTO_RUN_DIRS: &[&str] = &[
    ".vscode",
    ".zed",
    ".idea",
    ".fleet",
    ".cursor",
    ".devcontainer",
    ".husky",
    ".githooks",
    ".github/workflows",
    ".github/actions",
    ".circleci",
    ".gitlab",
    ".claude",
    ".agents",
    ".gemini",
    ".codex",
    ".continue",
    ".cargo/config",
    ".cargo/config.toml",
];

/// File names other programs run or load on their own, in any directory of the workspace.
const AUTO_RUN_NAMES: &[&str] = &[
    // A `.git` file names the directory git takes as the repository.
    ".git",
    ".envrc",
    ".mcp.json",
    ".gitlab-ci.yml",
    ".pre-commit-config.yaml",
    ".pre-commit-hooks.yaml",
    ".tool-versions",
    ".mise.toml",
    "mise.toml",
    ".mise.local.toml",
    ".npmrc",
    ".yarnrc",
    ".yarnrc.yml",
    ".pnpmfile.cjs",
    ".gitmodules",
    ".lefthook.yml",
    "lefthook.yml",
];

/// Credential directories, relative to the home directory: everything inside one is a
/// credential (a directory of that name elsewhere too, for what it holds).
const SECRET_DIRS: &[&str] = &[
    ".ssh",
    ".aws",
    ".gnupg",
    ".config/gcloud",
    ".azure",
    ".config/hub",
    ".config/op",
    ".password-store",
    ".local/share/keyrings",
];

/// Credential files, relative to the home directory (a copy elsewhere counts too).
const SECRET_FILES: &[&str] = &[
    ".kube/config",
    ".docker/config.json",
    ".netrc",
    ".pgpass",
    ".git-credentials",
    ".config/gh/hosts.yml",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".npmrc",
    ".pypirc",
    ".config/rclone/rclone.conf",
    ".terraform.d/credentials.tfrc.json",
    ".vault-token",
    ".m2/settings.xml",
    ".gradle/gradle.properties",
    ".config/composer/auth.json",
    ".config/git/credentials",
    ".cache/huggingface/token",
    ".cache/huggingface/stored_tokens",
    ".huggingface/token",
    // Keel's own, written by `keel login` (`config::credentials`).
    ".config/keel/credentials.toml",
];

/// Whether `path` is a repository's configuration file (`.git/config`, `config.worktree`, a
/// submodule's under `.git/modules/`): CI checkouts keep the job's token there
/// (`http.<url>.extraheader`), and remote URLs carry `user:token@`. A file tool's read of one
/// asks, as for any credential file.
fn is_git_config(path: &Path) -> bool {
    is_git_config_text(&fold(&path.to_string_lossy()))
}

/// [`is_git_config`] on a path already folded (NFC, lower case).
fn is_git_config_text(text: &str) -> bool {
    let mut parts = text.rsplit('/');
    let name = parts.next().unwrap_or_default();
    (name == "config" || name == "config.worktree") && parts.any(is_repository_dir)
}

/// Whether a folded path component names a repository's own directory: `.git`, or a bare
/// repository's `<name>.git` (what `git clone --bare` and `--mirror` make), whose `config`
/// holds the remote's URL as `.git/config` does.
fn is_repository_dir(component: &str) -> bool {
    component.ends_with(".git")
}

/// Whether the git configuration file at `path` (a repository's, [`is_git_config`], or the
/// user's, [`is_user_git_config_text`]) holds a credential: an `extraheader` (a CI checkout
/// keeps the job's token there), a `[credential]` section, or a URL with a password
/// (`https://user:token@host`). A file that cannot be read within bounds counts as holding one
/// unless it is known not to exist: a path too long to open by name (a search reaches such
/// files through its directories' descriptors) or one that cannot be looked at is not taken
/// for an absent file. Commands (`cat .git/config`, `grep -r`) then read a credential; an
/// ordinary repository's configuration stays readable.
fn config_text_holds_credential(path: &Path) -> bool {
    let Some(bytes) = crate::runtime::probe::read_bounded(path, super::gitrepo::MAX_CONFIG_BYTES)
    else {
        return match crate::runtime::probe::symlink_metadata(path) {
            Ok(_) => true,
            Err(e) => !matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ),
        };
    };
    let text = String::from_utf8_lossy(&bytes).to_lowercase();
    text.contains("extraheader")
        || text.contains("[credential")
        || text.split("://").skip(1).any(|rest| {
            let authority = rest
                .split(|c: char| c == '/' || c == '"' || c.is_whitespace())
                .next()
                .unwrap_or_default();
            authority
                .rsplit_once('@')
                .is_some_and(|(userinfo, _)| userinfo.contains(':'))
        })
}

/// Whether a folded path (NFC, lower case) names the user's own git configuration
/// (`~/.gitconfig`, `~/.config/git/config`, or a copy by that name).
fn is_user_git_config_text(text: &str) -> bool {
    text.ends_with("/.gitconfig") || text.ends_with("/.config/git/config")
}

/// Whether the directory at `path` is a credential store as a whole (`.ssh`, `.aws`,
/// `.gnupg`, `.config/gcloud`, ..., or `.envs`): a command that may not read credentials sees
/// it empty.
pub fn is_secret_dir(path: &Path) -> bool {
    let text = nfc(&path.to_string_lossy()).to_lowercase();
    text.ends_with("/.envs")
        || SECRET_DIRS.iter().any(|dir| {
            text.strip_suffix(dir)
                .is_some_and(|parent| parent.ends_with('/'))
        })
}

/// What the sandbox masks from a command that may not read credentials: a file the read tool
/// would ask about ([`is_secret_path`]) or a credential directory ([`is_secret_dir`]). Symlinks
/// are never masked themselves (what they point to is checked where it lies).
pub fn is_credential_entry(home: Option<&Path>, path: &Path, meta: &std::fs::Metadata) -> bool {
    if meta.is_dir() {
        is_secret_dir(path)
    } else if meta.is_file() {
        is_secret_path(home, path)
    } else {
        false
    }
}

/// [`is_credential_entry`] as the sandbox takes it, for the home directory `home`.
pub fn credential_rules(home: Option<PathBuf>) -> crate::runtime::sandbox::CredentialRules {
    // The entries classified are canonical: so is the home they are seen from.
    let home = home.map(|home| crate::runtime::paths::resolve(&home).unwrap_or(home));
    crate::runtime::sandbox::CredentialRules(std::sync::Arc::new(move |path, meta| {
        is_credential_entry(home.as_deref(), path, meta)
    }))
}

/// The home directory's credential files and directories: `SECRET_DIRS` and `SECRET_FILES`
/// (what a read asks about, so a search never shows what the mask hides), and the git
/// configurations, which a read asks about only when they hold a credential. The sandbox masks
/// each one that a command could otherwise see.
pub fn home_credentials(home: &Path) -> Vec<PathBuf> {
    const GIT_CONFIGS: &[&str] = &[".gitconfig", ".config/git/config"];
    SECRET_DIRS
        .iter()
        .chain(SECRET_FILES)
        .chain(GIT_CONFIGS)
        .map(|relative| home.join(relative))
        .collect()
}

/// The pre-execute check, bound to one workspace and home.
#[derive(Debug, Clone, Copy)]
pub struct Watchdog<'a> {
    pub context: ShellContext<'a>,
    /// Extra paths no tool may change (global config directory, trust store).
    pub protected: &'a [PathBuf],
}

/// `path` relative to `base`, both compared in lower case NFC. `None` when not below.
fn below(path: &str, base: &Path) -> Option<String> {
    let base = base.to_string_lossy();
    let base = fold(&base);
    let base = base.trim_end_matches('/');
    if path == base {
        return Some(String::new());
    }
    path.strip_prefix(base)
        .and_then(|rest| rest.strip_prefix('/'))
        .map(str::to_owned)
}

fn at_or_below(relative: &str, entry: &str) -> bool {
    relative == entry
        || relative
            .strip_prefix(entry)
            .is_some_and(|rest| rest.starts_with('/'))
}

impl Watchdog<'_> {
    /// A file tool's call on `canonical` (resolved from `user_path`).
    pub fn check_path(&self, user_path: &str, canonical: &Path, writes: bool) -> Verdict {
        let mut findings = Vec::new();
        if let Some(c) = confusable_char(user_path) {
            findings.push((
                true,
                Finding {
                    category: WatchdogCategory::Confusable,
                    reason: format!(
                        "the path contains the invisible or look-alike character U+{:04X}; \
                         write the path with plain characters",
                        c as u32
                    ),
                },
            ));
        }
        if writes {
            if let Some(finding) = self.protected_path(canonical) {
                findings.push((true, finding));
            }
            if let Some(finding) = self.auto_run_path(canonical) {
                findings.push((false, finding));
            }
            let text = canonical.to_string_lossy();
            if text.starts_with("/dev/") && !is_harmless_device(&text) {
                findings.push((
                    true,
                    Finding {
                        category: WatchdogCategory::DeviceWrite,
                        reason: format!("writing to the device {text}"),
                    },
                ));
            }
        } else if self.is_secret(canonical) || is_git_config(canonical) {
            findings.push((
                false,
                Finding {
                    category: WatchdogCategory::SecretRead,
                    reason: format!("{} holds credentials", canonical.display()),
                },
            ));
        }
        Verdict::from_findings(findings)
    }

    /// A shell call: the analysed line and its raw text.
    pub fn check_shell(&self, raw: &str, analysis: &ShellAnalysis) -> Verdict {
        // A line too long to analyse is escalated below; its first part is still scanned.
        let raw = super::shell::clip(raw, super::shell::MAX_SCRIPT_BYTES);
        let mut findings = Vec::new();
        if let Some(c) = confusable_char(raw) {
            findings.push((
                true,
                Finding {
                    category: WatchdogCategory::Confusable,
                    reason: format!(
                        "the command contains the invisible or look-alike character U+{:04X}, \
                         which hides what it does",
                        c as u32
                    ),
                },
            ));
        }
        if let Some(reason) = text::fork_bomb(raw) {
            findings.push((
                true,
                Finding {
                    category: WatchdogCategory::ForkBomb,
                    reason,
                },
            ));
        }
        if let Some(reason) = &analysis.too_complex {
            findings.push((
                false,
                Finding {
                    category: WatchdogCategory::Unanalysable,
                    reason: reason.clone(),
                },
            ));
        }
        self.check_pipelines(&analysis.pipelines, &mut findings);
        let mut pseudo = Vec::new();
        for opaque in &analysis.opaque {
            if let Some(finding) =
                keel_state::names_keel_state(opaque, self.context.roots, self.protected)
            {
                findings.push((true, finding));
            }
            if let Some(finding) = text::substituted_download(opaque) {
                findings.push((true, finding));
            }
            pseudo.extend(text::pseudo_pipelines(opaque, &self.context));
        }
        self.check_pipelines(&pseudo, &mut findings);
        // A credential read anywhere in a line that also talks to the network
        // (`curl -d "$(cat ~/.ssh/id_rsa)" ...`).
        let commands: Vec<&SimpleCommand> = analysis
            .commands()
            .chain(pseudo.iter().flat_map(|p| p.stages.iter()))
            .collect();
        if let Some(secret) = commands.iter().find(|c| self.reads_secret(c))
            && let Some(sender) = commands.iter().find(|c| network::is_sender(c.program()))
        {
            findings.push((
                true,
                Finding {
                    category: WatchdogCategory::Exfiltration,
                    reason: format!(
                        "`{}` reads a credential file in a line where `{}` talks to the network",
                        secret.text(),
                        sender.program()
                    ),
                },
            ));
        }
        Verdict::from_findings(findings)
    }

    /// Which protected file or directory `path` is, if any.
    pub fn protected_path(&self, path: &Path) -> Option<Finding> {
        // Another name of one of Keel's own files (a hard link in the workspace): the same
        // file, whatever its path. Only multiply-linked files are looked up.
        {
            use std::os::unix::fs::MetadataExt as _;
            if let Ok(meta) = crate::runtime::probe::symlink_metadata(path)
                && meta.is_file()
                && meta.nlink() > 1
                && self.protected.iter().any(|dir| {
                    crate::runtime::protected::what_it_holds(dir)
                        .1
                        .contains(&(meta.dev(), meta.ino()))
                })
            {
                return Some(Finding {
                    category: WatchdogCategory::KeelConfig,
                    reason: format!(
                        "{} is another name of a file of Keel's own configuration; only the \
                         user changes it",
                        path.display()
                    ),
                });
            }
        }
        let text = nfc(&path.to_string_lossy()).to_lowercase();
        for root in self.context.roots {
            if let Some(relative) = below(&text, root) {
                if at_or_below(&relative, ".keel") {
                    return Some(Finding {
                        category: WatchdogCategory::KeelConfig,
                        reason: format!(
                            "{} is Keel's project configuration; only the user changes it",
                            path.display()
                        ),
                    });
                }
                if relative == ".git/config" || at_or_below(&relative, ".git/hooks") {
                    return Some(Finding {
                        category: WatchdogCategory::GitConfigExecution,
                        reason: format!(
                            "{} makes git run programs; only the user changes it",
                            path.display()
                        ),
                    });
                }
                // The files inside any repository's own directory below the workspace
                // (`sub/.git/hooks/x`, `vendor/lib/.git/config`): git runs their hooks and
                // configured programs in that directory. The `.git` itself (`rm -rf sub/.git`,
                // `git --git-dir=sub/.git`) is not refused here.
                let parts: Vec<&str> = relative.split('/').collect();
                let last = parts.len().saturating_sub(1);
                if parts
                    .iter()
                    .enumerate()
                    .any(|(i, part)| i >= 1 && i < last && *part == ".git")
                {
                    return Some(Finding {
                        category: WatchdogCategory::GitConfigExecution,
                        reason: format!(
                            "{} is inside a git repository's own files, which can make git run \
                             programs; only the user changes them",
                            path.display()
                        ),
                    });
                }
            }
        }
        for protected in self.protected {
            if below(&text, protected).is_some() {
                return Some(Finding {
                    category: WatchdogCategory::KeelConfig,
                    reason: format!(
                        "{} is Keel's own configuration; only the user changes it",
                        path.display()
                    ),
                });
            }
        }
        if let Some(home) = self.context.home
            && let Some(relative) = below(&text, home)
        {
            if at_or_below(&relative, ".config/keel") || at_or_below(&relative, ".local/share/keel")
            {
                return Some(Finding {
                    category: WatchdogCategory::KeelConfig,
                    reason: format!(
                        "{} is Keel's own configuration; only the user changes it",
                        path.display()
                    ),
                });
            }
            if relative == ".gitconfig" || at_or_below(&relative, ".config/git") {
                return Some(Finding {
                    category: WatchdogCategory::GitConfigExecution,
                    reason: format!(
                        "{} is the user's git configuration, which can make git run programs",
                        path.display()
                    ),
                });
            }
            if relative.is_empty() {
                return None;
            }
            if STARTUP_FILES.iter().any(|f| at_or_below(&relative, f)) {
                return Some(Finding {
                    category: WatchdogCategory::StartupFile,
                    reason: format!("{} runs when a shell or session starts", path.display()),
                });
            }
        }
        if SYSTEM_STARTUP.iter().any(|f| at_or_below(&text, f)) {
            return Some(Finding {
                category: WatchdogCategory::StartupFile,
                reason: format!("{} runs when a shell or session starts", path.display()),
            });
        }
        None
    }

    /// Whether a write to `path` (canonical) lands on a file another program runs or loads on
    /// its own (`AUTO_RUN_DIRS`, `AUTO_RUN_NAMES`) inside a workspace root: asked every
    /// time, in every mode.
    pub fn auto_run_path(&self, path: &Path) -> Option<Finding> {
        let text = nfc(&path.to_string_lossy()).to_lowercase();
        let relative = self
            .context
            .roots
            .iter()
            .find_map(|root| below(&text, root))?;
        let parts: Vec<&str> = relative.split('/').filter(|p| !p.is_empty()).collect();
        if !runs_on_its_own(&parts) {
            return None;
        }
        Some(Finding {
            category: WatchdogCategory::AutoRunFile,
            reason: format!(
                "{} is read and acted on by other programs without asking (an editor, CI, a \
                 hook manager, another agent); asked every time",
                path.display()
            ),
        })
    }

    /// Whether `path` is a credential file.
    pub fn is_secret(&self, path: &Path) -> bool {
        is_secret_path(self.context.home, path)
    }
}

/// Whether the workspace path made of `parts` (relative to a root, lower case) is, or is inside,
/// a file another program runs or loads on its own ([`AUTO_RUN_DIRS`], [`AUTO_RUN_NAMES`]).
fn runs_on_its_own(parts: &[&str]) -> bool {
    let Some(name) = parts.last().map(|name| name.trim_end_matches(['.', ' '])) else {
        return false;
    };
    AUTO_RUN_NAMES.contains(&name)
        || (0..parts.len()).any(|start| {
            let rest = parts[start..].join("/");
            AUTO_RUN_DIRS.iter().any(|dir| at_or_below(&rest, dir))
        })
}

/// What the sandbox guards of a writable workspace root ([`crate::runtime::sandbox::guard`]):
/// `relative` is a path below the root. Keel's project configuration (`.keel/`), a `.git`
/// entry anywhere (a nested repository or a gitlink's pointer), the files of a repository's
/// own directory that make git run programs (`config`, `config.worktree`, `commondir`,
/// `hooks/`, the same under `modules/`), and the files other programs run on their own (the
/// list [`Watchdog::auto_run_path`] asks about). Called for every entry of the workspace's
/// walk: most names are passed over without a string being built.
pub fn guarded_entry(relative: &Path) -> Option<crate::runtime::sandbox::Guarded> {
    use crate::runtime::sandbox::Guarded;
    let parts: Vec<&[u8]> = relative
        .components()
        .map(|part| part.as_os_str().as_encoded_bytes())
        .collect();
    let is = |part: &[u8], name: &str| part.eq_ignore_ascii_case(name.as_bytes());
    if parts.first().is_some_and(|first| is(first, ".keel")) {
        return Some(Guarded::KeelConfig);
    }
    if let Some(at) = parts.iter().position(|part| is(part, ".git")) {
        let tail = &parts[at + 1..];
        let Some(last) = tail.last() else {
            return Some(Guarded::GitDir);
        };
        let redirect = |part: &[u8]| {
            is(part, "config") || is(part, "config.worktree") || is(part, "commondir")
        };
        let git_code = (tail.len() == 1 && redirect(last))
            || is(tail[0], "hooks")
            || (is(tail[0], "modules")
                && (redirect(last) || tail.iter().any(|part| is(part, "hooks"))));
        return git_code.then_some(Guarded::GitCode);
    }
    let worth_a_look = parts.iter().any(|part| {
        part.first() == Some(&b'.') || is(part, "mise.toml") || is(part, "lefthook.yml")
    });
    if !worth_a_look {
        return None;
    }
    let text = nfc(&relative.to_string_lossy()).to_lowercase();
    let parts: Vec<&str> = text.split('/').filter(|p| !p.is_empty()).collect();
    runs_on_its_own(&parts).then_some(Guarded::AutoRun)
}

/// [`guarded_entry`] and [`super::gitrepo::config_problem`] as the sandbox takes them.
pub fn guard_rules() -> crate::runtime::sandbox::GuardRules {
    crate::runtime::sandbox::GuardRules {
        classify: std::sync::Arc::new(guarded_entry),
        config_runs_code: std::sync::Arc::new(super::gitrepo::config_problem),
    }
}

#[cfg(test)]
mod tests;
