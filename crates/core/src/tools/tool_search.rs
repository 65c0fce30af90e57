//! `tool_search`: finds MCP and extension tools the request left out.
//!
//! When the extension tools (MCP, global, project) would take more of a request than their
//! budget, the turn loop sends only the bundled tools plus `tool_search`, and indexes the rest
//! ([`ToolIndex`], kept in the session's state). The model searches by query: an exact tool
//! name comes first, then BM25 over the name's words and the description. Every tool a search
//! returns is wired into the session's following requests.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use schemars::JsonSchema;
use serde::Deserialize;

use crate::tool::view::{given, one_line};
use crate::tool::{
    CallView, Describe, Subject, Tool, ToolContext, ToolError, ToolKind, ToolOutput, ToolSpec,
};

/// The tool's id, as the registry spells it.
pub const ID: &str = crate::tool::BundledTool::ToolSearch.id();

const DESCRIPTION: &str = "Find and load tools not offered yet (MCP and extension tools) by \
what they do or by exact name. Call the tools it returns by name.";

/// BM25 parameters.
const K1: f32 = 1.2;
const B: f32 = 0.75;

/// Arguments of `tool_search`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolSearchParams {
    /// Words describing the tool needed, or its exact name.
    pub query: String,
    /// How many tools to return (1 to 20, default 5).
    #[schemars(range(min = 1, max = 20))]
    pub limit: Option<usize>,
}

