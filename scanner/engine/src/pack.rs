//! The default template pack written by this project, shipped inside the
//! binary.
//!
//! `build.rs` embeds every YAML file under `scanner/engine/templates/` at compile
//! time, so a scanner node needs no template directory to do useful work; an
//! operator can still point the engine at any directory instead. Parsing and
//! compiling these files is the template loader's job: this module only hands
//! out the text.

include!(concat!(env!("OUT_DIR"), "/default_pack.rs"));

/// Every template of the pack as `(path relative to templates/, YAML text)`,
/// sorted by path, e.g. `("exposures/git-config-exposure.yaml", "id: ...")`.
pub fn default_pack() -> &'static [(&'static str, &'static str)] {
    DEFAULT_PACK
}

/// The `id:` of every pack template, in pack order.
///
/// Read from the top-level `id:` line without a YAML parse, which is enough
/// for listings; the pack tests check that every file has exactly such a line
/// and that it agrees with the parsed document.
pub fn ids() -> Vec<&'static str> {
    DEFAULT_PACK
        .iter()
        .filter_map(|(_, yaml)| top_level_id(yaml))
        .collect()
}

/// The value of the first unindented `id:` line, quotes removed.
pub fn top_level_id(yaml: &str) -> Option<&str> {
    yaml.lines().find_map(|line| {
        let value = line.strip_prefix("id:")?.trim();
        let value = value.trim_matches(|c| c == '"' || c == '\'');
        (!value.is_empty()).then_some(value)
    })
}
