//! What each scan engine does, in one place: which stages run, which hosts
//! are scanned, which templates are selected, how long a scan may take, and
//! how much of the progress bar each stage is worth.

use std::sync::Arc;
use std::time::Duration;

use scanfleet_common::events::Stage;
use scanfleet_common::jobs::Engine;
use scanfleet_common::settings::ScannerSettings;
use scanfleet_common::Severity;

use scanfleet_engine::engine::CompiledTemplate;

/// The templates an engine runs in its `VALIDATE` stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selection {
    /// Every runnable template.
    All,
    /// Templates of this severity or worse.
    AtLeast(Severity),
    /// Technology detection only (templates tagged `tech`).
    Technology,
    /// None but those the job names (a retest).
    Named,
    /// Per host: the templates of its detected technologies plus the
    /// baseline (`crate::auto`); `admits` does not decide it.
    PerHost,
}

impl Selection {
    pub fn admits(self, template: &CompiledTemplate) -> bool {
        let info = &template.template.info;
        match self {
            Selection::All => true,
            // Severity ranks run from critical (0) to info (4).
            Selection::AtLeast(floor) => info.severity.rank() <= floor.rank(),
            Selection::Technology => info.tags.iter().any(|t| t.eq_ignore_ascii_case("tech")),
            Selection::Named | Selection::PerHost => false,
        }
    }
}

/// One engine as data.
#[derive(Debug, Clone, Copy)]
pub struct EngineSpec {
    pub engine: Engine,
    /// Runs `DISCOVER` (subdomains and linked hosts); otherwise only the
    /// domain itself is scanned.
    pub discover: bool,
    pub selection: Selection,
}

impl Selection {
    /// Runs `DETECT` (technology detection) before `VALIDATE`.
    pub fn detects(self) -> bool {
        self == Selection::PerHost
    }
}

impl EngineSpec {
    pub fn of(engine: Engine) -> EngineSpec {
        match engine {
            Engine::Full => EngineSpec {
                engine,
                discover: true,
                selection: Selection::All,
            },
            Engine::Quick => EngineSpec {
                engine,
                discover: false,
                selection: Selection::AtLeast(Severity::Medium),
            },
            Engine::Recon => EngineSpec {
                engine,
                discover: true,
                selection: Selection::Technology,
            },
            // Discovery like `full`, so that it finds what `full` finds.
            Engine::Auto => EngineSpec {
                engine,
                discover: true,
                selection: Selection::PerHost,
            },
            // The job's domain is the finding's host.
            Engine::Retest => EngineSpec {
                engine,
                discover: false,
                selection: Selection::Named,
            },
        }
    }

    /// The whole scan's deadline, from the node's settings.
    pub fn deadline(&self, settings: &ScannerSettings) -> Duration {
        Duration::from_secs(match self.engine {
            Engine::Full | Engine::Auto => settings.deadline_full_secs,
            Engine::Quick => settings.deadline_quick_secs,
            Engine::Recon => settings.deadline_recon_secs,
            Engine::Retest => settings.deadline_quick_secs,
        })
    }

    /// The stages this engine runs, in order.
    pub fn stages(&self) -> Vec<Stage> {
        Stage::ALL
            .into_iter()
            .filter(|s| *s != Stage::Discover || self.discover)
            .filter(|s| *s != Stage::Detect || self.selection.detects())
            .collect()
    }

    /// The templates of `all` this engine runs; when the job names
    /// templates (`named`, by id), only those of them.
    pub fn select(
        &self,
        all: &[Arc<CompiledTemplate>],
        named: &[String],
    ) -> Vec<Arc<CompiledTemplate>> {
        all.iter()
            .filter(|t| {
                if named.is_empty() {
                    self.selection.admits(t)
                } else {
                    named.iter().any(|id| *id == t.template.id)
                }
            })
            .cloned()
            .collect()
    }
}

/// Relative weight of a stage in the progress bar.
fn weight(stage: Stage) -> u32 {
    match stage {
        Stage::Resolve => 5,
        Stage::Discover => 20,
        Stage::Probe => 10,
        Stage::Detect => 10,
        Stage::Validate => 60,
        Stage::Report => 5,
    }
}

/// Progress (0 to 99) after `done` of `planned` units of work in `stage`,
/// given the engine's stages. 100 is reserved for the completed status.
pub fn progress(stages: &[Stage], stage: Stage, done: usize, planned: usize) -> u8 {
    let total: u32 = stages.iter().map(|s| weight(*s)).sum();
    let before: u32 = stages
        .iter()
        .take_while(|s| **s != stage)
        .map(|s| weight(*s))
        .sum();
    let fraction = if planned == 0 {
        1.0
    } else {
        (done.min(planned) as f64) / planned as f64
    };
    let value = (before as f64 + weight(stage) as f64 * fraction) * 100.0 / total.max(1) as f64;
    (value.floor() as u8).min(99)
}

/// Stage deadlines: DNS that does not answer, or a host that trickles,
/// must not hold a scan; the whole-scan deadline still applies on top.
pub fn stage_deadline(stage: Stage) -> Duration {
    match stage {
        Stage::Resolve => Duration::from_secs(15),
        Stage::Discover => Duration::from_secs(120),
        Stage::Probe => Duration::from_secs(120),
        Stage::Detect => Duration::from_secs(600),
        Stage::Validate | Stage::Report => Duration::MAX,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_grows_with_work_and_stays_below_100() {
        let stages = EngineSpec::of(Engine::Full).stages();
        let mut last = 0;
        for stage in &stages {
            for done in 0..=10 {
                let p = progress(&stages, *stage, done, 10);
                assert!(p >= last, "{stage:?} {done}: {p} < {last}");
                last = p;
            }
        }
        assert_eq!(last, 99);
        assert_eq!(progress(&stages, Stage::Resolve, 0, 1), 0);
    }

    #[test]
    fn quick_skips_discovery_and_full_runs_every_stage() {
        assert_eq!(EngineSpec::of(Engine::Full).stages().len(), 5);
        assert_eq!(EngineSpec::of(Engine::Auto).stages().len(), 6);
        assert!(!EngineSpec::of(Engine::Quick)
            .stages()
            .contains(&Stage::Discover));
        assert!(EngineSpec::of(Engine::Recon)
            .stages()
            .contains(&Stage::Discover));
        assert!(!EngineSpec::of(Engine::Full)
            .stages()
            .contains(&Stage::Detect));
        let auto = EngineSpec::of(Engine::Auto).stages();
        assert_eq!(
            auto,
            vec![
                Stage::Resolve,
                Stage::Discover,
                Stage::Probe,
                Stage::Detect,
                Stage::Validate,
                Stage::Report
            ]
        );
    }
}