/// The words of a text: lowercase alphanumeric runs; `snake_case`, `kebab-case` and
/// `camelCase` split.
pub fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut previous_lower = false;
    for c in text.chars() {
        if c.is_alphanumeric() {
            if c.is_uppercase() && previous_lower && !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
            previous_lower = c.is_lowercase() || c.is_ascii_digit();
            current.extend(c.to_lowercase());
        } else {
            previous_lower = false;
            if !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// One indexed tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexedTool {
    pub id: String,
    pub description: String,
}

/// An inverted index over tools' names and descriptions.
#[derive(Debug, Default)]
pub struct ToolIndex {
    tools: Vec<IndexedTool>,
    /// Term → (tool, term frequency).
    postings: HashMap<String, Vec<(u32, u16)>>,
    lengths: Vec<u16>,
    average: f32,
    /// Lowercase id (and the part after its last `__`) → tool.
    names: HashMap<String, u32>,
}

impl ToolIndex {
    /// Indexes `tools` (id and description each).
    pub fn new(tools: Vec<IndexedTool>) -> Self {
        let mut postings: HashMap<String, Vec<(u32, u16)>> = HashMap::new();
        let mut lengths = Vec::with_capacity(tools.len());
        let mut names = HashMap::with_capacity(tools.len());
        for (doc, tool) in tools.iter().enumerate() {
            let doc = u32::try_from(doc).unwrap_or(u32::MAX);
            let lower = tool.id.to_lowercase();
            // The server's own name of the tool (`mcp__github__create_issue` → `create_issue`)
            // finds it too, the first such tool when two servers share it.
            if let Some((_, remote)) = lower.rsplit_once("__") {
                names.entry(remote.to_owned()).or_insert(doc);
            }
            names.insert(lower, doc);
            // The name's words count twice: they say most of what a tool is.
            let mut terms = words(&tool.id);
            terms.extend(words(&tool.id));
            terms.extend(words(&tool.description));
            lengths.push(u16::try_from(terms.len()).unwrap_or(u16::MAX));
            let mut counts: HashMap<String, u16> = HashMap::new();
            for term in terms {
                *counts.entry(term).or_default() += 1;
            }
            for (term, count) in counts {
                postings.entry(term).or_default().push((doc, count));
            }
        }
        let total: f32 = lengths.iter().map(|&l| f32::from(l)).sum();
        let average = if lengths.is_empty() {
            1.0
        } else {
            total / lengths.len() as f32
        };
        Self {
            tools,
            postings,
            lengths,
            average,
            names,
        }
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// The indexed ids, in index order.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.tools.iter().map(|t| t.id.as_str())
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The best `limit` tools for `query`: an exact name (with or without its `mcp__SERVER__`
    /// prefix) first, then by BM25 score; ties keep index order.
    pub fn search(&self, query: &str, limit: usize) -> Vec<&IndexedTool> {
        let mut out: Vec<u32> = Vec::new();
        let wanted = query.trim().to_lowercase();
        if let Some(&doc) = self.names.get(&wanted) {
            out.push(doc);
        }
        let n = self.tools.len() as f32;
        let mut terms = words(query);
        terms.sort();
        terms.dedup();
        let mut postings: Vec<&Vec<(u32, u16)>> = terms
            .iter()
            .filter_map(|term| self.postings.get(term))
            .collect();
        // A word in more than half the tools ("a", "the", "mcp") adds almost nothing to a
        // score (its idf is near 0) and costs a pass over half the index: left out, unless the
        // query has nothing else.
        if postings.iter().any(|p| p.len() * 2 <= self.tools.len()) {
            postings.retain(|p| p.len() * 2 <= self.tools.len());
        }
        let mut scores: Vec<f32> = Vec::new();
        let mut touched: Vec<u32> = Vec::new();
        if !postings.is_empty() {
            scores = vec![0.0; self.tools.len()];
        }
        for postings in postings {
            let df = postings.len() as f32;
            let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
            for &(doc, tf) in postings {
                let tf = f32::from(tf);
                let length = f32::from(self.lengths[doc as usize]);
                let score =
                    idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * length / self.average));
                let slot = &mut scores[doc as usize];
                if *slot == 0.0 {
                    touched.push(doc);
                }
                *slot += score;
            }
        }
        let better = |a: &u32, b: &u32| {
            scores[*b as usize]
                .total_cmp(&scores[*a as usize])
                .then(a.cmp(b))
        };
        let keep = limit + out.len();
        if touched.len() > keep && keep > 0 {
            touched.select_nth_unstable_by(keep - 1, better);
            touched.truncate(keep);
        }
        touched.sort_by(better);
        for doc in touched {
            if out.len() >= limit {
                break;
            }
            if !out.contains(&doc) {
                out.push(doc);
            }
        }
        out.truncate(limit);
        out.into_iter()
            .filter_map(|doc| self.tools.get(doc as usize))
            .collect()
    }
}

/// `tool_search`: search the deferred tools and load the ones found.
#[derive(Debug, Clone, Copy, Default)]
pub struct ToolSearchTool;

impl Tool for ToolSearchTool {
    type Params = ToolSearchParams;

    fn spec(&self) -> ToolSpec {
        ToolSpec::new::<ToolSearchParams>(ID, DESCRIPTION)
            .kind(ToolKind::Search)
            .title("Search tools")
            .subject(Subject::None)
            .read_only()
    }

    fn describe(&self, params: &ToolSearchParams, _how: Describe<'_>) -> CallView {
        let title = match given(Some(&params.query)) {
            Some(query) => format!("Search tools: {}", one_line(query, 100)),
            None => "Search tools".into(),
        };
        CallView {
            title,
            locations: Vec::new(),
        }
    }

    async fn run(
        &self,
        params: ToolSearchParams,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let state = ctx.session.private::<SessionToolIndex>();
        let Some(index) = state.index() else {
            return Ok(ToolOutput::text(
                "Every available tool is already loaded; there is nothing to search.",
            ));
        };
        let limit = params.limit.unwrap_or(5).clamp(1, 20);
        let found: Vec<IndexedTool> = index
            .search(&params.query, limit)
            .into_iter()
            .cloned()
            .collect();
        if found.is_empty() {
            return Ok(ToolOutput::text(format!(
                "No tool matches `{}` among {} searchable tools; try other words.",
                params.query,
                index.len()
            ))
            .with("found", 0));
        }
        state.select(found.iter().map(|tool| tool.id.clone()));
        let mut text = format!(
            "{} tools found and loaded; call them by name:\n",
            found.len()
        );
        for tool in &found {
            let summary = tool.description.lines().next().unwrap_or("");
            text.push_str(&format!("- {}: {summary}\n", tool.id));
        }
        Ok(ToolOutput::text(text).with("found", found.len()))
    }
}

/// Builds the index the session keeps for `tool_search`.
/// `tool_search`'s state in a session ([`crate::tool::SessionState::private`]): the extension
/// tools left out of requests (none below the budget), and the ids it returned, wired into the
/// following requests.
#[derive(Debug, Default)]
pub struct SessionToolIndex {
    index: Mutex<Option<Arc<ToolIndex>>>,
    selected: Mutex<Vec<String>>,
}

fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl SessionToolIndex {
    /// The index `tool_search` searches, when tools are left out of requests.
    pub fn index(&self) -> Option<Arc<ToolIndex>> {
        locked(&self.index).clone()
    }

    pub fn set_index(&self, index: Option<Arc<ToolIndex>>) {
        *locked(&self.index) = index;
    }

    /// Wires tools `tool_search` found into the following requests.
    pub fn select(&self, ids: impl IntoIterator<Item = String>) {
        let mut selected = locked(&self.selected);
        for id in ids {
            if !selected.contains(&id) {
                selected.push(id);
            }
        }
    }

    /// The tools `tool_search` found so far.
    pub fn selected(&self) -> Vec<String> {
        locked(&self.selected).clone()
    }
}

pub fn index_of(tools: &[Arc<dyn crate::tool::DynTool>]) -> ToolIndex {
    ToolIndex::new(
        tools
            .iter()
            .map(|tool| IndexedTool {
                id: tool.spec().id.clone(),
                description: tool.spec().description.clone(),
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index() -> ToolIndex {
        ToolIndex::new(
            [
                (
                    "mcp__github__create_issue",
                    "Create an issue in a GitHub repository.",
                ),
                (
                    "mcp__github__list_issues",
                    "List the issues of a repository.",
                ),
                (
                    "mcp__db__query",
                    "Run a read-only SQL query against the database.",
                ),
                ("mcp__weather__forecast", "Weather forecast for a city."),
            ]
            .into_iter()
            .map(|(id, description)| IndexedTool {
                id: id.into(),
                description: description.into(),
            })
            .collect(),
        )
    }

    #[test]
    fn words_split_cases_and_separators() {
        assert_eq!(
            words("mcp__github__createIssue v2"),
            ["mcp", "github", "create", "issue", "v2"]
        );
    }

    #[test]
    fn exact_names_come_first_then_bm25() {
        let index = index();
        let ids = |query: &str| -> Vec<String> {
            index
                .search(query, 2)
                .iter()
                .map(|t| t.id.clone())
                .collect()
        };
        assert_eq!(ids("create github issue")[0], "mcp__github__create_issue");
        assert_eq!(ids("sql database")[0], "mcp__db__query");
        assert_eq!(ids("query")[0], "mcp__db__query");
        assert_eq!(
            ids("mcp__github__list_issues")[0],
            "mcp__github__list_issues"
        );
        assert_eq!(ids("list_issues")[0], "mcp__github__list_issues");
        assert!(ids("zzz").is_empty());
    }
}
