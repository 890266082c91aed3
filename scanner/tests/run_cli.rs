//! `scanfleet-scanner run` as a user runs it: exit codes, refusal message,
//! JSON Lines on stdout.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::Command;

fn scanner() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_scanfleet-scanner"));
    // The developer's environment must not loosen the safety check.
    cmd.env_remove("SCANFLEET_SCANNER__ALLOW_PRIVATE");
    cmd
}

/// Answers every connection with one fixed response, on a thread.
fn serve(body: &'static str) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        for mut sock in listener.incoming().flatten() {
            let mut buf = [0u8; 8192];
            let mut seen = Vec::new();
            while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                match sock.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => seen.extend_from_slice(&buf[..n]),
                }
            }
            let reply = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = sock.write_all(reply.as_bytes());
        }
    });
    format!("http://{addr}")
}

fn template_file(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("word.yaml");
    std::fs::write(
        &path,
        r#"
id: cli-word
info: {name: CLI word, severity: high, description: d, remediation: r}
http:
  - path: ["{{BaseURL}}/probe"]
    matchers:
      - type: word
        words: ["needle"]
"#,
    )
    .expect("write template");
    path
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("scanfleet-run-cli-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

#[test]
fn a_loopback_target_is_refused_with_exit_code_2_without_allow_private() {
    let base = serve("needle");
    let dir = temp_dir("refuse");
    let out = scanner()
        .args(["run", "-t"])
        .arg(template_file(&dir))
        .args(["-u", &base, "--jsonl"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("refusing to connect"), "{stderr}");
    assert!(stderr.contains("--allow-private"), "{stderr}");
    assert!(out.stdout.is_empty());
}

#[test]
fn allow_private_prints_one_json_line_per_finding() {
    let base = serve("a needle here");
    let dir = temp_dir("jsonl");
    let out = scanner()
        .args(["run", "-t"])
        .arg(template_file(&dir))
        .args(["-u", &base, "--jsonl", "--allow-private"])
        .output()
        .expect("runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<_> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{stdout}");
    let v: serde_json::Value = serde_json::from_str(lines[0]).expect("json");
    assert_eq!(v["template_id"], "cli-word");
    assert_eq!(v["severity"], "high");
    assert_eq!(v["matched_at"], format!("{base}/probe"));
    assert_eq!(v["host"], base);
}

#[test]
fn the_allow_private_environment_setting_is_honoured() {
    let base = serve("needle");
    let dir = temp_dir("env");
    let out = scanner()
        .env("SCANFLEET_SCANNER__ALLOW_PRIVATE", "true")
        .args(["run", "-t"])
        .arg(template_file(&dir))
        .args(["-u", &base, "--jsonl"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1);
}

#[test]
fn a_malformed_variable_option_is_a_usage_error() {
    let out = scanner()
        .args(["run", "-u", "http://example.test", "--var", "novalue"])
        .output()
        .expect("runs");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("novalue"));
}
