//! The walk over tree-sitter-bash's syntax tree that builds a [`ShellAnalysis`].

mod words;

use std::path::{Component, Path, PathBuf};

use tree_sitter::{Node, Parser};

use super::render::render_pipelines;
use super::{
    Cwd, MAX_LINE_WORDS, MAX_NESTING, MAX_OPAQUE_SCAN_BYTES, MAX_SCRIPT_BYTES, MAX_SYNTAX_DEPTH,
    Pipeline, Place, Redirect, ShellAnalysis, ShellContext, SimpleCommand, clip, confusable_char,
};
use crate::policy::commands::approval_key;
use crate::policy::grammar::{Fit, fit};
use crate::policy::pattern::base_name;
use crate::policy::wrappers::{Peeled, is_dangerous_variable, peel};
use crate::tool::view::code;
use words::Word;

pub(super) fn run(script: &str, context: &ShellContext<'_>, start: Cwd) -> ShellAnalysis {
    let mut analyzer = Analyzer {
        context,
        logical: start.clone(),
        cwd: start,
        out: ShellAnalysis::default(),
        level: 0,
        words: 0,
        joiner: None,
        depth: 0,
        posix: false,
    };
    analyzer.script(script, 0);
    analyzer.out
}

/// A simple command as written: its words before expansion, its assignments (name, value) and
/// redirections, and whether any of them holds an expansion or substitution.
#[derive(Default)]
struct Written {
    words: Vec<Word>,
    assignments: Vec<(String, String)>,
    redirects: Vec<Redirect>,
    dynamic: bool,
}

struct Analyzer<'c, 'a> {
    context: &'c ShellContext<'a>,
    /// Where the next command runs (symlinks resolved).
    cwd: Cwd,
    /// The same directory as bash's logical `cd` names it (`$PWD`: symlinks kept, `..`
    /// applied to the text).
    logical: Cwd,
    /// The list operator before the next pipeline (`&&`, `||`, `;`).
    joiner: Option<String>,
    /// How deeply the script being walked is nested.
    depth: usize,
    /// The script being walked runs under `sh` (dash), whose globs are not bash's.
    posix: bool,
    out: ShellAnalysis,
    /// Recursion depth of the walk (bounded by [`MAX_SYNTAX_DEPTH`]).
    level: usize,
    /// Words seen so far (bounded by [`MAX_LINE_WORDS`]).
    words: usize,
}

impl Analyzer<'_, '_> {
    fn too_complex(&mut self, reason: String) {
        self.not_plain(reason.clone());
        self.out.too_complex.get_or_insert(reason);
    }

    /// Runs `walk` one level deeper in the walk: `None` (and the line marked too complex) past
    /// the limit.
    fn nested<T>(&mut self, walk: impl FnOnce(&mut Self) -> T) -> Option<T> {
        if self.level >= MAX_SYNTAX_DEPTH {
            self.too_complex(format!(
                "the command nests more than {MAX_SYNTAX_DEPTH} levels deep"
            ));
            return None;
        }
        self.level += 1;
        let value = walk(self);
        self.level = self.level.saturating_sub(1);
        Some(value)
    }

    fn not_plain(&mut self, reason: impl Into<String>) {
        let reason = reason.into();
        if !self.out.not_plain.contains(&reason) {
            self.out.not_plain.push(reason);
        }
    }

    /// Records why the line cannot be run from Keel's rendering ([`super::render`]).
    fn unrenderable(&mut self, reason: impl Into<String>) {
        let reason = reason.into();
        if !self.out.unrenderable.contains(&reason) {
            self.out.unrenderable.push(reason);
        }
    }

    fn push_pipeline(&mut self, stages: Vec<SimpleCommand>, pipes: Vec<String>) {
        let joiner = self.joiner.take().unwrap_or_default();
        self.out.pipelines.push(Pipeline {
            stages,
            pipes,
            joiner,
            depth: self.depth,
        });
    }

    fn opaque(&mut self, text: &str) {
        if !text.trim().is_empty() && !self.out.opaque.iter().any(|t| t == text) {
            self.out.opaque.push(text.to_owned());
        }
    }

