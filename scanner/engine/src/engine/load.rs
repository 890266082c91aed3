//! The templates of a run or a node: the built-in pack, or the given files
//! and directories, parsed, checked and compiled. A template that cannot run
//! is left out with its reason; only a named file that cannot be loaded
//! fails the whole load.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rayon::prelude::*;

use super::compile::CompiledTemplate;
use super::error::EngineError;
use crate::template::{self, CheckOptions, LoadError, Unrunnable};

/// A named template file that could not be loaded: the load stops.
#[derive(Debug, thiserror::Error)]
#[error("{}", path.display())]
pub struct LoadFailed {
    pub path: PathBuf,
    #[source]
    pub source: LoadError,
}

/// A template left out of the load; the others still run.
#[derive(Debug, thiserror::Error)]
pub enum LeftOut {
    /// A template of the built-in pack did not parse.
    #[error("{path}")]
    Pack {
        path: &'static str,
        #[source]
        source: LoadError,
    },
    /// A file under a template directory did not parse.
    #[error(transparent)]
    Unreadable(LoadError),
    /// The template parsed but needs something the engine does not do.
    #[error("{id}: not runnable")]
    NotRunnable {
        id: String,
        #[source]
        reason: Unrunnable,
    },
    /// The template's expressions or operators do not compile.
    #[error(transparent)]
    Compile(EngineError),
}

/// What a load produced.
#[derive(Debug)]
pub struct Loaded {
    /// The runnable templates, compiled, in load order.
    pub templates: Vec<Arc<CompiledTemplate>>,
    /// The templates left out, each with why.
    pub left_out: Vec<LeftOut>,
    /// Wall time of the whole load.
    pub elapsed: Duration,
}

impl Loaded {
    /// Templates found, runnable or not.
    pub fn found(&self) -> usize {
        self.templates.len() + self.left_out.len()
    }
}

/// Loads and compiles the templates under `paths` (files or directories),
/// or the built-in pack when `paths` is empty, for runs without an
/// interactsh server.
pub fn load_templates(paths: &[PathBuf]) -> Result<Loaded, LoadFailed> {
    load_templates_for(paths, CheckOptions::default())
}

/// [`load_templates`] for runs with what `options` says (out-of-band
/// templates are kept when an interactsh server is configured).
pub fn load_templates_for(paths: &[PathBuf], options: CheckOptions) -> Result<Loaded, LoadFailed> {
    let started = Instant::now();
    let mut parsed = Vec::new();
    let mut left_out = Vec::new();
    if paths.is_empty() {
        for (path, yaml) in crate::pack::default_pack() {
            match template::parse_str(yaml, Path::new(path)) {
                Ok(t) => parsed.push(t),
                Err(source) => left_out.push(LeftOut::Pack { path, source }),
            }
        }
    }
    for path in paths {
        if path.is_dir() {
            let report = template::load_dir(path);
            left_out.extend(report.failures.into_iter().map(LeftOut::Unreadable));
            parsed.extend(report.templates);
        } else {
            let t = template::load_file(path).map_err(|source| LoadFailed {
                path: path.clone(),
                source,
            })?;
            parsed.push(t);
        }
    }
    // Checking and compiling (regexes, DSL) is CPU work: on rayon, as the
    // parsing was; the order of the templates is kept.
    let outcomes: Vec<Result<Arc<CompiledTemplate>, LeftOut>> = parsed
        .into_par_iter()
        .map(|t| {
            // The operators are checked by compiling them, once.
            if let Err(reason) = template::check_before_compiling(&t, options) {
                return Err(LeftOut::NotRunnable {
                    id: t.id.clone(),
                    reason,
                });
            }
            CompiledTemplate::compile(t)
                .map(Arc::new)
                .map_err(LeftOut::Compile)
        })
        .collect();
    let mut templates = Vec::with_capacity(outcomes.len());
    for outcome in outcomes {
        match outcome {
            Ok(c) => templates.push(c),
            Err(e) => left_out.push(e),
        }
    }
    Ok(Loaded {
        templates,
        left_out,
        elapsed: started.elapsed(),
    })
}
