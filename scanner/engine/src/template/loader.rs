//! Reading templates from text, files and directory trees.
//!
//! A directory is walked once, then its files are parsed in parallel on the
//! rayon pool: parsing the public corpus (ten thousand files) is CPU work.
//! Each file's outcome stands alone, so one broken template is reported and
//! never stops the others.

use std::fmt;
use std::path::{Component, Path, PathBuf};

use rayon::prelude::*;

use super::model::{HttpBlock, PayloadDef, PayloadFile, Template, OTHER_PROTOCOLS};

/// Why a template file could not be turned into a [`Template`].
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read (missing, unreadable, not UTF-8).
    #[error("{}: cannot read", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The YAML is malformed or a field has a shape the format does not
    /// allow. `line` and `column` are 1-based, when the parser knows them;
    /// `message` is the parser's error without its own copy of them.
    #[error("{}{}: parse error: {message}", path.display(), position(*line, *column))]
    Parse {
        path: PathBuf,
        line: Option<u64>,
        column: Option<u64>,
        message: String,
        #[source]
        source: Box<serde_saphyr::Error>,
    },
}

fn position(line: Option<u64>, column: Option<u64>) -> String {
    match (line, column) {
        (Some(l), Some(c)) => format!(":{l}:{c}"),
        (Some(l), None) => format!(":{l}"),
        _ => String::new(),
    }
}

impl LoadError {
    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            LoadError::Io { path, .. } | LoadError::Parse { path, .. } => path,
        }
    }

    /// The line of a parse error, when known.
    pub fn line(&self) -> Option<u64> {
        match self {
            LoadError::Parse { line, .. } => *line,
            LoadError::Io { .. } => None,
        }
    }
}

/// Where relative payload file paths are looked up, besides the template's
/// own directory.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// Template roots, in order of preference. A relative payload path is
    /// tried in the template's directory, then in each of its parent
    /// directories that lie inside a root (so `helpers/wordlists/x.txt`
    /// written in `http/cves/2021/a.yaml` is found at the root of a
    /// nuclei-templates checkout), then directly under each root.
    pub roots: Vec<PathBuf>,
}

/// What loading a directory tree produced.
#[derive(Debug, Default)]
pub struct LoadReport {
    /// Template files seen (`.yaml` and `.yml`).
    pub found: usize,
    /// Templates that parsed, in path order.
    pub templates: Vec<Template>,
    /// Files that did not parse, in path order.
    pub failures: Vec<LoadError>,
    /// Directories that could not be listed; their templates are not
    /// counted in `found`.
    pub walk_errors: Vec<LoadError>,
}

impl LoadReport {
    /// Number of templates that parsed.
    pub fn parsed(&self) -> usize {
        self.templates.len()
    }
}

/// The parser's options under a duplicate-key policy.
fn parse_options(duplicate_keys: serde_saphyr::DuplicateKeyPolicy) -> serde_saphyr::Options {
    serde_saphyr::options! {
        duplicate_keys: duplicate_keys,
        // Comments carry nothing a template needs.
        emit_comments: false,
        // Errors carry line and column; a rendered snippet would only
        // clutter the grouped report.
        with_snippet: false,
    }
}

/// The template in `yaml` and the paths of the fields the model does not know.
fn deserialize(
    yaml: &str,
    duplicate_keys: serde_saphyr::DuplicateKeyPolicy,
) -> Result<(Template, Vec<String>), serde_saphyr::Error> {
    let mut unknown: Vec<String> = Vec::new();
    let template = serde_saphyr::with_deserializer_from_str_with_options(
        yaml,
        parse_options(duplicate_keys),
        |de| serde_ignored::deserialize(de, |p| unknown.push(p.to_string())),
    )?;
    Ok((template, unknown))
}

/// Parses one template from text. `path` names the file in errors and is
/// the base for relative payload files; it need not exist.
pub fn parse_str(yaml: &str, path: &Path) -> Result<Template, LoadError> {
    parse_str_with(yaml, path, &LoadOptions::default())
}

