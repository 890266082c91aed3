//! `templates map [DIR...] [--json] [--tech NAME]`: the technology ->
//! templates map the `auto` engine builds from a template set (the
//! built-in pack when no directory is given), with the detection stage and
//! the baseline.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use serde_json::json;

use scanfleet_common::chain::Chain;
use scanfleet_engine::engine::load::load_templates_for;
use scanfleet_engine::template::CheckOptions;
use scanfleet_scanner::auto::plan::left_out_counts;
use scanfleet_scanner::auto::techmap::TechMap;

#[derive(Debug, Args)]
pub struct MapArgs {
    /// Template files or directories; the built-in pack when none.
    pub dirs: Vec<PathBuf>,
    /// One JSON object: totals, the baseline, and each technology with its
    /// template count.
    #[arg(long)]
    pub json: bool,
    /// List the templates of this technology (as detected: `wordpress`,
    /// `apache-tomcat`) instead of the whole map.
    #[arg(long)]
    pub tech: Option<String>,
}

pub fn map(args: &MapArgs) -> ExitCode {
    let loaded = match load_templates_for(&args.dirs, CheckOptions::default()) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: {}", Chain(&e));
            return ExitCode::FAILURE;
        }
    };
    let map = TechMap::build(&loaded.templates);
    let mut out = String::new();
    if let Some(tech) = &args.tech {
        let ids: Vec<&str> = map
            .templates_of(tech)
            .into_iter()
            .map(|i| map.facts[i].id.as_str())
            .collect();
        if args.json {
            out = json!({"technology": tech, "keys": TechMap::keys_of(tech), "templates": ids})
                .to_string()
                + "\n";
        } else {
            out.push_str(&format!(
                "{tech} (keys {}): {} templates\n",
                TechMap::keys_of(tech).join(", "),
                ids.len()
            ));
            for id in ids {
                out.push_str(&format!("  {id}\n"));
            }
        }
    } else {
        let summary = map.summary();
        let detect = map.detect_stage().len();
        let baseline = map.baseline().len();
        let left_out = left_out_counts(&loaded.left_out);
        if args.json {
            out = json!({
                "templates": map.len(),
                "left_out": left_out,
                "detect_stage": detect,
                "baseline": baseline,
                "technologies": summary,
            })
            .to_string()
                + "\n";
        } else {
            out.push_str(&format!(
                "templates: {} runnable ({} left out: {left_out:?})\n\
                 detection stage: {detect} templates\nbaseline: {baseline} templates\n\
                 technologies the detectors can report: {}\n\n",
                map.len(),
                loaded.left_out.len(),
                summary.len()
            ));
            out.push_str("technology\ttemplates\n");
            for (name, n) in &summary {
                out.push_str(&format!("{name}\t{n}\n"));
            }
        }
    }
    // A closed pipe (`| head`) is not worth a panic.
    let _ = std::io::stdout().write_all(out.as_bytes());
    ExitCode::SUCCESS
}
