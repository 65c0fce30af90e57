//! Skills: folders with a `SKILL.md` (front matter `name` and `description`, then the body).
//!
//! They are found in the user's `<config>/skills/` and, once the project is trusted, in the
//! project's `.keel/skills/`, `.claude/skills/` and `.agents/skills/`. The system prompt lists
//! each as one line; the `skill` tool loads a body (and lists the skill's files) through the
//! runtime's capability check; a prompt `/name args` loads it too ([`expand_command`]).

use std::path::{Path, PathBuf};

use crate::capability::Access;
use crate::front_matter::front_matter;
use crate::runtime::{Runtime, config_files};
use crate::tool::ToolError;
use crate::tool::view::{escaped, quoted};

/// The project directories skills are read from (after trust); defined beside the trust
/// fingerprint that covers them.
pub use crate::policy::trust::PROJECT_SKILL_DIRS;

/// The file that makes a folder a skill.
pub const SKILL_FILE: &str = "SKILL.md";

/// A skill's files listed by the `skill` tool: at most this many.
const MAX_FILES: usize = 50;

/// One discovered skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    pub name: String,
    pub description: String,
    /// The skill's folder.
    pub dir: PathBuf,
    /// Whether it comes from the project (it waits for trust).
    pub project: bool,
}

/// The user's skills directory under the config directory.
pub fn user_dir(config_dir: &Path) -> PathBuf {
    config_dir.join("skills")
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !name.starts_with('.')
}

/// Parses a `SKILL.md`; the name defaults to the folder's name.
// String error: the message names the file and what to fix, listed as is.
pub fn parse(dir: &Path, text: &str) -> Result<(String, String), String> {
    let shown = dir.join(SKILL_FILE);
    let shown = shown.display();
    let (fields, _) = front_matter(text)
        .ok_or_else(|| format!("{shown}: a skill starts with a `---` front matter block"))?;
    let name = fields
        .get("name")
        .map(|values| values.join(", "))
        .filter(|name| !name.is_empty())
        .or_else(|| dir.file_name().and_then(|n| n.to_str()).map(str::to_owned))
        .unwrap_or_default();
    if !valid_name(&name) {
        return Err(format!(
            "{shown}: the name `{name}` may only hold letters, digits, `-`, `_` and `.`"
        ));
    }
    let description = fields
        .get("description")
        .map(|values| values.join(", "))
        .filter(|d| !d.is_empty())
        .ok_or_else(|| format!("{shown}: no `description`"))?;
    // One line each in the system prompt.
    let description = description.split_whitespace().collect::<Vec<_>>().join(" ");
    Ok((name, description))
}

/// The skills in `dir`; `project` is the workspace root when `dir` is one of the project's
/// (its files are then read only inside it).
fn scan(dir: &Path, project: Option<&Path>, skills: &mut Vec<Skill>, refused: &mut Vec<String>) {
    let folders = match config_files::list_dir(dir) {
        Ok(folders) => folders,
        Err(error) => {
            tracing::warn!(dir = %dir.display(), %error, "cannot list skills");
            return;
        }
    };
    for folder in folders {
        let file = folder.join(SKILL_FILE);
        let read = match project {
            Some(root) => config_files::read_project_file(root, &file),
            None => config_files::read_if_exists(&file),
        };
        let text = match read {
            Ok(Some(text)) => text,
            Ok(None) => continue,
            Err(error)
                if matches!(
                    error.kind(),
                    std::io::ErrorKind::NotADirectory | std::io::ErrorKind::IsADirectory
                ) =>
            {
                tracing::debug!(folder = %folder.display(), %error, "not a skill folder");
                continue;
            }
            Err(error) => {
                tracing::warn!("skill refused: {error}");
                let shown = project
                    .and_then(|root| file.strip_prefix(root).ok())
                    .unwrap_or(&file);
                refused.push(format!(
                    "refuses the skill file {}: {error}",
                    shown.display()
                ));
                continue;
            }
        };
        match parse(&folder, &text) {
            Ok((name, description)) if skills.iter().all(|s| s.name != name) => {
                skills.push(Skill {
                    name,
                    description,
                    dir: folder,
                    project: project.is_some(),
                });
            }
            Ok(_) => {}
            Err(error) => tracing::warn!("{error}"),
        }
    }
}