    fn script(&mut self, text: &str, depth: usize) {
        self.depth = depth;
        if depth > MAX_NESTING {
            self.not_plain("shell scripts nested too deeply");
            self.opaque(clip(text, MAX_SCRIPT_BYTES));
            return;
        }
        if text.len() > MAX_SCRIPT_BYTES {
            self.too_complex(format!(
                "the command is too long to analyse ({} bytes; at most {MAX_SCRIPT_BYTES})",
                text.len()
            ));
            self.opaque(clip(text, MAX_OPAQUE_SCAN_BYTES));
            return;
        }
        if super::nesting_depth(text, MAX_SYNTAX_DEPTH) > MAX_SYNTAX_DEPTH {
            self.too_complex(format!(
                "the command nests more than {MAX_SYNTAX_DEPTH} levels deep"
            ));
            self.opaque(clip(text, MAX_OPAQUE_SCAN_BYTES));
            return;
        }
        if let Some(c) = confusable_char(text) {
            self.not_plain(format!(
                "an invisible or look-alike character (U+{:04X})",
                c as u32
            ));
            self.opaque(text);
        }
        let mut parser = Parser::new();
        let tree = match parser.set_language(&tree_sitter_bash::LANGUAGE.into()) {
            Ok(()) => parser.parse(text, None),
            Err(_) => None,
        };
        let Some(tree) = tree else {
            self.not_plain("the command could not be parsed");
            self.opaque(text);
            return;
        };
        let root = tree.root_node();
        if root.has_error() {
            self.not_plain("the command does not parse as shell (a syntax error)");
            self.opaque(text);
        }
        let reasons = self.out.not_plain.len();
        self.sequence(root, text, depth);
        if self.out.not_plain.len() > reasons {
            self.opaque(text);
        }
    }

    fn sequence(&mut self, node: Node<'_>, src: &str, depth: usize) {
        self.nested(|walk| walk.walk_sequence(node, src, depth));
    }

    fn walk_sequence(&mut self, node: Node<'_>, src: &str, depth: usize) {
        let mut cursor = node.walk();
        for child in node.children(&mut cursor) {
            if child.is_named() {
                self.statement(child, src, depth);
            } else {
                self.operator(child.kind());
            }
        }
    }

    fn operator(&mut self, kind: &str) {
        match kind {
            "&&" | "||" | ";" | "\n" => self.joiner = Some(kind.to_owned()),
            "|" | "|&" => {}
            "&" => self.not_plain("a command runs in the background (`&`)"),
            other => self.not_plain(format!("the shell syntax {other}", other = code(other))),
        }
    }

    fn statement(&mut self, node: Node<'_>, src: &str, depth: usize) {
        self.nested(|walk| walk.walk_statement(node, src, depth));
    }

    fn walk_statement(&mut self, node: Node<'_>, src: &str, depth: usize) {
        match node.kind() {
            "program" | "list" => self.sequence(node, src, depth),
            "pipeline" => self.pipeline(node, &[], src, depth),
            "redirected_statement" => {
                let mut cursor = node.walk();
                let redirects: Vec<Node<'_>> = node
                    .children_by_field_name("redirect", &mut cursor)
                    .collect();
                match node.child_by_field_name("body") {
                    Some(body) => self.with_redirects(body, &redirects, src, depth),
                    None => self.not_plain("a redirection without a command"),
                }
            }
            "command" | "negated_command" => {
                if let Some(stage) = self.stage(node, src, depth) {
                    self.push_pipeline(vec![stage], Vec::new());
                }
            }
            "comment" => {}
            other => {
                self.not_plain(describe(other));
                self.opaque(&src[node.byte_range()]);
                self.harvest(node, src, depth);
            }
        }
    }

