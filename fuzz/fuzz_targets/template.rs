//! Template text -> loader -> runnability check -> compiler.
//!
//! Any bytes: the loader must return a template or a `LoadError`, and the
//! compiler a compiled template or an `EngineError`, never panic or hang.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use scanfleet_engine::engine::CompiledTemplate;
use scanfleet_engine::template::{self, parse_str};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // A directory that does not exist: relative payload files resolve to
    // nothing, so the target never reads the disk.
    let Ok(parsed) = parse_str(text, Path::new("/nonexistent/fuzz/template.yaml")) else {
        return;
    };
    let _ = template::check(&parsed);
    let _ = CompiledTemplate::compile(parsed);
});
