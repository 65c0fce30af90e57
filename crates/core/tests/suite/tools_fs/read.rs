//! `read`: numbering, windows, caps, binary and missing files, sidecars.

use super::*;

#[tokio::test]
async fn read_numbers_lines_and_honours_offset_and_limit() {
    let fx = Fixture::new();
    let body: String = (1..=12).map(|i| format!("line {i}\n")).collect();
    let path = fx.put("src/lines.txt", &body);

    let all = fx.read_ok("src/lines.txt").await;
    assert!(
        all.text.starts_with("     1\tline 1\n     2\tline 2\n"),
        "{}",
        all.text
    );
    assert!(all.text.ends_with("    12\tline 12"), "{}", all.text);
    assert_eq!(all.data["total_lines"], json!(12));
    assert_eq!(
        (all.data["start_line"].clone(), all.data["end_line"].clone()),
        (json!(1), json!(12))
    );
    assert_eq!(location(&all), (path.display().to_string(), Some(1)));

    let window = fx
        .read(json!({ "file_path": path.display().to_string(), "offset": 10, "limit": 2 }))
        .await
        .unwrap();
    assert_eq!(
        window.text,
        "    10\tline 10\n    11\tline 11\n\n[Showing lines 10-11 of 12. Call read with offset=12 to read more.]"
    );
    assert_eq!(window.data["end_line"], json!(11));
    assert_eq!(location(&window).1, Some(10));

    let past = failed(
        fx.read(json!({ "file_path": "src/lines.txt", "offset": 13 }))
            .await,
    );
    assert!(
        past.contains("past the end") && past.contains("12 lines"),
        "{past}"
    );
}

#[tokio::test]
async fn read_reports_missing_files_directories_and_empty_files() {
    let fx = Fixture::new();
    let missing = failed(fx.read(json!({ "file_path": "nope.rs" })).await);
    assert!(missing.contains("nope.rs does not exist"), "{missing}");

    fs::create_dir_all(fx.ws.join("src")).unwrap();
    let dir = failed(fx.read(json!({ "file_path": "src" })).await);
    assert!(
        dir.contains("is a directory") && dir.contains("glob"),
        "{dir}"
    );

    fx.put("empty.txt", "");
    let empty = fx.read_ok("empty.txt").await;
    assert!(empty.text.contains("empty.txt is empty"), "{}", empty.text);
    assert_eq!(empty.data["total_lines"], json!(0));
}

#[tokio::test]
async fn read_refuses_binary_and_cuts_long_lines() {
    let fx = Fixture::new();
    fx.put("image.png", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0");
    let binary = failed(fx.read(json!({ "file_path": "image.png" })).await);
    assert!(
        binary.contains("binary file") && binary.contains("NUL"),
        "{binary}"
    );

    fx.put("long.txt", format!("short\n{}\nend\n", "x".repeat(5000)));
    let long = fx.read_ok("long.txt").await;
    let second = long.text.lines().nth(1).unwrap();
    assert!(second.starts_with("     2\txxxx"), "{second}");
    assert!(second.contains("[line cut: 5000 bytes in full"), "{second}");
    assert_eq!(second.matches('x').count(), 2000);
    assert!(long.text.contains("     3\tend"));
}

#[tokio::test]
async fn read_past_the_byte_cap_returns_the_head_and_says_how_to_continue() {
    let fx = Fixture::new();
    // 3000 lines of 100 bytes: the 200 KB cap stops the output before the 2000-line default
    // limit does (at about 1900 numbered lines).
    let body: String = (1..=3000).map(|i| format!("{i:0>99}\n")).collect();
    fx.put("big.txt", &body);
    let out = fx.read_ok("big.txt").await;
    assert_eq!(out.data["truncated"], json!(true));
    let end = out.data["end_line"].as_u64().unwrap();
    assert!((1800..2000).contains(&end), "{end}");
    let (head, notice) = out.text.split_once("\n\n[").unwrap();
    assert!(head.len() <= 200 * 1024);
    assert_eq!(head.lines().count() as u64, end);
    assert!(notice.contains("Output capped at 200 KB"), "{notice}");
    assert!(notice.contains(&format!("offset={}", end + 1)), "{notice}");
    assert_eq!(out.data["total_lines"], json!(3000));
    let envelope = Envelope::from_result(Ok(out), std::time::Duration::ZERO);
    assert!(envelope.for_model().contains("truncated: true"));
}

#[tokio::test]
async fn read_of_a_large_file_goes_by_ranges() {
    let fx = Fixture::with_limits(Limits {
        read_bytes: 4096,
        ..Limits::default()
    });
    // 10 MB: past the whole-file threshold, so the file is streamed in chunks.
    let body: String = (1..=200_000).map(|i| format!("{i:0>49}\n")).collect();
    fx.put("huge.log", &body);
    let out = fx
        .read(json!({ "file_path": "huge.log", "offset": 150_000, "limit": 3 }))
        .await
        .unwrap();
    assert!(
        out.text
            .starts_with(&format!("150000\t{:0>49}\n150001\t", 150_000)),
        "{}",
        out.text
    );
    assert_eq!(out.data["end_line"], json!(150_002));
    assert_eq!(out.data["total_lines"], json!(200_000));
    let capped = fx.read_ok("huge.log").await;
    assert_eq!(capped.data["truncated"], json!(true));
    assert!(capped.text.len() < 4096 + 300);
}

#[tokio::test]
async fn read_shows_sidecar_files() {
    let fx = Fixture::new();
    let sidecar = fx
        .ctx
        .spill("grep", b"first match\nsecond match\n")
        .await
        .unwrap();
    let out = fx.read_ok(&sidecar.display().to_string()).await;
    assert_eq!(out.text, "     1\tfirst match\n     2\tsecond match");
}
