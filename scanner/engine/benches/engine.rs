//! Engine benchmark: loading and compiling the public template corpus, and
//! matching throughput of its operators on the rayon pool.
//!
//! `cargo bench -p scanfleet-engine --bench engine` (set `SCANFLEET_CORPUS`
//! to another directory; `SCANFLEET_BENCH_RESPONSES` for the number of
//! synthetic responses, 200 by default). Prints figures; no harness.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rayon::prelude::*;
use scanfleet_engine::dsl::{Bytes, Vars};
use scanfleet_engine::engine::response::{ResponseVars, RunNames};
use scanfleet_engine::engine::vars::Scope;
use scanfleet_engine::engine::CompiledTemplate;
use scanfleet_http::Response;

/// Peak resident set size of this process, from the kernel.
fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

fn synthetic_response(i: usize) -> Response {
    let kinds = [
        ("text/html", format!("<html><head><title>Welcome {i}</title></head><body>Apache/2.4.{i} phpinfo() PHP Version 7.4 <a href=\"/login\">login</a> wp-content jquery-3.5.1.min.js {}</body></html>", "lorem ipsum dolor sit amet ".repeat(200))),
        ("application/json", format!("{{\"version\":\"1.{i}.0\",\"status\":\"ok\",\"swagger\":\"2.0\",\"info\":{{\"title\":\"api\"}},\"items\":[{}]}}", (0..100).map(|n| n.to_string()).collect::<Vec<_>>().join(","))),
        ("text/plain", format!("[core]\n\trepositoryformatversion = 0\nDB_PASSWORD=secret{i}\nroot:x:0:0:root:/root:/bin/bash\n{}", "x".repeat(4000))),
    ];
    let (ctype, body) = &kinds[i % kinds.len()];
    Response {
        status: [200, 200, 403, 404, 302][i % 5],
        proto: "HTTP/1.1".into(),
        reason: String::new(),
        headers: vec![
            ("Server".into(), format!("nginx/1.{i}")),
            ("Content-Type".into(), ctype.to_string()),
            ("Set-Cookie".into(), "PHPSESSID=abc; path=/".into()),
            ("X-Powered-By".into(), "PHP/7.4".into()),
        ],
        body: body.clone().into_bytes().into(),
        body_truncated: false,
        content_decoded: false,
        final_url: format!("http://bench.test/path/{i}"),
        duration: Duration::from_millis(12),
        redirect_chain: Vec::new(),
        redirect_responses: Vec::new(),
    }
}

fn main() {
    let corpus = std::env::var("SCANFLEET_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|_| {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../../shared/corpus/nuclei-templates/http"
            ))
        });
    if !corpus.is_dir() {
        println!(
            "corpus {} not found: skipping the engine benchmark",
            corpus.display()
        );
        return;
    }
    let responses: usize = std::env::var("SCANFLEET_BENCH_RESPONSES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);

    let compiled = load_and_compile(&corpus);
    bench_matching(&compiled, responses);
}

/// Loads and compiles the corpus, printing times, counts and memory.
fn load_and_compile(corpus: &Path) -> Vec<Arc<CompiledTemplate>> {
    let rss_before = peak_rss_kib().unwrap_or(0);
    let t0 = Instant::now();
    let report = scanfleet_engine::template::load_dir(corpus);
    let load_time = t0.elapsed();
    let found = report.templates.len() + report.failures.len();
    let t1 = Instant::now();
    let mut compiled: Vec<Arc<CompiledTemplate>> = Vec::new();
    let mut unrunnable = 0usize;
    let mut compile_errors: Vec<String> = Vec::new();
    for t in report.templates {
        if scanfleet_engine::template::check(&t).is_err() {
            unrunnable += 1;
            continue;
        }
        match CompiledTemplate::compile(t) {
            Ok(c) => compiled.push(Arc::new(c)),
            Err(e) => compile_errors.push(e.to_string()),
        }
    }
    let compile_time = t1.elapsed();
    let rss_after = peak_rss_kib().unwrap_or(0);
    println!("corpus: {}", corpus.display());
    println!(
        "templates found: {found}, parsed: {}, unrunnable: {unrunnable}, compile errors: {}, compiled: {}",
        found - report.failures.len(),
        compile_errors.len(),
        compiled.len()
    );
    for e in &compile_errors {
        println!("  compile error: {e}");
    }
    println!("load (parse) time: {:.2} s", load_time.as_secs_f64());
    println!("compile time: {:.2} s", compile_time.as_secs_f64());
    println!(
        "load + compile time: {:.2} s",
        (load_time + compile_time).as_secs_f64()
    );
    println!(
        "peak RSS (VmHWM): {:.1} MiB before, {:.1} MiB after load + compile",
        rss_before as f64 / 1024.0,
        rss_after as f64 / 1024.0
    );

    compiled
}

/// Evaluates every operator block of `compiled` on synthetic responses on
/// rayon, printing the throughput.
fn bench_matching(compiled: &[Arc<CompiledTemplate>], responses: usize) {
    // Every block's operators count as one template evaluation per response.
    let operators: Vec<(Arc<CompiledTemplate>, usize)> = compiled
        .iter()
        .flat_map(|t| (0..t.blocks.len()).map(move |i| (t.clone(), i)))
        .collect();
    let names = RunNames::new("http://bench.test", "bench");
    let request = Bytes::from_static(b"GET / HTTP/1.1\r\n\r\n");
    let contexts: Vec<Scope> = (0..responses)
        .map(|i| {
            let resp = synthetic_response(i);
            Scope::new().below(Arc::new(ResponseVars::new(
                Arc::new(resp),
                &request,
                &names,
            )))
        })
        .collect();
    // Warm-up: lazily built regexes and caches.
    let _ = operators
        .par_iter()
        .map(|(t, b)| t.blocks[*b].operators.evaluate(&contexts[0]).matched as usize)
        .sum::<usize>();
    let t2 = Instant::now();
    let matched: usize = contexts
        .par_iter()
        .map(|ctx| {
            operators
                .iter()
                .map(|(t, b)| t.blocks[*b].operators.evaluate(ctx as &dyn Vars).matched as usize)
                .sum::<usize>()
        })
        .sum();
    let match_time = t2.elapsed();
    let pairs = (responses * compiled.len()) as f64;
    println!(
        "matching: {responses} responses x {} templates ({} operator blocks) in {:.2} s on {} rayon threads",
        compiled.len(),
        operators.len(),
        match_time.as_secs_f64(),
        rayon::current_num_threads()
    );
    println!(
        "throughput: {:.0} (responses x templates)/s, {matched} matches",
        pairs / match_time.as_secs_f64()
    );
    println!(
        "peak RSS (VmHWM) at end: {:.1} MiB",
        peak_rss_kib().unwrap_or(0) as f64 / 1024.0
    );
}