/// The skills of a workspace: the user's, then the project's when `trusted`. The first of a
/// name wins.
pub fn discover(config_dir: Option<&Path>, workspace: &Path, trusted: bool) -> Vec<Skill> {
    let mut skills = Vec::new();
    if let Some(config_dir) = config_dir {
        scan(&user_dir(config_dir), None, &mut skills, &mut Vec::new());
    }
    if trusted {
        for dir in PROJECT_SKILL_DIRS {
            scan(
                &workspace.join(dir),
                Some(workspace),
                &mut skills,
                &mut Vec::new(),
            );
        }
    }
    skills
}

/// The project's skills as the trust question lists them ("offers skill `x` (.claude/skills/x)").
/// A skill file Keel refuses to read (outside the project, not a regular file, over 1 MiB) is
/// listed too, with why.
pub fn waiting_for_trust(workspace: &Path) -> Vec<String> {
    let mut skills = Vec::new();
    let mut refused = Vec::new();
    for dir in PROJECT_SKILL_DIRS {
        scan(
            &workspace.join(dir),
            Some(workspace),
            &mut skills,
            &mut refused,
        );
    }
    let mut lines: Vec<String> = skills
        .into_iter()
        .map(|skill| {
            let relative = skill
                .dir
                .strip_prefix(workspace)
                .unwrap_or(&skill.dir)
                .display()
                .to_string();
            format!(
                "offers skill {} ({})",
                quoted(&skill.name),
                quoted(&relative)
            )
        })
        .collect();
    lines.extend(refused.iter().map(|line| escaped(line)));
    lines
}

/// The system prompt's section: one line per skill.
pub fn listing(skills: &[Skill]) -> String {
    let mut out = String::from("\nSkills (load one with the `skill` tool when it applies):\n");
    for skill in skills {
        out.push_str(&format!("- {}: {}\n", skill.name, skill.description));
    }
    out
}

/// A skill's body (the `SKILL.md` after its front matter) and its other files (relative to its
/// folder), read through the runtime's capability check.
pub async fn load(skill: &Skill, runtime: &Runtime) -> Result<(String, Vec<String>), ToolError> {
    let file = skill.dir.join(SKILL_FILE);
    let canonical = runtime.resolve_checked(&file.display().to_string(), Access::Read)?;
    let bytes = runtime.read(&canonical).await?;
    let text = String::from_utf8_lossy(&bytes);
    let body = front_matter(&text).map_or_else(|| text.to_string(), |(_, body)| body);
    let dir = runtime.resolve_checked(&skill.dir.display().to_string(), Access::Read)?;
    let mut files = Vec::new();
    for entry in runtime.walker(&dir)?.build().flatten() {
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let path = entry.path();
        if path == canonical {
            continue;
        }
        if files.len() == MAX_FILES {
            files.push("…".to_owned());
            break;
        }
        files.push(
            path.strip_prefix(&dir)
                .unwrap_or(path)
                .display()
                .to_string(),
        );
    }
    files.sort();
    Ok((body, files))
}

/// What a prompt `/name args` becomes when `name` is a skill: the skill's body, then the
/// arguments. `None` when the prompt does not name a skill.
pub async fn expand_command(
    text: &str,
    skills: &[Skill],
    runtime: &Runtime,
) -> Option<Result<String, ToolError>> {
    let rest = text.trim_start().strip_prefix('/')?;
    let (name, args) = rest
        .split_once(char::is_whitespace)
        .map_or((rest, ""), |(name, args)| (name, args.trim()));
    let skill = skills.iter().find(|skill| skill.name == name)?;
    Some(load(skill, runtime).await.map(|(body, files)| {
        let mut out = render(skill, &body, &files);
        if !args.is_empty() {
            out.push_str(&format!("\n\n{args}"));
        }
        out
    }))
}

/// A loaded skill as the model reads it.
pub fn render(skill: &Skill, body: &str, files: &[String]) -> String {
    let mut out = format!(
        "<skill name=\"{}\" dir=\"{}\">\n{body}\n</skill>",
        skill.name,
        skill.dir.display()
    );
    if !files.is_empty() {
        out.push_str(&format!(
            "\nThe skill's other files (under {}):\n- {}",
            skill.dir.display(),
            files.join("\n- ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skill_files_parse_with_the_folder_name_as_default() {
        let (name, description) = parse(
            Path::new("/s/release-notes"),
            "---\ndescription: Writes release\n  notes\n---\nBody",
        )
        .unwrap();
        assert_eq!(name, "release-notes");
        assert_eq!(description, "Writes release");
        let error = parse(Path::new("/s/x"), "no front matter").unwrap_err();
        assert!(error.contains("front matter"), "{error}");
        let error = parse(Path::new("/s/x"), "---\nname: a b\ndescription: d\n---\n").unwrap_err();
        assert!(error.contains("name"), "{error}");
    }
}
