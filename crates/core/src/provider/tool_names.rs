//! [`WireNames`]: tool names as the model APIs accept them (`^[a-zA-Z0-9_-]{1,64}$`), mapped
//! both ways per request.
//!
//! Keel's own tools already fit. MCP tools are `mcp__SERVER__TOOL`, and an MCP server may name a
//! tool with dots, slashes or up to 128 characters, which both APIs refuse. Such a name is sent
//! as its allowed characters (every other byte becomes `_`); when that is too long or taken by
//! another tool, a prefix of it plus `_` and 8 hex digits of the SHA-256 of the real name. Names
//! that fit are never changed, and win any collision. The mapping depends only on the request's
//! tool list, so every request of a session sends the same names (the prompt cache holds), and
//! a call the model makes under a sent name maps back to the tool it was offered as.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use super::limits::{MAX_TOOL_NAME, valid_tool_name};

/// The names of one request's tools, both ways. Empty (and free) when every name fits.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct WireNames {
    to_wire: HashMap<String, String>,
    from_wire: HashMap<String, String>,
}

impl WireNames {
    /// The mapping for a request offering `names`, in order.
    pub fn new<'a>(names: impl IntoIterator<Item = &'a str>) -> Self {
        let names: Vec<&str> = names.into_iter().collect();
        let mut taken: HashSet<String> = names
            .iter()
            .filter(|name| valid_tool_name(name))
            .map(|name| (*name).to_owned())
            .collect();
        let mut out = Self::default();
        for name in names {
            if valid_tool_name(name) || out.to_wire.contains_key(name) {
                continue;
            }
            let wire = unique_wire_name(name, &taken);
            taken.insert(wire.clone());
            out.from_wire.insert(wire.clone(), name.to_owned());
            out.to_wire.insert(name.to_owned(), wire);
        }
        out
    }

    /// The name sent for `name`: itself when it fits, its mapping when it is one of the
    /// request's tools, else (a tool of an earlier request, seen only in the history) the same
    /// rule applied to it alone.
    pub fn wire<'a>(&'a self, name: &'a str) -> Cow<'a, str> {
        if valid_tool_name(name) {
            return Cow::Borrowed(name);
        }
        match self.to_wire.get(name) {
            Some(wire) => Cow::Borrowed(wire),
            None => Cow::Owned(unique_wire_name(name, &HashSet::new())),
        }
    }

    /// The tool a name the model called maps back to (the name itself when it was not mapped).
    pub fn original<'a>(&'a self, wire: &'a str) -> &'a str {
        self.from_wire.get(wire).map_or(wire, String::as_str)
    }

    /// Whether no name needed mapping.
    pub fn is_empty(&self) -> bool {
        self.to_wire.is_empty()
    }
}

/// `name` with every byte outside `[a-zA-Z0-9_-]` replaced by `_`.
fn allowed_characters(name: &str) -> String {
    let out: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out.is_empty() { "_".to_owned() } else { out }
}

/// A valid name for `name` that is not in `taken`.
fn unique_wire_name(name: &str, taken: &HashSet<String>) -> String {
    let plain = allowed_characters(name);
    if plain.len() <= MAX_TOOL_NAME && !taken.contains(&plain) {
        return plain;
    }
    let digest = ring::digest::digest(&ring::digest::SHA256, name.as_bytes());
    let hash: String = digest
        .as_ref()
        .iter()
        .take(4)
        .map(|byte| format!("{byte:02x}"))
        .collect();
    // `plain` is ASCII: any byte index is a character boundary.
    let keep = MAX_TOOL_NAME - hash.len() - 1;
    let prefix = &plain[..plain.len().min(keep)];
    let mut candidate = format!("{prefix}_{hash}");
    let mut counter = 1u32;
    while taken.contains(&candidate) {
        let suffix = format!("_{hash}{counter}");
        let prefix = &plain[..plain.len().min(MAX_TOOL_NAME - suffix.len())];
        candidate = format!("{prefix}{suffix}");
        counter += 1;
    }
    candidate
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_fit_pass_and_the_rest_map_back() {
        let long = format!("mcp__server__{}", "x".repeat(100));
        let names = WireNames::new([
            "read",
            "mcp__docs__search.pages",
            "mcp__docs__search_pages",
            long.as_str(),
        ]);
        assert_eq!(names.wire("read"), "read");
        // The valid name keeps its own spelling; the dotted one gets a hashed variant.
        assert_eq!(
            names.wire("mcp__docs__search_pages"),
            "mcp__docs__search_pages"
        );
        let dotted = names.wire("mcp__docs__search.pages").into_owned();
        assert_ne!(dotted, "mcp__docs__search_pages");
        assert!(valid_tool_name(&dotted), "{dotted}");
        assert_eq!(names.original(&dotted), "mcp__docs__search.pages");
        let cut = names.wire(&long).into_owned();
        assert!(valid_tool_name(&cut) && cut.len() == MAX_TOOL_NAME, "{cut}");
        assert_eq!(names.original(&cut), long);
        assert_eq!(names.original("read"), "read");
        // The same list maps the same way every time.
        assert_eq!(
            names,
            WireNames::new([
                "read",
                "mcp__docs__search.pages",
                "mcp__docs__search_pages",
                long.as_str()
            ])
        );
    }
}
