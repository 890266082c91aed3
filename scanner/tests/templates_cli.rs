//! `scanfleet-scanner templates check`, run as a process.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A scratch directory removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Scratch {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "scanfleet-templates-cli-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        Scratch(dir)
    }
    fn write(&self, rel: &str, text: &str) {
        let p = self.0.join(rel);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const RUNNABLE: &str = "id: ok\ninfo: {name: ok, author: a, severity: low}\nhttp:\n  - path: ['{{BaseURL}}/']\n    matchers:\n      - type: status\n        status: [200]\n";

/// A flow script missing its closing brace.
fn flow(id: &str) -> String {
    format!("id: {id}\ninfo: {{name: f, author: a}}\nflow: |\n  for (let p of iterate(template.paths)) {{ set('p', p); http(1)\nhttp:\n  - path: ['{{{{BaseURL}}}}/']\n    matchers:\n      - type: status\n        status: [200]\n")
}

/// Two runnable, three broken flow scripts, one interactsh, one broken file.
fn sample_tree() -> Scratch {
    let s = Scratch::new();
    s.write("a/ok1.yaml", RUNNABLE);
    s.write("a/ok2.yml", RUNNABLE);
    for i in 0..3 {
        s.write(&format!("b/flow{i}.yaml"), &flow(&format!("f{i}")));
    }
    s.write(
        "b/oob.yaml",
        &RUNNABLE.replace("{{BaseURL}}/", "{{BaseURL}}/?u={{interactsh-url}}"),
    );
    s.write("c/broken.yaml", "id: x\ninfo: [\n");
    s.write("c/readme.md", "# not a template");
    s
}

fn scanner(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_scanfleet-scanner"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn path_arg(p: &Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

#[test]
fn check_with_json_prints_exactly_one_object_of_integer_totals() {
    let tree = sample_tree();
    let out = scanner(&["templates", "check", path_arg(&tree.0), "--json"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).expect("utf-8");
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("one JSON object");
    let obj = v.as_object().expect("an object");
    let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(keys, vec!["found", "parsed", "runnable", "unrunnable"]);
    assert_eq!(v["found"].as_u64(), Some(7));
    assert_eq!(v["parsed"].as_u64(), Some(6));
    assert_eq!(v["runnable"].as_u64(), Some(2));
    assert_eq!(
        v["unrunnable"],
        serde_json::json!({
            "flow script does not parse": 3,
            "needs interactsh (out-of-band)": 1,
            "parse error": 1,
        })
    );
}

#[test]
fn check_without_json_prints_a_table_sorted_by_count() {
    let tree = sample_tree();
    let out = scanner(&["templates", "check", path_arg(&tree.0)]);
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8(out.stdout).expect("utf-8");
    let flat = stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        flat.starts_with("found 7 parsed 6 runnable 2 (28.6%)"),
        "{stdout}"
    );
    let flow_at = stdout.find("flow script does not parse").expect("flow row");
    let oob_at = stdout.find("needs interactsh").expect("interactsh row");
    assert!(flow_at < oob_at, "rows not sorted by count:\n{stdout}");
}

#[test]
fn check_with_errors_lists_each_broken_file_with_its_line() {
    let tree = sample_tree();
    let out = scanner(&[
        "templates",
        "check",
        path_arg(&tree.0),
        "--json",
        "--errors",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8(out.stderr).expect("utf-8");
    assert!(stderr.contains("broken.yaml:"), "{stderr}");
    assert!(stderr.contains("parse error"), "{stderr}");
}

#[test]
fn check_of_a_missing_directory_fails_with_a_message() {
    let out = scanner(&["templates", "check", "/nonexistent/scanfleet-templates"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a directory"));
}
