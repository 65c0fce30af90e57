use super::*;

fn update(patch: &Patch, index: usize) -> (&str, Option<&String>, &[Hunk]) {
    match &patch.files[index] {
        FileOp::Update {
            path,
            move_to,
            hunks,
        } => (path, move_to.as_ref(), hunks),
        other => panic!("not an update: {other:?}"),
    }
}

#[test]
fn envelope_with_every_section() {
    let patch = parse(
        "*** Begin Patch\n\
         *** Add File: src/new.rs\n\
         +fn new() {}\n\
         +\n\
         *** Update File: src/lib.rs\n\
         *** Move to: src/core.rs\n\
         @@ fn main() {\n\
         -    old();\n\
         +    new();\n\
         @@\n\
         \x20context\n\
         -gone\n\
         *** End of File\n\
         *** Delete File: README.old\n\
         *** End Patch\n",
    )
    .unwrap();
    assert_eq!(patch.files.len(), 3);
    assert_eq!(
        patch.files[0],
        FileOp::Add {
            path: "src/new.rs".into(),
            content: "fn new() {}\n\n".into()
        }
    );
    let (path, move_to, hunks) = update(&patch, 1);
    assert_eq!(
        (path, move_to.map(String::as_str)),
        ("src/lib.rs", Some("src/core.rs"))
    );
    assert_eq!(hunks.len(), 2);
    assert_eq!(hunks[0].anchor.as_deref(), Some("fn main() {"));
    assert_eq!(
        hunks[0].lines,
        vec![
            HunkLine::Remove("    old();".into()),
            HunkLine::Add("    new();".into())
        ]
    );
    assert!(hunks[1].end_of_file && hunks[1].anchor.is_none());
    assert_eq!(
        patch.files[2],
        FileOp::Delete {
            path: "README.old".into()
        }
    );
}

#[test]
fn unified_diff_with_add_delete_rename() {
    let patch = parse(
        "diff --git a/src/lib.rs b/src/lib.rs\n\
         index 1111111..2222222 100644\n\
         --- a/src/lib.rs\n\
         +++ b/src/lib.rs\n\
         @@ -1,3 +1,3 @@ mod x;\n\
         \x20one\n\
         -two\n\
         +TWO\n\
         \x20three\n\
         @@ -10,2 +10,3 @@\n\
         \x20ten\n\
         +ten and a half\n\
         \x20eleven\n\
         --- /dev/null\n\
         +++ b/new.txt\n\
         @@ -0,0 +1,2 @@\n\
         +a\n\
         +b\n\
         \\ No newline at end of file\n\
         --- a/old.txt\n\
         +++ /dev/null\n\
         @@ -1 +0,0 @@\n\
         -bye\n\
         --- a/from.txt\n\
         +++ b/to.txt\n",
    )
    .unwrap();
    assert_eq!(patch.files.len(), 4);
    let (path, move_to, hunks) = update(&patch, 0);
    assert_eq!((path, move_to), ("src/lib.rs", None));
    assert_eq!(hunks.len(), 2);
    assert_eq!(hunks[0].old_start, Some(1));
    assert_eq!(hunks[1].lines.len(), 3);
    assert_eq!(
        patch.files[1],
        FileOp::Add {
            path: "new.txt".into(),
            content: "a\nb".into()
        }
    );
    assert_eq!(
        patch.files[2],
        FileOp::Delete {
            path: "old.txt".into()
        }
    );
    let (path, move_to, hunks) = update(&patch, 3);
    assert_eq!(
        (path, move_to.map(String::as_str)),
        ("from.txt", Some("to.txt"))
    );
    assert!(hunks.is_empty());
}

