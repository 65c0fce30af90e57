use super::*;

#[test]
fn a_double_star_matches_every_path_without_its_regex() {
    let all = Pattern::glob("**").unwrap();
    assert!(all.globs.as_ref().is_some_and(|g| g.every_path));
    for path in ["", "a", "/abs/b.rs", ".env", "a/\n/b", "a\u{fffd}b", "x/"] {
        let target = Target::Name(path);
        assert!(
            all.matches(&target, false) && all.matches(&target, true),
            "{path:?}"
        );
        let g = all.globs.as_ref().unwrap();
        assert!(
            g.path.is_match(path) && g.path_folded.is_match(path),
            "{path:?}"
        );
    }
    for glob in ["**/*.rs", "*", "src/**", "**/.env"] {
        let pattern = Pattern::glob(glob).unwrap();
        assert!(
            !pattern.globs.as_ref().is_some_and(|g| g.every_path),
            "{glob}"
        );
    }
}

/// Globs, prefixes and exact patterns of every shape the per-directory matching splits.
const SHAPES: &[&str] = &[
    "**",
    "**/*.rs",
    "**/*.RS",
    "*.rs",
    "src/**",
    "src/**/*.rs",
    "src/*/[a-c]*.rs",
    "**/.env",
    "**/.env.*",
    "**/.ENV",
    "**/{a,bb}?.rs",
    "docs/*.md",
    "[!x]*/*",
    "**/x/**",
    "src/a.rs",
    "SRC/A.RS",
    "a/b/**/c",
    "**/[[:upper:]]*",
    "?",
    "*",
    "~/x/**",
    "/abs/**",
    "./src/",
    "src\\*x",
    "**/*~",
    "**/.[a-z]*",
    "{session}/*.log",
];

#[test]
fn per_directory_matching_says_what_full_matching_says() {
    let dirs = [
        "",
        "src/",
        "SRC/",
        "src/a/",
        "src/A/b/",
        "docs/",
        "x/",
        "a/b/",
        "a/b/x/c/",
        ".git/",
        "/abs/",
        "~/x/",
        "~/",
        "{session}/",
        "src/x/y/",
        "docs/src/",
    ];
    let names = [
        "a.rs",
        "A.RS",
        "b.rs",
        "ab.rs",
        "bbx.rs",
        "x.md",
        ".env",
        ".env.local",
        ".ENV.x",
        "c",
        "x",
        "a.rs~",
        ".hidden",
        "Main.rs",
        "src",
        "*x",
        "ax.rs",
    ];
    let mut compared = 0;
    for shape in SHAPES {
        let pattern = Pattern::glob(shape).unwrap();
        let prefixes = [Pattern::prefix(shape).unwrap(), Pattern::exact(shape)];
        for pattern in std::iter::once(&pattern).chain(&prefixes) {
            for restrictive in [false, true] {
                let text = pattern.path_text(restrictive);
                for dir in dirs {
                    let prefix = if restrictive {
                        dir.to_ascii_lowercase()
                    } else {
                        dir.to_owned()
                    };
                    let in_dir = pattern.in_dir(&text, &prefix, restrictive);
                    for name in names {
                        let subject = format!("{dir}{name}");
                        let full = pattern.matches(&Target::Name(&subject), restrictive);
                        let name = if restrictive {
                            name.to_ascii_lowercase()
                        } else {
                            name.to_owned()
                        };
                        let fast = pattern.matches_in_dir(&in_dir, &prefix, &name, restrictive);
                        assert_eq!(
                            fast, full,
                            "{pattern} on {subject:?} (restrictive {restrictive}, {in_dir:?})"
                        );
                        compared += 1;
                    }
                }
            }
        }
    }
    assert!(compared > 20_000, "{compared}");
}

