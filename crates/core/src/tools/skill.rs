//! The `skill` tool: [`SkillTool`] with [`SkillParams`]. It loads a discovered skill's body
//! (and lists the skill's other files) from the session's index ([`SessionSkills`], the
//! tool's state in the session), reading through the runtime's
//! capability check. The user's skills folder is in the session's scope as `{ad-hoc}`; a
//! project's skills are in the workspace.

use std::sync::Mutex;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::capability::RequirementSet;
use crate::skills::Skill;
use crate::tool::view::{code, given};
use crate::tool::{
    CallView, Describe, SessionState, Subject, Tool, ToolContext, ToolError, ToolKind, ToolOutput,
    ToolSpec,
};

/// The tool's id.
pub const ID: &str = crate::tool::BundledTool::Skill.id();

const DESCRIPTION: &str = "Load a skill listed in the system prompt: returns its instructions \
and its other files. Load one when the task matches its description, then follow it.";

/// The skills the `skill` tool may load in a session (the turn sets them once trust is known):
/// the tool's own state in [`SessionState::private`](crate::tool::SessionState::private).
#[derive(Debug, Default)]
pub struct SessionSkills(Mutex<Vec<Skill>>);

impl SessionSkills {
    /// The skills of `session`.
    pub fn of(session: &SessionState) -> Vec<Skill> {
        session
            .private::<Self>()
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Replaces the skills of `session`.
    pub fn set(session: &SessionState, skills: Vec<Skill>) {
        *session
            .private::<Self>()
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = skills;
    }
}

/// Arguments of `skill`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SkillParams {
    /// The skill's name.
    #[schemars(length(min = 1))]
    pub name: String,
}

/// The `skill` tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct SkillTool;

impl Tool for SkillTool {
    type Params = SkillParams;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new::<SkillParams>(ID, DESCRIPTION)
            .kind(ToolKind::Read)
            .title("Load a skill")
            .read_only()
            .subject(Subject::None)
            .requires(RequirementSet::fs_read(&["{ad-hoc}/**"]))
    }

    fn describe(&self, params: &SkillParams, _how: Describe<'_>) -> CallView {
        let title = match given(Some(&params.name)) {
            Some(name) => format!("Load skill {}", code(name)),
            None => "Load a skill".into(),
        };
        CallView {
            title,
            locations: Vec::new(),
        }
    }

    async fn run(&self, params: SkillParams, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let skills = SessionSkills::of(&ctx.session);
        let Some(skill) = skills.iter().find(|skill| skill.name == params.name) else {
            let known: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
            return Err(ToolError::NotFound(format!(
                "no skill `{}`; the skills are: {}",
                params.name,
                if known.is_empty() {
                    "(none)".to_owned()
                } else {
                    known.join(", ")
                }
            )));
        };
        let (body, files) = crate::skills::load(skill, &ctx.runtime).await?;
        let text = crate::skills::render(skill, &body, &files);
        let (text, sidecar) = ctx
            .cap_bytes(ID, text, ctx.session.limits.read_bytes)
            .await?;
        let mut output = ToolOutput::text(text);
        output.output_path = sidecar;
        Ok(output.with("files", files))
    }
}