#[test]
fn malformed_patches_say_where_and_what() {
    let cases = [
        ("", "the patch is empty"),
        ("hello\n", "expected `*** Begin Patch`"),
        (
            "*** Begin Patch\n*** Add File: a\n+x\n",
            "must end with `*** End Patch`",
        ),
        ("*** Begin Patch\n*** End Patch\n", "changes no file"),
        (
            "*** Begin Patch\n*** Frobnicate File: a\n*** End Patch",
            "line 2 of the patch: expected `*** Add File: PATH`",
        ),
        (
            "*** Begin Patch\n*** Add File: a\nno plus\n*** End Patch",
            "line 3 of the patch: every line of an added file starts with `+`",
        ),
        (
            "*** Begin Patch\n*** Update File: a\n*** End Patch",
            "`*** Update File: a` has no hunk",
        ),
        (
            "*** Begin Patch\n*** Update File: a\n@@\n~tilde\n*** End Patch",
            "line 4 of the patch: a hunk line of `a` starts with ` ` (context)",
        ),
        (
            "*** Begin Patch\n*** Update File: a\n@@\n keep\n*** End Patch",
            "hunk 1 of `a` changes nothing",
        ),
        (
            "*** Begin Patch\n*** Add File:   \n*** End Patch",
            "names no file",
        ),
        (
            "--- a/x\nnot plus\n",
            "must be followed by a `+++ PATH` header",
        ),
        (
            "--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n-a\n+b\n",
            "hunk 1 of `x` ends early",
        ),
        ("--- a/x\n+++ b/x\n@@ bogus @@\n", "expected a hunk header"),
        ("--- a/x\n+++ b/x\n", "has no hunk"),
    ];
    for (text, expected) in cases {
        let error = parse(text).expect_err(text).to_string();
        assert!(error.contains(expected), "{text:?}: {error}");
    }
}

fn hunk(lines: &[&str]) -> Hunk {
    Hunk {
        lines: lines
            .iter()
            .map(|l| match l.split_at(1) {
                ("-", rest) => HunkLine::Remove(rest.into()),
                ("+", rest) => HunkLine::Add(rest.into()),
                (_, rest) => HunkLine::Context(rest.into()),
            })
            .collect(),
        ..Hunk::default()
    }
}

#[test]
fn hunks_apply_in_order_with_loose_whitespace() {
    let text = "a\nb\nc\nd\nb\nc\n";
    let first = hunk(&[" b", "-c", "+C"]);
    let second = hunk(&[" b", "-c", "+C2"]);
    assert_eq!(
        apply_hunks(text, &[first.clone(), second]).unwrap(),
        "a\nb\nC\nd\nb\nC2\n"
    );
    // Trailing whitespace and indentation differences still match.
    let loose = hunk(&["   a  ", "-b", "+B"]);
    assert_eq!(apply_hunks(text, &[loose]).unwrap(), "a\nB\nc\nd\nb\nc\n");
    // Anchors and end of file.
    let mut anchored = hunk(&["-c", "+X"]);
    anchored.anchor = Some("d".into());
    assert_eq!(
        apply_hunks(text, &[anchored]).unwrap(),
        "a\nb\nc\nd\nb\nX\n"
    );
    let mut at_end = hunk(&[" b", "-c", "+Z"]);
    at_end.end_of_file = true;
    assert_eq!(apply_hunks(text, &[at_end]).unwrap(), "a\nb\nc\nd\nb\nZ\n");
    // Only additions go at the end; no final line break is kept.
    assert_eq!(apply_hunks("x", &[hunk(&["+y"])]).unwrap(), "x\ny");
    assert_eq!(apply_hunks("", &[hunk(&["+y"])]).unwrap(), "y\n");
}

#[test]
fn a_hunk_that_does_not_apply_is_named() {
    let text = "one\ntwo\nthree\n";
    let ok = hunk(&[" one", "-two", "+2"]);
    let bad = hunk(&[" three", "-four", "+4"]);
    let error = apply_hunks(text, &[ok.clone(), bad]).unwrap_err();
    assert_eq!(error.hunk, 2);
    assert!(
        error.to_string().contains("hunk 2 does not apply"),
        "{error}"
    );
    assert!(error.why.contains("`four` is not in the file"), "{error}");
    // Lines that exist, but not together.
    let apart = hunk(&[" three", "-one", "+1"]);
    let error = apply_hunks(text, &[apart]).unwrap_err();
    assert!(error.why.contains("do not occur together"), "{error}");
    // A second hunk looks only after the first.
    let before = hunk(&["-one", "+1"]);
    let error = apply_hunks(text, &[ok, before]).unwrap_err();
    assert_eq!(error.hunk, 2);
}

#[test]
fn unified_hunks_apply_with_their_line_hints() {
    let patch =
        parse("--- a/f\n+++ b/f\n@@ -4,2 +4,2 @@\n x\n-y\n+Y\n@@ -7,0 +8 @@\n+after seven\n")
            .unwrap();
    let (_, _, hunks) = update(&patch, 0);
    let text = "x\ny\nz\nx\ny\nz\n7\n8\n";
    assert_eq!(
        apply_hunks(text, hunks).unwrap(),
        "x\ny\nz\nx\nY\nz\n7\nafter seven\n8\n"
    );
}