#[test]
fn globs_are_run_as_dfas() {
    for shape in SHAPES {
        let pattern = Pattern::glob(shape).unwrap();
        let Some(globs) = &pattern.globs else {
            continue;
        };
        if globs.every_path {
            continue;
        }
        for folded in [false, true] {
            assert!(globs.dfa(folded).is_some(), "{shape} ({folded})");
        }
    }
    // A glob whose DFA would be too large is matched with its regex.
    let large = Pattern::glob(&format!("*a{}", "?".repeat(24))).unwrap();
    let in_dir = large.in_dir(&large.path_text(false), "", false);
    assert!(matches!(in_dir, InDir::Glob), "{in_dir:?}");
    for subject in [
        "a".repeat(25),
        "a".repeat(24),
        format!("xa{}", "b".repeat(24)),
    ] {
        assert_eq!(
            large.matches_in_dir(&in_dir, "", &subject, false),
            large.matches(&Target::Name(&subject), false),
            "{subject}"
        );
    }
}

#[test]
fn specificity_orders_shapes() {
    let exact = Pattern::glob("src/main.rs").unwrap();
    let long = Pattern::glob("src/**/*.rs").unwrap();
    let short = Pattern::glob("**").unwrap();
    let prefix = Pattern::prefix("cargo test").unwrap();
    assert!(exact.specificity() > long.specificity());
    assert!(long.specificity() > short.specificity());
    assert!(prefix.specificity() > Pattern::class(CommandClass::ReadOnly).specificity());
    assert!(Pattern::class(CommandClass::ReadOnly).specificity() > Pattern::any().specificity());
}

#[test]
fn restrictive_matching_folds_case_and_normal_form() {
    let rule = Pattern::glob("secrets/**").unwrap();
    let target = |p: &'static str| Target::Path {
        relative: Some(p),
        absolute: "/w/x",
        home: None,
        session: None,
    };
    assert!(rule.matches(&target("SECRETS/a"), true));
    assert!(!rule.matches(&target("SECRETS/a"), false));
    let cafe = Pattern::prefix("docs/caf\u{e9}").unwrap();
    assert!(cafe.matches(&target("docs/cafe\u{301}/x"), true));
    assert!(!cafe.matches(&target("docs/cafe\u{301}/x"), false));
}

#[test]
fn patterns_are_bounded() {
    let long = "a".repeat(MAX_PATTERN_BYTES + 1);
    assert!(Pattern::glob(&format!("{long}*")).is_err());
    assert!(Pattern::prefix(&long).is_err());
    assert!(Pattern::glob(&"a".repeat(MAX_PATTERN_BYTES)).is_ok());
}

#[test]
fn command_prefix_is_word_wise() {
    let p = Pattern::prefix("git status").unwrap();
    let words = |s: &str| s.split(' ').map(str::to_owned).collect::<Vec<_>>();
    let w = words("git status --short");
    assert!(p.matches(
        &Target::Command {
            words: &w,
            text: "git status --short",
            read_only: false,
            outside_grammar: false
        },
        false
    ));
    let w = words("git statusx");
    assert!(!p.matches(
        &Target::Command {
            words: &w,
            text: "git statusx",
            read_only: false,
            outside_grammar: false
        },
        false
    ));
    let deny_rm = Pattern::prefix("rm").unwrap();
    let w = words("/bin/rm -rf x");
    assert!(deny_rm.matches(
        &Target::Command {
            words: &w,
            text: "/bin/rm -rf x",
            read_only: false,
            outside_grammar: false
        },
        true
    ));
    assert!(!deny_rm.matches(
        &Target::Command {
            words: &w,
            text: "/bin/rm -rf x",
            read_only: false,
            outside_grammar: false
        },
        false
    ));
}

#[test]
fn session_is_a_name_not_an_alternation() {
    let glob = Pattern::glob("{session}/**").unwrap();
    let prefix = Pattern::prefix("{session}").unwrap();
    let target = |s: &'static str| Target::Path {
        relative: None,
        absolute: "/tmp/s/x",
        home: None,
        session: Some(s),
    };
    for pattern in [&glob, &prefix] {
        assert!(pattern.matches(&target("{session}/out.txt"), false));
    }
    let outside = Target::Path {
        relative: None,
        absolute: "/tmp/s/x",
        home: None,
        session: None,
    };
    assert!(!glob.matches(&outside, false));
    assert_eq!(
        Pattern::glob("{session}/a.txt").unwrap().kind(),
        PatternKind::Exact
    );
}