    /// A statement followed by redirections: they belong to its last simple command
    /// (tree-sitter-bash attaches `a && b > f` to the whole list).
    fn with_redirects(&mut self, node: Node<'_>, redirects: &[Node<'_>], src: &str, depth: usize) {
        self.nested(|walk| walk.walk_with_redirects(node, redirects, src, depth));
    }

    fn walk_with_redirects(
        &mut self,
        node: Node<'_>,
        redirects: &[Node<'_>],
        src: &str,
        depth: usize,
    ) {
        match node.kind() {
            "command" => {
                let command = self.command(node, redirects, src, depth);
                self.push_pipeline(vec![command], Vec::new());
            }
            "pipeline" => self.pipeline(node, redirects, src, depth),
            "list" => {
                let mut cursor = node.walk();
                let children: Vec<Node<'_>> = node.children(&mut cursor).collect();
                let last_named = children.iter().rposition(|c| c.is_named());
                for (i, child) in children.iter().enumerate() {
                    if !child.is_named() {
                        self.operator(child.kind());
                    } else if Some(i) == last_named {
                        self.with_redirects(*child, redirects, src, depth);
                    } else {
                        self.statement(*child, src, depth);
                    }
                }
            }
            other => {
                self.not_plain(describe(other));
                self.opaque(&src[node.byte_range()]);
                self.harvest(node, src, depth);
            }
        }
    }

    fn pipeline(&mut self, node: Node<'_>, last_redirects: &[Node<'_>], src: &str, depth: usize) {
        let mut stages = Vec::new();
        let mut cursor = node.walk();
        let children: Vec<Node<'_>> = node.children(&mut cursor).collect();
        let last_named = children.iter().rposition(|c| c.is_named());
        let mut pipes = Vec::new();
        for (i, child) in children.iter().enumerate() {
            if !child.is_named() {
                if matches!(child.kind(), "|" | "|&") {
                    pipes.push(child.kind().to_owned());
                }
                self.operator(child.kind());
                continue;
            }
            let extra = if Some(i) == last_named {
                last_redirects
            } else {
                &[]
            };
            let stage = if child.kind() == "command" {
                Some(self.command(*child, extra, src, depth))
            } else {
                if !extra.is_empty() {
                    self.not_plain("a redirection of a compound command");
                }
                self.stage(*child, src, depth)
            };
            stages.extend(stage);
        }
        self.push_pipeline(stages, pipes);
    }

    fn stage(&mut self, node: Node<'_>, src: &str, depth: usize) -> Option<SimpleCommand> {
        self.nested(|walk| walk.walk_stage(node, src, depth))
            .flatten()
    }

    fn walk_stage(&mut self, node: Node<'_>, src: &str, depth: usize) -> Option<SimpleCommand> {
        match node.kind() {
            "command" => Some(self.command(node, &[], src, depth)),
            "negated_command" => {
                self.unrenderable("a negated command (`!`)");
                let mut cursor = node.walk();
                let inner = node.named_children(&mut cursor).next()?;
                self.stage(inner, src, depth)
            }
            "redirected_statement" => {
                let body = node.child_by_field_name("body");
                let mut cursor = node.walk();
                let redirects: Vec<Node<'_>> = node
                    .children_by_field_name("redirect", &mut cursor)
                    .collect();
                match body {
                    Some(body) if body.kind() == "command" => {
                        Some(self.command(body, &redirects, src, depth))
                    }
                    Some(body) => {
                        self.not_plain(describe(body.kind()));
                        self.opaque(&src[node.byte_range()]);
                        self.harvest(node, src, depth);
                        None
                    }
                    None => {
                        self.not_plain("a redirection without a command");
                        None
                    }
                }
            }
            other => {
                self.not_plain(describe(other));
                self.opaque(&src[node.byte_range()]);
                self.harvest(node, src, depth);
                None
            }
        }
    }

    /// Finds the commands inside a structure that is not plain, each as its own pipeline.
    fn harvest(&mut self, node: Node<'_>, src: &str, depth: usize) {
        self.nested(|walk| walk.walk_harvest(node, src, depth));
    }

    fn walk_harvest(&mut self, node: Node<'_>, src: &str, depth: usize) {
        let mut cursor = node.walk();
        for child in node.named_children(&mut cursor) {
            if child.kind() == "command" {
                let command = self.command(child, &[], src, depth);
                self.push_pipeline(vec![command], Vec::new());
            } else {
                self.harvest(child, src, depth);
            }
        }
    }

    fn command(
        &mut self,
        node: Node<'_>,
        redirect_nodes: &[Node<'_>],
        src: &str,
        depth: usize,
    ) -> SimpleCommand {
        let Some(written) = self.written(node, redirect_nodes, src, depth) else {
            return self.too_many_words(src);
        };
        let Written {
            words,
            mut assignments,
            redirects,
            dynamic,
        } = written;
        // What bash does to each word after quote removal: `~` and pathname expansion, here,
        // so that the words analysed are the words that run.
        let count = words.len();
        let mut expanded = Vec::with_capacity(count);
        for word in words {
            expanded.extend(self.expand(word));
        }
        let words = expanded;
        self.words = self.words.saturating_add(words.len().saturating_sub(count));
        if self.words > MAX_LINE_WORDS {
            return self.too_many_words(src);
        }
        let context = self.context;
        let cwd = self.cwd.clone();
        let inside =
            |word: &str| matches!(context.place(word, &cwd), Place::Inside(_) | Place::Root(_));
        let peeled = peel(&words, &inside);
        for reason in &peeled.not_plain {
            self.not_plain(reason.clone());
        }
        for code in &peeled.inline_code {
            self.opaque(code);
        }
        if !peeled.not_plain.is_empty() {
            self.opaque(&src[node.byte_range()]);
        }
        assignments.extend(peeled.assignments.iter().cloned());
        let container = !peeled.nested.is_empty();
        let nested_script = self.nested_scripts(&peeled, depth);
        let fit = if container {
            Fit::Ungoverned
        } else {
            fit(&peeled.argv)
        };
        // A call outside its command's grammar has no key: an "always" answer for the same
        // command must never cover it.
        let key = if container || fit.rejected() {
            None
        } else {
            approval_key(&peeled.argv)
        };
        let mut command = SimpleCommand {
            original: words,
            argv: peeled.argv,
            wrappers: peeled.wrappers,
            assignments,
            redirects,
            cwd,
            dynamic,
            container,
            inline_code: peeled.inline_code,
            key,
            fit,
            directory: None,
            nested_script,
        };
        command.directory = self.track_directory(&command);
        command
    }

    /// A simple command's words, assignments and redirections as written (before expansion);
    /// `None` past the bound on words per line.
    fn written(
        &mut self,
        node: Node<'_>,
        redirect_nodes: &[Node<'_>],
        src: &str,
        depth: usize,
    ) -> Option<Written> {
        let mut written = Written::default();
        let mut cursor = node.walk();
        let children: Vec<Node<'_>> = node.named_children(&mut cursor).collect();
        self.words = self.words.saturating_add(children.len());
        if self.words > MAX_LINE_WORDS {
            return None;
        }
        for child in children {
            match child.kind() {
                "variable_assignment" => {
                    let name = child
                        .child_by_field_name("name")
                        .map(|n| src[n.byte_range()].to_owned())
                        .unwrap_or_default();
                    let value = match child.child_by_field_name("value") {
                        Some(v) => {
                            let value = self.word(v, src, depth);
                            written.dynamic |= value.dynamic;
                            value.text()
                        }
                        None => String::new(),
                    };
                    if is_dangerous_variable(&name) {
                        self.not_plain(format!(
                            "setting {name} changes which code runs",
                            name = code(&name)
                        ));
                    }
                    written.assignments.push((name, value));
                }
                "command_name" => {
                    let mut inner_cursor = child.walk();
                    let word = child.named_children(&mut inner_cursor).next();
                    if let Some(word) = word {
                        let value = self.word(word, src, depth);
                        if value.dynamic {
                            self.not_plain("the command name is computed (an expansion)");
                        }
                        written.dynamic |= value.dynamic;
                        written.words.push(value);
                    }
                }
                "file_redirect" | "heredoc_redirect" | "herestring_redirect" => {
                    if let Some(r) = self.redirect(child, src, depth, &mut written.words) {
                        written.redirects.push(r);
                    }
                }
                _ => {
                    let value = self.word(child, src, depth);
                    written.dynamic |= value.dynamic;
                    written.words.push(value);
                }
            }
        }
        for node in redirect_nodes {
            if let Some(r) = self.redirect(*node, src, depth, &mut written.words) {
                written.redirects.push(r);
            }
        }
        written.dynamic |= written.redirects.iter().any(|r| r.dynamic);
        Some(written)
    }

    /// The scripts a wrapper runs (`sh -c`, `bash -c`), analysed as part of this line and
    /// rendered for the command that runs them; the working directory is this shell's again
    /// after them (a nested shell's `cd` does not move this one).
    fn nested_scripts(&mut self, peeled: &Peeled, depth: usize) -> Option<String> {
        let (saved, saved_logical) = (self.cwd.clone(), self.logical.clone());
        let mut nested_script = None;
        for script in &peeled.nested {
            // The nested script's pipelines are its own: the joiner before this command is
            // not theirs.
            let joiner = self.joiner.take();
            let first = self.out.pipelines.len();
            // `sh` is not bash: its script may not use bash's own operators, and its
            // patterns are not expanded as bash's.
            let posix = peeled
                .wrappers
                .last()
                .is_none_or(|shell| base_name(shell) != "bash");
            let outer = std::mem::replace(&mut self.posix, posix);
            self.script(script, depth + 1);
            self.posix = outer;
            self.depth = depth;
            self.joiner = joiner;
            let inner = self.out.pipelines[first..]
                .iter()
                .filter(|p| p.depth == depth + 1);
            match render_pipelines(inner, posix) {
                Ok(rendered) => nested_script = Some(rendered),
                Err(reason) => self.unrenderable(format!("in a nested shell: {reason}")),
            }
        }
        self.cwd = saved;
        self.logical = saved_logical;
        nested_script
    }

    fn too_many_words(&mut self, src: &str) -> SimpleCommand {
        // Past the bound the rest of the line is not looked at word by word.
        self.too_complex(format!(
            "the command holds more than {MAX_LINE_WORDS} words"
        ));
        self.opaque(clip(src, MAX_OPAQUE_SCAN_BYTES));
        SimpleCommand {
            original: Vec::new(),
            argv: Vec::new(),
            wrappers: Vec::new(),
            assignments: Vec::new(),
            redirects: Vec::new(),
            cwd: self.cwd.clone(),
            dynamic: true,
            container: false,
            inline_code: Vec::new(),
            key: None,
            fit: Fit::Ungoverned,
            directory: None,
            nested_script: None,
        }
    }

    /// Follows `cd`: where the next commands run, and for `cd` the directory it moves to as
    /// bash's logical `cd` computes it (absolute, symlinks kept, `..` applied to the text once
    /// the part before it is shown to be a directory), which is what Keel renders.
    fn track_directory(&mut self, command: &SimpleCommand) -> Option<PathBuf> {
        match command.program() {
            "cd" | "pushd" => {
                let operands: Vec<&String> = command
                    .argv
                    .iter()
                    .skip(1)
                    .filter(|a| !a.starts_with('-') || a.as_str() == "-")
                    .collect();
                let logical = match operands.first() {
                    None => self.context.home.map(Path::to_path_buf),
                    Some(_) if command.dynamic => None,
                    Some(dir) if dir.as_str() == "-" || dir.is_empty() => None,
                    Some(dir) => {
                        let dir = Path::new(dir.as_str());
                        match (&self.logical, dir.is_absolute()) {
                            (_, true) => canonical_text(dir, self.context),
                            (Cwd::Known(base), false) => {
                                canonical_text(&base.join(dir), self.context)
                            }
                            (Cwd::Unknown, false) => None,
                        }
                    }
                };
                // The directory itself, symlinks resolved (not `place`, which reads a `[` or
                // `*` in a name as a pattern).
                let physical = logical.as_ref().and_then(|dir| match self.context.runtime {
                    Some(runtime) => dir.to_str().and_then(|text| runtime.resolve(text).ok()),
                    None => Some(super::normalize(dir)),
                });
                match (logical, physical) {
                    (Some(logical), Some(physical)) => {
                        self.logical = Cwd::Known(logical.clone());
                        self.cwd = Cwd::Known(physical);
                        Some(logical)
                    }
                    _ => {
                        self.logical = Cwd::Unknown;
                        self.cwd = Cwd::Unknown;
                        None
                    }
                }
            }
            "popd" => {
                self.cwd = Cwd::Unknown;
                self.logical = Cwd::Unknown;
                None
            }
            _ => None,
        }
    }
}

/// `path` as bash's logical `cd` makes it canonical: `.` dropped, `..` removing the component
/// before it, once that prefix is shown to be a directory (else bash's `cd` fails: `None`).
/// Without a runtime (no file system to look at) the prefix is not checked.
fn canonical_text(path: &Path, context: &ShellContext<'_>) -> Option<PathBuf> {
    let mut out = PathBuf::from("/");
    for component in path.components() {
        match component {
            Component::ParentDir => {
                if context.runtime.is_some() && !crate::runtime::probe::is_dir(&out) {
                    return None;
                }
                out.pop();
            }
            Component::Normal(part) => out.push(part),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    Some(out)
}

fn describe(kind: &str) -> String {
    match kind {
        "subshell" => "a subshell `( ... )`".to_owned(),
        "compound_statement" => "a command group `{ ... }`".to_owned(),
        "function_definition" => "a function definition".to_owned(),
        "for_statement" | "c_style_for_statement" | "while_statement" => "a loop".to_owned(),
        "if_statement" => "an `if` statement".to_owned(),
        "case_statement" => "a `case` statement".to_owned(),
        "test_command" => "a test `[[ ... ]]`".to_owned(),
        "variable_assignment" | "variable_assignments" => {
            "a variable assignment without a command".to_owned()
        }
        "declaration_command" => "`export`/`declare`/`local`".to_owned(),
        "unset_command" => "`unset`".to_owned(),
        "ERROR" => "the command does not parse as shell (a syntax error)".to_owned(),
        other => format!("the shell construct {other}", other = code(other)),
    }
}
