//! The web console in headless Chromium (issue 33): a fleet (the api and a
//! scanner node, real processes) scanning the lab, and the walk of
//! `tests/browser/console_walk.py` against it: register, add the lab target,
//! a full scan watched live to 100%, a finding, two findings marked false
//! positive in one action, a rescan that keeps them so and shows its
//! changes, the same sign-in and triage by keyboard alone, screenshots of
//! every main screen in light and dark, and axe-core on each.
//!
//! The tools come from `tests/browser/setup.sh` (CI runs it before
//! `make test`): Debian's Chromium, Playwright for Python, axe-core from npm.
//! Where Chromium or Playwright is missing the test says so and passes
//! without walking, unless `CI=true` or `SCANFLEET_REQUIRE_BROWSER=1`, where
//! a missing tool fails it. The screenshots and `results.json` (axe counts
//! per screen, first-load weights) are kept in `target/console-screens/`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use scanfleet_tests::fleet::fleet_with_lab;
use scanfleet_tests::lab::{lab_hosts, Lab, DOMAIN};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

/// How many findings the rescan shows fixed: the lab's Git configuration,
/// on each of its three hosts, is switched off when the walk pauses before it.
const FIXED_BY_RESCAN: usize = 3;
/// The walk's own deadline; the test kills it a minute after.
const WALK_SECS: u64 = 1200;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn screens_dir() -> PathBuf {
    std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| root().join("target"))
        .join("console-screens")
}

fn chromium() -> PathBuf {
    std::env::var("CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from("/usr/bin/chromium"))
}

/// Why the walk cannot run on this machine, when it cannot.
fn missing_browser() -> Option<String> {
    if !chromium().is_file() {
        return Some(format!(
            "no Chromium at {} (tests/browser/setup.sh installs Debian's)",
            chromium().display()
        ));
    }
    match std::process::Command::new("python3")
        .args(["-c", "import playwright.sync_api"])
        .output()
    {
        Ok(out) if out.status.success() => None,
        Ok(_) => Some(
            "Playwright for Python is not installed (tests/browser/setup.sh installs it)".into(),
        ),
        Err(e) => Some(format!("python3 cannot be run: {e}")),
    }
}

/// `axe.min.js`, installed by the browser set-up (into its gitignored
/// cache, from npm) when missing.
fn axe_script() -> Result<PathBuf, String> {
    let axe = root().join("tests/browser/.cache/node_modules/axe-core/axe.min.js");
    if !axe.is_file() {
        let status = std::process::Command::new("bash")
            .arg(root().join("tests/browser/setup.sh"))
            .stdout(Stdio::null())
            .status();
        if !matches!(status, Ok(s) if s.success()) || !axe.is_file() {
            return Err(format!(
                "axe-core is not installed and tests/browser/setup.sh did not install it ({status:?})"
            ));
        }
    }
    Ok(axe)
}

fn required() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
        || std::env::var("SCANFLEET_REQUIRE_BROWSER").is_ok_and(|v| v == "1")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_walk_passes_in_headless_chromium_by_mouse_and_keyboard_in_light_and_dark() {
    let axe = match missing_browser().map_or_else(axe_script, Err) {
        Ok(axe) => axe,
        Err(why) if required() => panic!("the browser walk cannot run: {why}"),
        Err(why) => {
            println!("console browser test SKIPPED: {why}");
            eprintln!("console browser test SKIPPED: {why}");
            return;
        }
    };
    let screens = screens_dir();
    let _ = std::fs::remove_dir_all(&screens);
    std::fs::create_dir_all(&screens).expect("screenshot dir");

    // Slow enough that the progress bar is seen moving.
    let lab = Lab::start(Duration::from_millis(20)).await;
    // Rate limits on, as in production: browsing the console must not meet
    // a 429 (the console's pages do not count against the tier's API rate).
    let fleet = fleet_with_lab(&lab, &lab_hosts(), &[("SCANFLEET_RATE__ENABLED", "true")]).await;
    let api = fleet.api(&[]).await;
    let _node = fleet.node("node-a", &[]);

    let mut walk = Command::new("python3")
        .arg("-u")
        .arg(root().join("tests/browser/console_walk.py"))
        .arg("--base")
        .arg(fleet.base())
        .args(["--domain", DOMAIN])
        .arg("--screens")
        .arg(&screens)
        .arg("--axe")
        .arg(&axe)
        .arg("--chromium")
        .arg(chromium())
        .arg("--pause-before-rescan")
        .args(["--expect-fixed-count", &FIXED_BY_RESCAN.to_string()])
        .args(["--deadline", &WALK_SECS.to_string()])
        .current_dir(root())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("starting python3 tests/browser/console_walk.py");
    let mut stdin = walk.stdin.take().expect("walk stdin");
    let mut stdout = BufReader::new(walk.stdout.take().expect("walk stdout")).lines();
    let mut stderr = BufReader::new(walk.stderr.take().expect("walk stderr")).lines();
    let errors = tokio::spawn(async move {
        while let Ok(Some(line)) = stderr.next_line().await {
            eprintln!("walk: {line}");
        }
    });

    let mut summary = String::new();
    let mut failing = Vec::new();
    let followed = tokio::time::timeout(Duration::from_secs(WALK_SECS + 60), async {
        while let Ok(Some(line)) = stdout.next_line().await {
            println!("{line}");
            if line.ends_with("PAUSE before-rescan") {
                lab.set_git_exposed(false);
                stdin.write_all(b"go\n").await.expect("answering the walk");
                stdin.flush().await.expect("answering the walk");
            }
            if line.starts_with("console_walk: FAIL") {
                failing.push(line);
            } else if line.contains("summary:") {
                summary = line;
            }
        }
        walk.wait().await.expect("the walk's exit")
    })
    .await;
    let Ok(status) = followed else {
        let _ = walk.kill().await;
        panic!("the walk ran past {WALK_SECS} s");
    };
    let _ = errors.await;
    println!("screenshots and results.json: {}", screens.display());
    assert!(
        status.success(),
        "the console walk failed ({status}): {summary}\n{}\nscreenshots: {}\napi log:\n{}",
        failing.join("\n"),
        screens.display(),
        tail(&api.log_text(), 60)
    );
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