/// [`parse_str`] with explicit payload roots.
pub fn parse_str_with(
    yaml: &str,
    path: &Path,
    options: &LoadOptions,
) -> Result<Template, LoadError> {
    use serde_saphyr::DuplicateKeyPolicy;
    // Go's YAML decoder keeps the last of repeated keys, and so do we. The
    // parser can only do that by buffering every mapping before serde sees
    // it, which made it the largest cost of loading the corpus; so a
    // template is read streaming first, refusing repeated keys, and read
    // again keeping the last only when that fails. Any failure, not only a
    // repeated key: a later repeat may replace a value the first read
    // stopped at, so only the last-wins read decides what is an error.
    let (mut template, unknown) = deserialize(yaml, DuplicateKeyPolicy::Error)
        .or_else(|_| deserialize(yaml, DuplicateKeyPolicy::LastWins))
        .map_err(|e| parse_error(path, e))?;
    template.path = Some(path.to_path_buf());
    for field in unknown {
        if OTHER_PROTOCOLS.contains(&field.as_str()) {
            template.other_protocols.push(field);
        } else {
            template.unknown_fields.push(field);
        }
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    for block in &mut template.http {
        resolve_payloads(block, dir, options);
    }
    Ok(template)
}

fn parse_error(path: &Path, e: serde_saphyr::Error) -> LoadError {
    let location = e.location();
    let mut message = e.without_snippet().to_string();
    // The position is reported in its own fields; drop the parser's copy
    // of it from the message.
    if let Some(at) = message.rfind(" at line ") {
        let tail = &message[at + " at line ".len()..];
        if tail
            .split(", column ")
            .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        {
            message.truncate(at);
        }
    }
    LoadError::Parse {
        path: path.to_path_buf(),
        line: location.as_ref().map(|l| l.line()).filter(|&l| l > 0),
        column: location.as_ref().map(|l| l.column()).filter(|&c| c > 0),
        message,
        source: Box::new(e),
    }
}

/// Reads one template file. Relative payload files are looked up next to it.
pub fn load_file(path: &Path) -> Result<Template, LoadError> {
    load_file_with(path, &LoadOptions::default())
}

/// [`load_file`] with explicit payload roots.
pub fn load_file_with(path: &Path, options: &LoadOptions) -> Result<Template, LoadError> {
    let text = std::fs::read_to_string(path).map_err(|source| LoadError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse_str_with(&text, path, options)
}

/// Loads every `.yaml`/`.yml` file under `dir`, skipping hidden files and
/// folders. Payload files are looked
/// up relative to each template, then under `dir` and its parent (the
/// usual layout is `<checkout>/http/...` with `<checkout>/helpers/...`).
pub fn load_dir(dir: &Path) -> LoadReport {
    let mut roots = vec![dir.to_path_buf()];
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        roots.push(parent.to_path_buf());
    }
    load_dir_with(dir, &LoadOptions { roots })
}

/// [`load_dir`] with explicit payload roots.
pub fn load_dir_with(dir: &Path, options: &LoadOptions) -> LoadReport {
    let mut files = Vec::new();
    let mut walk_errors = Vec::new();
    walk(dir, &mut files, &mut walk_errors);
    files.sort();
    let outcomes: Vec<Result<Template, LoadError>> = files
        .par_iter()
        .map(|path| load_file_with(path, options))
        .collect();
    let mut report = LoadReport {
        found: files.len(),
        walk_errors,
        ..LoadReport::default()
    };
    for outcome in outcomes {
        match outcome {
            Ok(t) => report.templates.push(t),
            Err(e) => report.failures.push(e),
        }
    }
    report
}

fn is_template_file(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("yaml") || e.eq_ignore_ascii_case("yml"))
}

fn walk(dir: &Path, files: &mut Vec<PathBuf>, errors: &mut Vec<LoadError>) {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(source) => {
            errors.push(LoadError::Io {
                path: dir.to_path_buf(),
                source,
            });
            return;
        }
    };
    for entry in entries {
        let entry = match entry {
            Ok(e) => e,
            Err(source) => {
                errors.push(LoadError::Io {
                    path: dir.to_path_buf(),
                    source,
                });
                continue;
            }
        };
        // Hidden entries (`.github/workflows/*.yml` in a template checkout)
        // are tooling, not templates.
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let path = entry.path();
        // `metadata` follows symlinks, so linked files and folders count.
        match std::fs::metadata(&path) {
            Ok(m) if m.is_dir() => walk(&path, files, errors),
            Ok(m) if m.is_file() && is_template_file(&path) => files.push(path),
            Ok(_) => {}
            Err(source) => errors.push(LoadError::Io { path, source }),
        }
    }
}

/// Fills `payloads` from `payload_defs`, reading word-list files.
fn resolve_payloads(block: &mut HttpBlock, template_dir: &Path, options: &LoadOptions) {
    let mut values = Vec::with_capacity(block.payload_defs.len());
    let mut files = Vec::new();
    for (name, def) in &block.payload_defs {
        match def {
            PayloadDef::List(list) => values.push((name.clone(), list.clone())),
            PayloadDef::File(written) => {
                let found = find_payload_file(written, template_dir, options)
                    .and_then(|p| read_word_list(&p).map(|lines| (p, lines)));
                match found {
                    Some((resolved, lines)) => {
                        values.push((name.clone(), lines));
                        files.push(PayloadFile {
                            name: name.clone(),
                            path: written.clone(),
                            resolved: Some(resolved),
                        });
                    }
                    None => files.push(PayloadFile {
                        name: name.clone(),
                        path: written.clone(),
                        resolved: None,
                    }),
                }
            }
        }
    }
    block.payloads = values;
    block.payload_files = files;
}

/// The candidates for a payload path, first existing file wins.
///
/// Only relative paths without `..` are accepted: a template must not be
/// able to name an arbitrary file on the scanner's disk and send its lines
/// to a target.
fn find_payload_file(written: &str, template_dir: &Path, options: &LoadOptions) -> Option<PathBuf> {
    let rel = Path::new(written);
    if written.is_empty()
        || rel
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return None;
    }
    let mut candidates = vec![template_dir.join(rel)];
    for ancestor in template_dir.ancestors().skip(1) {
        if options.roots.iter().any(|root| ancestor.starts_with(root)) {
            candidates.push(ancestor.join(rel));
        }
    }
    candidates.extend(options.roots.iter().map(|root| root.join(rel)));
    candidates.into_iter().find(|c| c.is_file())
}

/// A word list: one value per line, empty lines skipped, as Nuclei reads it.
fn read_word_list(path: &Path) -> Option<Vec<String>> {
    let bytes = std::fs::read(path).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    Some(
        text.lines()
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect(),
    )
}

impl fmt::Display for LoadReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} found, {} parsed, {} failed",
            self.found,
            self.parsed(),
            self.failures.len()
        )
    }
}
